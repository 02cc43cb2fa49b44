//! p-values as people read them, the same in `ordo tune`'s terminal tables and `ordo report`'s pages.

/// A p-value for people: "< 0.001" below that, else three significant digits ("0.0123", "0.500", "1.00").
/// Printing p with a fixed four decimals showed 0 and 1, which read as certainty.
pub fn format_p(p: f64) -> String {
    if p.is_nan() {
        return "-".into();
    }
    if p < 0.001 {
        return "< 0.001".into();
    }
    let p = p.min(1.0);
    let decimals = |x: f64| (2 - x.log10().floor() as i32).max(0) as usize;
    // Round to three significant digits first, so 0.99996 prints as 1.00, not 1.000.
    let d = decimals(p);
    let rounded: f64 = format!("{p:.d$}").parse().unwrap_or(p);
    let d = decimals(rounded);
    format!("{rounded:.d$}")
}

/// `name = p` or `name < 0.001`.
pub fn p_equals(name: &str, p: f64) -> String {
    let f = format_p(p);
    if f.starts_with('<') {
        format!("{name} {f}")
    } else {
        format!("{name} = {f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13: p-values printed as 0 and 1.
    #[test]
    fn p_values_print_with_three_significant_digits_or_as_below_a_thousandth() {
        assert_eq!(format_p(0.0), "< 0.001");
        assert_eq!(format_p(0.000_999), "< 0.001");
        assert_eq!(format_p(0.001), "0.00100");
        assert_eq!(format_p(0.012_345), "0.0123");
        assert_eq!(format_p(0.5), "0.500");
        assert_eq!(format_p(0.999_96), "1.00");
        assert_eq!(format_p(1.0), "1.00");
        assert_eq!(p_equals("p", 0.04), "p = 0.0400");
        assert_eq!(p_equals("p_holm", 1e-9), "p_holm < 0.001");
    }
}
