//! Unit tests of the scripting layer: errors with file and line, wrk.format from the command line, the
//! setup/init order and values crossing states, request strings counted, responses split, done()'s stats.

use super::*;
use std::path::Path;

fn script(src: &str) -> Script {
    Script::from_source(Path::new("t.lua"), src, vec!["a".into(), "b".into()]).unwrap()
}

fn config() -> BenchConfig {
    BenchConfig::new("http://127.0.0.1:8080/x?y=1").unwrap()
}

fn addr() -> SocketAddr {
    "127.0.0.1:8080".parse().unwrap()
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    let e = Script::from_source(Path::new("bad.lua"), "x = = 1", vec![]).unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with("script bad.lua: "), "{m}");
    assert!(m.contains("bad.lua:1:"), "{m}");
    assert!(e.is_usage());
}

#[test]
fn counts_pipelined_requests() {
    assert_eq!(count_requests(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Ok(1));
    let three = b"GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\n\r\n";
    assert_eq!(count_requests(three), Ok(3));
    assert!(
        count_requests(b"GET / HTTP/1.1\r\n")
            .unwrap_err()
            .contains("incomplete")
    );
    assert!(
        count_requests(b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab")
            .unwrap_err()
            .contains("shorter")
    );
    assert!(count_requests(b"").unwrap_err().contains("empty"));
    assert!(count_requests(b"\x01\x02 nonsense\r\n\r\n").is_err());
}

#[test]
fn format_builds_wrk_requests_from_the_command_line() {
    let mut c = config();
    c.method = "PUT".into();
    c.headers = vec![crate::target::Header::parse("X-A: 1").unwrap()];
    c.body = Some(Bytes::from_static(b"hello"));
    let (p, _main) = start(&script(""), &c, addr(), 1).unwrap();
    let req = p.threads[0].static_req.clone().unwrap();
    let text = std::str::from_utf8(&req).unwrap();
    assert!(text.starts_with("PUT /x?y=1 HTTP/1.1\r\n"), "{text}");
    assert!(text.contains("Host: 127.0.0.1:8080\r\n"), "{text}");
    assert!(text.contains("X-A: 1\r\n"), "{text}");
    assert!(text.contains("Content-Length: 5\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
    assert_eq!(p.depth, 1);
}

#[test]
fn init_gets_the_url_and_the_arguments_and_setup_passes_values() {
    let src = r#"
        local n = 0
        function setup(thread)
            n = n + 1
            thread:set("id", n)
            thread:set("t", { k = "v", list = { 1, 2 } })
        end
        function init(args)
            got = args[0] .. "|" .. args[1] .. "|" .. args[2] .. "|" .. id .. "|" .. t.k .. t.list[2]
        end
        function request() return wrk.format(nil, "/" .. got) end
    "#;
    let (p, main) = start(&script(src), &config(), addr(), 2).unwrap();
    assert!(p.threads[0].static_req.is_none());
    let h = ThreadHandle::new(&p.threads[1].lua, p.threads[1].shared.clone());
    main.globals().set("h", h).unwrap();
    let got: String = main.load("return h:get('got')").eval().unwrap();
    assert_eq!(got, "http://127.0.0.1:8080/x?y=1|a|b|2|v2");
    // a function does not cross between states
    let e = main
        .load("h:set('f', print)")
        .exec()
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot cross between threads"), "{e}");
}

#[test]
fn setup_can_set_the_thread_address() {
    let src = r#"function setup(thread) thread.addr = "127.0.0.2:9" end"#;
    let (p, _) = start(&script(src), &config(), addr(), 1).unwrap();
    assert_eq!(p.threads[0].shared.addr(), "127.0.0.2:9".parse().unwrap());
    let bad = r#"function setup(thread) thread.addr = "nowhere" end"#;
    let e = start(&script(bad), &config(), addr(), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`nowhere` is not an address"), "{e}");
}

#[test]
fn a_request_that_is_not_http_is_refused_before_the_run() {
    let src = r#"function request() return "hello" end"#;
    let e = start(&script(src), &config(), addr(), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("request() did not return valid HTTP/1.1"), "{e}");
    let src = r#"function init() error("boom") end"#;
    let e = start(&script(src), &config(), addr(), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.lua:1:") && e.contains("boom"), "{e}");
}

#[test]
fn splits_a_recorded_response() {
    let info = |head: u64, body: u64, content: u64| ResponseInfo {
        status: 200,
        head_bytes: head,
        body_bytes: body,
        content_bytes: content,
        close: false,
    };
    let head = "HTTP/1.1 200 OK\r\nX-Token: t1\r\nContent-Length: 2\r\n\r\n";
    let mut rec = format!("HTTP/1.1 100 Continue\r\n\r\n{head}okHTTP/1.1 200").into_bytes();
    let r = split_response(&mut rec, &info(head.len() as u64, 2, 2), false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok");
    assert!(
        r.headers
            .iter()
            .any(|(k, v)| k == "X-Token" && &v[..] == b"t1")
    );
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let body = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let mut rec = format!("{head}{body}").into_bytes();
    let r = split_response(
        &mut rec,
        &info(head.len() as u64, body.len() as u64, 5),
        false,
    )
    .unwrap();
    assert_eq!(r.body, b"abcde");
}

#[test]
fn stats_objects_answer_like_wrk() {
    let mut h = crate::stats::new_hist();
    for v in [100u64, 200, 200, 300] {
        h.record(v).unwrap();
    }
    let lua = Lua::new();
    lua.globals().set("s", StatsObject::new(h)).unwrap();
    let (min, max, p50, n): (u64, u64, u64, usize) = lua
        .load("return s.min, s.max, s:percentile(50), #s")
        .eval()
        .unwrap();
    assert_eq!((min, max, p50, n), (100, 300, 200, 3));
    let (v, c): (u64, u64) = lua.load("return s(2)").eval().unwrap();
    assert_eq!((v, c), (200, 2));
    // report.lua's `%d` of a percentile works in Lua 5.4: percentiles are integers
    let s: String = lua
        .load("return string.format('%d', s:percentile(99.999))")
        .eval()
        .unwrap();
    assert_eq!(s, "300");
    assert!(lua.load("return s:percentile(101)").exec().is_err());
}
