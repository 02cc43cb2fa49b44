//! Access control per route: client address allow/deny rules evaluated in order like nginx's `allow` /
//! `deny` (the first rule that matches decides; none matching allows; denied → 403), then HTTP basic auth
//! against bcrypt hashes as `htpasswd -B` writes them (401 with `WWW-Authenticate: Basic realm="..."`).
//!
//! bcrypt is slow on purpose (htpasswd's default cost 5 is ~2 ms, cost 10 ~60 ms), so a check runs on the
//! blocking pool, at most `VERIFY_AT_ONCE` (4) at a time, and a credential that passed is remembered (as a
//! keyed hash of the header, never the password) for `REMEMBER` (60 s), so a client's later requests cost a
//! lookup. An unknown user is checked against a dummy hash, so its answer takes as long as a wrong password.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::AccessTable;

use crate::classify::Cidr;
use crate::http::{Request, Response};

/// bcrypt checks running at once per route, at most (a flood of wrong passwords waits here, not in the
/// blocking pool).
const VERIFY_AT_ONCE: usize = 4;
/// How long a credential that passed is remembered.
const REMEMBER: Duration = Duration::from_secs(60);
/// Credentials remembered at most per route (the memory is cleared when full).
const REMEMBER_MAX: usize = 4096;

#[derive(Clone, Debug, PartialEq)]
enum Rule {
    Allow(Option<Cidr>),
    Deny(Option<Cidr>),
}

/// A route's compiled access control.
pub(crate) struct Access {
    rules: Vec<Rule>,
    trusted: Vec<Cidr>,
    auth: Option<Auth>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("rules", &self.rules)
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

struct Auth {
    realm: String,
    users: HashMap<String, String>,
    /// Checked for unknown users: a hash of the same cost as the first user's.
    dummy: String,
    verifying: Arc<tokio::sync::Semaphore>,
    passed: Mutex<HashMap<u64, Instant>>,
    hasher: std::collections::hash_map::RandomState,
}

/// Why a request was refused (the metric's `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// An `ip` rule denied the client (403).
    Address,
    /// Missing, malformed or wrong credentials (401).
    Credentials,
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::Address => "address",
            Refusal::Credentials => "credentials",
        }
    }
}

fn is_bcrypt(h: &str) -> bool {
    ["$2a$", "$2b$", "$2y$", "$2x$"]
        .iter()
        .any(|p| h.starts_with(p))
        && h.parse::<bcrypt::HashParts>().is_ok()
}

