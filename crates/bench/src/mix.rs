//! Class mixes: a TOML file describing user classes (name, share, URLs, headers, cookies, think time), parsed
//! into a checked [`Mix`] whose errors name the file, line and field, and the deterministic smooth weighted
//! round robin that turns shares into connection or request-slot assignments.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ordo_util::keypath;
use ordo_util::located::{Located, Source, line_of, path_to_string};
use serde::Deserialize;
use toml::Spanned;

use crate::error::BenchError;
use crate::target::{Header, Target};
use crate::threshold::Threshold;
use ordo_sys::units::parse_duration_or_secs as parse_duration;

/// How shares are realised in a closed loop (an open loop always assigns request slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assign {
    /// Each connection is one user of one class for the whole run (seed 003's set-up); the realised
    /// share of clients is exact when `connections × share` is a whole number.
    Clients,
    /// Every request slot is given to a class in turn (smooth weighted round robin): the share of
    /// requests holds whatever the response times.
    Requests,
}

/// URL choice within a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UrlOrder {
    /// Cycle through the URLs.
    InTurn,
    /// Pick uniformly at random (seeded, so runs repeat).
    Random,
}

/// One user class.
#[derive(Clone, Debug)]
pub struct MixClass {
    pub name: String,
    /// Relative share (normalised over all classes).
    pub share: f64,
    /// Paths (`/x`) or full URLs on the target's host and port.
    pub urls: Vec<String>,
    pub order: UrlOrder,
    pub headers: Vec<Header>,
    /// Sent as one `Cookie:` header.
    pub cookies: Vec<(String, String)>,
    /// Pause after each response (closed loop only).
    pub think: Duration,
    /// Line of the class in its file, for error messages.
    pub line: Option<usize>,
}

impl MixClass {
    /// A class with one URL, no headers, no think time.
    pub fn new(name: &str, share: f64, url: &str) -> MixClass {
        MixClass {
            name: name.to_string(),
            share,
            urls: vec![url.to_string()],
            order: UrlOrder::InTurn,
            headers: Vec::new(),
            cookies: Vec::new(),
            think: Duration::ZERO,
            line: None,
        }
    }
}

/// A checked class mix.
#[derive(Clone, Debug)]
pub struct Mix {
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    pub assign: Assign,
    pub classes: Vec<MixClass>,
    /// The file's `fail-if = [...]` thresholds (`ordo bench` judges the run by them with its `--fail-if`
    /// ones; in-process users such as demo and tune ignore them).
    pub fail_if: Vec<Threshold>,
    /// The file's `[[stages]]` ramp (`ordo bench` runs it unless `--stage` gives one; in-process users
    /// ignore it).
    pub stages: Vec<crate::stage::Stage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    duration: Spanned<String>,
    target: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMix {
    #[serde(default)]
    assign: Option<Spanned<String>>,
    #[serde(default, rename = "fail-if")]
    fail_if: Option<Vec<Spanned<String>>>,
    #[serde(default, rename = "class")]
    classes: Vec<Spanned<RawClass>>,
    #[serde(default)]
    stages: Vec<Spanned<RawStage>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    name: Spanned<String>,
    #[serde(default)]
    share: Option<Spanned<f64>>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    #[serde(default)]
    urls: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    order: Option<Spanned<String>>,
    #[serde(default)]
    headers: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    cookies: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    think: Option<Spanned<String>>,
}

impl Mix {
    /// Read and check a mix file.
    pub fn from_file(path: &Path) -> Result<Mix, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Located::new(path.display().to_string(), format!("cannot read: {e}")))?;
        Mix::parse(&text, Some(path.to_path_buf()))
    }

    /// Parse and check mix text; `source` is only used in error messages.
    pub fn parse(text: &str, source: Option<PathBuf>) -> Result<Mix, BenchError> {
        let file = display_path(&source);
        let src = Source::new(&file, text);
        let raw: RawMix = src.parse()?;
        check(&src, raw)
            .map(|(assign, classes, fail_if, stages)| Mix {
                source,
                assign,
                classes,
                fail_if,
                stages,
            })
            .map_err(BenchError::from)
    }

    /// A mix built in Rust (no file).
    pub fn new(assign: Assign, classes: Vec<MixClass>) -> Mix {
        Mix {
            source: None,
            assign,
            classes,
            fail_if: Vec::new(),
            stages: Vec::new(),
        }
    }

    /// Check the URLs against the run's target (same host and port) and the shares.
    pub fn validate_against(&self, target: &Target) -> Result<(), BenchError> {
        let file = display_path(&self.source);
        if self.classes.is_empty() {
            return Err(Located::new(file, "a mix needs at least one class")
                .with_key("class")
                .into());
        }
        for (i, c) in self.classes.iter().enumerate() {
            let e = |field: &str, message: String| {
                BenchError::from(Located {
                    line: c.line,
                    key: Some(path_to_string(&keypath!["class", i, field])),
                    ..Located::new(file.clone(), format!("class \"{}\": {message}", c.name))
                })
            };
            if !(c.share.is_finite() && c.share > 0.0) {
                return Err(e("share", format!("must be > 0 (got {})", c.share)));
            }
            if c.urls.is_empty() {
                return Err(e("urls", "must list at least one URL".into()));
            }
            for u in &c.urls {
                target.join(u).map_err(|err| e("urls", err.to_string()))?;
            }
        }
        Ok(())
    }

    /// Shares normalised to sum to 1.
    pub fn normalised_shares(&self) -> Vec<f64> {
        let total: f64 = self.classes.iter().map(|c| c.share).sum();
        self.classes.iter().map(|c| c.share / total).collect()
    }
}

