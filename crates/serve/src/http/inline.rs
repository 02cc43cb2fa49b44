//! The accept loop's inline path: on a single-threaded runtime, a new connection whose first request has
//! already arrived whole and is answered at once (a cached file, a synthetic reply, a 503) is served right in
//! the accept loop — one read, one write, and for `Connection: close` one close — without a task, timers,
//! buffers of its own or an epoll registration and deregistration. Whatever cannot finish that way (the
//! request is incomplete, has a body, waits in the queue, or its response needs more than one write) is
//! handed to a connection task at the point reached, so behaviour is the same either way.

use std::future::Future;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};

use super::conn::{READ_CHUNK, Resume, Start, needs_nodelay, request_from};
use super::parse::{Framing, parse_head};
use super::write::encode_whole;
use super::{Handler, Limits};

/// Buffers the accept loop reuses for every connection it serves inline.
pub(crate) struct Scratch {
    read: Box<[u8]>,
    write: BytesMut,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        Scratch {
            read: vec![0u8; READ_CHUNK].into_boxed_slice(),
            write: BytesMut::with_capacity(4 * 1024),
        }
    }
}

/// How far the inline path got with a connection.
pub(crate) enum Outcome {
    /// Answered and to be closed, or the client is gone: dropping the stream closes it.
    Done,
    /// The connection goes on in a task, from `Start`.
    Task(Start),
}

fn task_from(bytes: &[u8], served: u64, nodelay: bool, resume: Resume) -> Outcome {
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK.max(bytes.len()));
    rbuf.extend_from_slice(bytes);
    Outcome::Task(Start {
        rbuf,
        served,
        nodelay,
        resume,
    })
}

/// A non-blocking call that found nothing to do now (or was interrupted): try later, from a task.
fn not_now(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Serves the first request of a just-accepted, non-blocking `stream` if it can be done without waiting.
pub(crate) fn try_serve<H: Handler>(
    stream: &std::net::TcpStream,
    peer: SocketAddr,
    handler: &H,
    limits: &Limits,
    shutting_down: bool,
    scratch: &mut Scratch,
) -> Outcome {
    let n = match (&*stream).read(&mut scratch.read) {
        Ok(0) => return Outcome::Done,
        Ok(n) => n,
        Err(e) if not_now(&e) => {
            return task_from(&[], 0, false, Resume::Read);
        }
        Err(_) => return Outcome::Done,
    };
    let input = &scratch.read[..n];
    // Anything but a whole head without a body (or an error to answer) goes to the task, which reads on.
    let head = match parse_head(input, limits.max_head_bytes, limits.max_uri_bytes) {
        Ok(h) if h.framing == Framing::None => h,
        _ => return task_from(input, 0, false, Resume::Read),
    };
    let pipelined = &input[head.len..];
    let head_bytes = Bytes::copy_from_slice(&input[..head.len]);
    let (req, info) = request_from(head, head_bytes, Bytes::new(), peer);
    let mut fut = Box::pin(handler.handle(req));
    // A no-op waker is enough: a handler that is not ready now moves to a task, whose first poll registers
    // the task's own waker (a future must re-register on every poll), so no wake-up can be lost.
    let resp = match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(resp) => resp,
        Poll::Pending => {
            let fut: super::conn::PendingResponse = fut;
            return task_from(pipelined, 0, false, Resume::Handle { fut, info });
        }
    };
    drop(fut);
    let mut ctx = info.write_ctx(1, shutting_down, limits);
    let nodelay = needs_nodelay(1, ctx.keep_alive, &resp.body);
    if let Err(resp) = encode_whole(&mut scratch.write, resp, &mut ctx) {
        return task_from(pipelined, 0, false, Resume::Write { resp, info });
    }
    if nodelay {
        let _ = stream.set_nodelay(true);
    }
    let keep = ctx.keep_alive;
    let out = &scratch.write[..];
    // The last bytes before a close: MSG_MORE lets the FIN travel with them.
    let closing = !keep && pipelined.is_empty();
    let written = match ordo_sys::net::send(stream, out, closing) {
        Ok(n) => n,
        Err(e) if not_now(&e) => 0,
        Err(_) => return Outcome::Done,
    };
    if written < out.len() {
        let rest = Bytes::copy_from_slice(&out[written..]);
        return task_from(pipelined, 1, nodelay, Resume::Rest { rest, keep });
    }
    if keep {
        return task_from(pipelined, 1, nodelay, Resume::Read);
    }
    if !pipelined.is_empty() {
        // input after a `Connection: close` request: drain it before closing (see conn::linger_close)
        return task_from(
            pipelined,
            1,
            nodelay,
            Resume::Rest {
                rest: Bytes::new(),
                keep: false,
            },
        );
    }
    Outcome::Done
}