impl Access {
    /// Compiles a table; `resolve` makes a relative path the config file's. An error names its key.
    pub(crate) fn build(
        t: &AccessTable,
        resolve: &dyn Fn(&std::path::Path) -> PathBuf,
    ) -> Result<Access, (&'static str, String)> {
        let mut rules = Vec::new();
        for r in &t.ip {
            let bad = || {
                format!(
                    "`{r}` is not a rule (expected \"allow CIDR\", \"deny CIDR\", CIDR may be `all`)"
                )
            };
            let (verb, what) = r
                .trim()
                .split_once(char::is_whitespace)
                .ok_or_else(|| ("ip", bad()))?;
            let what = what.trim();
            let range = if what == "all" {
                None
            } else {
                Some(Cidr::parse(what).map_err(|m| ("ip", format!("`{r}`: {m}")))?)
            };
            rules.push(match verb {
                "allow" => Rule::Allow(range),
                "deny" => Rule::Deny(range),
                _ => return Err(("ip", bad())),
            });
        }
        let trusted = t
            .trusted_proxies
            .iter()
            .map(|c| Cidr::parse(c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| ("trusted_proxies", m))?;
        let mut users = HashMap::new();
        if let Some(f) = &t.users_file {
            let path = resolve(f);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                (
                    "users_file",
                    format!("{}: cannot read: {e}", path.display()),
                )
            })?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let Some((user, hash)) = line.split_once(':') else {
                    return Err((
                        "users_file",
                        format!("{}:{}: expected user:hash", path.display(), n + 1),
                    ));
                };
                if !is_bcrypt(hash) {
                    return Err((
                        "users_file",
                        format!(
                            "{}:{}: user `{user}`: not a bcrypt hash (only bcrypt is accepted: \
                             create it with `htpasswd -B`)",
                            path.display(),
                            n + 1
                        ),
                    ));
                }
                users.insert(user.to_string(), hash.to_string());
            }
        }
        let mut inline: Vec<_> = t.users.iter().collect();
        inline.sort();
        for (user, hash) in inline {
            if user.is_empty() || user.contains(':') {
                return Err((
                    "users",
                    format!("`{user}`: a user name is non-empty, without `:`"),
                ));
            }
            if !is_bcrypt(hash) {
                return Err((
                    "users",
                    format!(
                        "user `{user}`: not a bcrypt hash (only bcrypt is accepted: create it with \
                         `htpasswd -nB {user}`)"
                    ),
                ));
            }
            users.insert(user.clone(), hash.clone());
        }
        let auth = match (&t.realm, users.is_empty()) {
            (_, true) if t.users_file.is_some() => {
                return Err(("users_file", "lists no users".to_string()));
            }
            (Some(_), true) => {
                return Err((
                    "realm",
                    "basic auth needs `users` or `users_file`".to_string(),
                ));
            }
            (_, true) => None,
            (realm, false) => {
                let realm = realm.clone().unwrap_or_else(|| "ordo".to_string());
                if realm.contains(['"', '\\']) || realm.chars().any(char::is_control) {
                    return Err((
                        "realm",
                        format!("{realm:?}: no quotes, backslashes or control characters"),
                    ));
                }
                let cost = users
                    .values()
                    .next()
                    .and_then(|h| h.parse::<bcrypt::HashParts>().ok())
                    .map_or(5, |p| p.get_cost());
                let dummy = bcrypt::hash("ordo: no such user", cost)
                    .map_err(|e| ("users", format!("cannot hash: {e}")))?;
                Some(Auth {
                    realm,
                    users,
                    dummy,
                    verifying: Arc::new(tokio::sync::Semaphore::new(VERIFY_AT_ONCE)),
                    passed: Mutex::new(HashMap::new()),
                    hasher: Default::default(),
                })
            }
        };
        Ok(Access {
            rules,
            trusted,
            auth,
        })
    }

    /// Whether the `ip` rules let `ip` in.
    fn address_allowed(&self, ip: IpAddr) -> bool {
        for r in &self.rules {
            match r {
                Rule::Allow(c) if c.is_none_or(|c| c.contains(ip)) => return true,
                Rule::Deny(c) if c.is_none_or(|c| c.contains(ip)) => return false,
                _ => {}
            }
        }
        true
    }

    /// `Err` with the answer (403 or 401) when `req` may not pass.
    pub(crate) async fn check(&self, req: &Request) -> Result<(), (Refusal, Response)> {
        if !self.rules.is_empty() {
            let ip = super::client_ip(req, &self.trusted);
            if !self.address_allowed(ip) {
                return Err((Refusal::Address, Response::text(403, "forbidden")));
            }
        }
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        if auth.verify(req).await {
            return Ok(());
        }
        Err((
            Refusal::Credentials,
            Response::text(401, "authentication required").with_header(
                "WWW-Authenticate",
                format!("Basic realm=\"{}\", charset=\"UTF-8\"", auth.realm),
            ),
        ))
    }
}

