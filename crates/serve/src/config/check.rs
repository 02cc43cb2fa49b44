//! Validation of a parsed config: plain values, listener addresses, proxy loops and the policy/script pair —
//! each failure an [`Invalid`] at its key path (or naming the flag that caused it), which
//! [`ServeConfig::locate`] places in the file.

use std::time::Duration;

use ordo_sched::PolicyKind;
use ordo_util::keypath;

use super::{Invalid, MAX_COALESCE, ServeConfig, path_to_string, policy_name};

impl ServeConfig {
    /// The policy / policy_script pair, with the flag named when one caused the mismatch.
    fn check_policy_script(&self) -> Result<(), Invalid> {
        let o = &self.overrides;
        let file = self.origin.as_ref().map(|o| o.name.clone());
        if self.policy == PolicyKind::Custom && self.policy_script.is_none() {
            if o.policy == Some(PolicyKind::Custom) {
                return Err(Invalid::flag(
                    "--policy lua",
                    match file {
                        Some(f) => {
                            format!("needs `policy_script` in {f} (or --policy-script PATH)")
                        }
                        None => {
                            "needs --policy-script PATH (the Lua script defining `pick(heads)`)"
                                .to_string()
                        }
                    },
                ));
            }
            return Err(Invalid::new(
                keypath!["policy"],
                "policy \"lua\" needs `policy_script = \"file.lua\"`",
            ));
        }
        if self.policy != PolicyKind::Custom && self.policy_script.is_some() {
            if let Some(flag) = o.flag_for("policy_script") {
                let whose = match (&o.policy, &file) {
                    (Some(_), _) => " from --policy".to_string(),
                    (None, Some(f)) => format!(" in {f}"),
                    (None, None) => String::new(),
                };
                return Err(Invalid::flag(
                    flag,
                    format!(
                        "only used with policy \"lua\" (policy is \"{}\"{whose}); add --policy lua",
                        policy_name(self.policy)
                    ),
                ));
            }
            if let Some(flag) = o.flag_for("policy") {
                return Err(Invalid::flag(
                    flag,
                    format!(
                        "{} sets `policy_script`, which only policy \"lua\" uses (leave out --policy, or \
                         remove `policy_script` from the file)",
                        self.file_line(keypath!["policy_script"])
                    ),
                ));
            }
            return Err(Invalid::new(
                keypath!["policy_script"],
                format!(
                    "only used with policy = \"lua\" (policy is \"{}\")",
                    policy_name(self.policy)
                ),
            ));
        }
        Ok(())
    }

    /// The admin listener must not share the HTTP listener's address; names `--admin` or `--listen` when
    /// one of them caused the clash.
    fn check_admin_address(&self) -> Result<(), Invalid> {
        if !(self.admin.enabled && self.admin.listen == self.listen && self.listen.port() != 0) {
            return Ok(());
        }
        let o = &self.overrides;
        if let Some(Some(a)) = o.admin {
            return Err(Invalid::flag(
                format!("--admin {a}"),
                format!("same address as the HTTP listener ({})", self.listen),
            ));
        }
        if let Some(l) = o.listen {
            return Err(Invalid::flag(
                format!("--listen {l}"),
                format!(
                    "same address as the admin listener (`admin.listen`, {}); pick another, or move it \
                     with --admin ADDR (--admin off disables it)",
                    self.file_line(keypath!["admin", "listen"])
                ),
            ));
        }
        Err(Invalid::new(
            keypath!["admin", "listen"],
            format!("same address as `listen` ({})", self.listen),
        ))
    }

    /// `tls.listen` must differ from the other listeners' addresses.
    fn check_tls_address(&self) -> Result<(), Invalid> {
        let Some(l) = self.tls.as_ref().and_then(|t| t.listen) else {
            return Ok(());
        };
        if l.port() == 0 {
            return Ok(());
        }
        let clash = if l == self.listen {
            "`listen`"
        } else if self.admin.enabled && l == self.admin.listen {
            "`admin.listen`"
        } else {
            return Ok(());
        };
        Err(Invalid::new(
            keypath!["tls", "listen"],
            format!(
                "same address as {clash} ({l}); leave `tls.listen` out to make the main listener speak TLS"
            ),
        ))
    }

