//! One `ordo tune run` as an explicit state machine (it was one 300-line function): prepare (checks,
//! refusals, skipped knobs, the machine-wide knob locks), open the experiment in the store (new or
//! resumed), then step through phases — randomized blocks over a fixed design, or a search that proposes
//! one trial at a time followed by the re-check of its best against the baseline — and finish (restore,
//! status, analysis). Every run goes through [`Session::run_one`], which restores the knobs after it
//! whatever happened and stores it in its own transaction.

use std::collections::{BTreeMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ordo_sys::knobs::{Applier, KnobId, RestoreNote, Scope, Target};

use crate::analysis::{self, score_of};
use crate::design::{self, Configuration};
use crate::runner::{
    NOTHING_TO_COMPARE, Outcome, RunError, RunOptions, TempDir, one_run, plan_with, restore,
    stored_spec_path, tempdir, without,
};
use crate::search::{Searcher, Space, Trial};
use crate::sequential::{self, Confirm, Next};
use crate::spec::{Design, Spec};
use crate::store::{ExperimentMeta, NewRun, RecheckMeta, SearchMeta, Store, text_hash};
use crate::target::RunningTarget;
use crate::workload::{self, WorkloadError};

/// Where an experiment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Randomized blocks over the design's configurations, from this block on.
    Design {
        block: usize,
    },
    /// The search runs its open trial, or proposes the next one.
    Search,
    /// The search's best against the baseline in fresh interleaved blocks, from this block on.
    Recheck {
        block: usize,
    },
    Done {
        interrupted: bool,
    },
}

/// How a block (or a run) ended.
enum Ended {
    Completed,
    Interrupted,
}

/// The checked experiment, ready to run.
pub(crate) struct Prepared {
    spec: Spec,
    configs: Vec<Configuration>,
    notes: Vec<String>,
    search: Option<Searcher>,
}

