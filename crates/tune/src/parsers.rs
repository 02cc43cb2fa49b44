//! Turning an external load generator's output into metrics: ab, wrk and sysbench, or a regex whose named
//! groups are the metrics. Names: throughput, mean_ms, p50_ms .. p99_ms, min_ms, max_ms, errors, requests,
//! elapsed_s (plus ab's time_per_request_all_ms).

use std::collections::BTreeMap;

use regex::Regex;

use crate::spec::ParserKind;

/// Why output could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parser} output: {message}")]
pub struct ParseError {
    pub parser: &'static str,
    pub message: String,
}

pub(crate) type Metrics = BTreeMap<String, f64>;

pub(crate) fn parse(kind: &ParserKind, out: &str) -> Result<Metrics, ParseError> {
    match kind {
        ParserKind::Ab => parse_ab(out),
        ParserKind::Wrk => parse_wrk(out),
        ParserKind::Sysbench => parse_sysbench(out),
        ParserKind::Regex(re) => parse_regex(re, out),
    }
}

fn first_number(s: &str) -> Option<f64> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .unwrap_or(s.len());
    s[..end].parse().ok().filter(|v: &f64| v.is_finite())
}

fn after<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.trim_start().strip_prefix(prefix)
}

/// ApacheBench (`ab`) output.
pub(crate) fn parse_ab(out: &str) -> Result<Metrics, ParseError> {
    let mut m = Metrics::new();
    let mut failed = 0.0;
    let mut non2xx = 0.0;
    let mut tpr_seen = false;
    for line in out.lines() {
        if let Some(r) = after(line, "Requests per second:") {
            m.extend(first_number(r).map(|v| ("throughput".into(), v)));
        } else if let Some(r) = after(line, "Time taken for tests:") {
            m.extend(first_number(r).map(|v| ("elapsed_s".into(), v)));
        } else if let Some(r) = after(line, "Complete requests:") {
            m.extend(first_number(r).map(|v| ("requests".into(), v)));
        } else if let Some(r) = after(line, "Failed requests:") {
            failed = first_number(r).unwrap_or(0.0);
        } else if let Some(r) = after(line, "Non-2xx responses:") {
            non2xx = first_number(r).unwrap_or(0.0);
        } else if let Some(r) = after(line, "Time per request:") {
            let key = if tpr_seen {
                "time_per_request_all_ms"
            } else {
                "time_per_request_ms"
            };
            tpr_seen = true;
            m.extend(first_number(r).map(|v| (key.into(), v)));
        } else if let Some(r) = after(line, "Total:") {
            let v: Vec<f64> = r
                .split_whitespace()
                .filter_map(|x| x.parse().ok().filter(|v: &f64| v.is_finite()))
                .collect();
            if v.len() >= 5 {
                m.insert("min_ms".into(), v[0]);
                m.insert("mean_ms".into(), v[1]);
                m.insert("max_ms".into(), v[4]);
            }
        } else {
            let t = line.trim_start();
            if let Some((p, rest)) = t.split_once('%')
                && let (Ok(p), Some(v)) = (p.parse::<u32>(), first_number(rest))
                && matches!(p, 50 | 90 | 95 | 99)
            {
                m.insert(format!("p{p}_ms"), v);
            }
        }
    }
    if !m.contains_key("throughput") {
        return Err(ParseError {
            parser: "ab",
            message: "no `Requests per second:` line (did ab fail?)".into(),
        });
    }
    m.insert("errors".into(), failed + non2xx);
    if let Some(t) = m.get("time_per_request_ms").copied() {
        m.entry("mean_ms".into()).or_insert(t);
    }
    Ok(m)
}

fn wrk_time_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let ms = match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        "h" => n * 3_600_000.0,
        _ => return None,
    };
    ms.is_finite().then_some(ms)
}

