//! Per-thread recording in constant memory (HdrHistograms in microseconds plus counters and a per-second
//! timeline) and the merge of all threads into one aggregate that the report is built from.

use hdrhistogram::Histogram;

/// Histogram bounds: 1 µs to 100 s at 3 significant figures (~140 KB each); larger values saturate.
const HIST_MAX_US: u64 = 100_000_000;

pub(crate) fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("constant histogram bounds are valid")
}

/// Failure kinds, ab's split plus timeouts (which ab folds into exceptions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    pub connect: u64,
    pub receive: u64,
    pub length: u64,
    pub exceptions: u64,
    /// Part of `exceptions`: requests that hit --timeout.
    pub timeouts: u64,
}

impl Failures {
    pub fn total(&self) -> u64 {
        self.connect + self.receive + self.length + self.exceptions
    }

    pub(crate) fn add(&mut self, o: &Failures) {
        self.connect += o.connect;
        self.receive += o.receive;
        self.length += o.length;
        self.exceptions += o.exceptions;
        self.timeouts += o.timeouts;
    }
}

/// How one request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailKind {
    Connect,
    Receive,
    Length,
    Exception,
    Timeout,
}

/// Statistics of one class.
#[derive(Clone, Debug)]
pub(crate) struct ClassStats {
    /// Latency from the moment the request was sent (connect included when the request opened one).
    pub latency: Histogram<u64>,
    /// Open loop: latency from when the request was due.
    pub corrected: Option<Histogram<u64>>,
    pub completed: u64,
    pub non_2xx: u64,
    pub failures: Failures,
    pub bytes: u64,
}

impl ClassStats {
    fn new(open: bool) -> ClassStats {
        ClassStats {
            latency: new_hist(),
            corrected: open.then(new_hist),
            completed: 0,
            non_2xx: 0,
            failures: Failures::default(),
            bytes: 0,
        }
    }

    fn merge(&mut self, o: &ClassStats) {
        let _ = self.latency.add(&o.latency);
        if let (Some(a), Some(b)) = (&mut self.corrected, &o.corrected) {
            let _ = a.add(b);
        }
        self.completed += o.completed;
        self.non_2xx += o.non_2xx;
        self.failures.add(&o.failures);
        self.bytes += o.bytes;
    }
}

/// One stage of a ramp: the requests that ended in it.
#[derive(Clone, Debug)]
pub(crate) struct StageStats {
    pub latency: Histogram<u64>,
    pub corrected: Option<Histogram<u64>>,
    pub completed: u64,
    pub failed: u64,
}

impl StageStats {
    pub(crate) fn new(open: bool) -> StageStats {
        StageStats {
            latency: new_hist(),
            corrected: open.then(new_hist),
            completed: 0,
            failed: 0,
        }
    }

    pub(crate) fn merge(&mut self, o: &StageStats) {
        let _ = self.latency.add(&o.latency);
        if let (Some(a), Some(b)) = (&mut self.corrected, &o.corrected) {
            let _ = a.add(b);
        }
        self.completed += o.completed;
        self.failed += o.failed;
    }
}

/// One second of the measured run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Second {
    pub completed: u64,
    pub failed: u64,
    pub bytes: u64,
}

/// Everything one thread (or, after merging, the whole run) recorded.
#[derive(Clone, Debug)]
pub(crate) struct Stats {
    pub classes: Vec<ClassStats>,
    /// ab's Connection Times (µs): connect is recorded only for requests that opened a connection
    /// (0 for reused ones, as ab with keep-alive).
    pub connect: Histogram<u64>,
    pub waiting: Histogram<u64>,
    pub processing: Histogram<u64>,
    pub status: Vec<u64>,
    pub head_bytes: u64,
    pub body_bytes: u64,
    pub content_bytes: u64,
    pub connections_opened: u64,
    pub timeline: Vec<Second>,
    /// Microseconds from measure start to the last completion.
    pub last_done_us: u64,
    /// Responses per class with a body length different from the first one (ab's rule), if enabled.
    pub length_mismatch: u64,
    /// ab's "Server Software": the `Server` header of the first response with one.
    pub server_software: Option<String>,
    /// ab's "Document Length": the decoded body length of the first measured response.
    pub document_length: Option<u64>,
    /// Connections the client failed, by reason (at most [`MAX_ERROR_REASONS`] reasons; later new ones
    /// count under the last).
    pub conn_errors: Vec<(String, u64)>,
    /// Per stage of a ramp (empty without stages).
    pub stages: Vec<StageStats>,
    open: bool,
}

