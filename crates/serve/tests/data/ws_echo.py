"""A WebSocket echo server and client built on the `websockets` library, for ordo serve's proxy tests:
  python3 ws_echo.py server        # prints "ready PORT", echoes every message until killed
  python3 ws_echo.py client URL N  # sends N text and N binary messages, checks each echo, prints "ok 2N"
"""
import asyncio
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def server():
    async with serve(echo, "127.0.0.1", 0) as s:
        port = s.sockets[0].getsockname()[1]
        print(f"ready {port}", flush=True)
        await asyncio.Future()


async def client(url, n):
    async with connect(url, open_timeout=5, close_timeout=2) as ws:
        for i in range(n):
            text = f"message {i} " + "x" * (i * 97 % 3000)
            await ws.send(text)
            got = await asyncio.wait_for(ws.recv(), 5)
            assert got == text, (got[:40], text[:40])
            data = bytes((i + k) % 256 for k in range(i * 131 % 70000))
            await ws.send(data)
            got = await asyncio.wait_for(ws.recv(), 5)
            assert got == data, len(got)
    print(f"ok {2 * n}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(server())
    else:
        asyncio.run(client(sys.argv[2], int(sys.argv[3])))
