//! Pass/fail thresholds for CI (`--fail-if 'p99>50ms'`, a mix file's `fail-if = [...]`): the expression
//! parser, checked before the run, and the judgement of a finished [`BenchReport`] against them, which the
//! binary turns into one line per threshold and its exit status.

use std::fmt;

use crate::report::BenchReport;

/// What a threshold measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// A latency percentile (one of the report's: 50, 66, 75, 80, 90, 95, 98, 99, 99.9, 99.99, 100).
    Percentile(f64),
    Mean,
    Min,
    Max,
    /// Requests that did not get a 2xx response: failed requests plus non-2xx responses.
    Errors,
    /// ab's failed requests only (connect, receive, length, exceptions including timeouts).
    Failed,
    /// Complete requests whose status was not 2xx.
    Non2xx,
    /// Complete requests per second.
    Rps,
}

/// How a threshold compares (the expression *fails* the run when the comparison holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
            Op::Lt => value < limit,
            Op::Le => value <= limit,
        }
    }
}

/// The unit a threshold's limit was given in (also the unit its measured value is printed in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Us,
    Ms,
    S,
    /// A percentage of measured requests (complete + failed).
    Percent,
    /// A plain number: a request count or requests per second.
    Count,
}

impl Unit {
    /// Milliseconds per unit, for latency units.
    fn ms(self) -> f64 {
        match self {
            Unit::Us => 0.001,
            Unit::S => 1000.0,
            _ => 1.0,
        }
    }
}

/// One parsed `--fail-if` expression: the run fails when `metric op limit` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// The expression as given (whitespace removed), for the report line.
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    /// In `unit`.
    pub limit: f64,
    pub unit: Unit,
}

/// A threshold that could not be parsed; the message names the expression and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid threshold `{expr}`: {reason}")]
pub struct ThresholdError {
    pub expr: String,
    pub reason: String,
}

const METRICS: &str = "p50, p66, p75, p80, p90, p95, p98, p99, p99.9 (p999), p99.99 (p9999), p100, min, \
                       mean (avg), max, errors, failed, non2xx, rps";