/// Distinct connection-error reasons kept.
pub(crate) const MAX_ERROR_REASONS: usize = 16;

impl Stats {
    pub(crate) fn new(classes: usize, open: bool) -> Stats {
        Stats {
            classes: (0..classes).map(|_| ClassStats::new(open)).collect(),
            connect: new_hist(),
            waiting: new_hist(),
            processing: new_hist(),
            status: vec![0; 600],
            head_bytes: 0,
            body_bytes: 0,
            content_bytes: 0,
            connections_opened: 0,
            timeline: Vec::new(),
            last_done_us: 0,
            length_mismatch: 0,
            server_software: None,
            document_length: None,
            conn_errors: Vec::new(),
            stages: Vec::new(),
            open,
        }
    }

    /// With `n` stages.
    pub(crate) fn with_stages(mut self, n: usize) -> Stats {
        self.stages = (0..n).map(|_| StageStats::new(self.open)).collect();
        self
    }

    /// A request ended in stage `s`: complete with (latency, corrected latency) µs, or failed.
    pub(crate) fn record_stage(&mut self, s: usize, ok: Option<(u64, Option<u64>)>) {
        let Some(st) = self.stages.get_mut(s) else {
            return;
        };
        match ok {
            Some((total, corrected)) => {
                st.latency.saturating_record(total.max(1));
                if let (Some(h), Some(v)) = (&mut st.corrected, corrected) {
                    h.saturating_record(v.max(1));
                }
                st.completed += 1;
            }
            None => st.failed += 1,
        }
    }

    /// A connection failed for `reason` (`n` times): counted under it, or under `(other reasons)` once
    /// [`MAX_ERROR_REASONS`] − 1 reasons are kept.
    pub(crate) fn record_conn_error(&mut self, reason: &str, n: u64) {
        const OTHER: &str = "(other reasons)";
        let reason = if self.conn_errors.len() < MAX_ERROR_REASONS - 1
            || self.conn_errors.iter().any(|e| e.0 == reason)
        {
            reason
        } else {
            OTHER
        };
        match self.conn_errors.iter_mut().find(|e| e.0 == reason) {
            Some(e) => e.1 += n,
            None => self.conn_errors.push((reason.to_string(), n)),
        }
    }

    fn second(&mut self, at_us: u64) -> &mut Second {
        let s = (at_us / 1_000_000) as usize;
        if self.timeline.len() <= s {
            self.timeline.resize(s + 1, Second::default());
        }
        &mut self.timeline[s]
    }

