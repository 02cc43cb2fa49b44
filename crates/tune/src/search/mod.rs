//! `[design] kind = "search"`: find a good configuration in far fewer trials than the full grid.
//!
//! Bayesian optimisation with a Gaussian process and expected improvement. Why this and not a random forest
//! or successive halving: the knobs are few (a handful) and mostly ordered (counts, nanoseconds, nice), the
//! response is smooth in them, and every trial costs seconds of a real workload, so a model that
//! interpolates between the points it has seen and knows how unsure it is away from them (the GP) spends
//! trials where they matter; a forest needs more points to be useful in a few dimensions, and successive
//! halving spends most of its budget on short, noisy runs of configurations it then throws away.
//!
//! The search is a pure function of the trials so far ([`Searcher::suggest`]): the runner stores each
//! trial's runs like any other configuration's, so an interrupted search resumes by replaying them. The
//! best trial is chosen by the model's posterior mean (not the highest noisy mean, which mostly picks the
//! luckiest run) and the runner re-checks it against the baseline in fresh interleaved blocks before
//! reporting it.

pub mod gp;
pub mod sim;

use std::collections::{BTreeMap, HashSet};

use crate::stats::Rng;
use gp::Gp;

/// How one knob's levels become model inputs.
#[derive(Clone, Debug, PartialEq)]
enum Axis {
    /// Numbers, scaled to 0..1 (on a log scale when they span a factor of 8 or more).
    Numeric(Vec<f64>),
    /// Names (policies, CPU lists): one-hot, so every two levels are equally far apart.
    Categorical(usize),
}

/// The search space: the full factorial of the knobs' levels.
#[derive(Clone, Debug)]
pub struct Space {
    pub knobs: Vec<(String, Vec<String>)>,
    axes: Vec<Axis>,
}

impl Space {
    pub fn new(knobs: &[(String, Vec<String>)]) -> Space {
        let axes = knobs
            .iter()
            .map(|(_, levels)| {
                let nums: Option<Vec<f64>> = levels.iter().map(|l| l.trim().parse().ok()).collect();
                match nums {
                    Some(v) if v.iter().all(|x: &f64| x.is_finite()) => {
                        let (lo, hi) = v
                            .iter()
                            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                                (a.min(x), b.max(x))
                            });
                        let log = lo > 0.0 && hi / lo >= 8.0;
                        let t = |x: f64| if log { x.ln() } else { x };
                        let (tl, th) = (t(lo), t(hi));
                        Axis::Numeric(
                            v.iter()
                                .map(|&x| {
                                    if th > tl {
                                        (t(x) - tl) / (th - tl)
                                    } else {
                                        0.0
                                    }
                                })
                                .collect(),
                        )
                    }
                    _ => Axis::Categorical(levels.len()),
                }
            })
            .collect();
        Space {
            knobs: knobs.to_vec(),
            axes,
        }
    }

    /// Number of points (saturating).
    pub fn size(&self) -> usize {
        self.knobs
            .iter()
            .fold(1usize, |a, (_, l)| a.saturating_mul(l.len()))
    }

    /// The `index`-th point (mixed radix, first knob slowest), as level indices.
    pub fn point(&self, mut index: usize) -> Vec<usize> {
        let mut p = vec![0; self.knobs.len()];
        for (i, (_, l)) in self.knobs.iter().enumerate().rev() {
            p[i] = index % l.len();
            index /= l.len();
        }
        p
    }

    /// Model inputs of a point.
    pub fn encode(&self, p: &[usize]) -> Vec<f64> {
        let mut x = Vec::new();
        for (axis, &l) in self.axes.iter().zip(p) {
            match axis {
                Axis::Numeric(v) => x.push(v[l]),
                Axis::Categorical(2) => x.push(l as f64),
                Axis::Categorical(n) => x.extend((0..*n).map(|i| {
                    if i == l {
                        std::f64::consts::FRAC_1_SQRT_2
                    } else {
                        0.0
                    }
                })),
            }
        }
        x
    }

    /// The knob values of a point.
    pub fn values(&self, p: &[usize]) -> BTreeMap<String, String> {
        self.knobs
            .iter()
            .zip(p)
            .map(|((k, l), &i)| (k.clone(), l[i].clone()))
            .collect()
    }

    /// The point with these values, when they set every knob to one of its levels.
    pub fn point_of(&self, values: &BTreeMap<String, String>) -> Option<Vec<usize>> {
        self.knobs
            .iter()
            .map(|(k, l)| values.get(k).and_then(|v| l.iter().position(|x| x == v)))
            .collect()
    }
}

/// One trial: a point of the space (`None` for a baseline that is not one, e.g. the machine's own
/// settings) and its mean score (`None` when every run failed).
#[derive(Clone, Debug, PartialEq)]
pub struct Trial {
    pub point: Option<Vec<usize>>,
    pub score: Option<f64>,
}

