//! A small Gaussian process for the search: Matérn 5/2 kernel with one length scale per input dimension
//! (ARD), a noise term, hyperparameters chosen by maximising the log marginal likelihood over a seeded
//! random + local search, and expected improvement. Written out here (Cholesky, triangular solves) because
//! the search needs a few dozen points in a handful of dimensions, not a numerics crate.

use crate::stats::Rng;

/// Kernel and noise hyperparameters (for standardised scores).
#[derive(Clone, Debug, PartialEq)]
pub struct Hyper {
    /// One length scale per input dimension.
    pub lengths: Vec<f64>,
    /// Signal variance.
    pub signal: f64,
    /// Noise variance (run-to-run noise of a trial's mean).
    pub noise: f64,
}

/// A fitted process: posterior mean and standard deviation anywhere in the input space.
#[derive(Clone, Debug)]
pub struct Gp {
    x: Vec<Vec<f64>>,
    hyper: Hyper,
    /// Lower Cholesky factor of K + noise·I.
    chol: Vec<Vec<f64>>,
    /// (K + noise·I)⁻¹ (y − mean) / sd.
    alpha: Vec<f64>,
    y_mean: f64,
    y_sd: f64,
    pub log_likelihood: f64,
}

fn matern52(a: &[f64], b: &[f64], h: &Hyper) -> f64 {
    let r2: f64 = a
        .iter()
        .zip(b)
        .zip(&h.lengths)
        .map(|((x, y), l)| ((x - y) / l).powi(2))
        .sum();
    let r = (5.0 * r2).sqrt();
    h.signal * (1.0 + r + r * r / 3.0) * (-r).exp()
}

/// Lower Cholesky factor of a symmetric positive definite matrix; `None` when it is not.
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i][i] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solve L z = b (L lower triangular).
fn forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|k| l[i][k] * z[k]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

/// Solve Lᵀ z = b.
fn backward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut z = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * z[k]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

impl Gp {
    /// Fit with fixed hyperparameters; `None` when the kernel matrix is not positive definite.
    pub fn with_hyper(x: &[Vec<f64>], y: &[f64], hyper: Hyper) -> Option<Gp> {
        let n = y.len();
        if n == 0 || x.len() != n {
            return None;
        }
        let y_mean = y.iter().sum::<f64>() / n as f64;
        let var = y.iter().map(|v| (v - y_mean).powi(2)).sum::<f64>() / n as f64;
        let y_sd = if var > 0.0 { var.sqrt() } else { 1.0 };
        let ys: Vec<f64> = y.iter().map(|v| (v - y_mean) / y_sd).collect();
        let mut k = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in 0..=i {
                let v = matern52(&x[i], &x[j], &hyper);
                k[i][j] = v;
                k[j][i] = v;
            }
            k[i][i] += hyper.noise + 1e-9;
        }
        let chol = cholesky(&k)?;
        let alpha = backward(&chol, &forward(&chol, &ys));
        let fit: f64 = ys.iter().zip(&alpha).map(|(a, b)| a * b).sum();
        let log_det: f64 = (0..n).map(|i| chol[i][i].ln()).sum();
        let log_likelihood =
            -0.5 * fit - log_det - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
        Some(Gp {
            x: x.to_vec(),
            hyper,
            chol,
            alpha,
            y_mean,
            y_sd,
            log_likelihood,
        })
    }

    /// Fit, choosing the hyperparameters with the highest marginal likelihood among `tries` seeded random
    /// draws (length scales 0.05..5, signal 0.2..5, noise 1e-4..1 of the scores' variance) and as many
    /// local perturbations of the best so far.
    pub fn fit(x: &[Vec<f64>], y: &[f64], seed: u64, tries: usize) -> Option<Gp> {
        let dims = x.first().map_or(0, Vec::len);
        let mut rng = Rng::new(seed);
        let log_uniform =
            |rng: &mut Rng, lo: f64, hi: f64| (lo.ln() + rng.f64() * (hi / lo).ln()).exp();
        let mut best: Option<Gp> = None;
        let consider = |h: Hyper, best: &mut Option<Gp>| {
            if let Some(g) = Gp::with_hyper(x, y, h)
                && g.log_likelihood.is_finite()
                && best
                    .as_ref()
                    .is_none_or(|b| g.log_likelihood > b.log_likelihood)
            {
                *best = Some(g);
            }
        };
        // A sensible start: unit length scales, the scores' variance, a little noise.
        consider(
            Hyper {
                lengths: vec![0.5; dims],
                signal: 1.0,
                noise: 0.05,
            },
            &mut best,
        );
        for _ in 0..tries {
            let h = Hyper {
                lengths: (0..dims)
                    .map(|_| log_uniform(&mut rng, 0.05, 5.0))
                    .collect(),
                signal: log_uniform(&mut rng, 0.2, 5.0),
                noise: log_uniform(&mut rng, 1e-4, 1.0),
            };
            consider(h, &mut best);
        }
        for _ in 0..tries {
            let Some(b) = best.as_ref().map(|g| g.hyper.clone()) else {
                break;
            };
            let mut jiggle =
                |v: f64, lo: f64, hi: f64| (v * (0.5 * rng.normal()).exp()).clamp(lo, hi);
            let h = Hyper {
                lengths: b.lengths.iter().map(|&l| jiggle(l, 0.05, 5.0)).collect(),
                signal: jiggle(b.signal, 0.2, 5.0),
                noise: jiggle(b.noise, 1e-4, 1.0),
            };
            consider(h, &mut best);
        }
        best
    }

    pub fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    /// Posterior mean and standard deviation of the (noise-free) score at `p`, in score units.
    pub fn predict(&self, p: &[f64]) -> (f64, f64) {
        let ks: Vec<f64> = self
            .x
            .iter()
            .map(|xi| matern52(xi, p, &self.hyper))
            .collect();
        let mean: f64 = ks.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.chol, &ks);
        let var = (self.hyper.signal - v.iter().map(|x| x * x).sum::<f64>()).max(1e-12);
        (self.y_mean + self.y_sd * mean, self.y_sd * var.sqrt())
    }
}