    /// Record a complete response. Times are µs; `done_us` is relative to the measure start.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_ok(
        &mut self,
        class: usize,
        status: u16,
        total_us: u64,
        corrected_us: Option<u64>,
        connect_us: u64,
        waiting_us: u64,
        processing_us: u64,
        head: u64,
        body: u64,
        content: u64,
        done_us: u64,
    ) {
        let c = &mut self.classes[class];
        c.latency.saturating_record(total_us.max(1));
        if let (Some(h), Some(v)) = (&mut c.corrected, corrected_us) {
            h.saturating_record(v.max(1));
        }
        c.completed += 1;
        if !(200..300).contains(&status) {
            c.non_2xx += 1;
        }
        c.bytes += head + body;
        self.connect.saturating_record(connect_us);
        self.waiting.saturating_record(waiting_us);
        self.processing.saturating_record(processing_us);
        if let Some(s) = self.status.get_mut(status as usize) {
            *s += 1;
        }
        self.head_bytes += head;
        self.body_bytes += body;
        self.content_bytes += content;
        self.last_done_us = self.last_done_us.max(done_us);
        let sec = self.second(done_us);
        sec.completed += 1;
        sec.bytes += head + body;
    }

    /// Record a failed request.
    pub(crate) fn record_fail(&mut self, class: usize, kind: FailKind, done_us: u64) {
        let f = &mut self.classes[class].failures;
        match kind {
            FailKind::Connect => f.connect += 1,
            FailKind::Receive => f.receive += 1,
            FailKind::Length => f.length += 1,
            FailKind::Exception => f.exceptions += 1,
            FailKind::Timeout => {
                f.exceptions += 1;
                f.timeouts += 1;
            }
        }
        self.last_done_us = self.last_done_us.max(done_us);
        self.second(done_us).failed += 1;
    }

    /// Add another thread's statistics.
    pub(crate) fn merge(&mut self, o: &Stats) {
        for (a, b) in self.classes.iter_mut().zip(&o.classes) {
            a.merge(b);
        }
        let _ = self.connect.add(&o.connect);
        let _ = self.waiting.add(&o.waiting);
        let _ = self.processing.add(&o.processing);
        for (a, b) in self.status.iter_mut().zip(&o.status) {
            *a += b;
        }
        self.head_bytes += o.head_bytes;
        self.body_bytes += o.body_bytes;
        self.content_bytes += o.content_bytes;
        self.connections_opened += o.connections_opened;
        if self.timeline.len() < o.timeline.len() {
            self.timeline.resize(o.timeline.len(), Second::default());
        }
        for (a, b) in self.timeline.iter_mut().zip(&o.timeline) {
            a.completed += b.completed;
            a.failed += b.failed;
            a.bytes += b.bytes;
        }
        self.last_done_us = self.last_done_us.max(o.last_done_us);
        self.length_mismatch += o.length_mismatch;
        if self.server_software.is_none() {
            self.server_software.clone_from(&o.server_software);
        }
        self.document_length = self.document_length.or(o.document_length);
        for (reason, n) in &o.conn_errors {
            self.record_conn_error(reason, *n);
        }
        if self.stages.len() < o.stages.len() {
            let open = self.open;
            self.stages
                .resize_with(o.stages.len(), || StageStats::new(open));
        }
        for (a, b) in self.stages.iter_mut().zip(&o.stages) {
            a.merge(b);
        }
    }

    /// All classes' latency merged.
    pub(crate) fn total_latency(&self) -> Histogram<u64> {
        let mut h = new_hist();
        for c in &self.classes {
            let _ = h.add(&c.latency);
        }
        h
    }

    /// All classes' corrected latency merged (open loop only).
    pub(crate) fn total_corrected(&self) -> Option<Histogram<u64>> {
        let mut out: Option<Histogram<u64>> = None;
        for c in &self.classes {
            if let Some(h) = &c.corrected {
                let _ = out.get_or_insert_with(new_hist).add(h);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_errors_are_counted_by_reason_and_bounded() {
        let mut a = Stats::new(1, false);
        let mut b = Stats::new(1, false);
        a.record_conn_error("flood", 1);
        b.record_conn_error("flood", 2);
        b.record_conn_error("bomb", 1);
        a.merge(&b);
        assert_eq!(a.conn_errors, vec![("flood".into(), 3), ("bomb".into(), 1)]);
        for i in 0..40 {
            a.record_conn_error(&format!("reason {i}"), 1);
        }
        assert_eq!(a.conn_errors.len(), MAX_ERROR_REASONS);
        // 2 + 13 reasons kept, the other 27 counted together
        assert_eq!(a.conn_errors[14], ("reason 12".into(), 1));
        assert_eq!(a.conn_errors[15], ("(other reasons)".into(), 27));
        a.record_conn_error("flood", 1);
        assert_eq!(a.conn_errors[0], ("flood".into(), 4));
    }

    #[test]
    fn records_and_merges() {
        let mut a = Stats::new(2, true);
        let mut b = Stats::new(2, true);
        a.record_ok(0, 200, 100, Some(150), 10, 50, 90, 20, 5, 5, 1_500_000);
        b.record_ok(1, 503, 300, Some(300), 0, 100, 300, 20, 0, 0, 2_100_000);
        b.record_fail(1, FailKind::Timeout, 100);
        a.merge(&b);
        assert_eq!(a.classes[0].completed, 1);
        assert_eq!(a.classes[1].non_2xx, 1);
        assert_eq!(a.classes[1].failures.exceptions, 1);
        assert_eq!(a.classes[1].failures.timeouts, 1);
        assert_eq!(a.status[200] + a.status[503], 2);
        assert_eq!(a.timeline.len(), 3);
        assert_eq!(a.timeline[0].failed, 1);
        assert_eq!(a.total_latency().len(), 2);
        assert_eq!(a.total_corrected().unwrap().max(), 300);
        assert_eq!(a.last_done_us, 2_100_000);
    }
}
