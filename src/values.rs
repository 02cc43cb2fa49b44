//! Value parsers that tell clap the names an option takes, so the completion scripts offer them and `--help`
//! lists them — taken from the library's own list (ordo-sched's policies, the demo's), never a copy here.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// `ordo serve --policy`: one of ordo-serve's [`POLICY_NAMES`](ordo_serve::POLICY_NAMES) (ordo-sched's
/// `PolicyKind::ALL`, its custom policy spelled `lua`).
pub fn serve_policy() -> impl TypedValueParser<Value = ordo_serve::PolicyKind> {
    PossibleValuesParser::new(ordo_serve::POLICY_NAMES).try_map(|s| ordo_serve::parse_policy(&s))
}

/// `ordo demo --policy`: one of [`DemoPolicy::ALL`](ordo_demo::DemoPolicy::ALL).
pub fn demo_policy() -> impl TypedValueParser<Value = ordo_demo::DemoPolicy> {
    PossibleValuesParser::new(ordo_demo::DemoPolicy::ALL.map(|p| p.as_str()))
        .try_map(|s| s.parse::<ordo_demo::DemoPolicy>())
}

/// A parser for values that are more than a list of names (`fifo:P`): `parse` decides, `names` are what
/// completion offers (the plain names; the help text spells the rest).
#[derive(Clone)]
pub struct Suggesting<T> {
    pub names: &'static [&'static str],
    pub parse: fn(&str) -> Result<T, String>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Suggesting<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let arg = arg.map_or_else(|| "...".to_string(), |a| a.to_string());
        let refuse = |why: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{arg}': {why}\n",
                    value.to_string_lossy()
                ),
            )
            .with_cmd(cmd)
        };
        let s = value
            .to_str()
            .ok_or_else(|| refuse("not UTF-8".to_string()))?;
        (self.parse)(s).map_err(refuse)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().map(|n| PossibleValue::new(*n))))
    }
}

/// `ordo probe loop --policy`: the thread policies a user may set without a priority (completion offers
/// these; `fifo:P` and `rr:P` are accepted too). A test checks each one parses.
pub const THREAD_POLICY_NAMES: [&str; 3] = ["other", "batch", "idle"];

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    /// `--policy v` parsed by `p` in a command of its own, as clap runs it.
    fn try_parse<P>(p: P, v: &str) -> Result<P::Value, clap::Error>
    where
        P: TypedValueParser + Send + Sync + 'static,
        P::Value: Clone + Send + Sync + 'static,
    {
        let m = Command::new("t")
            .arg(Arg::new("policy").long("policy").value_parser(p))
            .try_get_matches_from(["t", "--policy", v])?;
        Ok(m.get_one::<P::Value>("policy").unwrap().clone())
    }

    #[test]
    fn serve_policy_takes_every_name_and_lists_them() {
        for (name, kind) in ordo_serve::POLICY_NAMES
            .iter()
            .zip(ordo_serve::PolicyKind::ALL)
        {
            assert_eq!(try_parse(serve_policy(), name).unwrap(), kind);
        }
        let listed: Vec<String> = serve_policy()
            .possible_values()
            .unwrap()
            .map(|p| p.get_name().to_string())
            .collect();
        assert_eq!(listed, ordo_serve::POLICY_NAMES);
        assert!(listed.contains(&"lua".to_string()), "{listed:?}");
        let e = try_parse(serve_policy(), "strid").unwrap_err().to_string();
        assert!(e.contains("stride"), "{e}");
    }

    #[test]
    fn demo_policy_takes_its_names() {
        for p in ordo_demo::DemoPolicy::ALL {
            assert_eq!(try_parse(demo_policy(), p.as_str()).unwrap(), p);
        }
        assert!(try_parse(demo_policy(), "fcfs").is_err());
    }

    #[test]
    fn suggesting_parses_with_its_function_and_offers_its_names() {
        let p = Suggesting {
            names: &THREAD_POLICY_NAMES,
            parse: |s| s.parse::<ordo_sys::Policy>().map_err(|e| e.to_string()),
        };
        for n in THREAD_POLICY_NAMES {
            try_parse(p.clone(), n).unwrap();
        }
        assert_eq!(
            try_parse(p.clone(), "fifo:10").unwrap(),
            ordo_sys::Policy::Fifo(10)
        );
        let e = try_parse(p.clone(), "fifo:100").unwrap_err().to_string();
        assert!(e.contains("invalid value 'fifo:100' for '--policy"), "{e}");
        assert_eq!(p.possible_values().unwrap().count(), 3);
    }
}
