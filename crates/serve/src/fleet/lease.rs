//! The lease rule of fleet mode: how `fleet_workers` (the application's capacity) is divided among the
//! instances, per class, from every instance's published demand. A pure function of one snapshot, so every
//! instance that reads the same snapshot computes the same division, and each takes its own row.
//!
//! 1. **Classes** share the capacity by weighted max-min fairness over their fleet-wide demand (queued +
//!    in flight, summed over instances): water-filling, each class gets at most its demand, and what a class
//!    does not need goes to the others by weight.
//! 2. **Instances** share a class's part by max-min fairness over their demand for it.
//! 3. **Spare** capacity (when the whole fleet wants less than there is) is spread over every instance and
//!    class by weight, so a class idle now can start at once when its requests come, without waiting for the
//!    next sync; under contention there is none.
//! 4. The real-valued shares are rounded by largest remainder (ties by class order, then instance id), so
//!    the leases sum to `fleet_workers` exactly.

/// One instance's published demand: requests queued plus in flight, per class name.
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    pub instance: String,
    pub classes: Vec<(String, u64)>,
}

impl Demand {
    fn of(&self, class: &str) -> f64 {
        self.classes
            .iter()
            .find(|(n, _)| n == class)
            .map_or(0.0, |(_, d)| *d as f64)
    }
}

/// Weighted water-filling of `capacity` over `demand` (each gets at most its demand).
fn fill(capacity: f64, demand: &[f64], weight: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; demand.len()];
    let mut open: Vec<usize> = (0..demand.len()).filter(|&i| demand[i] > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-9 {
        let w: f64 = open.iter().map(|&i| weight[i]).sum();
        let unit = left / w;
        let sated: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| demand[i] - out[i] <= weight[i] * unit)
            .collect();
        if sated.is_empty() {
            for &i in &open {
                out[i] += weight[i] * unit;
            }
            break;
        }
        for &i in &sated {
            left -= demand[i] - out[i];
            out[i] = demand[i];
        }
        open.retain(|i| !sated.contains(i));
    }
    out
}

/// The leases of every instance in `demands` (sorted by instance id): `rows[k][c]` is instance k's workers
/// for class `classes[c]`. `classes` are (name, weight ≥ 1). The rows sum to `capacity` exactly (when there
/// is any instance).
pub fn leases(capacity: usize, classes: &[(&str, u32)], demands: &[Demand]) -> Vec<Vec<usize>> {
    let n = demands.len();
    let k = classes.len();
    if n == 0 || k == 0 {
        return vec![vec![0; k]; n];
    }
    let cap = capacity as f64;
    let weight: Vec<f64> = classes
        .iter()
        .map(|(_, w)| f64::from((*w).max(1)))
        .collect();
    let want: Vec<Vec<f64>> = demands
        .iter()
        .map(|d| classes.iter().map(|(c, _)| d.of(c)).collect())
        .collect();
    let class_want: Vec<f64> = (0..k).map(|c| want.iter().map(|r| r[c]).sum()).collect();
    let class_share = fill(cap, &class_want, &weight);
    let mut x = vec![vec![0.0; k]; n];
    for c in 0..k {
        let col: Vec<f64> = want.iter().map(|r| r[c]).collect();
        let part = fill(class_share[c], &col, &vec![1.0; n]);
        for (i, p) in part.into_iter().enumerate() {
            x[i][c] = p;
        }
    }
    let spare = cap - class_share.iter().sum::<f64>();
    if spare > 1e-9 {
        let total_w: f64 = weight.iter().sum::<f64>() * n as f64;
        for row in &mut x {
            for (c, v) in row.iter_mut().enumerate() {
                *v += spare * weight[c] / total_w;
            }
        }
    }
    // largest remainder: floors, then the units left to the largest fractions
    let mut out: Vec<Vec<usize>> = x
        .iter()
        .map(|r| r.iter().map(|v| v.floor().max(0.0) as usize).collect())
        .collect();
    let given: usize = out.iter().flatten().sum();
    let mut left = capacity.saturating_sub(given);
    let mut frac: Vec<(f64, usize, usize)> = Vec::with_capacity(n * k);
    for (i, r) in x.iter().enumerate() {
        for (c, v) in r.iter().enumerate() {
            frac.push((v - v.floor(), c, i));
        }
    }
    frac.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    for (_, c, i) in frac {
        if left == 0 {
            break;
        }
        out[i][c] += 1;
        left -= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(instance: &str, classes: &[(&str, u64)]) -> Demand {
        Demand {
            instance: instance.into(),
            classes: classes.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        }
    }

    const W: [(&str, u32); 3] = [("gold", 4), ("silver", 2), ("bronze", 1)];

    #[test]
    fn each_class_on_its_own_instance_gets_its_weight() {
        // the balancer sent every class to a different instance, each with more demand than the capacity
        let ds = [
            d("a", &[("gold", 50)]),
            d("b", &[("silver", 50)]),
            d("c", &[("bronze", 50)]),
        ];
        let l = leases(14, &W, &ds);
        assert_eq!(l, vec![vec![8, 0, 0], vec![0, 4, 0], vec![0, 0, 2]]);
    }

    #[test]
    fn a_class_that_wants_less_gives_the_rest_to_the_others_by_weight() {
        let ds = [
            d("a", &[("gold", 2), ("silver", 30)]),
            d("b", &[("silver", 30), ("bronze", 30)]),
        ];
        let l = leases(14, &W, &ds);
        // gold needs 2; the 12 left go 2:1 to silver (8) and bronze (4); silver's 8 split evenly
        assert_eq!(l, vec![vec![2, 4, 0], vec![0, 4, 4]]);
        assert_eq!(l.iter().flatten().sum::<usize>(), 14);
    }

    #[test]
    fn an_instance_with_little_demand_gets_what_it_wants_and_spare_is_spread() {
        // total demand 5 < 14: everyone gets its demand, the 9 spare spread by weight over both instances
        let ds = [d("a", &[("gold", 4)]), d("b", &[("bronze", 1)])];
        let l = leases(14, &W, &ds);
        assert_eq!(l.iter().flatten().sum::<usize>(), 14);
        assert!(l[0][0] >= 4 && l[1][2] >= 1, "{l:?}");
        // an idle class still has a worker somewhere to start on
        assert!(l[0][1] + l[1][1] >= 2, "{l:?}");
        // nobody: all spare
        let l = leases(7, &W, &[d("a", &[]), d("b", &[])]);
        assert_eq!(l.iter().flatten().sum::<usize>(), 7);
    }

    #[test]
    fn every_instance_computes_the_same_rows_and_they_sum_to_the_capacity() {
        for cap in [1usize, 3, 7, 14, 100] {
            let ds = [
                d("a", &[("gold", 3), ("silver", 9), ("unknown", 40)]),
                d("b", &[("gold", 7), ("bronze", 1)]),
                d("c", &[("silver", 2), ("bronze", 20)]),
            ];
            let l = leases(cap, &W, &ds);
            assert_eq!(l, leases(cap, &W, &ds));
            assert_eq!(l.iter().flatten().sum::<usize>(), cap, "cap {cap}: {l:?}");
        }
        assert!(leases(10, &W, &[]).is_empty());
    }
}
