//! Merging the results of several generator machines (`ordo report merge a.json b.json`) into one report
//! with exact percentiles: a load too large for one generator is run by many at once, each saving its
//! report with its HDR histograms, and the union is rebuilt here from the histograms (summed, never
//! averaged percentiles) and counters by the same builder as one run's report. Results of different
//! workloads (target, method, loop, keep-alive, mix, protocol, classes) are refused with what differs,
//! unless forced, when every output says so.

use std::collections::BTreeMap;

use crate::report::{self, BenchReport, MergedRun};
use crate::stats::{Failures, Second, Stats};

/// Why results could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("merging needs two or more results (got {0})")]
    TooFew(usize),
    #[error(
        "{file} has no histograms (written by an ordo bench before they were saved); run it again with \
         this version to merge it"
    )]
    NoHistograms { file: String },
    #[error("{file}: {field}: {reason}")]
    Corrupt {
        file: String,
        field: String,
        reason: String,
    },
    #[error(
        "the results measure different workloads, so their union means nothing:\n  {}\n(--force merges them \
         anyway, with a warning on every output)",
        .0.join("\n  ")
    )]
    Mismatch(Vec<String>),
}

/// What must be equal for two results to be one workload: (field, value as text). How much each
/// generator does — its connections, threads, request count, duration, warm-up and open-loop rate — may
/// differ: that is how a load is split over unequal machines; so may a ramp's targets (the merged stage's
/// target is their sum), not its stages' durations.
fn workload(r: &BenchReport) -> Vec<(&'static str, String)> {
    let c = &r.config;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    vec![
        ("target", r.target.clone()),
        ("config.mode", c.mode.clone()),
        ("config.method", c.method.clone()),
        ("config.keepalive", c.keepalive.to_string()),
        ("config.mix", opt(c.mix.clone())),
        ("config.assign", c.assign.clone()),
        ("config.protocol", opt(c.protocol.clone())),
        ("config.streams", opt(c.streams.map(|s| s.to_string()))),
        (
            "stages (durations)",
            if r.stages.is_empty() {
                "none".to_string()
            } else {
                r.stages
                    .iter()
                    .map(|s| format!("{}s", s.duration_s))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        ),
        (
            "classes",
            r.classes
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ]
}

/// Every difference between the first result's workload and each other's, as lines naming the field and
/// both values.
pub fn differences(inputs: &[(String, BenchReport)]) -> Vec<String> {
    let mut out = Vec::new();
    let Some((first_name, first)) = inputs.first() else {
        return out;
    };
    let base = workload(first);
    for (name, r) in &inputs[1..] {
        for ((field, a), (_, b)) in base.iter().zip(workload(r)) {
            if *a != b {
                out.push(format!("{field}: {first_name} has {a}, {name} has {b}"));
            }
        }
    }
    out
}

fn decode(source: &str, field: &str, s: &str) -> Result<hdrhistogram::Histogram<u64>, MergeError> {
    let h = report::decode(s).map_err(|reason| MergeError::Corrupt {
        file: source.into(),
        field: field.into(),
        reason,
    })?;
    let mut out = crate::stats::new_hist();
    out.add(&h).map_err(|e| MergeError::Corrupt {
        file: source.into(),
        field: field.into(),
        reason: format!("values beyond the histogram's range: {e:?}"),
    })?;
    Ok(out)
}

/// The runs a result stands for: itself, or the runs it was merged from.
fn runs_of(name: &str, r: &BenchReport) -> Vec<MergedRun> {
    if !r.merged.is_empty() {
        return r.merged.clone();
    }
    let p = |q: f64| {
        r.summary
            .latency
            .percentiles
            .iter()
            .find(|p| p.p == q)
            .map_or(0.0, |p| p.ms)
    };
    vec![MergedRun {
        source: name.to_string(),
        fingerprint: r.fingerprint.clone(),
        started_unix_ms: r.started_unix_ms,
        elapsed_s: r.elapsed_s,
        connections: r.config.connections,
        threads: r.config.threads,
        complete: r.summary.complete,
        failed: r.summary.failed.total,
        rps: r.summary.rps,
        p50_ms: p(50.0),
        p99_ms: p(99.0),
    }]
}

/// Merges `inputs` (each named by the file it came from) into one report: histograms and counters summed,
/// every percentile and mean computed again from the summed histograms; rates over the span from the
/// earliest start to the latest end (the runs are meant to run at once); timelines aligned on their wall
/// clock starts (to the second). Different workloads are refused ([`MergeError::Mismatch`]) unless
/// `force`, which records the differences in `warnings`.
pub fn merge(inputs: &[(String, BenchReport)], force: bool) -> Result<BenchReport, MergeError> {
    if inputs.len() < 2 {
        return Err(MergeError::TooFew(inputs.len()));
    }
    for (name, r) in inputs {
        if r.histograms.is_none() {
            return Err(MergeError::NoHistograms { file: name.clone() });
        }
    }
    let diffs = differences(inputs);
    if !diffs.is_empty() && !force {
        return Err(MergeError::Mismatch(diffs));
    }
    let first = &inputs[0].1;
    let open = first.summary.corrected.is_some();
    let classes = first.classes.len();
    let mut st = Stats::new(classes, open).with_stages(first.stages.len());
    let mut stage_plans: Vec<report::StagePlan> = first
        .stages
        .iter()
        .map(|s| report::StagePlan {
            start_s: s.start_s,
            duration_s: s.duration_s,
            from: 0.0,
            target: 0.0,
            unit: s.unit.clone(),
        })
        .collect();
    let start_ms = inputs
        .iter()
        .map(|(_, r)| r.started_unix_ms)
        .min()
        .unwrap_or(0);
    let end_ms = inputs
        .iter()
        .map(|(_, r)| r.started_unix_ms as f64 + r.elapsed_s * 1000.0)
        .fold(0.0, f64::max);
    let mut class_connections = vec![0u64; classes];
    let mut connections = 0;
    let mut threads = 0;
    let mut conn_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut warnings = Vec::new();
    if !diffs.is_empty() {
        warnings.push(format!(
            "WARNING: merged with --force although the results measure different workloads: {}",
            diffs.join("; ")
        ));
    }
    let mut merged = Vec::new();
    for (name, r) in inputs {
        let h = r
            .histograms
            .as_ref()
            .ok_or_else(|| MergeError::NoHistograms { file: name.clone() })?;
        if h.classes.len() != r.classes.len() || r.classes.len() != classes {
            return Err(MergeError::Corrupt {
                file: name.clone(),
                field: "histograms.classes".into(),
                reason: format!(
                    "{} class histograms for {} classes (the first result has {classes})",
                    h.classes.len(),
                    r.classes.len()
                ),
            });
        }
        for (i, (c, ch)) in r.classes.iter().zip(&h.classes).enumerate() {
            let s = &mut st.classes[i];
            let lat = decode(
                name,
                &format!("histograms.classes[{i}].latency"),
                &ch.latency,
            )?;
            let _ = s.latency.add(&lat);
            if let (Some(a), Some(b)) = (&mut s.corrected, &ch.corrected) {
                let _ = a.add(&decode(
                    name,
                    &format!("histograms.classes[{i}].corrected"),
                    b,
                )?);
            }
            s.completed += c.complete;
            s.non_2xx += c.non_2xx;
            s.bytes += c.bytes;
            s.failures.add(&Failures {
                connect: c.failed.connect,
                receive: c.failed.receive,
                length: c.failed.length,
                exceptions: c.failed.exceptions,
                timeouts: c.failed.timeouts,
            });
            class_connections[i] += c.connections;
        }
        if h.stages.len() != r.stages.len() || r.stages.len() != st.stages.len() {
            return Err(MergeError::Corrupt {
                file: name.clone(),
                field: "histograms.stages".into(),
                reason: format!(
                    "{} stage histograms for {} stages (the first result has {})",
                    h.stages.len(),
                    r.stages.len(),
                    st.stages.len()
                ),
            });
        }
        for (i, (s, sh)) in r.stages.iter().zip(&h.stages).enumerate() {
            let t = &mut st.stages[i];
            let _ = t.latency.add(&decode(
                name,
                &format!("histograms.stages[{i}].latency"),
                &sh.latency,
            )?);
            if let (Some(a), Some(b)) = (&mut t.corrected, &sh.corrected) {
                let _ = a.add(&decode(
                    name,
                    &format!("histograms.stages[{i}].corrected"),
                    b,
                )?);
            }
            t.completed += s.complete;
            t.failed += s.failed;
            stage_plans[i].from += s.from;
            stage_plans[i].target += s.target;
        }
        let _ = st
            .connect
            .add(&decode(name, "histograms.connect", &h.connect)?);
        let _ = st
            .waiting
            .add(&decode(name, "histograms.waiting", &h.waiting)?);
        let _ = st
            .processing
            .add(&decode(name, "histograms.processing", &h.processing)?);
        for sc in &r.status_counts {
            if let Some(n) = st.status.get_mut(sc.status as usize) {
                *n += sc.count;
            }
        }
        st.head_bytes += r.summary.total_bytes;
        st.content_bytes += r.summary.body_bytes;
        st.connections_opened += r.summary.connections_opened;
        let offset = (r.started_unix_ms.saturating_sub(start_ms) / 1000) as usize;
        for t in &r.timeline {
            let at = offset + t.second as usize;
            if st.timeline.len() <= at {
                st.timeline.resize(at + 1, Second::default());
            }
            st.timeline[at].completed += t.complete;
            st.timeline[at].failed += t.failed;
            st.timeline[at].bytes += t.bytes;
        }
        if let Some(d) = &r.document {
            if st.server_software.is_none() {
                st.server_software.clone_from(&d.server_software);
            }
            st.document_length = st.document_length.or(d.length);
        }
        for e in &r.summary.connection_errors {
            *conn_errors.entry(e.reason.clone()).or_default() += e.count;
        }
        connections += r.config.connections;
        threads += r.config.threads;
        merged.extend(runs_of(name, r));
        for w in &r.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    for (reason, n) in conn_errors {
        st.record_conn_error(&reason, n);
    }
    let mut config = first.config.clone();
    config.connections = connections;
    config.threads = threads;
    // an open loop's rate is the fleet's: each generator's share added up
    config.rate = inputs
        .iter()
        .map(|(_, r)| r.config.rate)
        .sum::<Option<f64>>();
    let doc = first.document.clone();
    let (hostname, port, path) = match &doc {
        Some(d) => (d.hostname.clone(), d.port, d.path.clone()),
        None => (String::new(), 0, String::new()),
    };
    let mut out = report::build(report::BuildInput {
        config,
        target: first.target.clone(),
        started_unix_ms: start_ms,
        interrupted: inputs.iter().any(|(_, r)| r.interrupted),
        elapsed_s: ((end_ms - start_ms as f64) / 1000.0).max(0.0),
        class_names: first.classes.iter().map(|c| c.name.clone()).collect(),
        shares: first.classes.iter().map(|c| c.share).collect(),
        class_connections,
        connections,
        stats: &st,
        server: None,
        hostname,
        port,
        path,
        stages: stage_plans,
    });
    // the machine is each run's, not this one's
    out.fingerprint = None;
    if doc.is_none() {
        out.document = None;
    }
    out.merged = merged;
    out.warnings = warnings;
    Ok(out)
}

#[cfg(test)]
mod tests;
