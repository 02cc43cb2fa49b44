//! The scheduler's configuration (classes, policy, caps, timeouts) and its validation, kept apart from the
//! queues so that a bad configuration is refused before any state is touched.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

/// Time in nanoseconds since an epoch the caller chooses; the core never reads a clock.
pub type Nanos = u64;

/// Index into [`SchedConfig::classes`].
pub type ClassId = usize;

/// One request class: its share, priority, aging, deadline and queue limits.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassSpec {
    /// Unique, non-empty name; `reconfigure` matches classes by it.
    pub name: String,
    /// Share for lottery, stride and wfq; must be at least 1.
    pub weight: u32,
    /// Priority policy: a higher value is served first.
    pub priority: i32,
    /// Priority and srpt aging: a request that has waited at least this long is "aged" (see docs/policies.md).
    pub age_after: Option<Nanos>,
    /// Relative deadline (edf). A request enqueued without an absolute deadline gets `arrival + deadline`.
    pub deadline: Option<Nanos>,
    /// Maximum queued requests of this class (`None`: unlimited).
    pub queue_cap: Option<usize>,
    /// Maximum queue wait of this class; overrides [`SchedConfig::queue_timeout`].
    pub queue_timeout: Option<Nanos>,
    /// Overload control inside the class: CoDel-style standing-queue drops and adaptive LIFO.
    pub codel: Option<crate::CodelSpec>,
}

impl ClassSpec {
    /// A class with weight 1, priority 0 and no limits.
    pub fn new(name: impl Into<String>) -> Self {
        ClassSpec {
            name: name.into(),
            weight: 1,
            priority: 0,
            age_after: None,
            deadline: None,
            queue_cap: None,
            queue_timeout: None,
            codel: None,
        }
    }

    /// Builder: set the weight.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Builder: set the priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
}

/// The dispatch policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// First come, first served across all classes.
    Fcfs,
    /// Strict priority by class, with optional aging.
    Priority,
    /// Randomised proportional share by weight (seeded, deterministic).
    Lottery,
    /// Deterministic proportional share by weight.
    Stride,
    /// Fair queuing charging each class by its requests' size hints divided by its weight.
    Wfq,
    /// Smallest size hint first, with aging.
    Srpt,
    /// Earliest deadline first, with admission control.
    Edf,
    /// An external [`crate::HeadPicker`] chooses among the queue heads.
    Custom,
}

impl PolicyKind {
    /// Every policy, in a stable order.
    pub const ALL: [PolicyKind; 8] = [
        PolicyKind::Fcfs,
        PolicyKind::Priority,
        PolicyKind::Lottery,
        PolicyKind::Stride,
        PolicyKind::Wfq,
        PolicyKind::Srpt,
        PolicyKind::Edf,
        PolicyKind::Custom,
    ];

