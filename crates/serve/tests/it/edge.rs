//! Edge duties through a whole server: compression of static and proxied responses (decoded with the
//! crates, with `curl --compressed` and by headless Chromium), precompressed siblings, and what is never
//! compressed (Range, HEAD, already-encoded bodies).

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::ctl_util::start;
use crate::http_util::{Client, Resp};

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"<p>the quick brown fox jumps over the lazy dog</p>\n"[i % 51])
        .collect()
}

fn decode(coding: &str, z: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(z)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(z, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        "zstd" => out = zstd::stream::decode_all(z).unwrap(),
        other => panic!("unexpected coding {other}"),
    }
    out
}

async fn fetch(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let mut c = Client::connect(addr).await;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send(req.as_bytes()).await;
    c.try_response(method == "HEAD").await.expect("a response")
}

/// An upstream that answers every request with `response` and closes.
async fn upstream(response: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut tmp).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
                let _ = s.write_all(&response).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

fn chunked(body: &[u8], extra_head: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n{extra_head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for piece in body.chunks(7000) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

struct Site {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("page.html"), text(20_000)).unwrap();
    std::fs::write(root.join("big.txt"), text(400_000)).unwrap();
    std::fs::write(root.join("tiny.txt"), b"tiny").unwrap();
    std::fs::write(root.join("pic.png"), text(20_000)).unwrap();
    // a precompressed sibling whose content differs from the original, so serving it shows
    std::fs::write(root.join("app.css"), text(5000)).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, b"from the .gz sibling").unwrap();
    std::fs::write(root.join("app.css.gz"), gz.finish().unwrap()).unwrap();
    Site { _dir: dir, root }
}

fn config(root: &Path, up: SocketAddr, extra: &str) -> String {
    format!(
        "[compression]\nenabled = true\nprecompressed = true\n{extra}\n\
         [[routes]]\nprefix = \"/\"\nstatic = {{ root = {root:?} }}\n\
         [[routes]]\nprefix = \"/up\"\nproxy = {{ upstreams = [\"{up}\"] }}\n\
         [[routes]]\nprefix = \"/plain\"\nstatic = {{ root = {root:?} }}\nstrip_prefix = true\n\
         [routes.compression]\nenabled = false\n"
    )
}