/// wrk output (with or without `--latency`).
pub(crate) fn parse_wrk(out: &str) -> Result<Metrics, ParseError> {
    let mut m = Metrics::new();
    let mut errors = 0.0;
    for line in out.lines() {
        let t = line.trim();
        if let Some(r) = t.strip_prefix("Requests/sec:") {
            m.extend(first_number(r).map(|v| ("throughput".into(), v)));
        } else if let Some(r) = t.strip_prefix("Latency") {
            let f: Vec<&str> = r.split_whitespace().collect();
            if f.len() >= 3 && !t.starts_with("Latency Distribution") {
                m.extend(wrk_time_ms(f[0]).map(|v| ("mean_ms".into(), v)));
                m.extend(wrk_time_ms(f[2]).map(|v| ("max_ms".into(), v)));
            }
        } else if let Some((p, rest)) = t.split_once('%')
            && let Ok(p) = p.trim().parse::<f64>()
            && let Some(v) = wrk_time_ms(rest)
        {
            if [50.0, 90.0, 95.0, 99.0].contains(&p) {
                m.insert(format!("p{}_ms", p as u32), v);
            }
        } else if let Some(r) = t.strip_prefix("Socket errors:") {
            errors += r
                .split(',')
                .filter_map(|x| {
                    // counts: digits only (an f64 parse takes `NaN` and `inf` too)
                    x.split_whitespace()
                        .last()
                        .and_then(|n| n.parse::<u64>().ok())
                        .map(|n| n as f64)
                })
                .sum::<f64>();
        } else if let Some(r) = t.strip_prefix("Non-2xx or 3xx responses:") {
            errors += first_number(r).unwrap_or(0.0);
        } else if t.contains(" requests in ") {
            let mut it = t.split(" requests in ");
            if let (Some(n), Some(rest)) = (it.next(), it.next()) {
                m.extend(first_number(n).map(|v| ("requests".into(), v)));
                let dur = rest.split(',').next().unwrap_or("");
                m.extend(wrk_time_ms(dur).map(|v| ("elapsed_s".into(), v / 1000.0)));
            }
        }
    }
    if !m.contains_key("throughput") {
        return Err(ParseError {
            parser: "wrk",
            message: "no `Requests/sec:` line (did wrk fail?)".into(),
        });
    }
    m.insert("errors".into(), errors);
    Ok(m)
}

/// sysbench (1.0) output: transactions or events per second, total time, latency block.
pub(crate) fn parse_sysbench(out: &str) -> Result<Metrics, ParseError> {
    let mut m = Metrics::new();
    let mut events = None;
    for line in out.lines() {
        let t = line.trim();
        let value = |k: &str| t.strip_prefix(k).and_then(first_number);
        if let Some(r) = t.strip_prefix("transactions:") {
            if let Some(open) = r.find('(') {
                m.extend(first_number(&r[open + 1..]).map(|v| ("throughput".into(), v)));
            }
            m.extend(first_number(r).map(|v| ("requests".into(), v)));
        } else if let Some(v) = value("events per second:") {
            m.entry("throughput".into()).or_insert(v);
        } else if let Some(v) = value("total time:") {
            m.insert("elapsed_s".into(), v);
        } else if let Some(v) = value("total number of events:") {
            events = Some(v);
        } else if let Some(v) = value("min:") {
            m.insert("min_ms".into(), v);
        } else if let Some(v) = value("avg:") {
            m.insert("mean_ms".into(), v);
        } else if let Some(v) = value("max:") {
            m.insert("max_ms".into(), v);
        } else if let Some(v) = value("95th percentile:") {
            m.insert("p95_ms".into(), v);
        } else if let Some(v) = value("errors:") {
            m.insert("errors".into(), v);
        }
    }
    if !m.contains_key("throughput")
        && let (Some(e), Some(t)) = (events, m.get("elapsed_s").copied())
        && t > 0.0
    {
        m.insert("throughput".into(), e / t);
    }
    if let Some(e) = events {
        m.entry("requests".into()).or_insert(e);
    }
    if !m.contains_key("throughput") {
        return Err(ParseError {
            parser: "sysbench",
            message: "no transactions, events per second or total time (did sysbench fail?)".into(),
        });
    }
    m.entry("errors".into()).or_insert(0.0);
    Ok(m)
}

