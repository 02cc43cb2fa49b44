//! Durations in config files as human strings ("250ms", "10s", "2m"): the one parser and serde helpers that
//! every duration field of ordo-serve's TOML uses.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Parses `<number><unit>` with unit `ns`, `us`, `ms`, `s`, `m` or `h` ("1.5s"); a bare number is refused
/// because its unit would be a guess. The one parser every ordo flag and config file uses.
pub use ordo_sys::units::parse_duration as parse;

/// Formats a duration the way [`parse`] reads it back, in the largest unit that keeps it exact.
pub use ordo_sys::units::format_duration as format;

/// `#[serde(deserialize_with = "crate::http::duration::deserialize")]` for a `Duration` field.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

/// The same helper under the name the interface in SERVE.md uses.
pub fn deserialize_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    deserialize(d)
}

/// For an `Option<Duration>` field (combine with `#[serde(default)]`).
pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| parse(&s).map_err(serde::de::Error::custom))
        .transpose()
}

/// `#[serde(serialize_with = "crate::http::duration::serialize")]`: writes the string form.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_field() {
        #[derive(Deserialize)]
        struct C {
            #[serde(deserialize_with = "deserialize")]
            t: Duration,
        }
        let c: C = toml::from_str("t = \"250ms\"").unwrap();
        assert_eq!(c.t, Duration::from_millis(250));
        let e = toml::from_str::<C>("t = \"5 fortnights\"")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown unit"), "{e}");
    }
}