/// The checks of a parsed mix file: every value in range, every class complete; errors name the line of
/// the offending value.
/// A checked mix file's parts: assignment, classes, thresholds, stages.
type Checked = (
    Assign,
    Vec<MixClass>,
    Vec<Threshold>,
    Vec<crate::stage::Stage>,
);

fn check(src: &Source<'_>, raw: RawMix) -> Result<Checked, Located> {
    let assign = match &raw.assign {
        None => Assign::Clients,
        Some(a) => match a.get_ref().as_str() {
            "clients" => Assign::Clients,
            "requests" => Assign::Requests,
            other => {
                return Err(src.at_span(
                    a.span(),
                    &keypath!["assign"],
                    format!("`{other}` is not one of \"clients\", \"requests\""),
                ));
            }
        },
    };
    let mut fail_if = Vec::new();
    for (i, t) in raw.fail_if.iter().flatten().enumerate() {
        fail_if.push(
            Threshold::parse(t.get_ref())
                .map_err(|e| src.at_span(t.span(), &keypath!["fail-if", i], e.to_string()))?,
        );
    }
    if raw.classes.is_empty() {
        return Err(Located::new(
            src.name,
            "no [[class]] tables: a mix needs at least one class",
        )
        .with_key("class"));
    }
    let mut classes = Vec::with_capacity(raw.classes.len());
    for (i, sc) in raw.classes.iter().enumerate() {
        let c = sc.get_ref();
        let name = c.name.get_ref().trim().to_string();
        let cerr = |span: std::ops::Range<usize>, field: &str, msg: String| {
            src.at_span(
                span,
                &keypath!["class", i, field],
                format!("class \"{name}\": {msg}"),
            )
        };
        if name.is_empty() {
            return Err(cerr(c.name.span(), "name", "must not be empty".into()));
        }
        if classes.iter().any(|k: &MixClass| k.name == name) {
            return Err(cerr(c.name.span(), "name", "is defined twice".into()));
        }
        let share = match &c.share {
            None => 1.0,
            Some(s) => {
                let v = *s.get_ref();
                if !(v.is_finite() && v > 0.0) {
                    return Err(cerr(s.span(), "share", format!("must be > 0 (got {v})")));
                }
                v
            }
        };
        let mut urls = Vec::new();
        if let (Some(_), Some(both)) = (&c.url, &c.urls) {
            return Err(cerr(
                both.span(),
                "urls",
                "give `url` or `urls`, not both".into(),
            ));
        }
        if let Some(u) = &c.url {
            urls.push(u.get_ref().clone());
        }
        if let Some(u) = &c.urls {
            if u.get_ref().is_empty() {
                return Err(cerr(u.span(), "urls", "must list at least one URL".into()));
            }
            urls.extend(u.get_ref().iter().cloned());
        }
        if urls.is_empty() {
            return Err(cerr(
                c.name.span(),
                "urls",
                "needs `url = \"/path\"` or `urls = [...]`".into(),
            ));
        }
        let order = match &c.order {
            None => UrlOrder::InTurn,
            Some(o) => match o.get_ref().as_str() {
                "in-turn" | "in_turn" | "round-robin" => UrlOrder::InTurn,
                "random" => UrlOrder::Random,
                other => {
                    return Err(cerr(
                        o.span(),
                        "order",
                        format!("`{other}` is not one of \"in-turn\", \"random\""),
                    ));
                }
            },
        };
        let mut headers = Vec::new();
        if let Some(h) = &c.headers {
            for (k, v) in h.get_ref() {
                headers.push(
                    Header::new(k, v)
                        .map_err(|e| cerr(h.span(), &format!("headers.{k}"), e.to_string()))?,
                );
            }
        }
        let mut cookies = Vec::new();
        if let Some(ck) = &c.cookies {
            for (k, v) in ck.get_ref() {
                // a cookie name is an HTTP token (RFC 6265 §4.1.1): `;` or `=` in it would split the header
                let name_ok = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                let value_ok = v
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && !b";,\\\"".contains(&b));
                if !name_ok || !value_ok {
                    return Err(cerr(
                        ck.span(),
                        &format!("cookies.{k}"),
                        "cookie names and values must be printable ASCII without spaces, `;`, `,`, `\"` or `\\`".into(),
                    ));
                }
                cookies.push((k.clone(), v.clone()));
            }
        }
        let think = match &c.think {
            None => Duration::ZERO,
            Some(t) => parse_duration(t.get_ref()).map_err(|e| cerr(t.span(), "think", e))?,
        };
        classes.push(MixClass {
            name,
            share,
            urls,
            order,
            headers,
            cookies,
            think,
            line: Some(line_of(src.text, sc.span().start)),
        });
    }
    let mut stages = Vec::with_capacity(raw.stages.len());
    for (i, s) in raw.stages.iter().enumerate() {
        let s = s.get_ref();
        let duration = parse_duration(s.duration.get_ref())
            .map_err(|e| src.at_span(s.duration.span(), &keypath!["stages", i, "duration"], e))?;
        if duration.is_zero() {
            return Err(src.at_span(
                s.duration.span(),
                &keypath!["stages", i, "duration"],
                "a stage must last longer than 0".to_string(),
            ));
        }
        let target = *s.target.get_ref();
        if !(target.is_finite() && target >= 0.0) {
            return Err(src.at_span(
                s.target.span(),
                &keypath!["stages", i, "target"],
                format!("{target} is not a load: a number ≥ 0"),
            ));
        }
        stages.push(crate::stage::Stage { duration, target });
    }
    Ok((assign, classes, fail_if, stages))
}

