//! Bad configurations are refused with the file, the line and the key named; every serve config under
//! examples/ is valid and routes a request to each of its classes.

use ordo_serve::ServeConfig;

fn err(text: &str) -> String {
    match ServeConfig::from_toml_str(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn value_errors_name_file_line_and_key() {
    assert_eq!(
        err("listen = \"127.0.0.1:0\"\nworkers = 0\n"),
        "bad.toml:2: workers: must be ≥ 1, got 0"
    );
    assert_eq!(
        err("[[classes]]\nname = \"a\"\n\n[[classes]]\nname = \"b\"\nweight = 0\n"),
        "bad.toml:6: classes[1].weight: must be ≥ 1, got 0"
    );
    assert_eq!(
        err("[[classes]]\nname = \"a\"\n[[classes]]\nname = \"a\"\n"),
        "bad.toml:4: classes[1].name: duplicate class name `a`"
    );
    assert_eq!(
        err("[[classes]]\nname = \"a\"\n[[rules]]\nclass = \"b\"\npath_prefix = \"/x\"\n"),
        "bad.toml:4: rules[0].class: no class named `b` (classes: a)"
    );
    assert_eq!(
        err("default_class = \"zz\"\n"),
        "bad.toml:1: default_class: no class named `zz` (classes: default)"
    );
}

#[test]
fn limits_that_would_make_the_server_unusable_are_refused() {
    assert_eq!(
        err("workers = 2\n[limits]\nmax_connections = 0\n"),
        "bad.toml:3: limits.max_connections: must be ≥ 1, got 0"
    );
    assert_eq!(
        err("[limits]\nmax_head_bytes = 0\n"),
        "bad.toml:2: limits.max_head_bytes: must be ≥ 1, got 0 (every request would be refused with 431)"
    );
    assert_eq!(
        err("[limits]\nmax_uri_bytes = 0\n"),
        "bad.toml:2: limits.max_uri_bytes: must be ≥ 1, got 0 (every request would be refused with 414)"
    );
    assert_eq!(
        err("[limits]\nhead_timeout = \"0s\"\n"),
        "bad.toml:2: limits.head_timeout: must be > 0"
    );
    assert_eq!(
        err("[limits]\nidle_timeout = \"0ms\"\n"),
        "bad.toml:2: limits.idle_timeout: must be > 0"
    );
    assert_eq!(
        err("[limits]\nmax_requests_per_connection = 0\n"),
        "bad.toml:2: limits.max_requests_per_connection: must be ≥ 1, got 0 (leave it out for no limit)"
    );
    // the smallest sensible values and a body limit of 0 (no bodies) are accepted
    ServeConfig::from_toml_str(
        "[limits]\nmax_connections = 1\nmax_head_bytes = 1\nhead_timeout = \"1ms\"\nidle_timeout = \"1ms\"\nmax_requests_per_connection = 1\nmax_body_bytes = 0\n",
        "ok.toml",
    )
    .unwrap();
}

#[test]
fn a_missing_inline_key_is_located_at_its_table() {
    assert_eq!(
        err("[[rules]]\nclass = \"default\"\nheader = { value = \"x\" }\n"),
        "bad.toml:3: rules[0].header.name: needs a non-empty `name`"
    );
}

#[test]
fn rule_and_route_errors() {
    let e = err("[[rules]]\nclass = \"default\"\npath_regex = \"(unclosed\"\n");
    assert!(
        e.starts_with("bad.toml:3: rules[0].path_regex: invalid regex"),
        "{e}"
    );
    let e = err("[[rules]]\nclass = \"default\"\nclient = \"10.0.0.0/40\"\n");
    assert_eq!(
        e,
        "bad.toml:3: rules[0].client: invalid prefix length `40` in `10.0.0.0/40` (0..=32)"
    );
    let e = err("[[rules]]\nclass = \"default\"\nheader = { name = \"x\", regex = \"[\" }\n");
    assert!(
        e.starts_with("bad.toml:3: rules[0].header.regex: invalid regex"),
        "{e}"
    );
    let e = err("[[rules]]\nclass = \"default\"\npath_prefix = \"/a\"\npath_glob = \"/b/*\"\n");
    assert_eq!(
        e,
        "bad.toml:1: rules[0]: give at most one of `path_prefix`, `path_glob`, `path_regex`"
    );
    let e = err(
        "[[routes]]\nprefix = \"/a\"\nsynthetic = {}\nproxy = { upstreams = [\"127.0.0.1:1\"] }\n",
    );
    assert_eq!(
        e,
        "bad.toml:1: routes[0]: a route needs exactly one backend table: `static`, `proxy`, `synthetic` or `redirect`"
    );
    let e = err("[[routes]]\nprefix = \"a\"\nsynthetic = {}\n");
    assert_eq!(
        e,
        "bad.toml:2: routes[0].prefix: must start with `/`, got `a`"
    );
    let e =
        err("[[routes]]\nprefix = \"/s\"\nstatic = { root = \"/nonexistent/ordo-test-root\" }\n");
    assert!(e.starts_with("bad.toml:3: routes[0].static: "), "{e}");
}

#[test]
fn parse_errors_name_the_line() {
    // an unknown key gets the one meant (issue 23)
    assert_eq!(
        err("workers = 4\nwokers = 3\n"),
        "bad.toml:2: wokers: unknown key `wokers`; did you mean `workers`?"
    );
    assert_eq!(
        err("workers = 4\n[[classes]]\nname = \"a\"\nweigth = 2\n"),
        "bad.toml:4: classes[0].weigth: unknown key `weigth`; did you mean `weight`?"
    );
    // bench's mix files say [[class]]; here it is [[classes]]
    assert_eq!(
        err("[[class]]\nname = \"a\"\n"),
        "bad.toml:1: class[0]: unknown key `class`; did you mean `classes`?"
    );
    assert_eq!(
        err("[admin]\nlisten_addr = \"127.0.0.1:1\"\n"),
        "bad.toml:2: admin.listen_addr: unknown key `listen_addr` (expected one of: enabled, listen, \
         token, token_file, allowed_hosts)"
    );
    // Rust's type names are not the reader's: the range, and what was found
    assert_eq!(
        err("workers = 4\n[[classes]]\nname = \"a\"\nweight = \"x\"\n"),
        "bad.toml:4: classes[0].weight: expected a whole number (0 to 4294967295), found the string \"x\""
    );
    // keys under a table header are named with their table, like the validation errors
    let e = err("[[classes]]\nname = \"a\"\n[[classes]] # b\nname = \"b\"\nweight = 4294967296\n");
    assert_eq!(
        e,
        "bad.toml:5: classes[1].weight: expected a whole number (0 to 4294967295), found the number 4294967296"
    );
    let e = err("workers = 2\n[limits]\nhead_timeout = \"soon\"\n");
    assert!(
        e.starts_with("bad.toml:3: limits.head_timeout: invalid duration"),
        "{e}"
    );
    let e = err("policy = \"random\"\n");
    assert_eq!(
        e,
        "bad.toml:1: policy: unknown value `random` (expected one of: fcfs, priority, lottery, stride, \
         wfq, srpt, edf, lua)"
    );
    assert_eq!(
        err("policy = \"strde\"\n"),
        "bad.toml:1: policy: unknown value `strde`; did you mean `stride`?"
    );
    let e = err("queue_timeout = \"10 parsecs\"\n");
    assert!(
        e.starts_with("bad.toml:1: queue_timeout: invalid duration"),
        "{e}"
    );
    let e = err("workers = \n");
    assert!(e.starts_with("bad.toml:1"), "{e}");
    let e = err("workers = -1\n");
    assert!(e.starts_with("bad.toml:1: workers:"), "{e}");
}

#[test]
fn policy_and_script_errors() {
    assert_eq!(
        err("policy = \"lua\"\n"),
        "bad.toml:1: policy: policy \"lua\" needs `policy_script = \"file.lua\"`"
    );
    assert_eq!(
        err("policy = \"edf\"\n"),
        "bad.toml:1: policy: policy \"edf\" needs at least one class with a `deadline`"
    );
    let dir = tempfile::tempdir().unwrap();
    let lua = dir.path().join("p.lua");
    std::fs::write(&lua, "function not_pick() end\n").unwrap();
    let e = err(&format!(
        "policy = \"lua\"\npolicy_script = \"{}\"\n",
        lua.display()
    ));
    assert!(e.starts_with("bad.toml:2: policy_script: "), "{e}");
    assert!(
        e.contains("does not define a global function `pick`"),
        "{e}"
    );
    std::fs::write(
        &lua,
        "function classify(r) return nil end\nthis is not lua\n",
    )
    .unwrap();
    let e = err(&format!("[classify]\nscript = \"{}\"\n", lua.display()));
    assert!(
        e.starts_with("bad.toml:2: classify.script: Lua script"),
        "{e}"
    );
    let e = err("[classify]\nscript = \"/nonexistent/x.lua\"\n");
    assert!(e.contains("cannot read Lua script"), "{e}");
}

#[test]
fn file_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("serve.toml");
    std::fs::write(&p, "\n\nworkers = 0\n").unwrap();
    let e = ServeConfig::from_file(&p).unwrap_err().to_string();
    assert_eq!(e, format!("{}:3: workers: must be ≥ 1, got 0", p.display()));
    let e = ServeConfig::from_file(dir.path().join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml: cannot read"), "{e}");
}

#[test]
fn defaults_serve_synthetic_fcfs_on_8080() {
    let c = ServeConfig::from_toml_str("", "empty.toml").unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.admin.listen.to_string(), "127.0.0.1:9090");
    assert_eq!(c.policy, ordo_serve::PolicyKind::Fcfs);
    assert_eq!(c.class_names(), vec!["default".to_string()]);
    assert!(c.effective_routes()[0].synthetic.is_some());
    ServeConfig::default().validate().unwrap();
}

/// Every `ordo serve` config under examples/ (examples/serve/*.toml, and the `serve.toml` /
/// `*-serve.toml` the demo and tune examples start) loads, validates and compiles as `--check` does, and
/// every class it declares can receive a request: a rule or `default_class` names it, it is the implicit
/// default (the first class), or a Lua classify script may pick it. A class nothing routes to is dead
/// configuration — examples/serve/adaptive.toml once had a CoDel/LIFO class that never saw a request.
#[test]
fn every_example_is_valid() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "toml") {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let is_serve = |p: &std::path::Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        p.parent()
            .and_then(|d| d.file_name())
            .is_some_and(|d| d == "serve")
            || name == "serve.toml"
            || name.ends_with("-serve.toml")
    };
    let mut n = 0;
    let scratch = tempfile::tempdir().unwrap();
    for p in files.iter().filter(|p| is_serve(p)) {
        // seed002.sh runs this one from a copy next to the www/ it generates: check it the same way
        let at = if p.ends_with("tune/seed002-serve.toml") {
            std::fs::create_dir_all(scratch.path().join("www")).unwrap();
            let copy = scratch.path().join("seed002-serve.toml");
            std::fs::copy(p, &copy).unwrap();
            copy
        } else {
            p.clone()
        };
        let c = ServeConfig::from_file(&at).unwrap_or_else(|e| panic!("{e}"));
        c.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let names = c.class_names();
        let default = c.default_class.clone().unwrap_or_else(|| names[0].clone());
        for name in &names {
            let reachable = *name == default
                || c.rules.iter().any(|r| r.class == *name)
                || c.classify.script.is_some();
            assert!(
                reachable,
                "{}: class `{name}` receives no request: no rule or default_class names it and there is \
                 no classify script",
                p.display()
            );
        }
        n += 1;
    }
    assert!(
        n >= 12,
        "expected the example serve configs, found {n}: {files:?}"
    );
}