/// Check everything, refuse or skip knobs, and take the machine-wide locks of every knob the experiment
/// changes (before anything runs, so a second experiment on one of them is refused up front).
pub(crate) fn prepare(
    spec: &Spec,
    opts: &RunOptions,
    applier: &mut Applier,
) -> Result<Prepared, RunError> {
    let plan = plan_with(spec, opts, true, Some(applier))?;
    let refusals = plan.refusals();
    if !refusals.is_empty() {
        return Err(RunError::Refused(refusals));
    }
    // Not root: drop system-wide knobs (never half-applied) and say so; likewise optional knobs this
    // machine lacks.
    let skipped = plan.skipped();
    let spec = without(spec, &skipped);
    let notes: Vec<String> = skipped
        .iter()
        .map(|s| {
            if s.kind == ordo_sys::knobs::RefusalKind::NotPrivileged {
                s.to_string() // already says "skipped"
            } else {
                format!("{s} — skipped")
            }
        })
        .collect();
    if opts.print {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    let configs = design::configurations(&spec);
    let search = match &spec.design {
        Design::Search(s) => Some(Searcher::new(
            Space::new(
                &spec
                    .knobs
                    .iter()
                    .map(|k| (k.id.to_string(), k.levels.clone()))
                    .collect::<Vec<_>>(),
            ),
            s.budget,
            s.initial,
            s.seed,
            spec.score.objective == crate::spec::Objective::Maximize,
        )),
        _ => None,
    };
    // With every knob skipped (a list design keeps its entries, now all equal to the baseline) there
    // is only the baseline left: running it over and over compares nothing.
    if spec.knobs.is_empty() || (search.is_none() && configs.len() < 2) {
        return Err(RunError::Other(NOTHING_TO_COMPARE.into()));
    }
    reserve(&spec, opts, applier)?;
    // The target started for the checks is stopped; its journal entry goes with this restore.
    restore(applier)?;
    Ok(Prepared {
        spec,
        configs,
        notes,
        search,
    })
}

/// Lock every knob the experiment changes: system-wide ones by file; for a target ordo did not start
/// (pid, name), its cgroup's files and its processes' threads.
fn reserve(spec: &Spec, opts: &RunOptions, applier: &mut Applier) -> Result<(), RunError> {
    for k in spec.knobs.iter().filter(|k| k.id.scope() == Scope::System) {
        applier.reserve(&k.id, &Target::default(), false)?;
    }
    let shared_knobs: Vec<&KnobId> = spec
        .knobs
        .iter()
        .map(|k| &k.id)
        .filter(|id| matches!(id.scope(), Scope::Thread | Scope::Cgroup))
        .collect();
    if spec.target.is_started() || shared_knobs.is_empty() {
        return Ok(());
    }
    let tmp = tempdir()?;
    let found = RunningTarget::start(
        &spec.target,
        &BTreeMap::new(),
        opts.ordo.as_deref(),
        tmp.path(),
    )?;
    for id in shared_knobs {
        let pids: &[i32] = if id.scope() == Scope::Cgroup {
            std::slice::from_ref(&found.pid)
        } else {
            &found.pids
        };
        for &pid in pids {
            applier.reserve(
                id,
                &Target {
                    pid: Some(pid),
                    tids: Vec::new(),
                },
                true,
            )?;
        }
    }
    Ok(())
}

struct Printer {
    bar: Option<indicatif::ProgressBar>,
    print: bool,
}

impl Printer {
    fn line(&self, s: &str) {
        if !self.print {
            return;
        }
        match &self.bar {
            Some(b) => b.println(s),
            None => println!("{s}"),
        }
    }
}

/// An experiment being run.
pub(crate) struct Session<'o> {
    opts: &'o RunOptions,
    spec: Spec,
    store: Store,
    experiment: i64,
    meta: ExperimentMeta,
    resumed: bool,
    configs: Vec<Configuration>,
    search: Option<Searcher>,
    /// (block, configuration) of every stored run.
    done: HashSet<(usize, usize)>,
    /// Per configuration: (block, score) of every measured run, stored ones first.
    scores: Vec<Vec<(usize, f64)>>,
    printer: Printer,
    session_runs: usize,
    tmp: TempDir,
}

fn objective_name(spec: &Spec) -> String {
    match spec.score.objective {
        crate::spec::Objective::Maximize => "maximize".into(),
        crate::spec::Objective::Minimize => "minimize".into(),
    }
}

fn design_name(d: &Design) -> &'static str {
    match d {
        Design::Full => "full",
        Design::OneAtATime => "ofat",
        Design::List(_) => "list",
        Design::Random { .. } => "random",
        Design::Search(_) => "search",
    }
}