/// Proposes the next trial from the trials so far.
#[derive(Clone, Debug)]
pub struct Searcher {
    pub space: Space,
    /// Trials in all, the baseline included.
    pub budget: usize,
    /// Space-filling trials after the baseline, before the model proposes.
    pub initial: usize,
    pub seed: u64,
    pub maximize: bool,
    /// Hyperparameters fitted to the first n scored trials, by n (see `Searcher::model`).
    pub hyper_cache: std::cell::RefCell<BTreeMap<usize, gp::Hyper>>,
}

/// Candidates scored per proposal: every untried point up to this many, else a seeded sample.
const MAX_CANDIDATES: usize = 20_000;

impl Searcher {
    fn tried(&self, trials: &[Trial]) -> HashSet<Vec<usize>> {
        trials.iter().filter_map(|t| t.point.clone()).collect()
    }

    /// Untried points to choose from (all of them when few, else a seeded sample).
    fn candidates(&self, tried: &HashSet<Vec<usize>>, rng: &mut Rng) -> Vec<Vec<usize>> {
        let n = self.space.size();
        if n <= MAX_CANDIDATES {
            return (0..n)
                .map(|i| self.space.point(i))
                .filter(|p| !tried.contains(p))
                .collect();
        }
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for _ in 0..MAX_CANDIDATES * 2 {
            if out.len() >= MAX_CANDIDATES {
                break;
            }
            let p = self.space.point(rng.index(n));
            if !tried.contains(&p) && seen.insert(p.clone()) {
                out.push(p);
            }
        }
        out
    }

    /// The scored trials on the grid as model inputs and scores (maximised: minimised scores are negated).
    fn data(&self, trials: &[Trial]) -> (Vec<Vec<f64>>, Vec<f64>) {
        trials
            .iter()
            .filter_map(|t| Some((self.space.encode(t.point.as_ref()?), t.score?)))
            .filter(|(_, y)| y.is_finite())
            .map(|(x, y)| (x, if self.maximize { y } else { -y }))
            .unzip()
    }

    /// A searcher with an empty hyperparameter cache.
    pub fn new(space: Space, budget: usize, initial: usize, seed: u64, maximize: bool) -> Searcher {
        Searcher {
            space,
            budget,
            initial,
            seed,
            maximize,
            hyper_cache: Default::default(),
        }
    }

    /// The process through every scored trial. Its hyperparameters are fitted (a search over the marginal
    /// likelihood, O(n³) per try) to the first n0 scored trials, n0 = n up to 24 and then the last multiple
    /// of 8, and kept by n0: refitting for every trial made a 200-trial search cost minutes. Still a
    /// function of the trials alone, so a resumed search proposes what an uninterrupted one would.
    fn model(&self, trials: &[Trial]) -> Option<Gp> {
        let (x, y) = self.data(trials);
        let n = y.len();
        if n < 3 {
            return None;
        }
        let n0 = if n <= 24 { n } else { n - n % 8 };
        let cached = self.hyper_cache.borrow().get(&n0).cloned();
        let hyper = match cached {
            Some(h) => h,
            None => {
                let tries = if n0 <= 40 { 48 } else { 24 };
                let seed = self.seed ^ (n0 as u64).wrapping_mul(0x2545_F491_4F6C_DD1D);
                let h = Gp::fit(&x[..n0], &y[..n0], seed, tries)?.hyper().clone();
                self.hyper_cache.borrow_mut().insert(n0, h.clone());
                h
            }
        };
        Gp::with_hyper(&x, &y, hyper)
    }

