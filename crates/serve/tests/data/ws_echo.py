"""A WebSocket echo server and client built on the `websockets` library, for ordo serve's proxy tests:
  python3 ws_echo.py server        # prints "ready PORT", echoes every message until killed
  python3 ws_echo.py client URL N  # sends N text and N binary messages, checks each echo, prints "ok 2N"
  python3 ws_echo.py h2client HOST PORT PATH N
                                   # the same over HTTP/2 (RFC 8441 extended CONNECT, h2c): the `h2`
                                   # library (hyper-h2) for HTTP/2, websockets' Sans-I/O protocol for the
                                   # frames and the close handshake; prints "ok 2N closed"
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


def h2client(host, port, path, n):
    import socket

    import h2.config
    import h2.connection
    import h2.events
    import h2.settings
    from websockets.frames import Opcode
    from websockets.protocol import Protocol, Side

    sock = socket.create_connection((host, port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    ws = Protocol(Side.CLIENT)
    state = {"connect": False, "status": None, "ended": False, "window": False}
    sid = None

    def pump():
        """One read from the socket, its events handled."""
        data = sock.recv(65536)
        if not data:
            raise EOFError("the server closed the connection")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                c = ev.changed_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)
                if c is not None and c.new_value == 1:
                    state["connect"] = True
            elif isinstance(ev, h2.events.ResponseReceived):
                state["status"] = dict(ev.headers)[b":status"]
            elif isinstance(ev, h2.events.DataReceived):
                ws.receive_data(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                state["ended"] = True
                ws.receive_eof()
            elif isinstance(ev, h2.events.StreamReset):
                raise RuntimeError(f"stream reset: {ev.error_code}")
            elif isinstance(ev, h2.events.WindowUpdated):
                state["window"] = True
        sock.sendall(conn.data_to_send())

    def send(data):
        """Sends `data` on the stream within the server's flow-control windows."""
        while data:
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if room == 0:
                state["window"] = False
                while not state["window"]:
                    pump()
                continue
            conn.send_data(sid, data[:room])
            sock.sendall(conn.data_to_send())
            data = data[room:]

    def frame():
        """The next frame from the server."""
        while True:
            for ev in ws.events_received():
                return ev
            pump()

    while not state["connect"]:
        pump()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [
        (":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
        (":path", path), (":authority", f"{host}:{port}"), ("sec-websocket-version", "13"),
    ])
    sock.sendall(conn.data_to_send())
    while state["status"] is None:
        pump()
    assert state["status"] == b"200", state["status"]
    for i in range(n):
        text = f"message {i} " + "x" * (i * 97 % 3000)
        ws.send_text(text.encode())
        send(b"".join(ws.data_to_send()))
        f = frame()
        assert f.opcode == Opcode.TEXT and f.data == text.encode(), (f.opcode, f.data[:40])
        data = bytes((i + k) % 256 for k in range(i * 131 % 70000))
        ws.send_binary(data)
        send(b"".join(ws.data_to_send()))
        f = frame()
        assert f.opcode == Opcode.BINARY and f.data == data, (f.opcode, len(f.data))
    ws.send_close(1000)
    send(b"".join(ws.data_to_send()))
    f = frame()
    assert f.opcode == Opcode.CLOSE, f.opcode
    while not state["ended"]:
        pump()
    conn.end_stream(sid)
    sock.sendall(conn.data_to_send())
    print(f"ok {2 * n} closed", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(server())
    elif sys.argv[1] == "h2client":
        h2client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        asyncio.run(client(sys.argv[2], int(sys.argv[3])))