/// A valid file made invalid by a command-line override: the error names the flag (file = the flag, no
/// line or key), the file's own errors keep their line, and an override that fixes nothing is not blamed.
#[test]
fn override_errors_name_the_flag_not_the_line() {
    use ordo_serve::{Overrides, PolicyKind};
    let with = |text: &str, o: Overrides| {
        let mut cfg = ServeConfig::from_toml_str(text, "ok.toml").expect("valid alone");
        cfg.apply_overrides(o);
        cfg.validate()
    };
    let e = with(
        "workers = 2\npolicy = \"fcfs\"\n",
        Overrides {
            policy: Some(PolicyKind::Custom),
            workers: Some(3.into()),
            ..Overrides::default()
        },
    )
    .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (None, None), "{e}");
    assert_eq!(
        e.to_string(),
        "--policy lua: needs `policy_script` in ok.toml (or --policy-script PATH)"
    );
    let e = with(
        "policy = \"edf\"\n[[classes]]\nname = \"a\"\ndeadline = \"1s\"\n[[classes]]\nname = \"b\"\n",
        Overrides {
            policy: Some(PolicyKind::Stride),
            policy_script: Some("/no/such/pick.lua".into()),
            ..Overrides::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--policy-script /no/such/pick.lua: only used with policy \"lua\" (policy is \"stride\" from --policy); add --policy lua"
    );
    // the admin listener's default address, taken by --listen
    let e = with(
        "workers = 2\n",
        Overrides {
            listen: Some("127.0.0.1:9090".parse().unwrap()),
            ..Overrides::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with(
            "--listen 127.0.0.1:9090: same address as the admin listener (`admin.listen`, ok.toml)"
        ),
        "{e}"
    );
    // overrides that only change valid values are fine
    assert!(
        with(
            "workers = 2\n",
            Overrides {
                workers: Some(8.into()),
                threads: Some(1),
                admin: Some(None),
                listen: Some("127.0.0.1:9090".parse().unwrap()),
                ..Overrides::default()
            },
        )
        .is_ok()
    );
}

/// `from_file_with` validates the file with the flags applied: a file completed by its flags is accepted
/// (and `from_file` alone still refuses it at its line), a flag that overrides a bad value fixes it.
#[test]
fn a_file_completed_by_its_flags_is_accepted() {
    use ordo_serve::Overrides;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("pick.lua");
    std::fs::write(&script, "function pick(heads) return heads[1].class end\n").unwrap();
    let p = dir.path().join("lua.toml");
    std::fs::write(&p, "workers = 2\npolicy = \"lua\"\n").unwrap();
    let e = ServeConfig::from_file(&p).unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("policy")), "{e}");
    let cfg = ServeConfig::from_file_with(
        &p,
        Overrides {
            policy_script: Some(script.clone()),
            ..Overrides::default()
        },
    )
    .unwrap();
    assert_eq!(cfg.policy_script.as_deref(), Some(script.as_path()));
    assert_eq!(
        cfg.overrides.policy_script.as_deref(),
        Some(script.as_path())
    );

    std::fs::write(&p, "workers = 0\n").unwrap();
    let e = ServeConfig::from_file_with(&p, Overrides::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}:1: workers: must be ≥ 1, got 0", p.display())
    );
    let cfg = ServeConfig::from_file_with(
        &p,
        Overrides {
            workers: Some(3.into()),
            ..Overrides::default()
        },
    )
    .unwrap();
    assert_eq!(cfg.workers, 3);
}

