//! The experiment runner: checks every knob before anything changes, then runs randomized blocks (each
//! block runs every configuration once, in a seeded order) until the repetition rule is met, applying each
//! configuration's knobs through the journalled applier and restoring them after every run, on error and
//! on SIGINT/SIGTERM. Each run is stored in its own transaction, so an interrupted experiment resumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ordo_sys::knobs::{
    Applier, CheckContext, Checker, KnobError, KnobId, Refusal, RefusalKind, RestoreNote, Scope,
    SysRoot, Target, ThreadKnob, ThreadOps,
};

use crate::analysis::Analysis;
use crate::design::{self, Configuration};
use crate::spec::{Design, KnobSpec, Spec, SpecError, TargetKind};
use crate::store::StoreError;
use crate::target::{RunningTarget, TargetError, command_line, free_port};
use crate::workload::{self, WorkloadError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{} knob(s) refused:\n{}", .0.len(), .0.iter().map(|r| format!("  - {r}")).collect::<Vec<_>>().join("\n"))]
    Refused(Vec<Refusal>),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("could not restore every knob (the journal {journal} keeps them; run `ordo tune recover --journal {journal}`):\n{}", .notes.join("\n"))]
    Restore { journal: String, notes: Vec<String> },
    #[error(
        "experiment {id} in {db} has different configurations than {file} now yields; use another --db or a new file"
    )]
    Mismatch { id: i64, db: String, file: String },
    #[error("{0}")]
    Other(String),
}

impl RunError {
    /// Errors caused by the experiment file or its knobs (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RunError::Spec(_)
                | RunError::Refused(_)
                | RunError::Mismatch { .. }
                | RunError::Target(TargetError::NoProcess(_))
        ) || matches!(self, RunError::Store(e) if e.is_bad_file())
    }
}

/// How to run.
pub struct RunOptions {
    pub db: PathBuf,
    pub journal: PathBuf,
    pub root: SysRoot,
    pub threads: Arc<dyn ThreadOps>,
    /// The `ordo` binary, for `builtin = "ordo-serve"` targets.
    pub ordo: Option<PathBuf>,
    /// Set by the signal handler; the runner restores and stops.
    pub stop: Arc<AtomicBool>,
    /// Show a progress bar (only drawn on a terminal).
    pub progress: bool,
    /// Stop as if interrupted after this many runs in this session (tests of resuming).
    pub run_limit: Option<usize>,
    /// Print one line per run and the summary.
    pub print: bool,
    /// Wait this long for a knob another experiment holds (machine-wide lock) instead of refusing at once.
    pub lock_wait: Duration,
}

impl RunOptions {
    /// Options for `db` and `journal` on `root` with the defaults: real threads, no `ordo` binary, no
    /// progress bar, nothing printed, no run limit, no waiting for knob locks.
    pub fn new(db: impl Into<PathBuf>, journal: impl Into<PathBuf>, root: SysRoot) -> RunOptions {
        RunOptions {
            db: db.into(),
            journal: journal.into(),
            root,
            threads: Arc::new(ordo_sys::knobs::RealThreads),
            ordo: None,
            stop: Arc::new(AtomicBool::new(false)),
            progress: false,
            run_limit: None,
            print: false,
            lock_wait: Duration::ZERO,
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("db", &self.db)
            .field("journal", &self.journal)
            .field("root", &self.root)
            .finish()
    }
}

/// What a finished (or interrupted) experiment left.
#[derive(Debug)]
pub struct Outcome {
    pub experiment: i64,
    pub interrupted: bool,
    pub resumed: bool,
    pub runs_this_session: usize,
    pub analysis: Analysis,
}

/// One knob's check result.
#[derive(Debug, Clone)]
pub struct KnobCheck {
    pub knob: String,
    pub levels: Vec<String>,
    /// Declared optional: a refusal because this machine lacks it skips it instead.
    pub optional: bool,
    pub result: Result<String, Refusal>,
}

impl KnobCheck {
    /// Dropped with a message (not root for a system-wide knob; an optional knob this machine lacks).
    pub fn skipped(&self) -> bool {
        use ordo_sys::knobs::RefusalKind::*;
        match &self.result {
            Ok(_) => false,
            Err(r) => {
                r.is_skip()
                    || (self.optional
                        && matches!(r.kind, Missing | NotWritable | Unsupported | Removed))
            }
        }
    }
}

/// What would run (`--dry-run`) and what the checks said.
#[derive(Debug, Clone)]
pub struct Plan {
    pub configs: Vec<Configuration>,
    pub checks: Vec<KnobCheck>,
    pub target_command: Option<String>,
    pub workloads: Vec<String>,
    pub min_runs: usize,
    pub max_runs: usize,
    pub warmup_blocks: usize,
    pub per_run: Duration,
    /// A dry run of a started target: per-thread and cgroup knobs could not be checked against its
    /// threads and cgroup yet (that happens when the run starts).
    pub target_unchecked: bool,
    /// A search: (trial budget, points in the grid).
    pub search: Option<(usize, usize)>,
}

impl Plan {
    pub fn refusals(&self) -> Vec<Refusal> {
        self.checks
            .iter()
            .filter(|c| !c.skipped())
            .filter_map(|c| c.result.clone().err())
            .collect()
    }

