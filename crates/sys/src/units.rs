//! Durations written by people ("250ms", "10s", "1.5m"): the one parser every ordo flag and config file uses.
//! It lives in ordo-sys because that is the crate all of ordo's other crates already build on.

use std::time::Duration;

const UNITS: &str = "ns, us, ms, s, m or h";

/// Parses `<number><unit>` with unit `ns`, `us` (or `µs`), `ms`, `s`, `m` (or `min`) or `h`; the number may
/// have a fraction ("1.5s"). A bare number is refused because its unit would be a guess. Integers are
/// converted exactly; fractions to the nearest nanosecond.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "invalid duration {s:?}: durations cannot be negative"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            format!("invalid duration {s:?}: missing unit (e.g. \"250ms\", \"10s\", \"2m\")")
        })?;
    let (num, unit) = t.split_at(split);
    let scale_ns: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" | "secs" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => {
            return Err(format!(
                "invalid duration {s:?}: unknown unit {other:?} (use {UNITS})"
            ));
        }
    };
    number_times(num, scale_ns).map_err(|why| format!("invalid duration {s:?}: {why}"))
}

/// Like [`parse_duration`], but a bare number means seconds (`"2.5"` → 2.5 s). For config keys and flags
/// whose documented unit is the second.
pub fn parse_duration_or_secs(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return number_times(t, 1_000_000_000)
            .map_err(|why| format!("invalid duration {s:?}: {why}"));
    }
    parse_duration(s)
}

fn number_times(num: &str, scale_ns: u64) -> Result<Duration, &'static str> {
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return Err("expected a number before the unit");
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(scale_ns)
            .map(Duration::from_nanos)
            .ok_or("too large");
    }
    let n: f64 = num
        .parse()
        .map_err(|_| "expected a number before the unit")?;
    let ns = (n * scale_ns as f64).round();
    if !ns.is_finite() || ns > u64::MAX as f64 {
        return Err("too large");
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// Formats a duration the way [`parse_duration`] reads it back, in the largest unit that keeps it exact.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, scale) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= scale && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("500µs"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 7ns "), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "",
            "10",
            "s",
            "1.s",
            ".5s",
            "1..2s",
            "10 parsecs",
            "-1s",
            "99999999999999999999h",
            "1e9h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(parse_duration("10").unwrap_err().contains("missing unit"));
        assert!(
            parse_duration("3 fortnights")
                .unwrap_err()
                .contains("unknown unit")
        );
    }

    #[test]
    fn a_negative_duration_is_refused_as_negative() {
        for s in ["-1us", " -2s", "-0.5ms"] {
            let e = parse_duration(s).unwrap_err();
            assert!(
                e.contains("cannot be negative") && e.contains(s.trim()),
                "{e}"
            );
            let e = parse_duration_or_secs(s).unwrap_err();
            assert!(e.contains("cannot be negative"), "{e}");
        }
    }

    #[test]
    fn bare_seconds_where_allowed() {
        assert_eq!(parse_duration_or_secs("2"), Ok(Duration::from_secs(2)));
        assert_eq!(
            parse_duration_or_secs("1.5"),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_duration_or_secs("250ms"),
            Ok(Duration::from_millis(250))
        );
        assert!(parse_duration_or_secs("").is_err());
        assert!(parse_duration_or_secs("-1").is_err());
        assert!(parse_duration_or_secs("2 weeks").is_err());
    }

    #[test]
    fn format_round_trips() {
        for d in [
            Duration::from_millis(250),
            Duration::from_secs(120),
            Duration::from_nanos(1234),
            Duration::from_secs(7200),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }
}