#[tokio::test]
async fn static_and_proxied_responses_are_compressed_by_negotiation() {
    let s = site();
    let body = text(30_000);
    let up = upstream(chunked(&body, "")).await;
    let h = start(&config(&s.root, up, "")).await;
    let addr = h.local_addr();

    for (coding, accept) in [
        ("br", "gzip, deflate, br, zstd"),
        ("zstd", "gzip;q=0.5, zstd"),
        ("gzip", "gzip, br;q=0"),
    ] {
        // a cached small file (in memory), a large file (from disk), a proxied chunked stream
        for (path, want) in [
            ("/page.html", text(20_000)),
            ("/big.txt", text(400_000)),
            ("/up/x", body.clone()),
        ] {
            let r = fetch(addr, "GET", path, &[("Accept-Encoding", accept)]).await;
            assert_eq!(r.status, 200, "{path}");
            assert_eq!(
                r.header("content-encoding"),
                Some(coding),
                "{path} {accept}"
            );
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{path}");
            assert!(r.body.len() < want.len() / 4, "{path}: {}", r.body.len());
            assert_eq!(decode(coding, &r.body), want, "{path} {coding}");
            assert!(r.header("accept-ranges").is_none(), "{path}");
            if let Some(etag) = r.header("etag") {
                assert!(etag.starts_with("W/"), "{path}: {etag}");
            }
        }
    }
    // identity when not accepted (and Vary all the same); never below min_size or for other types
    let r = fetch(
        addr,
        "GET",
        "/page.html",
        &[("Accept-Encoding", "identity")],
    )
    .await;
    assert_eq!((r.header("content-encoding"), r.body.len()), (None, 20_000));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    let r = fetch(addr, "GET", "/page.html", &[("Accept-Encoding", "*;q=0")]).await;
    assert_eq!(r.header("content-encoding"), None);
    let r = fetch(addr, "GET", "/tiny.txt", &[("Accept-Encoding", "gzip")]).await;
    assert_eq!(
        (r.header("content-encoding"), &r.body[..]),
        (None, &b"tiny"[..])
    );
    let r = fetch(addr, "GET", "/pic.png", &[("Accept-Encoding", "gzip")]).await;
    assert_eq!((r.header("content-encoding"), r.body.len()), (None, 20_000));
    // a route with compression off
    let r = fetch(
        addr,
        "GET",
        "/plain/page.html",
        &[("Accept-Encoding", "gzip")],
    )
    .await;
    assert_eq!(
        (r.header("content-encoding"), r.header("vary")),
        (None, None)
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn ranges_head_and_encoded_bodies_are_not_compressed() {
    let s = site();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &text(10_000)).unwrap();
    let already = gz.finish().unwrap();
    let up = upstream(chunked(&already, "Content-Encoding: gzip\r\n")).await;
    let h = start(&config(&s.root, up, "")).await;
    let addr = h.local_addr();
    let ae = ("Accept-Encoding", "gzip, br, zstd");

    // Range: the identity bytes asked for, 206, no coding
    for path in ["/page.html", "/big.txt"] {
        let r = fetch(addr, "GET", path, &[ae, ("Range", "bytes=10-109")]).await;
        assert_eq!(r.status, 206, "{path}");
        assert_eq!(r.header("content-encoding"), None, "{path}");
        assert_eq!(r.body, text(200)[10..110], "{path}");
    }
    // HEAD: identity headers (the length of the identity body)
    let r = fetch(addr, "HEAD", "/page.html", &[ae]).await;
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("content-length"), Some("20000"));
    // an upstream body already gzip-encoded passes through once, byte for byte
    let r = fetch(addr, "GET", "/up/x", &[ae]).await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, already);
    assert_eq!(decode("gzip", &r.body), text(10_000));
    // a precompressed sibling: its bytes, the original's type; without gzip accepted, the original
    let r = fetch(addr, "GET", "/app.css", &[ae]).await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(decode("gzip", &r.body), b"from the .gz sibling");
    let r = fetch(addr, "GET", "/app.css", &[("Accept-Encoding", "br")]).await;
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &r.body), text(5000));
    h.shutdown().await.unwrap();
}

/// `curl --compressed` decodes what ordo sends (each coding curl was built with).
#[tokio::test]
async fn curl_decodes_every_coding() {
    let Ok(v) = std::process::Command::new("curl").arg("-V").output() else {
        println!("skipped: curl is not installed");
        return;
    };
    let features = String::from_utf8_lossy(&v.stdout).to_lowercase();
    let s = site();
    let up = upstream(chunked(&text(30_000), "")).await;
    let h = start(&config(&s.root, up, "")).await;
    let addr = h.local_addr();
    for (coding, feature) in [("gzip", "libz"), ("br", "brotli"), ("zstd", "zstd")] {
        if !features.contains(feature) {
            println!("skipped {coding}: this curl lacks {feature}");
            continue;
        }
        for (path, want) in [("/big.txt", text(400_000)), ("/up/x", text(30_000))] {
            let url = format!("http://{addr}{path}");
            let ae = format!("Accept-Encoding: {coding}");
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new("curl")
                    .args(["-sS", "--compressed", "-D", "-", "-o", "-"])
                    .args(["-H", &ae, &url])
                    .output()
            })
            .await
            .unwrap()
            .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text_out = &out.stdout;
            let split = text_out
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("curl printed the head");
            let head = String::from_utf8_lossy(&text_out[..split]).to_lowercase();
            assert!(
                head.contains(&format!("content-encoding: {coding}")),
                "{coding} {path}: {head}"
            );
            assert_eq!(&text_out[split + 4..], &want[..], "{coding} {path}");
        }
    }
    h.shutdown().await.unwrap();
}