impl<'o> Session<'o> {
    /// Open the experiment: resume the unfinished one the same file started, or create it.
    pub(crate) fn open(p: Prepared, opts: &'o RunOptions) -> Result<Session<'o>, RunError> {
        let Prepared {
            spec,
            configs,
            notes,
            search,
        } = p;
        let mut store = Store::open(&opts.db)?;
        let (experiment, resumed) = match store.resumable(&text_hash(&spec.text))? {
            Some(id) => {
                let data = store.load(id)?;
                let stored: Vec<&str> = data
                    .configurations
                    .iter()
                    .map(|c| c.label.as_str())
                    .collect();
                let now: Vec<&str> = configs.iter().map(|c| c.label.as_str()).collect();
                // A search stores its trials as it goes: the baseline must match and the rest be points
                // of the same space.
                let same = match &search {
                    None => stored == now,
                    Some(s) => {
                        stored.first() == now.first()
                            && data.configurations.iter().skip(1).all(|c| {
                                c.label.starts_with("re-check: ")
                                    || s.space.point_of(&c.values).is_some()
                            })
                    }
                };
                if !same {
                    return Err(RunError::Mismatch {
                        id,
                        db: opts.db.display().to_string(),
                        file: spec.file.display().to_string(),
                    });
                }
                store.set_status(id, "running")?;
                (id, true)
            }
            None => {
                let meta = ExperimentMeta {
                    knobs: spec
                        .knobs
                        .iter()
                        .map(|k| (k.id.to_string(), k.levels.clone()))
                        .collect(),
                    objective: objective_name(&spec),
                    score_terms: spec.score.terms.clone(),
                    scale_knob: spec.scale_knob.clone(),
                    scale_base: spec.scale_base,
                    min_runs: spec.repeat.min,
                    max_runs: spec.repeat.max,
                    rel_ci: spec.repeat.rel_ci,
                    warmup_blocks: spec.repeat.warmup,
                    fixed_work: spec.workloads.first().is_some_and(workload::fixed_work),
                    notes: notes.clone(),
                    design: Some(design_name(&spec.design).into()),
                    search: search.as_ref().map(|s| SearchMeta {
                        budget: s.budget,
                        initial: s.initial,
                        seed: s.seed,
                        grid: s.space.size(),
                        recheck: None,
                    }),
                    confirmatory: true,
                    confirm: None,
                    warnings: Vec::new(),
                };
                let fp = serde_json::to_value(ordo_sys::fingerprint::collect()).ok();
                let id = store.create_experiment(
                    &spec.name,
                    &stored_spec_path(&spec.file),
                    &spec.text,
                    spec.seed,
                    &meta,
                    &configs,
                    fp.as_ref(),
                )?;
                (id, false)
            }
        };
        let existing = store.load(experiment)?;
        let meta = existing.experiment.meta.clone();
        // A search's configurations are the ones stored so far (the baseline first).
        let configs: Vec<Configuration> = if search.is_some() {
            existing
                .configurations
                .iter()
                .map(|c| Configuration {
                    label: c.label.clone(),
                    values: c.values.clone(),
                    is_baseline: c.is_baseline,
                })
                .collect()
        } else {
            configs
        };
        let done: HashSet<(usize, usize)> =
            existing.runs.iter().map(|r| (r.block, r.config)).collect();
        let scores: Vec<Vec<(usize, f64)>> = (0..configs.len())
            .map(|i| {
                existing
                    .runs
                    .iter()
                    .filter(|r| r.config == i && !r.warmup && r.ok)
                    .filter_map(|r| r.metrics.get("score").map(|&s| (r.block, s)))
                    .collect()
            })
            .collect();
        let n = configs.len();
        let (min_runs, _) = sequential::runs_per_configuration(&spec.repeat);
        let expected = match &search {
            Some(s) => s.budget * spec.repeat.min + 2 * min_runs,
            None => n * (spec.repeat.warmup + min_runs),
        };
        let bar = (opts.progress && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(expected as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} runs  {elapsed_precise} elapsed, ETA {eta_precise}  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_position(done.len() as u64);
            b.enable_steady_tick(Duration::from_millis(500));
            b
        });
        let printer = Printer {
            bar,
            print: opts.print,
        };
        if resumed {
            printer.line(&format!(
                "resuming experiment {experiment} ({} run(s) already stored)",
                done.len()
            ));
        } else if let Some(s) = &search {
            printer.line(&format!(
                "experiment {experiment}: search over {} configuration(s) with at most {} trials of {} runs each, then a re-check of the best against the baseline",
                s.space.size(),
                s.budget,
                spec.repeat.min
            ));
        } else {
            printer.line(&format!(
                "experiment {experiment}: {} configuration(s), {} to {} runs each",
                n, spec.repeat.min, spec.repeat.max
            ));
        }
        Ok(Session {
            opts,
            spec,
            store,
            experiment,
            meta,
            resumed,
            configs,
            search,
            done,
            scores,
            printer,
            session_runs: 0,
            tmp: tempdir()?,
        })
    }

