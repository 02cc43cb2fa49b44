//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on a listener behind an L4 balancer: the header
//! the balancer sends first is read, bounded, before TLS or HTTP, and its source address becomes the
//! client's. A connection without a valid header is closed without an answer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A v1 header is at most this long, CRLF included (the specification's bound).
pub const V1_MAX: usize = 107;
/// The v2 signature.
pub const V2_SIG: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v2 address block (with TLVs) accepted; the specification allows 65535, balancers send far
/// less (AWS NLB's largest TLVs are a few hundred bytes).
pub const V2_MAX_LEN: usize = 2048;

/// A header's verdict on the client's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The proxied client's address.
    Client(SocketAddr),
    /// `UNKNOWN` (v1), `LOCAL` or an address family without an IP (v2): keep the connection's own peer.
    Unknown,
}

/// What [`parse`] made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole header of `len` bytes.
    Done(Source, usize),
    /// A valid beginning; more bytes are needed.
    Partial,
}

/// Parses a PROXY header at the start of `buf` (v1 or v2).
pub fn parse(buf: &[u8]) -> Result<Parsed, &'static str> {
    if buf.is_empty() {
        return Ok(Parsed::Partial);
    }
    if buf[0] == b'\r' {
        return parse_v2(buf);
    }
    parse_v1(buf)
}

fn parse_v1(buf: &[u8]) -> Result<Parsed, &'static str> {
    const PREFIX: &[u8] = b"PROXY ";
    let n = buf.len().min(PREFIX.len());
    if buf[..n] != PREFIX[..n] {
        return Err("no PROXY protocol header");
    }
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX {
            Err("PROXY v1 header longer than 107 bytes")
        } else if window.contains(&b'\n') || (window.contains(&b'\r') && !window.ends_with(b"\r")) {
            Err("PROXY v1 header with a bare CR or LF")
        } else {
            Ok(Parsed::Partial)
        };
    };
    let line =
        std::str::from_utf8(&buf[PREFIX.len()..end]).map_err(|_| "PROXY v1 header not ASCII")?;
    let mut words = line.split(' ');
    let source = match words.next() {
        Some("UNKNOWN") => Source::Unknown,
        Some(fam @ ("TCP4" | "TCP6")) => {
            let fields: Vec<&str> = words.collect();
            let [src, dst, sport, dport] = fields[..] else {
                return Err("PROXY v1 header needs 4 fields after the family");
            };
            let ip = |s: &str| -> Result<IpAddr, &'static str> {
                let ip: IpAddr = s.parse().map_err(|_| "PROXY v1 address invalid")?;
                match (fam, ip) {
                    ("TCP4", IpAddr::V4(_)) | ("TCP6", IpAddr::V6(_)) => Ok(ip),
                    _ => Err("PROXY v1 address of the wrong family"),
                }
            };
            let port = |s: &str| -> Result<u16, &'static str> {
                if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("PROXY v1 port invalid");
                }
                s.parse().map_err(|_| "PROXY v1 port invalid")
            };
            let (src, _dst, sport, _dport) = (ip(src)?, ip(dst)?, port(sport)?, port(dport)?);
            Source::Client(SocketAddr::new(src, sport))
        }
        _ => return Err("PROXY v1 family not TCP4, TCP6 or UNKNOWN"),
    };
    Ok(Parsed::Done(source, end + 2))
}

fn parse_v2(buf: &[u8]) -> Result<Parsed, &'static str> {
    let n = buf.len().min(V2_SIG.len());
    if buf[..n] != V2_SIG[..n] {
        return Err("no PROXY protocol header");
    }
    if buf.len() < 16 {
        return Ok(Parsed::Partial);
    }
    let (ver_cmd, fam, len) = (
        buf[12],
        buf[13],
        u16::from_be_bytes([buf[14], buf[15]]) as usize,
    );
    if ver_cmd >> 4 != 2 {
        return Err("PROXY v2 version not 2");
    }
    if len > V2_MAX_LEN {
        return Err("PROXY v2 address block too long");
    }
    if buf.len() < 16 + len {
        return Ok(Parsed::Partial);
    }
    let body = &buf[16..16 + len];
    let source = match ver_cmd & 0x0f {
        0 => Source::Unknown, // LOCAL: the balancer's own connection (health checks)
        1 => match fam >> 4 {
            1 => {
                if len < 12 {
                    return Err("PROXY v2 IPv4 address block too short");
                }
                let ip = Ipv4Addr::new(body[0], body[1], body[2], body[3]);
                Source::Client(SocketAddr::new(
                    IpAddr::V4(ip),
                    u16::from_be_bytes([body[8], body[9]]),
                ))
            }
            2 => {
                if len < 36 {
                    return Err("PROXY v2 IPv6 address block too short");
                }
                let mut o = [0u8; 16];
                o.copy_from_slice(&body[..16]);
                Source::Client(SocketAddr::new(
                    IpAddr::V6(Ipv6Addr::from(o)),
                    u16::from_be_bytes([body[32], body[33]]),
                ))
            }
            // UNSPEC or a Unix socket: no IP address to take
            0 | 3 => Source::Unknown,
            _ => return Err("PROXY v2 address family unknown"),
        },
        _ => return Err("PROXY v2 command neither LOCAL nor PROXY"),
    };
    Ok(Parsed::Done(source, 16 + len))
}