    /// The lower-case name used in configuration files ("fcfs", "priority", ..., "custom").
    pub const fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Fcfs => "fcfs",
            PolicyKind::Priority => "priority",
            PolicyKind::Lottery => "lottery",
            PolicyKind::Stride => "stride",
            PolicyKind::Wfq => "wfq",
            PolicyKind::Srpt => "srpt",
            PolicyKind::Edf => "edf",
            PolicyKind::Custom => "custom",
        }
    }

    /// Whether the policy reads requests' size hints (srpt orders by them, wfq charges them, a custom
    /// picker sees them): a front end may skip computing hints for the others.
    pub const fn uses_size_hint(self) -> bool {
        matches!(
            self,
            PolicyKind::Srpt | PolicyKind::Wfq | PolicyKind::Custom
        )
    }

    /// Whether the policy learns from observed service times (edf's admission estimate): a front end that
    /// serves a request without the scheduler still reports its service time for these.
    pub const fn learns_service_time(self) -> bool {
        matches!(self, PolicyKind::Edf)
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error of [`PolicyKind::from_str`]; it lists [`PolicyKind::ALL`]'s names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = PolicyKind::ALL.map(PolicyKind::as_str);
        write!(
            f,
            "unknown policy {:?} (expected one of {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

/// The whole scheduler configuration.
#[derive(Clone, Debug)]
pub struct SchedConfig {
    /// At least one class; class 0 is where requests of removed classes go on `reconfigure`.
    pub classes: Vec<ClassSpec>,
    /// The dispatch policy.
    pub policy: PolicyKind,
    /// Maximum queued requests over all classes.
    pub global_queue_cap: Option<usize>,
    /// Default maximum queue wait for classes without their own.
    pub queue_timeout: Option<Nanos>,
    /// Seed of the lottery policy's random numbers.
    pub seed: u64,
}

impl SchedConfig {
    /// A configuration with the given classes and policy, no caps, no timeout, seed 0.
    pub fn new(classes: Vec<ClassSpec>, policy: PolicyKind) -> Self {
        SchedConfig {
            classes,
            policy,
            global_queue_cap: None,
            queue_timeout: None,
            seed: 0,
        }
    }

    /// Check the configuration; the error names the class and field at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.classes.is_empty() {
            return Err(ConfigError::NoClasses);
        }
        if self.global_queue_cap == Some(0) {
            return Err(ConfigError::ZeroGlobalQueueCap);
        }
        if self.queue_timeout == Some(0) {
            return Err(ConfigError::ZeroGlobalQueueTimeout);
        }
        let mut seen = HashSet::with_capacity(self.classes.len());
        for (index, c) in self.classes.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(ConfigError::EmptyClassName { index });
            }
            if !seen.insert(c.name.as_str()) {
                return Err(ConfigError::DuplicateClass {
                    class: c.name.clone(),
                });
            }
            let bad = |field: &'static str, reason: &'static str| ConfigError::InvalidField {
                class: c.name.clone(),
                field,
                reason,
            };
            if c.weight == 0 {
                return Err(bad("weight", "must be at least 1 (got 0)"));
            }
            if c.queue_cap == Some(0) {
                return Err(bad("queue_cap", "must be at least 1 (got 0)"));
            }
            if c.queue_timeout == Some(0) {
                return Err(bad("queue_timeout", "must be greater than 0"));
            }
            if c.deadline == Some(0) {
                return Err(bad("deadline", "must be greater than 0"));
            }
            if let Some(codel) = c.codel {
                if codel.target == 0 {
                    return Err(bad("codel.target", "must be greater than 0"));
                }
                if codel.interval == 0 {
                    return Err(bad("codel.interval", "must be greater than 0"));
                }
            }
        }
        Ok(())
    }

    /// The queue timeout that applies to `class` (its own, else the global one).
    pub fn timeout_of(&self, class: ClassId) -> Option<Nanos> {
        self.classes
            .get(class)
            .and_then(|c| c.queue_timeout)
            .or(self.queue_timeout)
    }

    /// The index of the class called `name`.
    pub fn class_by_name(&self, name: &str) -> Option<ClassId> {
        self.classes.iter().position(|c| c.name == name)
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `classes` is empty.
    #[error("scheduler: at least one class is required")]
    NoClasses,
    /// A class has an empty name.
    #[error("scheduler: class #{index} has an empty name")]
    EmptyClassName {
        /// Position in `classes`.
        index: usize,
    },
    /// Two classes share a name.
    #[error("scheduler: duplicate class name {class:?}")]
    DuplicateClass {
        /// The repeated name.
        class: String,
    },
    /// A field of a class has a bad value.
    #[error("scheduler: class {class:?}: {field} {reason}")]
    InvalidField {
        /// The class name.
        class: String,
        /// The field name.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// `global_queue_cap` is 0.
    #[error("scheduler: global_queue_cap must be at least 1 (got 0)")]
    ZeroGlobalQueueCap,
    /// `queue_timeout` is 0.
    #[error("scheduler: queue_timeout must be greater than 0")]
    ZeroGlobalQueueTimeout,
    /// Policy `custom` without a [`crate::HeadPicker`].
    #[error("scheduler: policy custom needs a head picker (use Scheduler::with_picker)")]
    MissingPicker,
    /// A [`crate::HeadPicker`] was given for a built-in policy.
    #[error("scheduler: a head picker was given but the policy is {0}, not custom")]
    UnexpectedPicker(PolicyKind),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(classes: Vec<ClassSpec>) -> SchedConfig {
        SchedConfig::new(classes, PolicyKind::Fcfs)
    }

    #[test]
    fn policy_names_round_trip() {
        for p in PolicyKind::ALL {
            assert_eq!(p.as_str().parse::<PolicyKind>(), Ok(p));
        }
        assert_eq!(
            "fifo".parse::<PolicyKind>().unwrap_err().to_string(),
            "unknown policy \"fifo\" (expected one of fcfs, priority, lottery, stride, wfq, srpt, edf, custom)"
        );
    }

    #[test]
    fn validation_names_class_and_field() {
        assert_eq!(cfg(vec![]).validate(), Err(ConfigError::NoClasses));
        let e = cfg(vec![ClassSpec::new("a").weight(0)])
            .validate()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "scheduler: class \"a\": weight must be at least 1 (got 0)"
        );
        let e = cfg(vec![ClassSpec::new("a"), ClassSpec::new("a")])
            .validate()
            .unwrap_err();
        assert_eq!(e, ConfigError::DuplicateClass { class: "a".into() });
        let e = cfg(vec![ClassSpec::new("")]).validate().unwrap_err();
        assert_eq!(e, ConfigError::EmptyClassName { index: 0 });
        let mut c = ClassSpec::new("b");
        c.queue_cap = Some(0);
        let e = cfg(vec![c]).validate().unwrap_err();
        assert!(e.to_string().contains("\"b\": queue_cap"), "{e}");
        let mut g = cfg(vec![ClassSpec::new("a")]);
        g.global_queue_cap = Some(0);
        assert_eq!(g.validate(), Err(ConfigError::ZeroGlobalQueueCap));
        assert!(
            cfg(vec![ClassSpec::new("a"), ClassSpec::new("b")])
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn class_timeout_overrides_global() {
        let mut a = ClassSpec::new("a");
        a.queue_timeout = Some(5);
        let mut c = cfg(vec![a, ClassSpec::new("b")]);
        c.queue_timeout = Some(9);
        assert_eq!(c.timeout_of(0), Some(5));
        assert_eq!(c.timeout_of(1), Some(9));
    }
}
