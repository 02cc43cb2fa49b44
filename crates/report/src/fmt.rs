//! Number and date formatting shared by tables and captions (no clock or locale is read).

/// `v` with at most `decimals` decimals and trailing zeros removed; "–" for non-finite values.
pub(crate) fn num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let mut s = format!("{v:.decimals$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// Seconds since the Unix epoch as "YYYY-MM-DD HH:MM UTC".
pub(crate) fn civil_utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let rem = unix_s % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(1.5000, 3), "1.5");
        assert_eq!(num(2.0, 2), "2");
        assert_eq!(num(-0.0001, 2), "0");
        assert_eq!(num(f64::INFINITY, 2), "–");
    }

    #[test]
    fn dates() {
        assert_eq!(civil_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(civil_utc(1_700_000_000), "2023-11-14 22:13 UTC");
        assert_eq!(civil_utc(951_782_400), "2000-02-29 00:00 UTC");
    }
}
