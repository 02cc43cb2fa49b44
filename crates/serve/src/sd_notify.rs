//! systemd's readiness protocol (sd_notify): a datagram such as `READY=1` to the unix socket named by
//! `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). Without the variable (not started by
//! systemd with `Type=notify`/`notify-reload`) nothing is sent. No crate needed.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (newline-separated `KEY=VALUE` pairs) to systemd; `false` when not under systemd or the
/// datagram could not be sent (never fatal: the service runs on, and systemd times out the start).
pub fn notify(state: &str) -> bool {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) => send(&path, state).is_ok(),
        None => false,
    }
}

fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), path)?;
    }
    Ok(())
}

/// `RELOADING=1` with the monotonic timestamp `Type=notify-reload` asks for.
pub fn reloading() -> String {
    format!(
        "RELOADING=1\nMONOTONIC_USEC={}",
        ordo_sys::clock::monotonic_ns() / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_and_an_abstract_socket() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notify.sock");
        let rx = UnixDatagram::bind(&p).unwrap();
        send(p.as_os_str(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("ordo-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), &reloading()).unwrap();
        let n = rx.recv(&mut buf).unwrap();
        let got = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(got.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{got}");
    }
}