impl Threshold {
    /// Parse `METRIC OP VALUE`, e.g. `p99>50ms`, `errors>0.1%`, `errors>=1`, `rps<1000`.
    pub fn parse(expr: &str) -> Result<Threshold, ThresholdError> {
        let err = |reason: String| ThresholdError {
            expr: expr.to_string(),
            reason,
        };
        let text: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let Some(at) = text.find(['<', '>', '=', '!']) else {
            return Err(err(
                "expected METRIC OP VALUE with OP one of >, >=, <, <= (e.g. `p99>50ms`)".into(),
            ));
        };
        let (name, rest) = text.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Op::Gt, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            return Err(err(format!(
                "`{}` is not a comparison: use >, >=, < or <=",
                rest.chars().take(2).collect::<String>()
            )));
        };
        if name.is_empty() {
            return Err(err(format!(
                "no metric before the comparison (one of {METRICS})"
            )));
        }
        let metric = parse_metric(name)
            .ok_or_else(|| err(format!("unknown metric `{name}` (one of {METRICS})")))?;
        if value.is_empty() {
            return Err(err("no value after the comparison".into()));
        }
        let split = value
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(value.len());
        let (number, unit) = value.split_at(split);
        let limit: f64 = match number.parse() {
            Ok(v) if f64::is_finite(v) => v,
            _ => return Err(err(format!("`{value}` does not start with a number"))),
        };
        let unit = match (metric, unit) {
            (Metric::Percentile(_) | Metric::Mean | Metric::Min | Metric::Max, u) => match u {
                "us" | "µs" => Unit::Us,
                "ms" => Unit::Ms,
                "s" => Unit::S,
                "" => {
                    return Err(err(format!(
                        "a latency needs a unit: `{number}us`, `{number}ms` or `{number}s`"
                    )));
                }
                other => {
                    return Err(err(format!(
                        "`{other}` is not a latency unit (us, ms or s)"
                    )));
                }
            },
            (Metric::Errors | Metric::Failed | Metric::Non2xx, "%") => {
                if limit > 100.0 {
                    return Err(err(format!("{limit}% is more than 100%")));
                }
                Unit::Percent
            }
            (Metric::Errors | Metric::Failed | Metric::Non2xx, "") => {
                if limit.fract() != 0.0 {
                    return Err(err(format!(
                        "a request count is a whole number (got {number}; for a share write `{number}%`)"
                    )));
                }
                Unit::Count
            }
            (Metric::Errors | Metric::Failed | Metric::Non2xx, other) => {
                return Err(err(format!(
                    "`{other}` is not a unit for {name}: give a count (`{name}>10`) or a percentage (`{name}>0.1%`)"
                )));
            }
            (Metric::Rps, "" | "/s") => Unit::Count,
            (Metric::Rps, other) => {
                return Err(err(format!(
                    "`{other}` is not a unit for rps: give requests per second (`rps<1000`)"
                )));
            }
        };
        Ok(Threshold {
            text,
            metric,
            op,
            limit,
            unit,
        })
    }

    /// Judge a finished run. Latency thresholds read the latency measured from when each request was due
    /// in an open loop (coordinated omission corrected), else the plain latency; with no complete request
    /// there is no latency, and a latency threshold fails rather than pass on nothing.
    pub fn check(&self, r: &BenchReport) -> Verdict {
        let s = &r.summary;
        let measured = s.complete + s.failed.total;
        let lat = s.corrected.as_ref().unwrap_or(&s.latency);
        let share = |n: u64| {
            if measured == 0 {
                0.0
            } else {
                n as f64 * 100.0 / measured as f64
            }
        };
        let value = match self.metric {
            Metric::Percentile(_) | Metric::Mean | Metric::Min | Metric::Max if lat.count == 0 => {
                return Verdict {
                    failed: true,
                    detail: "no complete request to measure".into(),
                };
            }
            Metric::Percentile(p) => {
                let ms = if p >= 100.0 {
                    Some(lat.max_ms)
                } else {
                    lat.at(p)
                };
                match ms {
                    Some(ms) => ms / self.unit.ms(),
                    None => {
                        return Verdict {
                            failed: true,
                            detail: format!("the report has no p{p}"),
                        };
                    }
                }
            }
            Metric::Mean => lat.mean_ms / self.unit.ms(),
            Metric::Min => lat.min_ms / self.unit.ms(),
            Metric::Max => lat.max_ms / self.unit.ms(),
            Metric::Errors | Metric::Failed | Metric::Non2xx => {
                let n = match self.metric {
                    Metric::Errors => s.failed.total + s.non_2xx,
                    Metric::Failed => s.failed.total,
                    _ => s.non_2xx,
                };
                let v = if self.unit == Unit::Percent {
                    share(n)
                } else {
                    n as f64
                };
                let detail = format!(
                    "{} = {} ({n} of {measured} requests)",
                    self.metric,
                    if self.unit == Unit::Percent {
                        format!("{v:.3}%")
                    } else {
                        n.to_string()
                    }
                );
                return Verdict {
                    failed: self.op.holds(v, self.limit),
                    detail,
                };
            }
            Metric::Rps => s.rps,
        };
        let shown = match self.unit {
            Unit::Us => format!("{value:.1}us"),
            Unit::Ms => format!("{value:.3}ms"),
            Unit::S => format!("{value:.4}s"),
            _ => format!("{value:.2}"),
        };
        let corrected = match self.metric {
            Metric::Rps => "",
            _ if s.corrected.is_some() => ", from when each request was due",
            _ => "",
        };
        Verdict {
            failed: self.op.holds(value, self.limit),
            detail: format!("{} = {shown}{corrected}", self.metric),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::Percentile(p) => write!(f, "p{p}"),
            Metric::Mean => f.write_str("mean"),
            Metric::Min => f.write_str("min"),
            Metric::Max => f.write_str("max"),
            Metric::Errors => f.write_str("errors"),
            Metric::Failed => f.write_str("failed"),
            Metric::Non2xx => f.write_str("non2xx"),
            Metric::Rps => f.write_str("rps"),
        }
    }
}