/// Every named group of the first match becomes a metric.
pub(crate) fn parse_regex(re: &Regex, out: &str) -> Result<Metrics, ParseError> {
    let caps = re.captures(out).ok_or_else(|| ParseError {
        parser: "regex",
        message: format!("`{}` does not match the output", re.as_str()),
    })?;
    let mut m = Metrics::new();
    for name in re.capture_names().flatten() {
        if let Some(c) = caps.name(name) {
            let v: f64 = c
                .as_str()
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| ParseError {
                    parser: "regex",
                    message: format!("group `{name}` matched `{}`, not a number", c.as_str()),
                })?;
            m.insert(name.to_string(), v);
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AB: &str = "Server Software:        ordo
Concurrency Level:      100
Time taken for tests:   1.234 seconds
Complete requests:      1000
Failed requests:        2
Non-2xx responses:      3
Requests per second:    810.37 [#/sec] (mean)
Time per request:       123.401 [ms] (mean)
Time per request:       1.234 [ms] (mean, across all concurrent requests)

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.1      0       1
Total:          1    2   0.5      2       6

Percentage of the requests served within a certain time (ms)
  50%      2
  90%      3
  95%      3
  99%      4
 100%      6 (longest request)
";

    #[test]
    fn ab() {
        let m = parse_ab(AB).unwrap();
        assert_eq!(m["throughput"], 810.37);
        assert_eq!(m["elapsed_s"], 1.234);
        assert_eq!(m["requests"], 1000.0);
        assert_eq!(m["errors"], 5.0);
        assert_eq!(m["time_per_request_ms"], 123.401);
        assert_eq!(m["time_per_request_all_ms"], 1.234);
        assert_eq!((m["min_ms"], m["max_ms"], m["p95_ms"]), (1.0, 6.0, 3.0));
        assert!(parse_ab("apr_socket_connect(): Connection refused").is_err());
    }

    /// Found by the fuzz target (issue 23): a `Socket errors:` count of `NaN` (or `inf`) was read as a
    /// float and made the run's error metric NaN; counts are digits.
    #[test]
    fn issue23_wrk_socket_errors_are_counts() {
        let out = "Socket errors: connect 1, read 2, write 3, timeout 4 NaN\nRequests/sec: 50%";
        let m = parse_wrk(out).unwrap();
        assert_eq!(m["errors"], 6.0);
        assert_eq!(m["throughput"], 50.0);
        let m = parse_wrk("Socket errors: connect inf, read 2\nRequests/sec: 1").unwrap();
        assert_eq!(m["errors"], 2.0);
    }

    /// Found by the fuzz target (issue 23): a number past f64's range (`1e309`, or a time that overflows
    /// when converted to ms) was read as infinity; it is not read.
    #[test]
    fn issue23_numbers_out_of_range_are_not_metrics() {
        assert!(parse_ab("Requests per second:11e308").is_err());
        let m =
            parse_wrk("Requests/sec: 1\n    Latency   1e308h    0.89ms  12.92ms   93.69%").unwrap();
        assert!(!m.contains_key("mean_ms"), "{m:?}");
        assert_eq!(first_number("1e309"), None);
        // ab's connection-times row with a NaN column is not read (it was: min/mean/max became NaN)
        let m =
            parse_ab("Requests per second: 5\nTotal:      NaN  NaN   NaN    NaN     NaN").unwrap();
        assert!(
            !m.contains_key("min_ms") && !m.contains_key("max_ms"),
            "{m:?}"
        );
        assert_eq!(first_number("2.5e3 x"), Some(2500.0));
    }

    /// Found by the fuzz target (issue 23): a regex group matching `NaN` or `inf` became a metric that
    /// is not a number; it is refused like any other non-number.
    #[test]
    fn issue23_regex_metrics_are_finite() {
        let re = Regex::new(r"(?P<throughput>\S+) req/s").unwrap();
        for v in ["NaN", "inf", "-infinity"] {
            let e = parse_regex(&re, &format!("{v} req/s")).unwrap_err();
            assert!(e.message.contains("not a number"), "{v}: {}", e.message);
        }
        assert_eq!(parse_regex(&re, "12.5 req/s").unwrap()["throughput"], 12.5);
    }

    #[test]
    fn wrk() {
        let out = "Running 10s test @ http://127.0.0.1:8080/
  2 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   635.91us    0.89ms  12.92ms   93.69%
    Req/Sec     9.14k   791.34    10.63k    71.00%
  Latency Distribution
     50%  420.00us
     90%    1.05ms
     99%    4.54ms
  181950 requests in 10.01s, 26.37MB read
  Socket errors: connect 1, read 0, write 0, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:  18177.61
Transfer/sec:      2.63MB
";
        let m = parse_wrk(out).unwrap();
        assert_eq!(m["throughput"], 18177.61);
        assert!((m["mean_ms"] - 0.63591).abs() < 1e-9);
        assert_eq!(m["max_ms"], 12.92);
        assert!((m["p50_ms"] - 0.42).abs() < 1e-9);
        assert_eq!(m["p99_ms"], 4.54);
        assert_eq!(m["requests"], 181950.0);
        assert!((m["elapsed_s"] - 10.01).abs() < 1e-9);
        assert_eq!(m["errors"], 16.0);
    }

    #[test]
    fn sysbench() {
        let out = "SQL statistics:
    transactions:                        1234   (123.40 per sec.)
    ignored errors:                      0      (0.00 per sec.)
General statistics:
    total time:                          10.0012s
    total number of events:              1234
Latency (ms):
         min:                                    2.12
         avg:                                    8.10
         max:                                   45.67
         95th percentile:                       12.08
";
        let m = parse_sysbench(out).unwrap();
        assert_eq!(m["throughput"], 123.40);
        assert_eq!(m["elapsed_s"], 10.0012);
        assert_eq!(m["p95_ms"], 12.08);
        assert_eq!(m["requests"], 1234.0);
        let cpu = "CPU speed:\n    events per second:  1500.25\nGeneral statistics:\n    total time: 10.0001s\n    total number of events: 15003\n";
        assert_eq!(parse_sysbench(cpu).unwrap()["throughput"], 1500.25);
        assert!(parse_sysbench("FATAL: error").is_err());
    }

    #[test]
    fn regex_groups() {
        let re = Regex::new(r"score: (?P<php>[0-9.]+).*?rps=(?P<throughput>[0-9.]+)").unwrap();
        let m = parse_regex(&re, "score: 99873.5 blah rps=10219.1").unwrap();
        assert_eq!(m["php"], 99873.5);
        assert_eq!(m["throughput"], 10219.1);
        assert!(parse_regex(&re, "nothing").is_err());
    }
}