    /// Knobs dropped with a message, and why.
    pub fn skipped(&self) -> Vec<Refusal> {
        self.checks
            .iter()
            .filter(|c| c.skipped())
            .filter_map(|c| c.result.clone().err())
            .collect()
    }

    /// Estimated duration with `reps` runs per configuration.
    fn estimate(&self, most: bool) -> Duration {
        let rule = crate::spec::RepeatRule {
            min: self.min_runs,
            max: self.max_runs,
            rel_ci: 0.0,
            warmup: 0,
        };
        let (lo, hi) = crate::sequential::runs_per_configuration(&rule);
        let reps = if most { hi } else { lo };
        let runs = match self.search {
            Some((budget, _)) => {
                let (lo, hi) = search_runs(&rule, budget);
                if most { hi } else { lo }
            }
            None => self.configs.len() * (reps + self.warmup_blocks),
        };
        self.per_run * (runs as u32)
    }

    /// The plan as text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        if let Some(c) = &self.target_command {
            o.push_str(&format!("target: {c}\n"));
        }
        for w in &self.workloads {
            o.push_str(&format!("workload: {w}\n"));
        }
        o.push_str("knobs:\n");
        for c in &self.checks {
            let deferred = self.target_unchecked
                && c.knob.parse::<KnobId>().is_ok_and(|id| {
                    matches!(id.scope(), Scope::Thread | Scope::Cgroup)
                        || ordo_sys::knobs::rt_only(&id).is_some()
                });
            match &c.result {
                Ok(_) if deferred => o.push_str(&format!(
                    "  {} = [{}]  levels ok; checked against the target's threads/cgroup when the run starts\n",
                    c.knob,
                    c.levels.join(", ")
                )),
                Ok(cur) if cur.is_empty() => {
                    o.push_str(&format!("  {} = [{}]  ok\n", c.knob, c.levels.join(", ")))
                }
                Ok(cur) => o.push_str(&format!(
                    "  {} = [{}]  ok (now {cur})\n",
                    c.knob,
                    c.levels.join(", ")
                )),
                Err(r) if c.skipped() => o.push_str(&format!("  {r} — SKIPPED\n")),
                Err(r) => o.push_str(&format!("  {r}\n")),
            }
        }
        let (confirm_lo, confirm_hi) =
            crate::sequential::runs_per_configuration(&crate::spec::RepeatRule {
                min: self.min_runs,
                max: self.max_runs,
                rel_ci: 0.0,
                warmup: 0,
            });
        match self.search {
            Some((budget, grid)) => o.push_str(&format!(
                "search: at most {budget} configuration(s) (the baseline included) of a {grid}-point grid, each run {} times, proposed one by one by a Gaussian-process model (expected improvement); then the best against the baseline in fresh interleaved blocks ({} to {} runs each: a pilot, then as many confirmatory runs)\n  {:>3}  {}\n",
                self.min_runs,
                confirm_lo,
                confirm_hi,
                0,
                self.configs.first().map_or("", |c| c.label.as_str())
            )),
            None => {
                o.push_str(&format!("{} configuration(s):\n", self.configs.len()));
                for (i, c) in self.configs.iter().enumerate() {
                    o.push_str(&format!("  {i:>3}  {}\n", c.label));
                }
            }
        }
        let fmt = |d: Duration| {
            let s = d.as_secs();
            format!("{}h{:02}m{:02}s", s / 3600, (s / 60) % 60, s % 60)
        };
        o.push_str(&format!(
            "runs: {} to {} per configuration (+{} warm-up block(s)), ~{:.1}s each: a pilot of {} to {} that sets how many are needed, then as many confirmatory runs, which alone decide significance\nestimated duration: {} to {}\n",
            confirm_lo,
            confirm_hi,
            self.warmup_blocks,
            self.per_run.as_secs_f64(),
            self.min_runs,
            self.max_runs,
            fmt(self.estimate(false)),
            fmt(self.estimate(true))
        ));
        o
    }
}

/// Variables for placeholders: parameters, `{port}`, `{dir}`, `{tmp}`.
fn vars_for(
    spec: &Spec,
    config: &Configuration,
    port: u16,
    tmp: &Path,
) -> BTreeMap<String, String> {
    let mut v: BTreeMap<String, String> = BTreeMap::new();
    for k in &spec.knobs {
        if let KnobId::Param(p) = &k.id {
            let val = config
                .values
                .get(&k.id.to_string())
                .cloned()
                .unwrap_or_else(|| k.levels[0].clone());
            v.insert(p.clone(), val);
        }
    }
    v.insert("port".into(), port.to_string());
    v.insert("dir".into(), spec.dir.display().to_string());
    v.insert("tmp".into(), tmp.display().to_string());
    v
}