#[test]
fn compression_errors_name_file_line_and_key() {
    let err = |t: &str| {
        ordo_serve::ServeConfig::from_toml_str(t, "c.toml")
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("[compression]\nenabled = true\nlevel = 0\n"),
        "c.toml:3: compression.level: must be 1 to 9, got 0"
    );
    assert_eq!(
        err(
            "[[routes]]\nprefix = \"/\"\nsynthetic = {}\n[routes.compression]\nalgorithms = [\"lzma\"]\n"
        ),
        "c.toml:5: routes[0].compression.algorithms: unknown coding `lzma` (expected br, zstd or gzip)"
    );
    let e = err("[compression]\ntypes = [\"html\"]\n");
    assert!(
        e.starts_with("c.toml:2: compression.types: `html` is not a media type"),
        "{e}"
    );
    let e = err("[compression]\nenable = true\n");
    assert_eq!(
        e,
        "c.toml:2: compression.enable: unknown key `enable`; did you mean `enabled`?"
    );
}

/// N requests sent back to back on one connection: exactly `burst` pass, the rest get 429 with
/// Retry-After and the RateLimit headers, counted in /metrics and logged with status 429.
#[tokio::test]
async fn a_burst_passes_and_the_rest_is_answered_429() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let h = start(&format!(
        "[access_log]\npath = {log:?}\nflush_interval = \"10ms\"\n\
         [[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n\
         [routes.rate_limit]\nrate = \"1/m\"\nburst = 5\nname = \"per-ip\"\n\
         [[routes]]\nprefix = \"/free\"\nsynthetic = {{}}\n"
    ))
    .await;
    let addr = h.local_addr();
    let mut c = Client::connect(addr).await;
    let (mut ok, mut limited) = (0, 0);
    for _ in 0..20 {
        c.send(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").await;
        let r = c.response().await;
        match r.status {
            200 => {
                ok += 1;
                assert_eq!(r.header("ratelimit-policy"), Some("\"per-ip\";q=1;w=60"));
                assert!(
                    r.header("ratelimit")
                        .is_some_and(|v| v.starts_with("\"per-ip\";r="))
                );
            }
            429 => {
                limited += 1;
                let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
                assert!((1..=60).contains(&retry), "{retry}");
                assert_eq!(
                    r.header("ratelimit"),
                    Some(format!("\"per-ip\";r=0;t={retry}").as_str())
                );
                assert_eq!(r.header("ratelimit-policy"), Some("\"per-ip\";q=1;w=60"));
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert_eq!((ok, limited), (5, 15));
    // another route has no limit
    assert_eq!(fetch(addr, "GET", "/free/x", &[]).await.status, 200);
    let m = h.metrics_text();
    assert!(
        m.contains("ordo_serve_rate_limited_total{route=\"/\"} 15"),
        "{m}"
    );
    let admin = crate::ctl_util::get(h.admin_addr().unwrap(), "/metrics").await;
    assert!(
        admin
            .body
            .contains("ordo_serve_rate_limited_total{route=\"/\"} 15"),
        "{}",
        admin.body
    );
    h.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.contains("\" 429 ")).count(),
        15,
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains("\" 200 ")).count(),
        6,
        "{text}"
    );
}

