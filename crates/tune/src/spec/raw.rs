//! The experiment file as serde reads it — types and unknown keys refused, each error at its line — before
//! any check; and the value parsers (durations, command lines, knob levels as text) the checks share.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) target: RawTarget,
    #[serde(default)]
    pub(super) workload: OneOrMany<RawWorkload>,
    #[serde(default)]
    pub(super) knobs: toml::Table,
    pub(super) design: Option<RawDesign>,
    pub(super) repeat: Option<RawRepeat>,
    #[serde(default)]
    pub(super) baseline: toml::Table,
    pub(super) score: Option<RawScore>,
    pub(super) scale: Option<String>,
    pub(super) scale_base: Option<f64>,
}

/// `[workload]` (one table) or `[[workload]]` (an array of them). Deserialized by hand rather than as an
/// untagged enum: that buffers the value and reports only "did not match any variant", while this hands the
/// table to `T` directly, so an error inside it keeps its key and line.
pub(super) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table or an array of tables")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(m)).map(OneOrMany::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(SeqAccessDeserializer::new(s)).map(OneOrMany::Many)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A command: one string split like a shell would, or a list of arguments.
pub(super) enum StrOrList {
    Str(String),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for StrOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrOrList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command line (\"ab -n 100 URL\") or a list of arguments")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StrOrList, E> {
                Ok(StrOrList::Str(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<StrOrList, A::Error> {
                Vec::<String>::deserialize(SeqAccessDeserializer::new(s)).map(StrOrList::List)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration: a number of seconds, or a string such as `"500ms"`.
pub(super) enum DurationValue {
    Secs(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of seconds or a duration such as \"2s\" or \"500ms\"")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationValue, E> {
                Ok(DurationValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    pub(super) builtin: Option<String>,
    pub(super) config: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    pub(super) command: Option<StrOrList>,
    pub(super) ready_url: Option<String>,
    pub(super) ready_timeout: Option<DurationValue>,
    pub(super) pid: Option<i32>,
    pub(super) name: Option<String>,
    pub(super) threads: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkload {
    pub(super) name: Option<String>,
    pub(super) kind: Option<String>,
    // bench
    pub(super) url: Option<String>,
    pub(super) connections: Option<usize>,
    pub(super) concurrency: Option<usize>,
    pub(super) threads: Option<usize>,
    pub(super) duration: Option<DurationValue>,
    pub(super) requests: Option<u64>,
    pub(super) rate: Option<f64>,
    pub(super) keepalive: Option<bool>,
    pub(super) method: Option<String>,
    #[serde(default)]
    pub(super) headers: Vec<String>,
    pub(super) body: Option<String>,
    pub(super) timeout: Option<DurationValue>,
    pub(super) warmup: Option<DurationValue>,
    pub(super) mix: Option<String>,
    pub(super) seed: Option<u64>,
    // command
    pub(super) command: Option<StrOrList>,
    pub(super) parser: Option<String>,
    pub(super) regex: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDesign {
    pub(super) kind: Option<String>,
    pub(super) n: Option<usize>,
    pub(super) budget: Option<usize>,
    pub(super) initial: Option<usize>,
    pub(super) seed: Option<u64>,
    #[serde(default)]
    pub(super) configurations: Vec<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRepeat {
    pub(super) min: Option<usize>,
    pub(super) max: Option<usize>,
    pub(super) ci: Option<f64>,
    pub(super) warmup: Option<usize>,
    pub(super) allow_fewer: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScore {
    pub(super) objective: Option<String>,
    pub(super) metric: Option<String>,
    #[serde(default)]
    pub(super) weights: BTreeMap<String, f64>,
}

pub(super) fn toml_value_string(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Durations in experiment files: `10`, `2.5` (seconds), `"500ms"`, `"2s"`, `"1m"`; at most 10^7 s, so no
/// deadline computed from one can overflow the clock.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = ordo_sys::units::parse_duration_or_secs(s)?;
    if d > Duration::from_secs(10_000_000) {
        return Err(format!("`{s}` is out of range (at most 10000000s)"));
    }
    Ok(d)
}

/// Split a command line on whitespace, honouring single and double quotes (no other shell syntax).
pub fn split_command(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unterminated quote in `{s}`"));
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    if out.is_empty() {
        return Err("empty command".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_like_a_shell_would() {
        assert_eq!(
            split_command("ab -n 10 'http://x/ y'").unwrap(),
            vec!["ab", "-n", "10", "http://x/ y"]
        );
        assert!(split_command("a 'b").is_err());
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    }
}