fn policy_levels(knobs: &[KnobSpec]) -> Vec<String> {
    knobs
        .iter()
        .find(|k| k.id == KnobId::Thread(ThreadKnob::Policy))
        .map(|k| k.levels.clone())
        .unwrap_or_default()
}

/// Why a run with only the baseline left is refused.
pub const NOTHING_TO_COMPARE: &str = "every knob was skipped: nothing to compare but the baseline (run as root for system-wide knobs)";

/// The spec without the knobs that were skipped.
pub(crate) fn without(spec: &Spec, skipped: &[Refusal]) -> Spec {
    let mut spec = spec.clone();
    for s in skipped {
        spec.knobs.retain(|k| k.id.to_string() != s.knob);
        spec.baseline.remove(&s.knob);
        if let crate::spec::Design::List(list) = &mut spec.design {
            for m in list.iter_mut() {
                m.remove(&s.knob);
            }
        }
    }
    spec
}

/// Check every knob. For targets ordo starts, `live` starts the target once (baseline parameters) so
/// thread and cgroup knobs are checked against its real threads; a dry run never starts anything.
pub fn plan(spec: &Spec, opts: &RunOptions, live: bool) -> Result<Plan, RunError> {
    plan_with(spec, opts, live, None)
}

/// [`plan`], journalling a target it starts through `applier` (when the run itself plans).
pub(crate) fn plan_with(
    spec: &Spec,
    opts: &RunOptions,
    live: bool,
    mut applier: Option<&mut Applier>,
) -> Result<Plan, RunError> {
    let tmp = tempdir()?;
    let baseline = design::configurations(spec)
        .into_iter()
        .next()
        .ok_or_else(|| RunError::Other("no configurations".into()))?;
    let vars = vars_for(spec, &baseline, 0, tmp.path());
    let mut ctx = CheckContext {
        target: Target::default(),
        policy_levels: policy_levels(&spec.knobs),
    };
    // Thread and cgroup knobs act on the target; real-time-only sysctls depend on its threads' policies.
    let needs_target = spec.knobs.iter().any(|k| {
        matches!(k.id.scope(), Scope::Thread | Scope::Cgroup)
            || ordo_sys::knobs::rt_only(&k.id).is_some()
    });
    let mut running = None;
    if needs_target && (live || !spec.target.is_started()) {
        let port = free_port().map_err(|e| RunError::Other(format!("no free port: {e}")))?;
        let vars = vars_for(spec, &baseline, port, tmp.path());
        let mut record = |pid: i32, cmd: &str| match applier.as_deref_mut() {
            Some(a) => a.record_process(pid, cmd).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        let mut t = RunningTarget::start_with(
            &spec.target,
            &vars,
            opts.ordo.as_deref(),
            tmp.path(),
            &mut record,
        )?;
        ctx.target = Target {
            pid: Some(t.pid),
            tids: t
                .threads(&spec.target.threads)
                .into_iter()
                .map(|(t, _)| t)
                .collect(),
        };
        running = Some(t);
    }
    let checker = Checker {
        root: &opts.root,
        threads: opts.threads.as_ref(),
    };
    let mut checks: Vec<KnobCheck> = spec
        .knobs
        .iter()
        .map(|k| KnobCheck {
            knob: k.id.to_string(),
            levels: k.levels.clone(),
            optional: k.optional,
            result: checker.check(&k.id, &k.levels, &ctx),
        })
        .collect();
    if live
        && needs_target
        && ctx.target.tids.is_empty()
        && spec.knobs.iter().any(|k| k.id.scope() == Scope::Thread)
    {
        for c in checks.iter_mut() {
            if let Ok(id) = c.knob.parse::<KnobId>()
                && id.scope() == Scope::Thread
            {
                c.result = Err(Refusal::new(
                    &id,
                    ordo_sys::knobs::RefusalKind::NoEffect,
                    format!(
                        "no thread of the target matches threads = {}",
                        spec.target.threads
                    ),
                ));
            }
        }
    }
    // A cgroup knob on a target that shares ordo's own cgroup would throttle the load generator too.
    if let Some(pid) = ctx.target.pid {
        let mine = std::fs::read_to_string("/proc/self/cgroup").ok();
        let theirs = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok();
        if mine.is_some() && mine == theirs {
            for c in checks.iter_mut() {
                if c.knob.starts_with("cgroup:") && c.result.is_ok() {
                    c.result = Err(Refusal::new(
                        &c.knob
                            .parse::<KnobId>()
                            .unwrap_or(KnobId::Cgroup(c.knob.clone())),
                        ordo_sys::knobs::RefusalKind::NoEffect,
                        "the target is in ordo's own cgroup, so the load generator would be limited as much as the target; start the target in a cgroup of its own (e.g. `systemd-run --scope` in target.command)",
                    ));
                }
            }
        }
    }
    let target_unchecked = needs_target && running.is_none() && spec.target.is_started();
    // Nor can it say whether a real-time-only knob acts on a target that runs real-time by itself
    // (`chrt -r 10 ...`): unless the experiment sets the policy, that is checked when the run starts.
    if target_unchecked && ctx.policy_levels.is_empty() {
        for c in checks.iter_mut() {
            let rt = c
                .knob
                .parse::<KnobId>()
                .is_ok_and(|id| ordo_sys::knobs::rt_only(&id).is_some());
            if rt && matches!(&c.result, Err(r) if r.kind == RefusalKind::NoEffect) {
                c.result = Ok(String::new());
            }
        }
    }
    // The policies the target's threads run with, read while it is alive: a target started as
    // `chrt -r 10 ordo serve` runs SCHED_RR, and read after it stopped every thread looked SCHED_OTHER.
    let found: Vec<String> = ctx
        .target
        .tids
        .iter()
        .filter_map(|&t| opts.threads.get(t, ThreadKnob::Policy).ok())
        .collect();
    drop(running);
    let skipped: Vec<Refusal> = checks
        .iter()
        .filter(|c| c.skipped())
        .filter_map(|c| c.result.clone().err())
        .collect();
    let kept = without(spec, &skipped);
    let configs = design::configurations(&kept);
    // Every configuration that will run, not just each knob's levels (a search's grid is the full
    // factorial, which the level checks cover; its baseline is checked here).
    // A dry run of a started target has not seen its threads' own policy (`chrt -r 10 ...` runs RR):
    // only configurations that set the policy themselves can be judged before the run.
    no_effect_in_configurations(
        &configs,
        (!target_unchecked).then_some(found.as_slice()),
        &mut checks,
    );
    let per_run = spec
        .workloads
        .iter()
        .map(workload::estimate)
        .sum::<Duration>()
        + if spec.target.is_started() {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        };
    Ok(Plan {
        target_unchecked,
        search: match &kept.design {
            Design::Search(s) => Some((
                s.budget,
                kept.knobs
                    .iter()
                    .fold(1usize, |a, k| a.saturating_mul(k.levels.len())),
            )),
            _ => None,
        },
        configs,
        checks,
        target_command: match &spec.target.kind {
            TargetKind::Pid(p) => Some(format!("running process {p}")),
            TargetKind::Name(n) => Some(format!("running processes named `{n}`")),
            _ => command_line(
                &spec.target,
                &vars_for(spec, &baseline, 0, tmp.path()),
                opts.ordo.as_deref(),
            )
            .ok()
            .map(|v| v.join(" ").replace("127.0.0.1:0", "127.0.0.1:{port}")),
        },
        workloads: spec
            .workloads
            .iter()
            .map(|w| {
                format!(
                    "{}: {}",
                    w.name,
                    workload::describe(w, &vars).replace(":0/", ":{port}/")
                )
            })
            .collect(),
        min_runs: spec.repeat.min,
        max_runs: spec.repeat.max,
        warmup_blocks: spec.repeat.warmup,
        per_run,
    })
}

/// Refuse each knob that some configuration would set without effect ([`ordo_sys::knobs::no_effect_in`]),
/// naming those configurations. `found`: the policies the target's threads run with; `None` when unknown
/// (a dry run of a target ordo starts), and then only configurations that set `policy` are judged.
fn no_effect_in_configurations(
    configs: &[Configuration],
    found: Option<&[String]>,
    checks: &mut [KnobCheck],
) {
    let mut bad: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for c in configs {
        let Some(found) = found.or(c.values.contains_key("policy").then_some(&[][..])) else {
            continue;
        };
        for (knob, why) in ordo_sys::knobs::no_effect_in(&c.values, found) {
            bad.entry(knob)
                .or_insert_with(|| (why, Vec::new()))
                .1
                .push(format!("`{}`", c.label));
        }
    }
    for c in checks.iter_mut().filter(|c| c.result.is_ok()) {
        let Some((why, labels)) = bad.get(&c.knob) else {
            continue;
        };
        let Ok(id) = c.knob.parse::<KnobId>() else {
            continue;
        };
        let shown: Vec<&str> = labels.iter().take(3).map(String::as_str).collect();
        c.result = Err(Refusal::new(
            &id,
            RefusalKind::NoEffect,
            format!(
                "{why} in {} configuration(s) ({}{}): it would run there as a silent no-op. Set the policy in every configuration that sets it (for ofat and list designs: [baseline] policy = \"rr:10\")",
                labels.len(),
                shown.join(", "),
                if labels.len() > 3 { ", ..." } else { "" }
            ),
        ));
    }
}

pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn tempdir() -> Result<TempDir, RunError> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_stale_scratch(&std::env::temp_dir()));
    let p = std::env::temp_dir().join(format!(
        "ordo-tune-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&p).map_err(|e| RunError::Other(format!("{}: {e}", p.display())))?;
    Ok(TempDir(p))
}

/// Removes the scratch directories (`ordo-tune-PID-N`) of `ordo tune` processes that are gone: a run
/// removes its own when it ends, but one killed with SIGKILL cannot. A directory whose PID is alive (this
/// process, another run, or an unrelated process that reused the number) is left alone.
fn sweep_stale_scratch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ordo-tune-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Set `flag` on SIGINT or SIGTERM (`ordo_sys::watch_interrupts`: a thread of its own waits for them). Returns once
/// the handlers are registered, so no signal after this call can kill the process before it restores.
pub fn install_signal_flag(flag: Arc<AtomicBool>) {
    if ordo_sys::watch_interrupts("ordo-tune-signal", move |_| {
        flag.store(true, Ordering::SeqCst)
    })
    .is_err()
    {
        tracing::warn!(
            "could not install SIGINT/SIGTERM handlers; a signal will not restore the knobs (use `ordo tune recover`)"
        );
    }
}

fn sample_all(samplers: &mut [ordo_sys::ProcessSampler]) -> Vec<Option<ordo_sys::ProcessSnapshot>> {
    samplers.iter_mut().map(|s| s.sample().ok()).collect()
}

/// The target's share of a run: CPU, switches and run-queue wait, in total and per request.
fn target_metrics(
    before: &[Option<ordo_sys::ProcessSnapshot>],
    after: &[Option<ordo_sys::ProcessSnapshot>],
    requests: f64,
) -> BTreeMap<String, f64> {
    let (mut cpu, mut vol, mut invol, mut delay, mut any) = (0u64, 0u64, 0u64, 0u64, false);
    for (b, a) in before.iter().zip(after) {
        if let (Some(b), Some(a)) = (b, a) {
            let d = a.delta(b);
            cpu += d.best_cpu_ns();
            vol += d.voluntary_switches;
            invol += d.involuntary_switches;
            delay += d.run_delay_ns;
            any = true;
        }
    }
    let mut m = BTreeMap::new();
    if !any {
        return m;
    }
    m.insert("target.cpu_s".into(), cpu as f64 / 1e9);
    m.insert("target.voluntary_switches".into(), vol as f64);
    m.insert("target.involuntary_switches".into(), invol as f64);
    m.insert("target.run_delay_ms".into(), delay as f64 / 1e6);
    if requests > 0.0 {
        m.insert("target.cpu_us_per_req".into(), cpu as f64 / 1e3 / requests);
        m.insert("target.vcsw_per_req".into(), vol as f64 / requests);
        m.insert("target.ivcsw_per_req".into(), invol as f64 / requests);
        m.insert(
            "target.run_delay_us_per_req".into(),
            delay as f64 / 1e3 / requests,
        );
    }
    m
}

/// The order knobs are applied in: policy first (so RR-only knobs act on RR threads), then the other
/// per-thread knobs, cgroup, system-wide; parameters are not applied (they are in the command).
fn apply_order(values: &BTreeMap<String, String>) -> Vec<(KnobId, String)> {
    let mut v: Vec<(KnobId, String)> = values
        .iter()
        .filter_map(|(k, val)| k.parse::<KnobId>().ok().map(|id| (id, val.clone())))
        .filter(|(id, _)| id.scope() != Scope::Param)
        .collect();
    v.sort_by_key(|(id, _)| match id {
        KnobId::Thread(ThreadKnob::Policy) => 0,
        KnobId::Thread(_) => 1,
        KnobId::Cgroup(_) => 2,
        _ => 3,
    });
    v
}

pub(crate) fn restore(applier: &mut Applier) -> Result<Vec<RestoreNote>, RunError> {
    let notes = applier.restore();
    if notes.iter().any(RestoreNote::failed) {
        return Err(RunError::Restore {
            journal: applier.journal_path().display().to_string(),
            notes: notes.iter().map(|n| n.to_string()).collect(),
        });
    }
    Ok(notes)
}

/// One run of one configuration: start the target, apply the knobs, run every workload, sample the
/// target, stop it. The caller restores the knobs.
pub(crate) fn one_run(
    spec: &Spec,
    config: &Configuration,
    opts: &RunOptions,
    applier: &mut Applier,
    tmp: &Path,
) -> Result<BTreeMap<String, f64>, RunError> {
    let port = free_port().map_err(|e| RunError::Other(format!("no free port: {e}")))?;
    let vars = vars_for(spec, config, port, tmp);
    let mut target = RunningTarget::start_with(
        &spec.target,
        &vars,
        opts.ordo.as_deref(),
        tmp,
        &mut recorder(applier),
    )?;
    let tids: Vec<i32> = target
        .threads(&spec.target.threads)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    let tgt = Target {
        pid: Some(target.pid),
        tids,
    };
    for (id, value) in apply_order(&config.values) {
        applier.apply(&id, &tgt, &value)?;
    }
    let mut samplers: Vec<ordo_sys::ProcessSampler> = target
        .pids
        .iter()
        .filter_map(|&p| ordo_sys::ProcessSampler::new(p).ok())
        .collect();
    let before = sample_all(&mut samplers);
    let mut metrics = BTreeMap::new();
    let mut requests = 0.0;
    for w in &spec.workloads {
        let m = workload::run_with(w, &vars, &opts.stop, &mut recorder(applier))?;
        requests += m.get("requests").copied().unwrap_or(0.0);
        for (k, v) in m {
            metrics.insert(format!("{}.{k}", w.name), v);
        }
    }
    let after = sample_all(&mut samplers);
    metrics.extend(target_metrics(&before, &after, requests));
    if spec.target.is_started() && !target.alive() {
        return Err(RunError::Other("the target exited during the run".into()));
    }
    target.stop();
    Ok(metrics)
}

/// Journals each process a run starts (target, external load generator), so `recover` can stop it.
fn recorder(applier: &mut Applier) -> impl FnMut(i32, &str) -> Result<(), String> + '_ {
    |pid, cmd| applier.record_process(pid, cmd).map_err(|e| e.to_string())
}