#[tokio::test]
async fn the_limit_keys_on_the_forwarded_client_behind_a_trusted_proxy() {
    let h = start(
        "[rate_limit]\nrate = \"1/m\"\nburst = 1\ntrusted_proxies = [\"127.0.0.0/8\"]\n\
         [[routes]]\nprefix = \"/\"\nsynthetic = {}\n",
    )
    .await;
    let a = h.local_addr();
    let from = |ip: &'static str| async move {
        fetch(a, "GET", "/x", &[("X-Forwarded-For", ip)])
            .await
            .status
    };
    assert_eq!(from("1.1.1.1").await, 200);
    assert_eq!(from("1.1.1.1").await, 429);
    assert_eq!(from("2001:db8::1").await, 200);
    assert_eq!(from("8.8.8.8, 1.1.1.1").await, 429);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn basic_auth_and_address_rules_per_route() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("pw", 4).unwrap();
    std::fs::write(dir.path().join("htpasswd"), format!("alice:{hash}\n")).unwrap();
    let cfg_path = dir.path().join("ordo.toml");
    std::fs::write(
        &cfg_path,
        "[[routes]]\nprefix = \"/admin\"\nsynthetic = {}\n\
         [routes.access]\nrealm = \"staff only\"\nusers_file = \"htpasswd\"\n\
         [[routes]]\nprefix = \"/lan\"\nsynthetic = {}\n\
         [routes.access]\nip = [\"allow ::1\", \"deny all\"]\n\
         [[routes]]\nprefix = \"/local\"\nsynthetic = {}\n\
         [routes.access]\nip = [\"deny 10.0.0.0/8\", \"allow 127.0.0.0/8\", \"deny all\"]\n",
    )
    .unwrap();
    let cfg = ordo_serve::ServeConfig::from_file(&cfg_path).unwrap();
    let h = crate::ctl_util::start_cfg(cfg).await;
    let a = h.local_addr();
    let basic = |s: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    };
    let r = fetch(a, "GET", "/admin/x", &[]).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"staff only\", charset=\"UTF-8\"")
    );
    for bad in [
        basic("alice:nope"),
        basic("mallory:pw"),
        "Basic %%%".into(),
        "Basic".into(),
    ] {
        assert_eq!(
            fetch(a, "GET", "/admin/x", &[("Authorization", &bad)])
                .await
                .status,
            401,
            "{bad}"
        );
    }
    let good = basic("alice:pw");
    assert_eq!(
        fetch(a, "GET", "/admin/x", &[("Authorization", &good)])
            .await
            .status,
        200
    );
    // the client is 127.0.0.1: not ::1, so /lan is 403; /local lets it in
    assert_eq!(fetch(a, "GET", "/lan/x", &[]).await.status, 403);
    assert_eq!(fetch(a, "GET", "/local/x", &[]).await.status, 200);
    let m = h.metrics_text();
    assert!(
        m.contains("ordo_serve_access_denied_total{route=\"/admin\",reason=\"credentials\"} 5"),
        "{m}"
    );
    assert!(
        m.contains("ordo_serve_access_denied_total{route=\"/lan\",reason=\"address\"} 1"),
        "{m}"
    );
    h.shutdown().await.unwrap();
}

/// `htpasswd -B` (Apache's tool) writes hashes ordo accepts.
#[tokio::test]
async fn htpasswd_b_hashes_are_accepted() {
    let Ok(out) = std::process::Command::new("htpasswd")
        .args(["-nbB", "carol", "horse battery"])
        .output()
    else {
        println!("skipped: htpasswd is not installed (apache2-utils)");
        return;
    };
    use base64::Engine;
    let line = String::from_utf8(out.stdout).unwrap();
    let (user, hash) = line.trim().split_once(':').unwrap();
    let h = start(&format!(
        "[[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n[routes.access]\nusers = {{ {user} = \"{hash}\" }}\n"
    ))
    .await;
    let ok = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("carol:horse battery")
    );
    assert_eq!(
        fetch(h.local_addr(), "GET", "/", &[("Authorization", &ok)])
            .await
            .status,
        200
    );
    h.shutdown().await.unwrap();
}