/// Issue 10 (smaller items): a class name with a line break would split log lines and the `X-Ordo-Class`
/// header; it is refused where it is written. `"` and `\` are fine (metrics escape them).
#[test]
fn issue10_class_names_with_control_characters_are_refused() {
    assert_eq!(
        err("[[classes]]\nname = \"a\"\n[[classes]]\nname = \"b\\nc\"\n"),
        "bad.toml:4: classes[1].name: \"b\\nc\" contains a control character (line break, tab, ...)"
    );
    assert!(
        err("[[classes]]\nname = \"tab\\there\"\n").starts_with("bad.toml:2: classes[0].name: ")
    );
    ServeConfig::from_toml_str("[[classes]]\nname = 'we\"ird\\ one'\n", "ok.toml").unwrap();
}

/// Issue 10 defect 9: the admin token's keys are checked like the others.
#[test]
fn issue10_admin_token_errors_name_the_key() {
    assert_eq!(
        err("[admin]\ntoken = \"a\"\ntoken_file = \"t\"\n"),
        "bad.toml:3: admin.token_file: give `token` or `token_file`, not both"
    );
    assert_eq!(
        err("[admin]\ntoken = \"\"\n"),
        "bad.toml:2: admin.token: the token is empty"
    );
    assert!(
        err("[admin]\ntoken = \"two words\"\n")
            .starts_with("bad.toml:2: admin.token: the token must be printable")
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.token");
    let e = err(&format!(
        "[admin]\ntoken_file = \"{}\"\n",
        missing.display()
    ));
    assert!(
        e.starts_with(&format!(
            "bad.toml:2: admin.token_file: cannot read {}",
            missing.display()
        )),
        "{e}"
    );
    let empty = dir.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let e = err(&format!("[admin]\ntoken_file = \"{}\"\n", empty.display()));
    assert_eq!(
        e,
        format!(
            "bad.toml:2: admin.token_file: {}: the token is empty",
            empty.display()
        )
    );
    assert_eq!(
        err("[admin]\nallowed_hosts = [\"ok.example\", \"http://x:1/\"]\n"),
        "bad.toml:2: admin.allowed_hosts[1]: \"http://x:1/\" is not a host name (give the name alone: no scheme, port or path)"
    );
    // the token never shows in a printed configuration
    let c = ServeConfig::from_toml_str("[admin]\ntoken = \"hunter2\"\n", "ok.toml").unwrap();
    assert!(!format!("{c:?}").contains("hunter2"));
}

/// Issue 10 defect 8: the Lua limits are checked like every other key.
#[test]
fn issue10_lua_limit_errors_name_the_key() {
    assert_eq!(
        err("[lua]\nmemory_limit = 10\n"),
        "bad.toml:2: lua.memory_limit: must be ≥ 1048576 (1 MiB), got 10"
    );
    assert_eq!(
        err("[lua]\nclassify_time_limit = \"0s\"\n"),
        "bad.toml:2: lua.classify_time_limit: must be > 0"
    );
    assert_eq!(
        err("[lua]\npick_time_limit = \"1m\"\n"),
        "bad.toml:2: lua.pick_time_limit: must be ≤ 10s, got 1m"
    );
    assert!(
        err("[lua]\nmemroy_limit = 1\n")
            .ends_with("unknown key `memroy_limit`; did you mean `memory_limit`?")
    );
}

#[test]
fn proxy_keys_are_checked_with_file_line_and_key() {
    let route = |extra: &str| {
        format!(
            "workers = 2\n\n[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"127.0.0.1:9\"]\n{extra}\n"
        )
    };
    assert_eq!(
        err(&route("response_head_timeout = \"0s\"")),
        "bad.toml:7: routes[0].proxy.response_head_timeout: must be > 0"
    );
    assert_eq!(
        err(&route("read_timeout = \"0ms\"")),
        "bad.toml:7: routes[0].proxy.read_timeout: must be > 0"
    );
    assert_eq!(
        err(&route("max_response_head_bytes = 0")),
        "bad.toml:7: routes[0].proxy.max_response_head_bytes: must be ≥ 1, got 0"
    );
    let e = err(&route("forward_underscore_headers = \"yes\""));
    assert!(
        e.starts_with("bad.toml:7: ") && e.contains("proxy.forward_underscore_headers: "),
        "{e}"
    );
    let e = err(&route("response_head_timeout = 5"));
    assert!(
        e.starts_with("bad.toml:7: ") && e.contains("proxy.response_head_timeout: "),
        "{e}"
    );
    assert_eq!(
        err("[[routes]]\nprefix = \"/\"\nproxy = { upstreams = [] }\n"),
        "bad.toml:3: routes[0].proxy.upstreams: at least one upstream is needed"
    );
    // https upstreams (issue 11): a CA file that cannot be read is named with its key
    let e = err(
        "[[routes]]\nprefix = \"/\"\nproxy = { upstreams = [\"https://x:1\"], ca_file = \"/nonexistent/ca.pem\" }\n",
    );
    assert!(
        e.starts_with("bad.toml:3: routes[0].proxy.ca_file: /nonexistent/ca.pem: cannot read"),
        "{e}"
    );
    // the new keys with sensible values are accepted
    ServeConfig::from_toml_str(
        &route("response_head_timeout = \"10s\"\nforward_underscore_headers = true"),
        "ok.toml",
    )
    .unwrap();
}
