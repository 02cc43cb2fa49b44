//! How the config file and `--policy` spell the scheduler's policies: the names, the flag's parser and the
//! serde reader of `policy = "..."`, kept apart so that the one list of names serves all three.

use std::fmt;

use ordo_sched::PolicyKind;
use serde::Deserialize;

/// How the config file and `--policy` spell each of the scheduler's policies: sched's own names, except that
/// its custom policy (an external picker chooses among the queue heads) is `lua`, the one picker serve has.
pub const fn policy_name(p: PolicyKind) -> &'static str {
    match p {
        PolicyKind::Custom => "lua",
        p => p.as_str(),
    }
}

/// Every name [`policy_name`] gives, in [`PolicyKind::ALL`]'s order: what serde lists on an unknown one and
/// what `--policy` completes to.
pub const POLICY_NAMES: [&str; PolicyKind::ALL.len()] = {
    let mut names = [""; PolicyKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = policy_name(PolicyKind::ALL[i]);
        i += 1;
    }
    names
};

/// The policy spelled `s` (see [`policy_name`]).
fn policy_named(s: &str) -> Option<PolicyKind> {
    PolicyKind::ALL.into_iter().find(|p| policy_name(*p) == s)
}

/// `--policy NAME`: the policy spelled `s`; the error lists the valid names.
pub fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    policy_named(s).ok_or_else(|| {
        let (rest, last) = POLICY_NAMES.split_at(POLICY_NAMES.len() - 1);
        format!(
            "unknown policy `{s}` (expected {} or {})",
            rest.join(", "),
            last.join("")
        )
    })
}

/// `policy = "..."`, read as serde reads a unit-only enum (so a wrong value gets the same message, with the
/// valid names listed): one of [`POLICY_NAMES`].
pub(super) fn deserialize_policy<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<PolicyKind, D::Error> {
    /// The variant's name, refused inside the variant's own place so that the error points at it.
    struct Name(PolicyKind);
    impl<'de> Deserialize<'de> for Name {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            policy_named(&s)
                .map(Name)
                .ok_or_else(|| serde::de::Error::unknown_variant(&s, &POLICY_NAMES))
        }
    }
    struct PolicyVisitor;
    impl<'de> serde::de::Visitor<'de> for PolicyVisitor {
        type Value = PolicyKind;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a policy name")
        }
        fn visit_enum<A: serde::de::EnumAccess<'de>>(
            self,
            data: A,
        ) -> Result<PolicyKind, A::Error> {
            use serde::de::VariantAccess;
            let (Name(p), variant) = data.variant()?;
            variant.unit_variant()?;
            Ok(p)
        }
    }
    d.deserialize_enum("PolicyKind", &POLICY_NAMES, PolicyVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;

    #[test]
    fn policies_are_sched_kinds_with_custom_spelled_lua() {
        for p in PolicyKind::ALL {
            assert_eq!(parse_policy(policy_name(p)), Ok(p));
            let cfg = ServeConfig::from_toml_str(
                &format!(
                    "policy = \"{}\"\n[[classes]]\nname = \"a\"\ndeadline = \"1s\"\n",
                    policy_name(p)
                ),
                "p.toml",
            );
            // lua also needs its script; every other name is accepted as is
            match p {
                PolicyKind::Custom => {
                    assert!(cfg.unwrap_err().to_string().contains("policy_script"))
                }
                _ => assert_eq!(cfg.unwrap().policy, p),
            }
        }
        assert_eq!(policy_name(PolicyKind::Custom), "lua");
        assert_eq!(
            parse_policy("custom").unwrap_err(),
            "unknown policy `custom` (expected fcfs, priority, lottery, stride, wfq, srpt, edf or lua)"
        );
    }
}