    /// The phase to start (or resume) in.
    pub(crate) fn first_phase(&self) -> Phase {
        match (
            &self.search,
            self.meta.search.as_ref().and_then(|s| s.recheck.as_ref()),
        ) {
            (Some(_), Some(_)) => Phase::Recheck { block: 0 },
            (Some(_), None) => Phase::Search,
            (None, _) => Phase::Design { block: 0 },
        }
    }

    /// Take one step.
    pub(crate) fn step(&mut self, phase: Phase, applier: &mut Applier) -> Result<Phase, RunError> {
        match phase {
            Phase::Design { block } => self.design_block(block, applier),
            Phase::Search => self.search_step(applier),
            Phase::Recheck { block } => self.recheck_block(block, applier),
            done @ Phase::Done { .. } => Ok(done),
        }
    }

    fn design_block(&mut self, block: usize, applier: &mut Applier) -> Result<Phase, RunError> {
        let members: Vec<usize> = (0..self.configs.len()).collect();
        let warm = match sequential::next(
            block,
            &self.spec.repeat,
            &self.scores,
            self.meta.confirm.as_ref(),
        ) {
            Next::Done => return Ok(Phase::Done { interrupted: false }),
            Next::StartConfirm(c) => {
                self.meta.confirm = Some(c);
                self.store.update_meta(self.experiment, &self.meta)?;
                self.confirm_line(c);
                return Ok(Phase::Design { block });
            }
            Next::Run { warm } => warm,
        };
        Ok(match self.run_block(&members, block, warm, applier)? {
            Ended::Completed => Phase::Design { block: block + 1 },
            Ended::Interrupted => Phase::Done { interrupted: true },
        })
    }

    /// Say that the pilot is over and how many confirmatory blocks follow.
    fn confirm_line(&self, c: Confirm) {
        self.printer.line(&format!(
            "pilot done after {} block(s); {} confirmatory block(s) follow, and only their runs decide significance",
            c.from - self.spec.repeat.warmup.min(c.from),
            c.blocks
        ));
        if let Some(b) = &self.printer.bar {
            b.set_length(
                b.length()
                    .unwrap_or(0)
                    .max(self.done.len() as u64 + (c.blocks * self.configs.len()) as u64),
            );
        }
    }

    fn recheck_block(&mut self, block: usize, applier: &mut Applier) -> Result<Phase, RunError> {
        let Some(r) = self.meta.search.as_ref().and_then(|s| s.recheck.clone()) else {
            return Ok(Phase::Done { interrupted: false });
        };
        let members = [r.baseline, r.candidate];
        let scores: Vec<Vec<(usize, f64)>> =
            members.iter().map(|&i| self.scores[i].clone()).collect();
        let rule = crate::spec::RepeatRule {
            warmup: 0,
            ..self.spec.repeat.clone()
        };
        match sequential::next(block, &rule, &scores, r.confirm.as_ref()) {
            Next::Done => return Ok(Phase::Done { interrupted: false }),
            Next::StartConfirm(c) => {
                if let Some(rc) = self.meta.search.as_mut().and_then(|s| s.recheck.as_mut()) {
                    rc.confirm = Some(c);
                }
                self.store.update_meta(self.experiment, &self.meta)?;
                self.printer.line(&format!(
                    "re-check: pilot done after {block} block(s); {} confirmatory block(s) follow, and only their runs decide significance",
                    c.blocks
                ));
                return Ok(Phase::Recheck { block });
            }
            Next::Run { .. } => {}
        }
        Ok(match self.run_block(&members, block, false, applier)? {
            Ended::Completed => Phase::Recheck { block: block + 1 },
            Ended::Interrupted => Phase::Done { interrupted: true },
        })
    }