/// The experiment file's path as stored with the experiment: absolute, so that `resume` from another
/// working directory resolves the file's relative paths (`{dir}`, a target `config`, a workload `mix`)
/// against the file's directory, not its own.
pub(crate) fn stored_spec_path(file: &Path) -> String {
    std::path::absolute(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string()
}

/// Runs per configuration-equivalent of a search, at least and at most (for the plan's estimate): every
/// trial runs `min` times, the re-check runs two configurations through a pilot and its confirmatory blocks.
pub(crate) fn search_runs(rule: &crate::spec::RepeatRule, budget: usize) -> (usize, usize) {
    let (lo, hi) = crate::sequential::runs_per_configuration(rule);
    (budget * rule.min + 2 * lo, budget * rule.min + 2 * hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ExperimentMeta, Store};
    use crate::{resume, run};

    #[test]
    fn scratch_dirs_of_gone_processes_are_swept_and_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let mine = std::process::id();
        for n in [
            format!("ordo-tune-{gone}-0"),
            format!("ordo-tune-{mine}-3"),
            "ordo-tune-x-1".into(),
            "other-1-2".into(),
        ] {
            std::fs::create_dir(d.path().join(&n)).unwrap();
            std::fs::write(d.path().join(&n).join("target.stderr"), "x").unwrap();
        }
        sweep_stale_scratch(d.path());
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let want_gone = !Path::new(&format!("/proc/{gone}")).exists();
        let mut want = vec![
            format!("ordo-tune-{mine}-3"),
            "ordo-tune-x-1".to_string(),
            "other-1-2".to_string(),
        ];
        if !want_gone {
            // (the number was reused at once by another process: then it is rightly kept)
            want.push(format!("ordo-tune-{gone}-0"));
        }
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn without_root_system_knobs_are_skipped_and_optional_ones_dropped() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("proc/sys/vm")).unwrap();
        std::fs::write(root.join("proc/sys/vm/swappiness"), "60\n").unwrap();
        let text = format!(
            r#"
[target]
pid = {pid}
[workload]
url = "http://127.0.0.1:1/"
[knobs]
"sysctl:vm.swappiness" = [10, 20]
"debugfs:base_slice_ns" = {{ levels = [1000000], optional = true }}
nice = [0, 5]
"#,
            pid = std::process::id()
        );
        let spec = Spec::parse(&text, Path::new("e.toml"), d.path()).unwrap();
        let opts = RunOptions::new(
            d.path().join("t.db"),
            d.path().join("j"),
            SysRoot::at(&root).with_privileged(false),
        );
        let plan = plan(&spec, &opts, false).unwrap();
        assert!(plan.refusals().is_empty(), "{:?}", plan.refusals());
        let skipped: Vec<String> = plan.skipped().iter().map(|r| r.knob.clone()).collect();
        assert_eq!(
            skipped,
            vec!["sysctl:vm.swappiness", "debugfs:base_slice_ns"]
        );
        // Only the nice levels remain: baseline + 2.
        assert_eq!(plan.configs.len(), 3);
        assert!(plan.render().contains("SKIPPED"));
        // Nothing was written.
        assert_eq!(
            std::fs::read_to_string(root.join("proc/sys/vm/swappiness")).unwrap(),
            "60\n"
        );
        assert!(!opts.db.exists());
    }

    #[test]
    fn a_list_design_left_with_only_the_baseline_is_refused() {
        // tuned-profiles.toml without root: every sysctl is skipped, the list's entries all become the
        // baseline; running it would compare nothing.
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("proc/sys/vm")).unwrap();
        std::fs::write(root.join("proc/sys/vm/swappiness"), "60\n").unwrap();
        let text = format!(
            r#"
[target]
pid = {pid}
[workload]
url = "http://127.0.0.1:1/"
[knobs]
"sysctl:vm.swappiness" = [10, 20]
[design]
kind = "list"
configurations = [{{ "sysctl:vm.swappiness" = 10 }}, {{ "sysctl:vm.swappiness" = 20 }}]
"#,
            pid = std::process::id()
        );
        let spec = Spec::parse(&text, Path::new("e.toml"), d.path()).unwrap();
        let opts = RunOptions::new(
            d.path().join("t.db"),
            d.path().join("j"),
            SysRoot::at(&root).with_privileged(false),
        );
        assert_eq!(plan(&spec, &opts, false).unwrap().configs.len(), 1);
        match run(&spec, &opts) {
            Err(RunError::Other(m)) => assert_eq!(m, NOTHING_TO_COMPARE),
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
        assert!(!opts.db.exists());
        assert_eq!(
            std::fs::read_to_string(root.join("proc/sys/vm/swappiness")).unwrap(),
            "60\n"
        );
    }

    /// Issue 13 defect 2: with `ofat` and `list` designs `sched_rr_timeslice_ms` ran in configurations
    /// whose target threads were all SCHED_OTHER, because only the knob's levels were checked.
    #[test]
    fn every_configuration_is_checked_so_rr_timeslice_never_runs_without_rr_threads() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        for (rel, v) in [
            ("proc/sys/kernel/sched_rr_timeslice_ms", "100\n"),
            ("proc/sys/kernel/osrelease", "6.18.0\n"),
        ] {
            std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(rel), v).unwrap();
        }
        let plan_of = |design: &str| {
            let text = format!(
                r#"
[target]
pid = {pid}
[workload]
url = "http://127.0.0.1:1/"
[knobs]
policy = ["rr:10"]
"sysctl:kernel.sched_rr_timeslice_ms" = [5, 50]
{design}
"#,
                pid = std::process::id()
            );
            let spec = Spec::parse(&text, Path::new("e.toml"), d.path()).unwrap();
            let opts = RunOptions::new(
                d.path().join("t.db"),
                d.path().join("j"),
                SysRoot::at(&root),
            );
            plan(&spec, &opts, false).unwrap()
        };
        // This test process's threads are SCHED_OTHER.
        for design in [
            "[design]\nkind = \"ofat\"",
            "[design]\nconfigurations = [{ \"sysctl:kernel.sched_rr_timeslice_ms\" = 5 }, { policy = \"rr:10\", \"sysctl:kernel.sched_rr_timeslice_ms\" = 50 }]",
        ] {
            let refused = plan_of(design).refusals();
            assert_eq!(refused.len(), 1, "{design}: {refused:?}");
            let r = &refused[0];
            assert_eq!(r.knob, "sysctl:kernel.sched_rr_timeslice_ms");
            assert_eq!(r.kind, RefusalKind::NoEffect);
            assert!(r.reason.contains("`sched_rr_timeslice_ms=5`"), "{r}");
            assert!(r.reason.contains("other"), "{r}");
        }
        // With the policy set in every configuration (the baseline's carries into ofat), it can act.
        assert!(
            plan_of("[baseline]\npolicy = \"rr:10\"\n[design]\nkind = \"ofat\"")
                .refusals()
                .is_empty()
        );
        // The full factorial sets the policy everywhere.
        assert!(plan_of("").refusals().is_empty());
    }

    /// Threads that run SCHED_RR for as long as they exist, as under `chrt -r 10`, without CAP_SYS_NICE.
    struct RoundRobinWhileAlive;

    impl ThreadOps for RoundRobinWhileAlive {
        fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError> {
            if !self.alive(tid) {
                return Err(KnobError::Thread {
                    tid,
                    what: "get",
                    source: std::io::ErrorKind::NotFound.into(),
                });
            }
            Ok(match knob {
                ThreadKnob::Policy => "rr:10".into(),
                ThreadKnob::Nice => "0".into(),
                ThreadKnob::Slice => "3000000".into(),
                ThreadKnob::Affinity => "0".into(),
            })
        }
        fn set(&self, _: i32, _: ThreadKnob, _: &str) -> Result<(), KnobError> {
            Ok(())
        }
        fn alive(&self, tid: i32) -> bool {
            Path::new(&format!("/proc/{tid}")).exists()
        }
    }

    /// Issue 24: a target started as `chrt -r 10 ordo serve` was refused as SCHED_OTHER: its threads'
    /// policies were read after the target started for the checks had been stopped.
    #[test]
    fn a_started_real_time_target_is_recognised_while_it_runs() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        for (rel, v) in [
            ("proc/sys/kernel/sched_rr_timeslice_ms", "100\n"),
            ("proc/sys/kernel/osrelease", "6.18.0\n"),
        ] {
            std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(rel), v).unwrap();
        }
        let text = r#"