/// examples/kubernetes/ordo.yaml: its ConfigMap holds a valid configuration; the Deployment's probes name a
/// container port that is the configuration's admin port, and their paths answer 200 on a running ordo
/// started from that configuration; the Service targets a port the container declares. The YAML is read
/// by Python's PyYAML (no YAML crate in the workspace); skipped when it is not installed.
#[tokio::test]
async fn the_kubernetes_example_probes_real_admin_endpoints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let yaml = root.join("examples/kubernetes/ordo.yaml");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(&yaml)
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("No module named 'yaml'"),
                "the YAML does not parse: {err}"
            );
            println!("skipped: python3 has no yaml module (pip install pyyaml)");
            return;
        }
        Err(_) => {
            println!("skipped: python3 is not installed");
            return;
        }
    };
    let docs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let docs = docs.as_array().unwrap();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"] == k)
            .unwrap_or_else(|| panic!("no {k} in {}", yaml.display()))
    };
    let toml_text = kind("ConfigMap")["data"]["ordo.toml"].as_str().unwrap();
    let cfg = ordo_serve::ServeConfig::from_toml_str(toml_text, "configmap ordo.toml").unwrap();
    assert!(cfg.listen.ip().is_unspecified() && cfg.admin.listen.ip().is_unspecified());
    let container = &kind("Deployment")["spec"]["template"]["spec"]["containers"][0];
    let ports = container["ports"].as_array().unwrap();
    let port_number = |p: &serde_json::Value| -> u64 {
        match p.as_u64() {
            Some(n) => n,
            None => ports
                .iter()
                .find(|q| q["name"] == *p)
                .unwrap_or_else(|| panic!("no container port named {p}"))["containerPort"]
                .as_u64()
                .unwrap(),
        }
    };
    assert_eq!(
        port_number(&kind("Service")["spec"]["ports"][0]["targetPort"]),
        u64::from(cfg.listen.port())
    );
    // the grace ordo takes is shorter than the one Kubernetes gives before SIGKILL
    let k8s_grace = kind("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(cfg.shutdown_grace.as_secs() < k8s_grace);
    let h = crate::ctl_util::start_cfg(cfg.clone()).await;
    let admin = h.admin_addr().unwrap();
    let mut probes = 0;
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        let p = &container[probe]["httpGet"];
        if p.is_null() {
            continue;
        }
        probes += 1;
        assert_eq!(
            port_number(&p["port"]),
            u64::from(cfg.admin.listen.port()),
            "{probe}"
        );
        let path = p["path"].as_str().unwrap();
        let r = crate::ctl_util::get(admin, path).await;
        assert_eq!(r.status, 200, "{probe} {path}: {}", r.body);
    }
    assert!(probes >= 2, "readiness and liveness probes");
    h.shutdown().await.unwrap();
    // the image's own configuration is valid, and every file the Dockerfile copies from the tree exists
    let image_cfg =
        ordo_serve::ServeConfig::from_file(root.join("examples/container/ordo.toml")).unwrap();
    assert!(image_cfg.listen.ip().is_unspecified());
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    for line in dockerfile
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let src = line.split_whitespace().nth(1).unwrap();
        assert!(
            root.join(src).exists(),
            "Dockerfile copies {src}, which is missing"
        );
    }
}

/// Over HTTP/2 (h2c) the same negotiation applies: a streamed file and a proxied stream arrive compressed
/// and decode to the originals.
#[tokio::test]
async fn compression_over_http2() {
    let s = site();
    let up = upstream(chunked(&text(30_000), "")).await;
    let h = start(&config(&s.root, up, "")).await;
    let io = tokio::net::TcpStream::connect(h.local_addr())
        .await
        .unwrap();
    let (mut send, conn) = h2::client::handshake(io).await.unwrap();
    let conn = tokio::spawn(conn);
    for (path, coding, want) in [
        ("/big.txt", "zstd", text(400_000)),
        ("/up/x", "gzip", text(30_000)),
        ("/page.html", "br", text(20_000)),
    ] {
        let req = http::Request::builder()
            .uri(format!("http://t.test{path}"))
            .header("accept-encoding", coding)
            .body(())
            .unwrap();
        let (resp, _) = send.send_request(req, true).unwrap();
        let resp = tokio::time::timeout(std::time::Duration::from_secs(10), resp)
            .await
            .unwrap()
            .unwrap();
        let (parts, mut body) = resp.into_parts();
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers["content-encoding"], coding, "{path}");
        let mut got = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            let _ = body.flow_control().release_capacity(chunk.len());
            got.extend_from_slice(&chunk);
        }
        assert_eq!(decode(coding, &got), want, "{path}");
    }
    drop(send);
    conn.abort();
    h.shutdown().await.unwrap();
}