    /// The next point to try, or `None` when the budget is spent or every point has been tried.
    pub fn suggest(&self, trials: &[Trial]) -> Option<Vec<usize>> {
        if trials.len() >= self.budget {
            return None;
        }
        let tried = self.tried(trials);
        let mut rng =
            Rng::new(self.seed ^ (trials.len() as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let candidates = self.candidates(&tried, &mut rng);
        if candidates.is_empty() {
            return None;
        }
        let fitted = if trials.len() > self.initial {
            self.model(trials)
        } else {
            None
        };
        let Some(gp) = fitted else {
            return Some(self.space_filling(&tried, candidates, &mut rng));
        };
        let (x, y) = self.data(trials);
        // The incumbent: the best posterior mean at a tried point (robust to one lucky noisy mean).
        let incumbent = x
            .iter()
            .map(|p| gp.predict(p).0)
            .fold(f64::NEG_INFINITY, f64::max);
        let spread = {
            let m = y.iter().sum::<f64>() / y.len() as f64;
            (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / y.len() as f64).sqrt()
        };
        let xi = 0.01 * spread;
        candidates
            .into_iter()
            .map(|p| {
                let (m, sd) = gp.predict(&self.space.encode(&p));
                (gp::expected_improvement(m, sd, incumbent, xi), p)
            })
            .fold(
                None,
                |best: Option<(f64, Vec<usize>)>, (ei, p)| match best {
                    Some((b, _)) if b >= ei => best,
                    _ => Some((ei, p)),
                },
            )
            .map(|(_, p)| p)
    }

    /// Maximin: of some random untried candidates, the one farthest from every tried point.
    fn space_filling(
        &self,
        tried: &HashSet<Vec<usize>>,
        mut candidates: Vec<Vec<usize>>,
        rng: &mut Rng,
    ) -> Vec<usize> {
        rng.shuffle(&mut candidates);
        candidates.truncate(256);
        let tried_x: Vec<Vec<f64>> = tried.iter().map(|p| self.space.encode(p)).collect();
        let dist =
            |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>();
        candidates
            .into_iter()
            .map(|p| {
                let x = self.space.encode(&p);
                let d = tried_x
                    .iter()
                    .map(|t| dist(&x, t))
                    .fold(f64::INFINITY, f64::min);
                (d, p)
            })
            .fold(None, |best: Option<(f64, Vec<usize>)>, (d, p)| match best {
                Some((b, _)) if b >= d => best,
                _ => Some((d, p)),
            })
            .map(|(_, p)| p)
            .unwrap_or_default()
    }

    /// The index of the best trial on the grid: the highest posterior mean among the scored grid trials
    /// (the highest mean when there are too few for a model); `None` when no grid trial has a score. A
    /// baseline off the grid (the machine's own settings) is not a candidate: its raw mean is not comparable
    /// with the model's smoothed means (a lucky baseline run would beat every trial), and whether a trial
    /// beats it is the re-check's question, answered on fresh runs.
    pub fn best(&self, trials: &[Trial]) -> Option<usize> {
        let sign = if self.maximize { 1.0 } else { -1.0 };
        let gp = self.model(trials);
        let value = |t: &Trial| -> Option<f64> {
            let p = t.point.as_ref()?;
            let s = sign * t.score?;
            Some(match &gp {
                Some(g) => g.predict(&self.space.encode(p)).0,
                None => s,
            })
        };
        let mut best: Option<(usize, f64)> = None;
        for (i, t) in trials.iter().enumerate() {
            if let Some(v) = value(t)
                && best.is_none_or(|(_, b)| v > b)
            {
                best = Some((i, v));
            }
        }
        best.map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space::new(&[
            (
                "param:threads".into(),
                ["1", "2", "4", "8", "16", "32", "64"]
                    .map(String::from)
                    .to_vec(),
            ),
            (
                "policy".into(),
                ["other", "batch", "idle"].map(String::from).to_vec(),
            ),
            ("nice".into(), ["0", "5", "10"].map(String::from).to_vec()),
        ])
    }

    #[test]
    fn points_encode_and_round_trip() {
        let s = space();
        assert_eq!(s.size(), 63);
        let p = s.point(62);
        assert_eq!(p, vec![6, 2, 2]);
        assert_eq!(s.point_of(&s.values(&p)), Some(p.clone()));
        // threads on a log scale (64/1 >= 8), policy one-hot, nice linear.
        let x = s.encode(&[3, 1, 1]);
        assert_eq!(x.len(), 5);
        assert!((x[0] - 0.5).abs() < 1e-12, "{x:?}");
        assert!((x[4] - 0.5).abs() < 1e-12, "{x:?}");
        assert!(s.point_of(&BTreeMap::new()).is_none());
    }

    #[test]
    fn suggestions_are_deterministic_new_and_within_the_budget() {
        let s = Searcher::new(space(), 12, 3, 9, true);
        let f = |p: &[usize]| {
            100.0 - (p[0] as f64 - 3.0).powi(2) * 5.0 - p[1] as f64 * 3.0 - p[2] as f64
        };
        let mut trials = vec![Trial {
            point: None,
            score: Some(50.0),
        }];
        while let Some(p) = s.suggest(&trials) {
            assert!(
                !trials.iter().any(|t| t.point.as_ref() == Some(&p)),
                "{p:?} twice"
            );
            trials.push(Trial {
                score: Some(f(&p)),
                point: Some(p),
            });
        }
        assert_eq!(trials.len(), 12);
        let again: Vec<Option<Vec<usize>>> = {
            let mut t = vec![trials[0].clone()];
            while let Some(p) = s.suggest(&t) {
                t.push(Trial {
                    score: Some(f(&p)),
                    point: Some(p),
                });
            }
            t.into_iter().map(|t| t.point).collect()
        };
        assert_eq!(
            again,
            trials.iter().map(|t| t.point.clone()).collect::<Vec<_>>()
        );
        let best = s.best(&trials).unwrap();
        let top = trials
            .iter()
            .filter_map(|t| t.score)
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(trials[best].score.unwrap() >= top - 5.0, "{trials:?}");
    }
}
