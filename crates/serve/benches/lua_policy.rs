//! Criterion microbenchmarks of the Lua hooks (`cargo bench -p ordo-serve --bench lua_policy`):
//! - the Lua policy's cost per dispatch: one enqueue plus one dispatch with 100k requests queued across 8
//!   classes, a small `pick(heads)` versus the built-in stride policy in the same run;
//! - the cost of classifying one request (6 headers, 2 cookies) with examples/serve/lua-classify.lua versus
//!   ten config rules, in the same run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ordo_sched::{ClassSpec, Meta, Nanos, PolicyKind, SchedConfig, Scheduler};
use ordo_serve::lua::LuaPicker;

const QUEUED: usize = 100_000;
const CLASSES: usize = 8;
const TICK: Nanos = 100;

/// A realistic small policy: the highest `weight × waited` head (proportional aging).
const SCRIPT: &str = r#"
function pick(heads)
  local best, score = nil, -1
  for _, h in ipairs(heads) do
    local s = h.weight * (h.waited_us + 1)
    if s > score then best, score = h.class, s end
  end
  return best
end
"#;

fn config(policy: PolicyKind) -> SchedConfig {
    let classes = (0..CLASSES)
        .map(|i| ClassSpec::new(format!("class{i}")).weight(1 + i as u32))
        .collect();
    let mut cfg = SchedConfig::new(classes, policy);
    cfg.seed = 42;
    cfg
}

fn filled(lua: bool, script: &std::path::Path) -> (Scheduler<u64>, u64) {
    let mut s = if lua {
        let p = LuaPicker::load(script, Default::default()).expect("script loads");
        Scheduler::with_picker(config(PolicyKind::Custom), Box::new(p)).expect("valid")
    } else {
        Scheduler::new(config(PolicyKind::Stride)).expect("valid")
    };
    let mut now = 0;
    for i in 0..QUEUED as u64 {
        now += TICK;
        s.enqueue(i, Meta::new(i as usize % CLASSES, now), now)
            .expect("no caps");
    }
    (s, now)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("pick.lua");
    std::fs::write(&script, SCRIPT).expect("write script");
    let mut g = c.benchmark_group("enqueue+dispatch, 100k queued, 8 classes");
    g.measurement_time(Duration::from_secs(5));
    g.warm_up_time(Duration::from_secs(1));
    for (name, lua) in [("stride", false), ("lua", true)] {
        let (mut s, mut now) = filled(lua, &script);
        let mut i = QUEUED as u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                now += TICK;
                i += 1;
                s.enqueue(i, Meta::new(i as usize % CLASSES, now), now)
                    .expect("no caps");
                black_box(s.dispatch(now));
            })
        });
    }
    g.finish();
}

fn bench_classify(c: &mut Criterion) {
    use ordo_serve::ServeConfig;
    use ordo_serve::classify::Classifier;
    use ordo_serve::http::Request;

    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/serve");
    let mut rules = String::new();
    for i in 0..10 {
        rules.push_str(&format!("[[classes]]\nname = \"c{i}\"\n"));
    }
    for i in 0..9 {
        rules.push_str(&format!(
            "[[rules]]\nclass = \"c{i}\"\nheader = {{ name = \"x-tier\", value = \"t{i}\" }}\n"
        ));
    }
    rules.push_str("[[rules]]\nclass = \"c9\"\ncookie = { name = \"user\", value = \"alice\" }\n");
    let by_rules = ServeConfig::from_toml_str(&rules, "rules.toml").expect("valid");
    let by_rules = Classifier::build(&by_rules).expect("compiles");
    let by_lua = ServeConfig::from_file(examples.join("lua-classify.toml")).expect("example");
    let by_lua = Classifier::build(&by_lua).expect("compiles");

    let mut req = Request::get("/export/report?id=7");
    for (k, v) in [
        ("host", "example.test"),
        ("user-agent", "curl/8.5"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip"),
        ("x-request-id", "4f9a"),
        ("cookie", "theme=dark; user=alice"),
    ] {
        req.headers.push(k, v);
    }
    assert_eq!(&**by_rules.classify(&req).class_name, "c9");
    assert_eq!(&**by_lua.classify(&req).class_name, "paid");

    let mut g = c.benchmark_group("classify one request");
    g.measurement_time(Duration::from_secs(5));
    g.warm_up_time(Duration::from_secs(1));
    g.bench_function("10 rules", |b| {
        b.iter(|| black_box(by_rules.classify(&req)))
    });
    g.bench_function("lua", |b| b.iter(|| black_box(by_lua.classify(&req))));
    g.finish();
}

criterion_group!(benches, bench, bench_classify);
criterion_main!(benches);