/// Reads the PROXY header off `stream` (exactly its bytes: what follows is left for TLS or HTTP) within
/// `limit`; the client's address, or `peer` when the header names none. `Err`: close the connection.
pub async fn read_header(
    stream: &mut TcpStream,
    peer: SocketAddr,
    limit: Duration,
) -> Result<SocketAddr, String> {
    let read = async {
        let mut buf = [0u8; 16 + V2_MAX_LEN];
        let mut last = 0;
        loop {
            let n = stream
                .peek(&mut buf)
                .await
                .map_err(|e| format!("reading the PROXY header: {e}"))?;
            if n == 0 {
                return Err("closed before a PROXY header".to_string());
            }
            match parse(&buf[..n])? {
                Parsed::Done(source, len) => {
                    stream
                        .read_exact(&mut buf[..len])
                        .await
                        .map_err(|e| format!("reading the PROXY header: {e}"))?;
                    return Ok(match source {
                        Source::Client(a) => a,
                        Source::Unknown => peer,
                    });
                }
                Parsed::Partial if n == buf.len() => return Err("PROXY header too long".into()),
                // the rest of the header is still on its way: look again shortly (peek returns at once
                // while any byte is unread)
                Parsed::Partial => {
                    if n == last {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    last = n;
                }
            }
        }
    };
    match tokio::time::timeout(limit, read).await {
        Ok(r) => r,
        Err(_) => Err("no complete PROXY header in time".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(b: &[u8]) -> (Source, usize) {
        match parse(b) {
            Ok(Parsed::Done(s, n)) => (s, n),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn v1_tcp4_tcp6_and_unknown() {
        let h = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            done(h),
            (Source::Client("192.0.2.7:56324".parse().unwrap()), 41)
        );
        let h = b"PROXY TCP6 2001:db8::1 ::1 4000 80\r\n";
        assert_eq!(
            done(h),
            (
                Source::Client("[2001:db8::1]:4000".parse().unwrap()),
                h.len()
            )
        );
        assert_eq!(done(b"PROXY UNKNOWN\r\n"), (Source::Unknown, 15));
        assert_eq!(
            done(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n").0,
            Source::Unknown
        );
    }

    #[test]
    fn v1_partial_malformed_and_too_long() {
        for p in [
            &b"PRO"[..],
            b"PROXY TCP4 1.2.3.4",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r",
        ] {
            assert_eq!(parse(p), Ok(Parsed::Partial), "{p:?}");
        }
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
            b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
            b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n",
        ] {
            assert!(
                parse(bad).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(V1_MAX + 10, b'x');
        assert!(parse(&long).is_err());
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[test]
    fn v2_proxy_local_and_families() {
        let mut b4 = vec![192, 0, 2, 7, 10, 0, 0, 1];
        b4.extend_from_slice(&56324u16.to_be_bytes());
        b4.extend_from_slice(&443u16.to_be_bytes());
        let h = v2(1, 0x11, &b4);
        assert_eq!(
            done(&h),
            (Source::Client("192.0.2.7:56324".parse().unwrap()), 28)
        );
        // TLVs after the addresses are skipped with them
        let mut with_tlv = b4.clone();
        with_tlv.extend_from_slice(&[0x04, 0, 2, 1, 2]);
        assert_eq!(done(&v2(1, 0x11, &with_tlv)).1, 16 + 17);
        let mut b6 = vec![0u8; 36];
        b6[..16].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        b6[32..34].copy_from_slice(&4000u16.to_be_bytes());
        assert_eq!(
            done(&v2(1, 0x21, &b6)).0,
            Source::Client("[2001:db8::1]:4000".parse().unwrap())
        );
        assert_eq!(done(&v2(0, 0x00, &[])), (Source::Unknown, 16), "LOCAL");
        assert_eq!(done(&v2(1, 0x00, &[])).0, Source::Unknown, "UNSPEC");
    }

    #[test]
    fn v2_truncated_and_malformed() {
        let h = v2(1, 0x11, &[1; 12]);
        for cut in [1, 11, 12, 15, 16, 27] {
            assert_eq!(parse(&h[..cut]), Ok(Parsed::Partial), "cut at {cut}");
        }
        assert!(
            parse(&v2(1, 0x11, &[1; 11])).is_err(),
            "IPv4 block too short"
        );
        assert!(
            parse(&v2(1, 0x21, &[1; 35])).is_err(),
            "IPv6 block too short"
        );
        assert!(parse(&v2(2, 0x11, &[1; 12])).is_err(), "command 2");
        assert!(parse(&v2(1, 0x51, &[1; 12])).is_err(), "family 5");
        let mut bad_version = h.clone();
        bad_version[12] = 0x11;
        assert!(parse(&bad_version).is_err());
        let mut huge = V2_SIG.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert!(parse(&huge).is_err(), "length beyond the bound");
        assert!(parse(b"\r\n\r\n\0\r\nQUIX\n").is_err());
    }
}