/// `Authorization: Basic <base64 user:password>` → (user, password); `None` when absent or malformed.
fn credentials(req: &Request) -> Option<(String, String)> {
    use base64::Engine;
    let v = req.header("authorization")?.trim();
    let (scheme, token) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

impl Auth {
    fn key(&self, header: &str) -> u64 {
        self.hasher.hash_one(header)
    }

    async fn verify(&self, req: &Request) -> bool {
        let Some((user, pass)) = credentials(req) else {
            return false;
        };
        let key = self.key(req.header("authorization").unwrap_or(""));
        {
            let passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
            if passed.get(&key).is_some_and(|t| t.elapsed() < REMEMBER) {
                return true;
            }
        }
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (self.dummy.clone(), false),
        };
        let Ok(_permit) = self.verifying.clone().acquire_owned().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pass, &hash).unwrap_or(false))
            .await
            .unwrap_or(false)
            && known;
        if ok {
            let mut passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
            if passed.len() >= REMEMBER_MAX {
                passed.clear();
            }
            passed.insert(key, Instant::now());
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(toml_text: &str) -> Result<Access, (&'static str, String)> {
        let t: AccessTable = toml::from_str(toml_text).unwrap();
        Access::build(&t, &|p| p.to_path_buf())
    }

    fn from(ip: &str) -> Request {
        let mut r = Request::get("/");
        r.peer = std::net::SocketAddr::new(ip.parse().unwrap(), 1);
        r
    }

    #[tokio::test]
    async fn ip_rules_are_evaluated_in_order() {
        let a = build(
            "ip = [\"deny 10.0.0.7\", \"allow 10.0.0.0/8\", \"allow 2001:db8::/32\", \"deny all\"]",
        )
        .unwrap();
        let status = |ip: &str| {
            let a = &a;
            let r = from(ip);
            async move { a.check(&r).await.err().map(|(_, r)| r.status) }
        };
        assert_eq!(status("10.1.2.3").await, None);
        assert_eq!(status("10.0.0.7").await, Some(403));
        assert_eq!(status("192.168.0.1").await, Some(403));
        assert_eq!(status("2001:db8::1").await, None);
        assert_eq!(status("2001:db9::1").await, Some(403));
        // IPv4-mapped IPv6 peers match IPv4 rules
        assert_eq!(status("::ffff:10.1.2.3").await, None);
        // no rule matching allows
        let a = build("ip = [\"deny 10.0.0.0/8\"]").unwrap();
        assert!(a.check(&from("11.0.0.1")).await.is_ok());
        // behind a trusted proxy the rules see the forwarded client
        let a = build("ip = [\"allow 1.2.3.4\", \"deny all\"]\ntrusted_proxies = [\"127.0.0.1\"]")
            .unwrap();
        let r = from("127.0.0.1").with_header("X-Forwarded-For", "1.2.3.4");
        assert!(a.check(&r).await.is_ok());
        let r = from("127.0.0.1").with_header("X-Forwarded-For", "5.6.7.8");
        assert!(a.check(&r).await.is_err());
    }

    #[tokio::test]
    async fn basic_auth_with_bcrypt() {
        use base64::Engine;
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let a = build(&format!(
            "realm = \"staff\"\nusers = {{ alice = \"{hash}\" }}"
        ))
        .unwrap();
        let with = |v: &str| from("1.1.1.1").with_header("Authorization", v);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(
            a.check(&with(&format!("Basic {}", b64("alice:s3cret"))))
                .await
                .is_ok()
        );
        // remembered: the same header passes again at once
        assert!(
            a.check(&with(&format!("basic {}", b64("alice:s3cret"))))
                .await
                .is_ok()
        );
        for bad in [
            format!("Basic {}", b64("alice:wrong")),
            format!("Basic {}", b64("bob:s3cret")),
            format!("Basic {}", b64("alice")),
            "Basic !!!not-base64".to_string(),
            "Bearer abc".to_string(),
            "Basic".to_string(),
            String::new(),
        ] {
            let (why, r) = a.check(&with(&bad)).await.unwrap_err();
            assert_eq!((why, r.status), (Refusal::Credentials, 401), "{bad}");
            assert_eq!(
                r.header("www-authenticate"),
                Some("Basic realm=\"staff\", charset=\"UTF-8\"")
            );
        }
        let (_, r) = a.check(&from("1.1.1.1")).await.unwrap_err();
        assert_eq!(r.status, 401);
    }

    #[test]
    fn bad_tables_name_their_key() {
        assert_eq!(build("ip = [\"permit 10.0.0.0/8\"]").unwrap_err().0, "ip");
        assert_eq!(build("ip = [\"allow 10.0.0.0/40\"]").unwrap_err().0, "ip");
        assert_eq!(build("ip = [\"allow\"]").unwrap_err().0, "ip");
        assert_eq!(build("realm = \"x\"").unwrap_err().0, "realm");
        let e = build("users = { bob = \"$apr1$abc$def\" }").unwrap_err();
        assert!(e.0 == "users" && e.1.contains("htpasswd -nB bob"), "{e:?}");
        let e = build("users_file = \"/nonexistent/htpasswd\"").unwrap_err();
        assert!(e.0 == "users_file" && e.1.contains("cannot read"), "{e:?}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("htpasswd");
        std::fs::write(&f, "# users\nalice:{SHA}abc=\n").unwrap();
        let e = build(&format!("users_file = {f:?}")).unwrap_err();
        assert!(e.1.contains(":2: user `alice`: not a bcrypt hash"), "{e:?}");
    }
}