/// Standard normal CDF (Abramowitz & Stegun 7.1.26 for erf; absolute error < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Standard normal density.
pub fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Expected improvement over `best` of a point whose score is N(mean, sd²), for maximisation, with a
/// margin `xi` (in score units) that favours exploring a little.
pub fn expected_improvement(mean: f64, sd: f64, best: f64, xi: f64) -> f64 {
    let gain = mean - best - xi;
    if sd <= 0.0 {
        return gain.max(0.0);
    }
    let z = gain / sd;
    gain * normal_cdf(z) + sd * normal_pdf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_cdf_matches_tables() {
        for (z, p) in [
            (0.0, 0.5),
            (1.0, 0.841_344_7),
            (-1.96, 0.024_997_9),
            (2.5, 0.993_790_3),
        ] {
            assert!((normal_cdf(z) - p).abs() < 1e-6, "{z}: {}", normal_cdf(z));
        }
    }

    #[test]
    fn expected_improvement_rewards_mean_and_uncertainty() {
        assert!(expected_improvement(1.0, 0.1, 0.0, 0.0) > 0.99);
        assert!(expected_improvement(-1.0, 0.0, 0.0, 0.0) == 0.0);
        assert!(
            expected_improvement(0.0, 1.0, 0.0, 0.0) > expected_improvement(0.0, 0.1, 0.0, 0.0)
        );
    }

    #[test]
    fn cholesky_solves_a_known_system() {
        let a = vec![vec![4.0, 2.0], vec![2.0, 3.0]];
        let l = cholesky(&a).unwrap();
        let x = backward(&l, &forward(&l, &[2.0, 1.0]));
        // 4x + 2y = 2, 2x + 3y = 1 -> x = 0.5, y = 0
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        assert!(cholesky(&[vec![1.0, 2.0], vec![2.0, 1.0]]).is_none());
    }

    #[test]
    fn a_fitted_process_interpolates_a_smooth_function() {
        let f = |x: f64| (3.0 * x).sin() * 10.0 + 50.0;
        let x: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64 / 7.0]).collect();
        let y: Vec<f64> = x.iter().map(|p| f(p[0])).collect();
        let gp = Gp::fit(&x, &y, 1, 40).unwrap();
        for p in [0.1, 0.45, 0.8] {
            let (m, sd) = gp.predict(&[p]);
            assert!((m - f(p)).abs() < 1.0, "{p}: {m} vs {}", f(p));
            assert!(sd < 2.0, "{p}: sd {sd}");
        }
        // Far outside the data the model is unsure.
        let (_, far) = gp.predict(&[3.0]);
        assert!(far > gp.predict(&[0.45]).1);
    }
}
