//! Statistics the analysis needs, implemented here so their numerics are tested against published values:
//! descriptive statistics, Student's t distribution (via the regularized incomplete beta function), 95%
//! confidence intervals, Welch's two-sample t-test and Holm's step-down correction.

use serde::{Deserialize, Serialize};

pub use ordo_results::tune::Summary;

/// Descriptive statistics of one sample (mean, sd, min, max and the 95% interval of the mean).
pub fn summary(xs: &[f64]) -> Summary {
    let n = xs.len();
    if n == 0 {
        return Summary {
            n: 0,
            mean: f64::NAN,
            sd: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            ci95: f64::INFINITY,
        };
    }
    let m = mean(xs);
    let sd = sd(xs);
    Summary {
        n,
        mean: m,
        sd,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ci95: ci_half_width(xs, 0.95),
    }
}

pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance (n - 1 in the denominator); 0 for fewer than two values.
pub(crate) fn variance(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64
}

pub(crate) fn sd(xs: &[f64]) -> f64 {
    variance(xs).sqrt()
}

/// Half-width of the `level` (e.g. 0.95) confidence interval of the mean: t_{(1+level)/2, n-1} * s / sqrt(n).
pub(crate) fn ci_half_width(xs: &[f64], level: f64) -> f64 {
    let n = xs.len();
    if n < 2 {
        return f64::INFINITY;
    }
    t_quantile((1.0 + level) / 2.0, (n - 1) as f64) * sd(xs) / (n as f64).sqrt()
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; about 15 significant digits).
pub(crate) fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction for the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const EPS: f64 = 1e-15;
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=500 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub(crate) fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T <= t) for Student's t with `df` (> 0, not necessarily integer) degrees of freedom.
pub(crate) fn t_cdf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 1.0 } else { 0.0 };
    }
    let x = df / (df + t * t);
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, x);
    if t > 0.0 { 1.0 - tail } else { tail }
}

/// Two-sided p-value of a t statistic.
pub(crate) fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    if t.is_infinite() {
        return 0.0;
    }
    inc_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// The `p`-quantile of Student's t with `df` degrees of freedom (bisection on [`t_cdf`], to ~1e-12).
pub(crate) fn t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-13 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Result of Welch's unequal-variances t-test of `a` against `b`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Welch {
    /// mean(a) - mean(b)
    pub diff: f64,
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// 95% confidence interval of the difference.
    pub ci_low: f64,
    pub ci_high: f64,
}

/// Welch's t-test; `None` when either sample has fewer than two values.
pub(crate) fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (variance(a) / na, variance(b) / nb);
    let diff = mean(a) - mean(b);
    let se2 = va + vb;
    if se2 == 0.0 {
        // Both samples constant: identical means are no difference; different ones are certain.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 {
            0.0
        } else {
            diff.signum() * f64::INFINITY
        };
        return Some(Welch {
            diff,
            t,
            df: na + nb - 2.0,
            p,
            ci_low: diff,
            ci_high: diff,
        });
    }
    let se = se2.sqrt();
    let t = diff / se;
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let q = t_quantile(0.975, df);
    Some(Welch {
        diff,
        t,
        df,
        p: t_two_sided_p(t, df),
        ci_low: diff - q * se,
        ci_high: diff + q * se,
    })
}