    /// A proxy upstream that is this server's own listen address would send every request back to the
    /// server until it times out; refused (with `--listen` named when the flag made it so). Loops through
    /// other hops are caught at run time by the proxy's Via check.
    fn check_proxy_loops(&self) -> Result<(), Invalid> {
        for (i, r) in self.routes.iter().enumerate() {
            let Some(p) = &r.proxy else { continue };
            for (j, u) in p.upstreams.iter().enumerate() {
                let u = &u.address;
                if !crate::backend::proxy::points_at_listener(u, self.listen) {
                    continue;
                }
                let path = keypath!["routes", i, "proxy", "upstreams", j];
                if let Some(l) = self.overrides.listen {
                    return Err(Invalid::flag(
                        format!("--listen {l}"),
                        format!(
                            "{}: {} upstream `{u}` is this address: every request on prefix `{}` \
                             would be proxied back to this server",
                            self.file_line(path.clone()),
                            path_to_string(&path),
                            r.prefix
                        ),
                    ));
                }
                return Err(Invalid::new(
                    path,
                    format!(
                        "`{u}` is this server's own `listen` address ({}): every request would be \
                         proxied back to this server",
                        self.listen
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[limits]` values that would make the server unusable (every request 431, no connection accepted,
    /// kept-alive connections dropped at once) are refused rather than silently clamped or obeyed.
    fn check_limits(&self) -> Result<(), Invalid> {
        let l = &self.limits;
        if l.max_head_bytes == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_head_bytes"],
                "must be ≥ 1, got 0 (every request would be refused with 431)",
            ));
        }
        if l.max_uri_bytes == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_uri_bytes"],
                "must be ≥ 1, got 0 (every request would be refused with 414)",
            ));
        }
        if l.max_connections == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_connections"],
                "must be ≥ 1, got 0",
            ));
        }
        if l.head_timeout.is_zero() {
            return Err(Invalid::new(
                keypath!["limits", "head_timeout"],
                "must be > 0",
            ));
        }
        if l.idle_timeout.is_zero() {
            return Err(Invalid::new(
                keypath!["limits", "idle_timeout"],
                "must be > 0",
            ));
        }
        if l.max_requests_per_connection == Some(0) {
            return Err(Invalid::new(
                keypath!["limits", "max_requests_per_connection"],
                "must be ≥ 1, got 0 (leave it out for no limit)",
            ));
        }
        Ok(())
    }

    /// Checks of plain values (everything that needs no compilation).
    pub(crate) fn check_values(&self) -> Result<(), Invalid> {
        if self.workers == crate::overload::Workers::Fixed(0) {
            return Err(Invalid::new(keypath!["workers"], "must be ≥ 1, got 0"));
        }
        if self.threads > crate::serving_thread::MAX_SERVING_THREADS {
            return Err(Invalid::new(
                keypath!["threads"],
                format!("must be ≤ 1024, got {}", self.threads),
            ));
        }
        if self.coalesce > MAX_COALESCE {
            return Err(Invalid::new(
                keypath!["coalesce"],
                format!(
                    "must be ≤ {}, got {}",
                    crate::http::duration::format(MAX_COALESCE),
                    crate::http::duration::format(self.coalesce)
                ),
            ));
        }
        if self.queue_cap == Some(0) {
            return Err(Invalid::new(keypath!["queue_cap"], "must be ≥ 1, got 0"));
        }
        self.check_limits()?;
        if let Some(f) = &self.fleet {
            f.check(self.workers)
                .map_err(|(k, m)| Invalid::new(keypath!["fleet", k], m))?;
        }
        self.http2.check()?;
        self.lua.check()?;
        self.check_policy_script()?;
        let mut seen = std::collections::HashSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    "every class needs a non-empty name",
                ));
            }
            // names go into log lines and the X-Ordo-Class header, where a line break would split them
            if c.name.chars().any(char::is_control) {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    format!(
                        "{:?} contains a control character (line break, tab, ...)",
                        c.name
                    ),
                ));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    format!("duplicate class name `{}`", c.name),
                ));
            }
            if c.weight == 0 {
                return Err(Invalid::new(
                    keypath!["classes", i, "weight"],
                    "must be ≥ 1, got 0",
                ));
            }
            if c.queue_cap == Some(0) {
                return Err(Invalid::new(
                    keypath!["classes", i, "queue_cap"],
                    "must be ≥ 1, got 0",
                ));
            }
            if c.deadline == Some(Duration::ZERO) {
                return Err(Invalid::new(
                    keypath!["classes", i, "deadline"],
                    "must be > 0",
                ));
            }
        }
        if self.policy == PolicyKind::Edf && !self.classes.iter().any(|c| c.deadline.is_some()) {
            return Err(Invalid::new(
                keypath!["policy"],
                "policy \"edf\" needs at least one class with a `deadline`",
            ));
        }
        if let Some(d) = &self.default_class {
            if !self.class_names().iter().any(|n| n == d) {
                return Err(Invalid::new(
                    keypath!["default_class"],
                    format!(
                        "no class named `{d}` (classes: {})",
                        self.class_names().join(", ")
                    ),
                ));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            if !self.class_names().iter().any(|n| n == &r.class) {
                return Err(Invalid::new(
                    keypath!["rules", i, "class"],
                    format!(
                        "no class named `{}` (classes: {})",
                        r.class,
                        self.class_names().join(", ")
                    ),
                ));
            }
        }
        let mut prefixes = std::collections::HashSet::new();
        for (i, r) in self.routes.iter().enumerate() {
            let host = match &r.host {
                Some(h) => crate::vhost::HostPattern::parse(h)
                    .map_err(|e| Invalid::new(keypath!["routes", i, "host"], e))?,
                None => crate::vhost::HostPattern::Any,
            };
            if !r.prefix.starts_with('/') {
                return Err(Invalid::new(
                    keypath!["routes", i, "prefix"],
                    format!("must start with `/`, got `{}`", r.prefix),
                ));
            }
            let tls = r
                .tls_only()
                .map_err(|e| Invalid::new(keypath!["routes", i, "scheme"], e))?;
            if !prefixes.insert((host.clone(), r.prefix.as_str(), tls)) {
                return Err(Invalid::new(
                    keypath!["routes", i, "prefix"],
                    format!("duplicate route prefix `{}` for host `{host}`", r.prefix),
                ));
            }
            let n = r.static_files.is_some() as u8
                + r.proxy.is_some() as u8
                + r.synthetic.is_some() as u8
                + r.redirect.is_some() as u8;
            if n != 1 {
                return Err(Invalid::new(
                    keypath!["routes", i],
                    "a route needs exactly one backend table: `static`, `proxy`, `synthetic` or `redirect`",
                ));
            }
        }
        self.check_admin_address()?;
        self.check_tls_address()?;
        self.check_proxy_loops()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_COALESCE;

    #[test]
    fn coalesce_is_a_duration_up_to_100us() {
        let ok = |t: &str| ServeConfig::from_toml_str(t, "c.toml").map(|c| c.coalesce);
        assert_eq!(ok(""), Ok(DEFAULT_COALESCE));
        assert_eq!(ok("coalesce = \"0s\"\n"), Ok(Duration::ZERO));
        assert_eq!(ok("coalesce = \"20us\"\n"), Ok(Duration::from_micros(20)));
        assert_eq!(ok("coalesce = \"100us\"\n"), Ok(Duration::from_micros(100)));
        assert_eq!(
            ok("threads = 1\ncoalesce = \"1ms\"\n")
                .unwrap_err()
                .to_string(),
            "c.toml:2: coalesce: must be ≤ 100us, got 1ms"
        );
        let e = ok("coalesce = 20\n").unwrap_err().to_string();
        assert!(e.starts_with("c.toml:1: coalesce:"), "{e}");
        let e = ok("coalesce = \"20 furlongs\"\n").unwrap_err().to_string();
        assert!(e.contains("coalesce") && e.contains("unit"), "{e}");
    }
}