fn parse_metric(name: &str) -> Option<Metric> {
    let name = name.to_ascii_lowercase();
    Some(match name.as_str() {
        "mean" | "avg" => Metric::Mean,
        "min" => Metric::Min,
        "max" => Metric::Max,
        "errors" | "error" => Metric::Errors,
        "failed" => Metric::Failed,
        "non2xx" | "non-2xx" => Metric::Non2xx,
        "rps" => Metric::Rps,
        "p999" => Metric::Percentile(99.9),
        "p9999" => Metric::Percentile(99.99),
        other => {
            let p: f64 = other.strip_prefix('p')?.parse().ok()?;
            let known = crate::report::PERCENTILES
                .iter()
                .find(|&&k| (k - p).abs() < 1e-9)?;
            Metric::Percentile(*known)
        }
    })
}

/// The judgement of one threshold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The threshold's comparison held: the run fails it.
    pub failed: bool,
    /// What was measured, e.g. `p99 = 73.200ms`.
    pub detail: String,
}

/// Every threshold judged, plus the check that is always made: a run in which no request completed measured
/// nothing, whatever else it says. Returns the lines to print and whether the run failed.
pub fn judge(thresholds: &[Threshold], r: &BenchReport) -> (Vec<String>, bool) {
    let mut lines = Vec::with_capacity(thresholds.len() + 1);
    let mut any = false;
    for t in thresholds {
        let v = t.check(r);
        any |= v.failed;
        lines.push(format!(
            "threshold {}: {} ({})",
            t.text,
            if v.failed { "FAILED" } else { "ok" },
            v.detail
        ));
    }
    let s = &r.summary;
    if s.complete == 0 && !r.interrupted {
        any = true;
        lines.push(format!(
            "check: FAILED (no request completed: {} failed; nothing was measured)",
            s.failed.total
        ));
    }
    (lines, any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Threshold {
        Threshold::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn e(s: &str) -> String {
        Threshold::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn parses_expressions() {
        let t = p("p99>50ms");
        assert_eq!(
            (t.metric, t.op, t.limit, t.unit),
            (Metric::Percentile(99.0), Op::Gt, 50.0, Unit::Ms)
        );
        assert_eq!(t.text, "p99>50ms");
        let t = p(" p99.9 >= 1.5 s ");
        assert_eq!(
            (t.metric, t.op, t.limit, t.unit),
            (Metric::Percentile(99.9), Op::Ge, 1.5, Unit::S)
        );
        assert_eq!(t.text, "p99.9>=1.5s");
        assert_eq!(p("p999>1ms").metric, Metric::Percentile(99.9));
        assert_eq!(p("p9999>1ms").metric, Metric::Percentile(99.99));
        assert_eq!(p("P50<=800us").unit, Unit::Us);
        assert_eq!(p("p90>800µs").unit, Unit::Us);
        assert_eq!(p("p100>1s").metric, Metric::Percentile(100.0));
        assert_eq!(p("avg>2ms").metric, Metric::Mean);
        assert_eq!(p("max>2ms").metric, Metric::Max);
        assert_eq!(p("min>2ms").metric, Metric::Min);
        let t = p("errors>0.1%");
        assert_eq!(
            (t.metric, t.limit, t.unit),
            (Metric::Errors, 0.1, Unit::Percent)
        );
        let t = p("errors>=1");
        assert_eq!((t.op, t.limit, t.unit), (Op::Ge, 1.0, Unit::Count));
        assert_eq!(p("failed>0").metric, Metric::Failed);
        assert_eq!(p("non-2xx>5%").metric, Metric::Non2xx);
        let t = p("rps<1000");
        assert_eq!((t.metric, t.op, t.limit), (Metric::Rps, Op::Lt, 1000.0));
        assert_eq!(p("rps<1000/s").unit, Unit::Count);
    }

    #[test]
    fn refuses_malformed_expressions_naming_them() {
        let m = e("p99");
        assert!(m.contains("`p99`") && m.contains("METRIC OP VALUE"), "{m}");
        assert!(e("p97>5ms").contains("unknown metric `p97`"));
        assert!(e("latency>5ms").contains("unknown metric `latency`"));
        assert!(e(">5ms").contains("no metric"));
        assert!(e("p99>").contains("no value"));
        assert!(e("p99>50").contains("needs a unit"));
        assert!(e("p99>50kg").contains("`kg` is not a latency unit"));
        assert!(e("p99=50ms").contains("not a comparison"));
        assert!(e("p99!=50ms").contains("not a comparison"));
        assert!(e("p99==50ms").contains("not a comparison"));
        assert!(e("p99>abc").contains("does not start with a number"));
        assert!(e("p99>1.2.3ms").contains("does not start with a number"));
        assert!(e("errors>101%").contains("more than 100%"));
        assert!(e("errors>0.5").contains("whole number"));
        assert!(e("errors>5ms").contains("not a unit for errors"));
        assert!(e("rps<5%").contains("not a unit for rps"));
        assert!(e("").contains("METRIC OP VALUE"));
    }

    use crate::report::sample as report;

    fn line(t: &str, r: &BenchReport) -> (bool, String) {
        let v = p(t).check(r);
        (v.failed, v.detail)
    }

    #[test]
    fn judges_a_report() {
        let r = report(9990, 10, 40, 1234.5, false);
        assert_eq!(line("p99>50ms", &r), (true, "p99 = 73.200ms".into()));
        assert_eq!(line("p99>80ms", &r), (false, "p99 = 73.200ms".into()));
        assert!(line("p99>=73.2ms", &r).0);
        assert_eq!(line("p99>0.05s", &r), (true, "p99 = 0.0732s".into()));
        assert_eq!(line("p50>900us", &r), (true, "p50 = 1000.0us".into()));
        assert_eq!(line("p100>89ms", &r).1, "p100 = 90.000ms");
        assert!(line("max>89ms", &r).0);
        assert!(!line("mean>2ms", &r).0);
        assert!(line("mean>=2ms", &r).0);
        // errors: 10 failed + 40 non-2xx of 10 000 measured = 0.5 %
        assert_eq!(
            line("errors>0.1%", &r),
            (true, "errors = 0.500% (50 of 10000 requests)".into())
        );
        assert!(!line("errors>0.5%", &r).0);
        assert!(line("errors>=50", &r).0);
        assert!(!line("errors>50", &r).0);
        assert!(line("failed>0", &r).0);
        assert!(!line("failed>0.1%", &r).0);
        assert!(line("non2xx>39", &r).0);
        assert_eq!(line("rps<1000", &r), (false, "rps = 1234.50".into()));
        assert!(line("rps<2000", &r).0);

        // open loop: the corrected latency is judged
        let r = report(100, 0, 0, 10.0, true);
        let (failed, detail) = line("p99>100ms", &r);
        assert!(
            failed && detail.contains("732.000ms") && detail.contains("due"),
            "{detail}"
        );

        // nothing completed: a latency threshold fails instead of passing on zeros
        let r = report(0, 5, 0, 0.0, false);
        assert_eq!(
            line("p99>50ms", &r),
            (true, "no complete request to measure".into())
        );
        assert!(line("errors>99%", &r).0);
    }

    #[test]
    fn judge_prints_one_line_each_and_checks_that_something_completed() {
        let r = report(9990, 10, 0, 1234.5, false);
        let ts = [p("p99>50ms"), p("rps<1000")];
        let (lines, failed) = judge(&ts, &r);
        assert!(failed);
        assert_eq!(
            lines,
            [
                "threshold p99>50ms: FAILED (p99 = 73.200ms)",
                "threshold rps<1000: ok (rps = 1234.50)"
            ]
        );
        let (lines, failed) = judge(&ts[1..], &r);
        assert!(!failed && lines.len() == 1);
        let (lines, failed) = judge(&[], &r);
        assert!(!failed && lines.is_empty());
        // no threshold, but nothing completed
        let r = report(0, 7, 0, 0.0, false);
        let (lines, failed) = judge(&[], &r);
        assert!(failed);
        assert_eq!(
            lines,
            ["check: FAILED (no request completed: 7 failed; nothing was measured)"]
        );
    }
}
