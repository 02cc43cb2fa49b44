//! Small statistics for the probes: percentiles over a sample (exact, by sorting — a loop run has at most
//! 100 000 samples), summary rows and histograms with relative (× nominal) or absolute (ms) bucket edges.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The distribution of one figure over all samples: min, mean, percentiles, max.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Distribution {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The q-quantile (0..=1) of sorted values, nearest-rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Distribution {
    pub fn of(values: &[f64]) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Distribution {
            min: v[0],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: quantile(&v, 0.5),
            p90: quantile(&v, 0.9),
            p99: quantile(&v, 0.99),
            p999: quantile(&v, 0.999),
            max: v[v.len() - 1],
        }
    }
}

/// One histogram bucket: values in [lo, hi) (hi None = no upper bound).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bucket {
    pub label: String,
    pub lo: f64,
    pub hi: Option<f64>,
    pub count: usize,
    /// count / total, 0..=1.
    pub fraction: f64,
}

/// A histogram of elapsed times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Histogram {
    /// "relative" (edges are multiples of the nominal time) or "ms" (edges in milliseconds).
    pub unit: String,
    pub edges: Vec<f64>,
    pub buckets: Vec<Bucket>,
}

/// The default relative edges: ≤1.1×, 1.1–1.5×, 1.5–2×, 2–4×, >4×.
pub const RELATIVE_EDGES: [f64; 4] = [1.1, 1.5, 2.0, 4.0];

fn fmt_edge(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl Histogram {
    /// Bucket `values` (already in the edges' unit) at strictly increasing `edges`: [0, e0), [e0, e1), …,
    /// [en, ∞). Relative histograms put a value equal to an edge in the lower bucket ("≤1.1×").
    pub fn build(unit: &str, edges: &[f64], values: &[f64]) -> Histogram {
        let relative = unit == "relative";
        let mut counts = vec![0usize; edges.len() + 1];
        for &v in values {
            let i = if relative {
                edges.iter().position(|&e| v <= e).unwrap_or(edges.len())
            } else {
                edges.iter().position(|&e| v < e).unwrap_or(edges.len())
            };
            counts[i] += 1;
        }
        let total = values.len().max(1) as f64;
        let suffix = if relative { "×" } else { " ms" };
        let buckets = counts
            .iter()
            .enumerate()
            .map(|(i, &count)| {
                let lo = if i == 0 { 0.0 } else { edges[i - 1] };
                let hi = edges.get(i).copied();
                let label = match (i, hi) {
                    (0, Some(h)) if relative => format!("≤{}{suffix}", fmt_edge(h)),
                    (_, Some(h)) => format!("{}–{}{suffix}", fmt_edge(lo), fmt_edge(h)),
                    (_, None) if relative => format!(">{}{suffix}", fmt_edge(lo)),
                    (_, None) => format!("≥{}{suffix}", fmt_edge(lo)),
                };
                Bucket {
                    label,
                    lo,
                    hi,
                    count,
                    fraction: count as f64 / total,
                }
            })
            .collect();
        Histogram {
            unit: unit.to_string(),
            edges: edges.to_vec(),
            buckets,
        }
    }
}

/// Check bucket edges: positive, finite and strictly increasing.
pub fn check_edges(edges: &[f64]) -> Result<(), String> {
    if edges.is_empty() {
        return Err("at least one bucket edge is needed".into());
    }
    for w in edges.windows(2) {
        if w[1] <= w[0] {
            return Err(format!(
                "bucket edges must increase: {} then {}",
                w[0], w[1]
            ));
        }
    }
    if edges.iter().any(|e| !e.is_finite() || *e <= 0.0) {
        return Err("bucket edges must be positive numbers".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let s = Distribution::of(&v);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p90, 90.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.mean, 50.5);
        assert_eq!(Distribution::of(&[]), Distribution::default());
    }

    #[test]
    fn seed_buckets() {
        let h = Histogram::build(
            "ms",
            &[11.0, 18.0, 24.0, 50.0, 75.0],
            &[5.0, 11.0, 14.0, 17.9, 20.0, 65.0, 80.0],
        );
        let counts: Vec<usize> = h.buckets.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![1, 3, 1, 0, 1, 1]);
        assert_eq!(h.buckets[1].label, "11–18 ms");
        assert_eq!(h.buckets[5].label, "≥75 ms");
        assert!((h.buckets[1].fraction - 3.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn relative_buckets() {
        let h = Histogram::build("relative", &RELATIVE_EDGES, &[1.0, 1.1, 1.2, 3.0, 4.5]);
        let counts: Vec<usize> = h.buckets.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![2, 1, 0, 1, 1]);
        assert_eq!(h.buckets[0].label, "≤1.1×");
        assert_eq!(h.buckets[4].label, ">4×");
    }

    #[test]
    fn edges_checked() {
        assert!(check_edges(&[1.0, 2.0]).is_ok());
        assert!(check_edges(&[2.0, 2.0]).is_err());
        assert!(check_edges(&[]).is_err());
        assert!(check_edges(&[-1.0]).is_err());
    }
}