[target]
command = "sleep 30"
[workload]
url = "http://127.0.0.1:1/"
[knobs]
"sysctl:kernel.sched_rr_timeslice_ms" = [5, 50]
"#;
        let spec = Spec::parse(text, Path::new("e.toml"), d.path()).unwrap();
        let mut opts = RunOptions::new(
            d.path().join("t.db"),
            d.path().join("j"),
            SysRoot::at(&root),
        );
        opts.threads = Arc::new(RoundRobinWhileAlive);
        let plan = plan(&spec, &opts, true).unwrap();
        assert!(plan.refusals().is_empty(), "{:?}", plan.refusals());
        // A dry run starts nothing: it cannot know the target's own policy, so it does not refuse.
        let dry = super::plan(&spec, &opts, false).unwrap();
        assert!(dry.refusals().is_empty(), "{:?}", dry.refusals());
        assert!(
            dry.render()
                .contains("checked against the target's threads/cgroup when the run starts"),
            "{}",
            dry.render()
        );
        // The same threads under SCHED_OTHER are refused (the check can still say no).
        let fake = ordo_sys::knobs::FakeThreads::new();
        opts.threads = Arc::new(fake);
        let refused = super::plan(&spec, &opts, true).unwrap().refusals();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].kind, RefusalKind::NoEffect);
    }

    #[test]
    fn apply_order_puts_policy_first_and_skips_params() {
        let v: BTreeMap<String, String> = [
            (
                "sysctl:kernel.sched_rr_timeslice_ms".to_string(),
                "5".to_string(),
            ),
            ("policy".to_string(), "rr:10".to_string()),
            ("param:threads".to_string(), "4".to_string()),
            ("nice".to_string(), "5".to_string()),
        ]
        .into();
        let order: Vec<String> = apply_order(&v)
            .into_iter()
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(
            order,
            vec!["policy", "nice", "sysctl:kernel.sched_rr_timeslice_ms"]
        );
    }

    #[test]
    fn the_stored_spec_path_is_absolute_so_resume_finds_the_files_next_to_it() {
        // `ordo tune run exp.toml` in the file's directory, resumed from elsewhere: the stored path must
        // lead back to that directory (it was "exp.toml", which resume read as ./exp.toml of its own cwd).
        let stored = PathBuf::from(stored_spec_path(Path::new("exp.toml")));
        assert!(stored.is_absolute(), "{}", stored.display());
        assert_eq!(
            stored.parent().unwrap(),
            std::env::current_dir().unwrap().as_path()
        );
        assert_eq!(
            stored_spec_path(Path::new("/a/b/exp.toml")),
            "/a/b/exp.toml"
        );
    }

    fn resume_opts(dir: &Path, db: &str) -> RunOptions {
        RunOptions::new(dir.join(db), dir.join("j"), SysRoot::at(dir.join("root")))
    }

    fn resume_err(opts: &RunOptions) -> RunError {
        match resume(opts) {
            Err(e) => e,
            Ok(_) => panic!("resume of {} should fail", opts.db.display()),
        }
    }

    #[test]
    fn resume_refuses_a_missing_or_foreign_file_without_touching_it_and_says_when_all_is_finished()
    {
        let d = tempfile::tempdir().unwrap();
        // Missing: a usage error naming the file; no database is created.
        let opts = resume_opts(d.path(), "missing.db");
        let e = resume_err(&opts);
        assert!(e.is_usage(), "{e}");
        assert!(
            e.to_string().contains("missing.db: no such database"),
            "{e}"
        );
        assert!(!opts.db.exists());

        // Not SQLite: a usage error naming the file, which is left as it was.
        let opts = resume_opts(d.path(), "notes.db");
        std::fs::write(&opts.db, "text\n").unwrap();
        let e = resume_err(&opts);
        assert!(e.is_usage(), "{e}");
        assert!(
            e.to_string().contains("notes.db: not an ordo tune store"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&opts.db).unwrap(), "text\n");

        // A store whose experiments are all finished: nothing to resume (exit 1, not a usage error).
        let opts = resume_opts(d.path(), "done.db");
        let mut store = Store::open(&opts.db).unwrap();
        let e = resume_err(&opts);
        assert!(!e.is_usage());
        assert!(
            e.to_string()
                .contains("done.db: nothing to resume — it holds no experiments"),
            "{e}"
        );
        let meta = ExperimentMeta {
            knobs: vec![("param:x".into(), vec!["1".into(), "2".into()])],
            objective: "maximize".into(),
            score_terms: vec![("web.throughput".into(), 1.0)],
            scale_knob: None,
            scale_base: None,
            min_runs: 3,
            max_runs: 3,
            rel_ci: 0.02,
            warmup_blocks: 0,
            fixed_work: false,
            notes: Vec::new(),
            ..Default::default()
        };
        let id = store
            .create_experiment("e", "e.toml", "text", 1, &meta, &[], None)
            .unwrap();
        store.set_status(id, "finished").unwrap();
        let e = resume_err(&opts);
        assert!(!e.is_usage());
        assert!(
            e.to_string().contains(
                "nothing to resume — every experiment in it is finished (the newest is 1"
            ),
            "{e}"
        );
    }
}