    /// The trials so far, as the searcher sees them.
    fn trials(&self, s: &Searcher) -> Vec<Trial> {
        self.configs
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.label.starts_with("re-check: "))
            .map(|(i, c)| Trial {
                point: s.space.point_of(&c.values),
                score: (!self.scores[i].is_empty()).then(|| {
                    crate::stats::mean(&self.scores[i].iter().map(|&(_, v)| v).collect::<Vec<_>>())
                }),
            })
            .collect()
    }

    /// Finish the open trial (each trial runs `repeat.min` times, one run per block), or propose the
    /// next, or — the budget spent — start the re-check of the best.
    fn search_step(&mut self, applier: &mut Applier) -> Result<Phase, RunError> {
        // Taken out and put back (not cloned) so its hyperparameter cache lives on between steps.
        let Some(searcher) = self.search.take() else {
            return Ok(Phase::Done { interrupted: false });
        };
        let step = self.search_step_with(&searcher, applier);
        self.search = Some(searcher);
        step
    }

    fn search_step_with(
        &mut self,
        searcher: &Searcher,
        applier: &mut Applier,
    ) -> Result<Phase, RunError> {
        let min = self.spec.repeat.min;
        if let Some(open) =
            (0..self.configs.len()).find(|&i| (0..min).any(|b| !self.done.contains(&(b, i))))
        {
            let block = (0..min)
                .find(|&b| !self.done.contains(&(b, open)))
                .unwrap_or(0);
            return Ok(match self.run_block(&[open], block, false, applier)? {
                Ended::Completed => Phase::Search,
                Ended::Interrupted => Phase::Done { interrupted: true },
            });
        }
        let trials = self.trials(searcher);
        if trials.len() >= 2 && trials.iter().all(|t| t.score.is_none()) {
            let _ = self.store.set_status(self.experiment, "failed");
            return Err(RunError::Other(format!(
                "every run of the first {} trials failed; stopping (see the lines above)",
                trials.len()
            )));
        }
        if let Some(point) = searcher.suggest(&trials) {
            let values = searcher.space.values(&point);
            let order: Vec<String> = self.spec.knobs.iter().map(|k| k.id.to_string()).collect();
            let c = Configuration {
                label: design::label_of(&values, &order),
                values,
                is_baseline: false,
            };
            self.add_configuration(c)?;
            return Ok(Phase::Search);
        }
        self.start_recheck(searcher, &trials)
    }

    fn add_configuration(&mut self, c: Configuration) -> Result<usize, RunError> {
        let idx = self.configs.len();
        self.store.add_configuration(self.experiment, idx, &c)?;
        self.configs.push(c);
        self.scores.push(Vec::new());
        Ok(idx)
    }

    /// The best trial against the baseline, as two new configurations run in fresh interleaved blocks: the
    /// search's own runs of its best are the luckiest of many and overstate its gain.
    fn start_recheck(&mut self, searcher: &Searcher, trials: &[Trial]) -> Result<Phase, RunError> {
        let base = self.configs.iter().position(|c| c.is_baseline).unwrap_or(0);
        let best = searcher.best(trials).unwrap_or(base);
        if best == base {
            self.printer
                .line("search: the baseline is the best point tried; nothing to re-check");
            return Ok(Phase::Done { interrupted: false });
        }
        let label = self.configs[best].label.clone();
        self.printer.line(&format!(
            "search: {} trial(s) done; best `{label}`, re-checked against the baseline in fresh interleaved blocks",
            trials.len()
        ));
        let b = Configuration {
            label: "re-check: baseline".into(),
            values: self.configs[base].values.clone(),
            is_baseline: false,
        };
        let c = Configuration {
            label: format!("re-check: {label}"),
            values: self.configs[best].values.clone(),
            is_baseline: false,
        };
        let baseline = self.add_configuration(b)?;
        let candidate = self.add_configuration(c)?;
        if let Some(s) = self.meta.search.as_mut() {
            s.recheck = Some(RecheckMeta {
                best,
                baseline,
                candidate,
                confirm: None,
            });
        }
        self.store.update_meta(self.experiment, &self.meta)?;
        Ok(Phase::Recheck { block: 0 })
    }

    /// One block: each member once, in the block's seeded order; runs already stored are skipped.
    fn run_block(
        &mut self,
        members: &[usize],
        block: usize,
        warm: bool,
        applier: &mut Applier,
    ) -> Result<Ended, RunError> {
        if let Some(b) = &self.printer.bar {
            b.set_length(
                b.length()
                    .unwrap_or(0)
                    .max(self.done.len() as u64 + members.len() as u64),
            );
        }
        let (mut attempted, mut failures) = (0, 0);
        for i in design::block_order(members.len(), self.spec.seed, block) {
            let idx = members[i];
            if self.done.contains(&(block, idx)) {
                continue;
            }
            if self.opts.stop.load(Ordering::SeqCst)
                || self.opts.run_limit.is_some_and(|l| self.session_runs >= l)
            {
                return Ok(Ended::Interrupted);
            }
            attempted += 1;
            match self.run_one(idx, block, warm, applier)? {
                None => return Ok(Ended::Interrupted),
                Some(false) => failures += 1,
                Some(true) => {}
            }
        }
        // A search trial's block is one run: a failed trial is a trial without a score (see search_step).
        if members.len() > 1 && attempted > 0 && failures == attempted {
            let _ = self.store.set_status(self.experiment, "failed");
            return Err(RunError::Other(format!(
                "every run of block {block} failed; stopping (see the lines above)"
            )));
        }
        Ok(Ended::Completed)
    }

    /// Run configuration `idx` once, restore, store: `Some(ok)`, or `None` when interrupted.
    fn run_one(
        &mut self,
        idx: usize,
        block: usize,
        warm: bool,
        applier: &mut Applier,
    ) -> Result<Option<bool>, RunError> {
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let t0 = Instant::now();
        let result = one_run(
            &self.spec,
            &self.configs[idx],
            self.opts,
            applier,
            self.tmp.path(),
        );
        // Restore after every configuration run, whatever happened.
        restore(applier)?;
        let mut metrics = match result {
            Ok(m) => m,
            Err(RunError::Workload(WorkloadError::Interrupted)) => return Ok(None),
            Err(e @ (RunError::Target(_) | RunError::Knob(_))) => {
                let _ = self.store.set_status(self.experiment, "failed");
                return Err(e);
            }
            Err(e) => {
                let e = e.to_string();
                self.record(idx, block, warm, started_ms, t0, BTreeMap::new(), Some(e))?;
                return Ok(Some(false));
            }
        };
        if self.opts.stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let error = match score_of(&metrics, &self.spec.score.terms) {
            None => Some(format!(
                "a score metric is missing (have: {})",
                metrics.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(s) => {
                metrics.insert("score".into(), s);
                None
            }
        };
        let ok = error.is_none();
        self.record(idx, block, warm, started_ms, t0, metrics, error)?;
        Ok(Some(ok))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        idx: usize,
        block: usize,
        warm: bool,
        started_ms: i64,
        t0: Instant,
        metrics: BTreeMap<String, f64>,
        error: Option<String>,
    ) -> Result<(), RunError> {
        self.store.record_run(
            self.experiment,
            &NewRun {
                config: idx,
                block,
                warmup: warm,
                started_unix_ms: started_ms,
                duration_s: t0.elapsed().as_secs_f64(),
                error: error.clone(),
                metrics: metrics.clone(),
            },
        )?;
        self.done.insert((block, idx));
        self.session_runs += 1;
        if let Some(b) = &self.printer.bar {
            b.inc(1);
        }
        let label_w = label_width(self.configs.iter().map(|c| c.label.as_str()), 10);
        let label = &self.configs[idx].label;
        let score = metrics.get("score").copied();
        match (&error, score) {
            (Some(e), _) => self
                .printer
                .line(&format!("[{block}] {label:<label_w$}  FAILED: {e}")),
            (None, Some(s)) => {
                if !warm {
                    self.scores[idx].push((block, s));
                }
                let w0 = &self.spec.workloads[0].name;
                let get = |k: &str| metrics.get(&format!("{w0}.{k}")).copied();
                let values: Vec<f64> = self.scores[idx].iter().map(|&(_, s)| s).collect();
                let summary = crate::stats::summary(&values);
                self.printer.line(&format!(
                    "[{block}] {label:<label_w$}  score {s:>12.2}  ({}{}{}) {}",
                    get("throughput")
                        .map(|v| format!("{v:.1} req/s"))
                        .unwrap_or_default(),
                    get("p99_ms")
                        .map(|v| format!(", p99 {v:.2} ms"))
                        .unwrap_or_default(),
                    get("errors")
                        .filter(|e| *e > 0.0)
                        .map(|v| format!(", {v} errors"))
                        .unwrap_or_default(),
                    if warm {
                        "warm-up (discarded)".to_string()
                    } else if summary.n >= 2 {
                        format!("n={} ±{:.2}%", summary.n, 100.0 * summary.rel_ci())
                    } else {
                        format!("n={}", summary.n)
                    }
                ));
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// Restore everything, set the status, analyse.
    pub(crate) fn finish(
        mut self,
        applier: Applier,
        interrupted: bool,
    ) -> Result<Outcome, RunError> {
        if let Some(b) = &self.printer.bar {
            b.finish_and_clear();
        }
        let notes = applier.finish();
        if notes.iter().any(RestoreNote::failed) {
            return Err(RunError::Restore {
                journal: self.opts.journal.display().to_string(),
                notes: notes.iter().map(|n| n.to_string()).collect(),
            });
        }
        self.store.set_status(
            self.experiment,
            if interrupted {
                "interrupted"
            } else {
                "finished"
            },
        )?;
        let analysis = analysis::analyze(&self.store.load(self.experiment)?);
        Ok(Outcome {
            experiment: self.experiment,
            interrupted,
            resumed: self.resumed,
            runs_this_session: self.session_runs,
            analysis,
        })
    }
}

/// Run (or resume) an experiment: prepare (checks, locks), open it in the store, then step through its
/// phases (this module) until it is done or interrupted, and restore everything.
pub fn run(spec: &Spec, opts: &RunOptions) -> Result<Outcome, RunError> {
    // The journal (and its lock) first: every process started from here on is journalled.
    let mut applier = Applier::new(opts.root.clone(), &opts.journal, opts.threads.clone())?;
    applier.set_lock_wait(opts.lock_wait);
    let prepared = prepare(spec, opts, &mut applier)?;
    let mut s = Session::open(prepared, opts)?;
    let mut phase = s.first_phase();
    let interrupted = loop {
        match phase {
            Phase::Done { interrupted } => break interrupted,
            p => phase = s.step(p, &mut applier)?,
        }
    };
    s.finish(applier, interrupted)
}

/// Resume the newest unfinished experiment in `opts.db` from the file text stored with it.
/// A missing file or one that is not a store is refused (usage error) without creating or changing it.
pub fn resume(opts: &RunOptions) -> Result<Outcome, RunError> {
    let store = Store::open_existing(&opts.db)?;
    let id = store.latest_unfinished()?.ok_or_else(|| {
        RunError::Other(match store.latest() {
            Ok(newest) => format!(
                "{}: nothing to resume — every experiment in it is finished (the newest is {newest}; `ordo tune show {}` prints it)",
                opts.db.display(),
                opts.db.display()
            ),
            Err(_) => format!("{}: nothing to resume — it holds no experiments", opts.db.display()),
        })
    })?;
    let e = store.experiment(id)?;
    drop(store);
    let file = PathBuf::from(&e.spec_path);
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let spec = Spec::parse(&e.spec_text, &file, &dir)?;
    run(&spec, opts)
}

/// The width of the label column of the progress lines: the longest label, at least `min`, at most 60 (a
/// longer label pushes its line out rather than widening every line).
fn label_width<'a>(labels: impl Iterator<Item = &'a str>, min: usize) -> usize {
    labels.map(str::len).max().unwrap_or(min).clamp(min, 60)
}