/// Where a mix came from, for error messages.
pub(crate) fn display_path(p: &Option<PathBuf>) -> String {
    p.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<mix>".to_string())
}

/// Smooth weighted round robin (nginx's): a deterministic sequence in which every prefix is as close to the
/// weights as whole numbers allow. Returns `len` class indices.
pub(crate) fn swrr_sequence(weights: &[f64], len: usize) -> Vec<usize> {
    let total: f64 = weights.iter().sum();
    let mut current = vec![0.0f64; weights.len()];
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let mut best = 0;
        for (i, w) in weights.iter().enumerate() {
            current[i] += w;
            if current[i] > current[best] + 1e-12 {
                best = i;
            }
        }
        current[best] -= total;
        out.push(best);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
assign = "requests"

[[class]]
name = "light"
share = 1
urls = ["/bytes?n=1024", "/bytes?n=2048"]
order = "random"
think = "10ms"
headers = { X-User-Type = "light" }
cookies = { user = "light" }

[[class]]
name = "heavy"
share = 4
url = "/bytes?n=778240"
"#;

    #[test]
    fn parses_a_mix() {
        let m = Mix::parse(GOOD, None).unwrap();
        assert_eq!(m.assign, Assign::Requests);
        assert_eq!(m.classes.len(), 2);
        let l = &m.classes[0];
        assert_eq!(l.urls.len(), 2);
        assert_eq!(l.order, UrlOrder::Random);
        assert_eq!(l.think, Duration::from_millis(10));
        assert_eq!(l.headers[0].name, "X-User-Type");
        assert_eq!(l.cookies, vec![("user".into(), "light".into())]);
        assert_eq!(m.classes[1].share, 4.0);
        assert_eq!(m.classes[1].line, Some(13));
        let t = Target::parse("http://127.0.0.1:1/").unwrap();
        m.validate_against(&t).unwrap();
    }

    fn err_of(text: &str) -> String {
        Mix::parse(text, Some(PathBuf::from("m.toml")))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn stages_parse_and_errors_name_line_and_key() {
        let m = Mix::parse(
            "[[class]]\nname = \"a\"\nurl = \"/\"\n[[stages]]\nduration = \"10s\"\ntarget = 50\n[[stages]]\nduration = \"500ms\"\ntarget = 2.5\n",
            None,
        )
        .unwrap();
        assert_eq!(
            m.stages,
            [
                crate::stage::Stage {
                    duration: Duration::from_secs(10),
                    target: 50.0
                },
                crate::stage::Stage {
                    duration: Duration::from_millis(500),
                    target: 2.5
                }
            ]
        );
        assert!(Mix::parse(GOOD, None).unwrap().stages.is_empty());
        let e = err_of(
            "[[class]]\nname = \"a\"\nurl = \"/\"\n[[stages]]\nduration = \"soon\"\ntarget = 5\n",
        );
        assert!(
            e.starts_with("mix file m.toml:5: stages[0].duration:"),
            "{e}"
        );
        let e = err_of(
            "[[class]]\nname = \"a\"\nurl = \"/\"\n[[stages]]\nduration = \"1s\"\ntarget = -5\n",
        );
        assert!(
            e.starts_with("mix file m.toml:6: stages[0].target: -5 is not a load"),
            "{e}"
        );
        let e = err_of("[[class]]\nname = \"a\"\nurl = \"/\"\n[[stages]]\nduration = \"1s\"\n");
        assert!(e.contains("target"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = err_of("[[class]]\nname = \"a\"\nshare = -1\nurl = \"/\"\n");
        assert_eq!(
            e,
            "mix file m.toml:3: class[0].share: class \"a\": must be > 0 (got -1)"
        );
        assert!(
            e.contains("m.toml:3") && e.contains("share") && e.contains("-1"),
            "{e}"
        );
        let e = err_of("[[class]]\nname = \"a\"\nurl = \"/\"\n[[class]]\nname = \"b\"\nurl = 3\n");
        assert!(
            e.starts_with("mix file m.toml:6: class[1].url: expected a string, found the number 3"),
            "{e}"
        );
        let e = err_of("[[class]]\nname = \"a\"\nshre = 1\n");
        assert!(e.contains("m.toml:3") && e.contains("shre"), "{e}");
        assert!(
            e.ends_with("unknown key `shre`; did you mean `share`?"),
            "{e}"
        );
        let e = err_of("[[class]]\nname = \"a\"\n");
        assert!(e.contains("urls"), "{e}");
        let e = err_of("[[class]]\nname = \"a\"\nurl = \"/\"\nthink = \"soon\"\n");
        assert!(e.contains("m.toml:4") && e.contains("think"), "{e}");
        let e =
            err_of("[[class]]\nname = \"a\"\nurl = \"/\"\nheaders = { \"Bad Name\" = \"x\" }\n");
        assert!(e.contains("headers.Bad Name"), "{e}");
        let e =
            err_of("[[class]]\nname = \"a\"\nurl = \"/\"\n[[class]]\nname = \"a\"\nurl = \"/\"\n");
        assert!(e.contains("m.toml:5") && e.contains("twice"), "{e}");
        let e = err_of("assign = \"coin\"\n[[class]]\nname = \"a\"\nurl = \"/\"\n");
        assert!(e.contains("m.toml:1") && e.contains("assign"), "{e}");
        let e = err_of("[[class]\n");
        assert!(e.contains("m.toml:1"), "{e}");
        let e = err_of("");
        assert!(e.contains("class"), "{e}");
        let e = err_of("[[class]]\nname = \"a\"\nurl = \"/\"\nurls = [\"/x\"]\n");
        assert!(
            e.contains("m.toml:4") && e.contains("`url` or `urls`, not both"),
            "{e}"
        );
        for bad in ["a;b", "a=b", "a b", "a,b", "(a)"] {
            let e = err_of(&format!(
                "[[class]]\nname = \"a\"\nurl = \"/\"\ncookies = {{ \"{bad}\" = \"x\" }}\n"
            ));
            assert!(
                e.contains("m.toml:4") && e.contains(&format!("cookies.{bad}")),
                "{bad}: {e}"
            );
        }
        Mix::parse(
            "[[class]]\nname = \"a\"\nurl = \"/\"\ncookies = { \"__Host-id_1.x\" = \"v\" }\n",
            None,
        )
        .unwrap();
    }

    #[test]
    fn fail_if_thresholds_parse_and_errors_name_line_and_index() {
        let m = Mix::parse(
            "fail-if = [\"p99>50ms\", \"errors>0.1%\"]\n[[class]]\nname = \"a\"\nurl = \"/\"\n",
            None,
        )
        .unwrap();
        assert_eq!(m.fail_if.len(), 2);
        assert_eq!(m.fail_if[1].text, "errors>0.1%");
        assert!(Mix::parse(GOOD, None).unwrap().fail_if.is_empty());
        let e = err_of(
            "assign = \"clients\"\nfail-if = [\n  \"p99>50ms\",\n  \"p99>50\",\n]\n[[class]]\nname = \"a\"\nurl = \"/\"\n",
        );
        assert!(
            e.starts_with(
                "mix file m.toml:4: fail-if[1]: invalid threshold `p99>50`: a latency needs a unit"
            ),
            "{e}"
        );
        let e = err_of("fail-if = \"p99>50ms\"\n[[class]]\nname = \"a\"\nurl = \"/\"\n");
        assert!(e.contains("m.toml:1") && e.contains("fail-if"), "{e}");
    }

    #[test]
    fn url_host_must_match_target() {
        let m = Mix::parse(
            "[[class]]\nname = \"a\"\nurl = \"http://other:1/\"\n",
            Some("m.toml".into()),
        )
        .unwrap();
        let t = Target::parse("http://127.0.0.1:1/").unwrap();
        let e = m.validate_against(&t).unwrap_err().to_string();
        assert!(
            e.contains("m.toml:1") && e.contains("urls") && e.contains("other"),
            "{e}"
        );
    }

    #[test]
    fn swrr_is_smooth_and_exact() {
        let s = swrr_sequence(&[1.0, 2.0, 4.0], 7);
        let count = |k| s.iter().filter(|&&x| x == k).count();
        assert_eq!((count(0), count(1), count(2)), (1, 2, 4));
        // every prefix is within one of its target
        let s = swrr_sequence(&[1.0, 1.0, 1.0], 1000);
        for n in 1..=s.len() {
            for k in 0..3 {
                let got = s[..n].iter().filter(|&&x| x == k).count() as f64;
                assert!((got - n as f64 / 3.0).abs() <= 1.0);
            }
        }
    }
}