/// A browser decodes every coding ordo makes: headless Chromium loads one page per coding over HTTPS
/// (Chromium offers `br` and `zstd` only to secure origins) from routes that each allow one coding, and
/// its DOM must hold the page's first and last lines; the access log shows each of Chromium's responses
/// was sent compressed (its length well under the page's). Skipped, saying so, without Chromium.
#[tokio::test]
async fn chromium_decodes_every_coding() {
    if !ordo_testkit::chromium::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("c.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.path().join("c.key"), ck.key_pair.serialize_pem()).unwrap();
    let page = |coding: &str| {
        let mut p = format!("<!doctype html><html><body><p id=first>first line {coding}</p>\n");
        for i in 0..600 {
            p += &format!("<p>row {i} of a page that compresses well, served as {coding}</p>\n");
        }
        p + &format!("<p id=last>last line {coding}</p></body></html>\n")
    };
    let mut routes = String::new();
    for coding in ["gzip", "br", "zstd"] {
        let root = dir.path().join(coding);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("page.html"), page(coding)).unwrap();
        routes += &format!(
            "[[routes]]\nprefix = \"/{coding}\"\nstrip_prefix = true\nstatic = {{ root = {root:?} }}\n\
             [routes.compression]\nalgorithms = [\"{coding}\"]\n"
        );
    }
    let log = dir.path().join("access.log");
    let toml = format!(
        "[compression]\nenabled = true\n\
         [access_log]\npath = {log:?}\nformat = \"json\"\nflush_interval = \"10ms\"\n\
         [[tls.certificates]]\ncert = \"c.crt\"\nkey = \"c.key\"\n{routes}"
    );
    let cfg_path = dir.path().join("ordo.toml");
    std::fs::write(&cfg_path, toml).unwrap();
    let h =
        crate::ctl_util::start_cfg(ordo_serve::ServeConfig::from_file(&cfg_path).unwrap()).await;
    let port = h.local_addr().port();
    let raw_len = page("gzip").len();
    for coding in ["gzip", "br", "zstd"] {
        let url = format!("https://localhost:{port}/{coding}/page.html");
        let profile = tempfile::tempdir().unwrap();
        let out = tokio::task::spawn_blocking({
            let profile = profile.path().to_path_buf();
            move || {
                let chromium = ordo_testkit::chromium::command(&profile);
                std::process::Command::new("timeout")
                    .arg("60")
                    .arg(chromium.get_program())
                    .args(chromium.get_args())
                    .args([
                        "--ignore-certificate-errors",
                        // nothing but this server: every other name fails at once
                        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
                        "--dump-dom",
                    ])
                    .arg(&url)
                    .output()
                    .expect("start chromium")
            }
        })
        .await
        .unwrap();
        let dom = String::from_utf8_lossy(&out.stdout);
        assert!(
            dom.contains(&format!("first line {coding}"))
                && dom.contains(&format!("last line {coding}")),
            "{coding}: Chromium's DOM lacks the page ({} bytes of DOM); stderr: {}",
            dom.len(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // every page Chromium fetched was sent compressed (a page of one coding's route can only be that coding)
    let mut seen = Vec::new();
    for _ in 0..200 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        seen = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| {
                v["user_agent"]
                    .as_str()
                    .is_some_and(|u| u.contains("Chrome"))
                    && v["target"]
                        .as_str()
                        .is_some_and(|t| t.ends_with("/page.html"))
            })
            .map(|v| {
                (
                    v["target"].as_str().unwrap().to_string(),
                    v["bytes"].as_u64(),
                )
            })
            .collect();
        if seen.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        seen.len(),
        3,
        "Chromium's page requests in the access log: {seen:?}"
    );
    for (target, bytes) in &seen {
        let bytes = bytes.unwrap_or(u64::MAX);
        assert!(
            bytes * 4 < raw_len as u64,
            "{target}: {bytes} bytes sent for a {raw_len}-byte page: not compressed"
        );
    }
    h.shutdown().await.unwrap();
}
