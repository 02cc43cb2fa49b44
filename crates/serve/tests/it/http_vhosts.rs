//! Issue 20's virtual hosts and redirects through a whole `ordo serve`: routes chosen by Host (exact name
//! over `*.wildcard` over no host, then the longest prefix within that host, port and case ignored), unknown
//! hosts, duplicate and bad `host` values refused, and redirect routes (placeholders, status, bad values
//! refused with file, line and key). The TLS side (421 for a Host of another virtual host than the SNI name's)
//! is in `tls.rs`.

use std::net::SocketAddr;

use crate::http_forwarded::ordo;
use crate::http_util::*;
use ordo_serve::ServeConfig;

/// An upstream that answers every request with `name` as the body.
async fn named_upstream(name: &'static str) -> SocketAddr {
    head_upstream(move |_| name.as_bytes().to_vec()).await
}

async fn with_host(addr: SocketAddr, host: Option<&str>, path: &str) -> Resp {
    let raw = match host {
        Some(h) => format!("GET {path} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        None => format!("GET {path} HTTP/1.0\r\n\r\n"),
    };
    let mut c = Client::connect(addr).await;
    c.send(raw.as_bytes()).await;
    c.response().await
}

#[tokio::test]
async fn routes_are_chosen_by_host_then_prefix() {
    let mut toml = String::new();
    for (host, prefix, name) in [
        (None, "/", "any"),
        (None, "/shop", "any-shop"),
        (Some("api.example.com"), "/", "api"),
        (Some("api.example.com"), "/v1", "api-v1"),
        (Some("*.example.com"), "/", "wild"),
    ] {
        let up = named_upstream(name).await;
        toml.push_str("[[routes]]\n");
        if let Some(h) = host {
            toml.push_str(&format!("host = \"{h}\"\n"));
        }
        toml.push_str(&format!(
            "prefix = \"{prefix}\"\nproxy = {{ upstreams = [\"{up}\"] }}\n"
        ));
    }
    let h = ordo(&toml).await;
    let a = h.local_addr();
    for (host, path, want) in [
        (Some("api.example.com"), "/v1/users", "api-v1"),
        (Some("API.Example.COM:8080"), "/v1", "api-v1"),
        (Some("api.example.com"), "/shop", "api"),
        (Some("www.example.com"), "/v1", "wild"),
        (Some("a.b.example.com"), "/", "wild"),
        (Some("example.com"), "/shop/x", "any-shop"),
        (Some("other.test"), "/", "any"),
        (None, "/shop", "any-shop"),
    ] {
        let r = with_host(a, host, path).await;
        assert_eq!(r.status, 200, "{host:?} {path}");
        assert_eq!(r.text(), want, "{host:?} {path}");
    }
    h.shutdown().await.unwrap();

    // only named hosts: another host has no route
    let up = named_upstream("only").await;
    let h = ordo(&format!(
        "[[routes]]\nhost = \"only.test\"\nproxy = {{ upstreams = [\"{up}\"] }}\n"
    ))
    .await;
    assert_eq!(
        with_host(h.local_addr(), Some("only.test"), "/")
            .await
            .text(),
        "only"
    );
    assert_eq!(
        with_host(h.local_addr(), Some("else.test"), "/")
            .await
            .status,
        404
    );
    h.shutdown().await.unwrap();
}

#[test]
fn bad_and_duplicate_hosts_are_refused_with_file_line_and_key() {
    let e = ServeConfig::from_toml_str(
        "[[routes]]\nhost = \"a.test:8080\"\nsynthetic = {}\n",
        "v.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("v.toml:2") && e.contains("routes[0].host") && e.contains("a.test:8080"),
        "{e}"
    );
    // the same prefix on two hosts is fine; twice on one host is not (case and trailing dot ignored)
    ServeConfig::from_toml_str(
        "[[routes]]\nsynthetic = {}\n[[routes]]\nhost = \"a.test\"\nsynthetic = {}\n",
        "v.toml",
    )
    .unwrap();
    let e = ServeConfig::from_toml_str(
        "[[routes]]\nhost = \"a.test\"\nsynthetic = {}\n[[routes]]\nhost = \"A.test.\"\nsynthetic = {}\n",
        "v.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("duplicate route prefix `/` for host `a.test`"),
        "{e}"
    );
}

#[tokio::test]
async fn redirect_routes_answer_with_their_target() {
    let h = ordo(
        "[[routes]]\nredirect = { to = \"https://{host}{uri}\" }\n\
         [[routes]]\nprefix = \"/old\"\nstrip_prefix = true\nredirect = { to = \"/new{path}?{query}\", status = 308 }\n\
         [[routes]]\nhost = \"www.example.com\"\nredirect = { to = \"https://example.com{uri}\", status = 302 }\n",
    )
    .await;
    let a = h.local_addr();
    let r = with_host(a, Some("App.test:8080"), "/a/b?x=1").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("https://app.test/a/b?x=1"));
    let r = with_host(a, Some("app.test"), "/old/page?y=2").await;
    assert_eq!(r.status, 308);
    assert_eq!(r.header("location"), Some("/new/page?y=2"));
    let r = with_host(a, Some("www.example.com"), "/z").await;
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://example.com/z"));
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_http_only_redirect_sends_plain_requests_to_https() {
    let up = named_upstream("app").await;
    let h = ordo(&format!(
        "[[routes]]\nscheme = \"http\"\nredirect = {{ to = \"https://{{host}}{{uri}}\", status = 308 }}\n\
         [[routes]]\nscheme = \"https\"\nproxy = {{ upstreams = [\"{up}\"] }}\n\
         [[routes]]\nprefix = \"/health\"\nproxy = {{ upstreams = [\"{up}\"] }}\n"
    ))
    .await;
    let r = with_host(h.local_addr(), Some("app.test"), "/login?next=/").await;
    assert_eq!(r.status, 308);
    assert_eq!(r.header("location"), Some("https://app.test/login?next=/"));
    let r = with_host(h.local_addr(), Some("app.test"), "/health").await;
    assert_eq!((r.status, r.text().as_str()), (200, "app"));
    h.shutdown().await.unwrap();
    let e = ServeConfig::from_toml_str("[[routes]]\nscheme = \"ftp\"\nsynthetic = {}\n", "s.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s.toml:2") && e.contains("routes[0].scheme"),
        "{e}"
    );
}

#[test]
fn bad_redirects_are_refused_with_file_line_and_key() {
    for (toml, want) in [
        (
            "[[routes]]\nredirect = { to = \"/x\", status = 200 }\n",
            "routes[0].redirect.status: 200 is not a redirect status",
        ),
        (
            "[[routes]]\nredirect = { to = \"example.com\" }\n",
            "routes[0].redirect.to: `example.com` must be an absolute http(s) URL or start with `/`",
        ),
        (
            "[[routes]]\nredirect = { to = \"/{nope}\" }\n",
            "unknown placeholder `{nope}`",
        ),
        (
            "[[routes]]\nredirect = { to = \"/x\" }\nsynthetic = {}\n",
            "exactly one backend table",
        ),
    ] {
        let e = ServeConfig::from_toml_str(toml, "r.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.toml:") && e.contains(want), "{toml}: {e}");
    }
}