/// Holm's step-down adjustment of a family of p-values (same order as given; NaN stays NaN).
pub(crate) fn holm(ps: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..ps.len()).filter(|&i| !ps[i].is_nan()).collect();
    idx.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let m = idx.len();
    let mut out = vec![f64::NAN; ps.len()];
    let mut running: f64 = 0.0;
    for (rank, &i) in idx.iter().enumerate() {
        let adj = ((m - rank) as f64 * ps[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

pub use ordo_util::pvalue::{format_p, p_equals};

/// The workspace's seeded generator (ordo-util), for designs, run order and synthetic tests.
pub(crate) use ordo_util::SplitMix64 as Rng;

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b} (tol {tol})");
    }

    #[test]
    fn t_quantiles_match_tables() {
        // R: qt(0.975, c(1, 2, 5, 10, 30, 1e6)); qt(0.95, 5); qt(0.995, 10)
        close(t_quantile(0.975, 1.0), 12.706_204_736, 1e-6);
        close(t_quantile(0.975, 2.0), 4.302_652_730, 1e-7);
        close(t_quantile(0.975, 5.0), 2.570_581_836, 1e-7);
        close(t_quantile(0.975, 10.0), 2.228_138_852, 1e-7);
        close(t_quantile(0.975, 30.0), 2.042_272_456, 1e-7);
        close(t_quantile(0.975, 1e6), 1.959_966_0, 1e-5);
        close(t_quantile(0.95, 5.0), 2.015_048_373, 1e-7);
        close(t_quantile(0.995, 10.0), 3.169_272_673, 1e-7);
        close(t_quantile(0.025, 5.0), -2.570_581_836, 1e-7);
        // R: pt(1, 1) = 0.75 (Cauchy); pt(2, 3) = 0.930337
        close(t_cdf(1.0, 1.0), 0.75, 1e-12);
        close(t_cdf(2.0, 3.0), 0.930_337_4, 1e-6);
    }

    #[test]
    fn ln_gamma_and_beta() {
        close(ln_gamma(1.0), 0.0, 1e-13);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-13);
        close(ln_gamma(10.0), (362_880.0_f64).ln(), 1e-11);
        // I_x(1, 1) = x; I_x(2, 3) at 0.4 = 0.5248
        close(inc_beta(1.0, 1.0, 0.3), 0.3, 1e-13);
        close(inc_beta(2.0, 3.0, 0.4), 0.5248, 1e-12);
    }

    #[test]
    fn welch_matches_r_sleep_data() {
        // R: t.test(extra ~ group, data = sleep): t = -1.8608, df = 17.776, p-value = 0.07939,
        // 95 percent CI -3.3654832 0.2054832.
        let g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        let w = welch(&g1, &g2).unwrap();
        close(w.t, -1.860_813, 1e-5);
        close(w.df, 17.776_41, 1e-4);
        close(w.p, 0.079_39, 1e-5);
        close(w.ci_low, -3.365_483_2, 1e-5);
        close(w.ci_high, 0.205_483_2, 1e-5);
        // R: t.test(1:5, c(2,4,6,8,10)): t = -1.8974, df = 5.8824, p-value = 0.1076
        let w = welch(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 6.0, 8.0, 10.0]).unwrap();
        close(w.t, -1.897_367, 1e-5);
        close(w.df, 5.882_353, 1e-5);
        close(w.p, 0.1076, 1e-4);
        assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
        assert_eq!(welch(&[2.0, 2.0], &[2.0, 2.0]).unwrap().p, 1.0);
    }

    #[test]
    fn holm_adjustment() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        for (a, b) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            close(*a, b, 1e-12);
        }
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn summary_and_ci() {
        let s = crate::stats::summary(&[10.0, 12.0, 14.0]);
        close(s.mean, 12.0, 1e-12);
        close(s.sd, 2.0, 1e-12);
        // t(0.975, 2) * 2 / sqrt(3)
        close(s.ci95, 4.302_652_73 * 2.0 / 3f64.sqrt(), 1e-6);
        assert_eq!((s.min, s.max), (10.0, 14.0));
        assert!(crate::stats::summary(&[1.0]).ci95.is_infinite());
    }

    #[test]
    fn a_a_experiments_are_mostly_not_significant() {
        // Two identical configurations, 5 runs each, noise sd 2% of the mean: at alpha = 0.05 the test
        // must call "no significant difference" in >= 95% of seeded trials (Welch is slightly conservative for
        // equal variances, so the expected rate is a little above 95%), and the rate must not be
        // absurdly conservative either.
        let mut rng = Rng::new(42);
        let trials = 2000;
        let mut not_sig = 0;
        for _ in 0..trials {
            let a: Vec<f64> = (0..5).map(|_| 1000.0 + 20.0 * rng.normal()).collect();
            let b: Vec<f64> = (0..5).map(|_| 1000.0 + 20.0 * rng.normal()).collect();
            if welch(&a, &b).unwrap().p >= 0.05 {
                not_sig += 1;
            }
        }
        let rate = not_sig as f64 / trials as f64;
        assert!((0.95..=0.99).contains(&rate), "rate {rate}");
    }
}
