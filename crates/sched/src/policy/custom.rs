//! The custom policy: an external [`HeadPicker`] (the Lua policy of ordo serve) chooses among the queue
//! heads. The core stays in charge of queues, caps and timeouts; the picker only names a class. If it
//! returns `None`, an unknown class or an empty class, the core falls back to FCFS over the heads, so a
//! buggy script can slow the service down but never stall or lose a request.

use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{ClassId, Nanos, SchedConfig};

/// What a picker sees of each non-empty class: its head request and its queue length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head<'a> {
    /// The class index.
    pub class: ClassId,
    /// The class name.
    pub class_name: &'a str,
    /// Requests queued in the class.
    pub queued: usize,
    /// The head request's size hint.
    pub size_hint: u64,
    /// How long the head request has waited.
    pub waited: Nanos,
    /// The head request's absolute deadline.
    pub deadline: Option<Nanos>,
    /// The class weight (from the configuration).
    pub weight: u32,
    /// The class priority (from the configuration).
    pub priority: i32,
}

/// A policy written outside the core: picks the class to serve among the queue heads.
pub trait HeadPicker: Send {
    /// Return the class to serve next; `heads` lists the non-empty classes in class order.
    fn pick(&mut self, heads: &[Head<'_>], now: Nanos) -> Option<ClassId>;
}

pub(crate) struct Custom {
    names: Vec<String>,
    weight: Vec<u32>,
    priority: Vec<i32>,
    picker: Box<dyn HeadPicker>,
}

impl Custom {
    pub(super) fn new(cfg: &SchedConfig, picker: Box<dyn HeadPicker>) -> Self {
        Custom {
            names: cfg.classes.iter().map(|c| c.name.clone()).collect(),
            weight: cfg.classes.iter().map(|c| c.weight).collect(),
            priority: cfg.classes.iter().map(|c| c.priority).collect(),
            picker,
        }
    }
}

impl Policy for Custom {
    fn on_enqueue(&mut self, _q: &Queues, _e: &QEntry, _live: &dyn Fn(Handle) -> bool) {}

    fn pick(&mut self, q: &Queues, now: Nanos) -> Option<Choice> {
        let heads: Vec<Head<'_>> = q
            .heads()
            .map(|(c, e)| Head {
                class: c,
                class_name: &self.names[c],
                queued: q.len(c),
                size_hint: e.meta.size_hint,
                waited: e.waited(now),
                deadline: e.meta.deadline,
                weight: self.weight[c],
                priority: self.priority[c],
            })
            .collect();
        let chosen = self.picker.pick(&heads, now);
        drop(heads);
        match chosen {
            Some(c) if q.len(c) > 0 => Some(Choice::Head(c)),
            _ => q.oldest_head().map(Choice::Head),
        }
    }

    fn on_remove(&mut self, _q: &Queues, _e: &QEntry, _dispatched: bool) {}

    fn take_picker(self: Box<Self>) -> Option<Box<dyn HeadPicker>> {
        Some(self.picker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClassSpec, Meta, PolicyKind, Scheduler};

    /// Records what it was shown and picks the last head.
    struct Spy(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
    impl HeadPicker for Spy {
        fn pick(&mut self, heads: &[Head<'_>], now: Nanos) -> Option<ClassId> {
            let mut seen = self.0.lock().unwrap();
            for h in heads {
                seen.push(format!(
                    "{}:{}:{}:{}:{}:{:?}:{}:{}@{now}",
                    h.class,
                    h.class_name,
                    h.queued,
                    h.size_hint,
                    h.waited,
                    h.deadline,
                    h.weight,
                    h.priority
                ));
            }
            heads.last().map(|h| h.class)
        }
    }

    #[test]
    fn picker_sees_non_empty_heads_and_is_obeyed() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut b = ClassSpec::new("b").weight(3).priority(-1);
        b.deadline = Some(1000);
        let classes = vec![ClassSpec::new("a"), ClassSpec::new("empty"), b];
        let cfg = SchedConfig::new(classes, PolicyKind::Custom);
        let mut s = Scheduler::with_picker(cfg, Box::new(Spy(seen.clone()))).unwrap();
        let mut m = Meta::new(0, 5);
        m.size_hint = 7;
        s.enqueue("a", m, 5).unwrap();
        s.enqueue("b1", Meta::new(2, 10), 10).unwrap();
        s.enqueue("b2", Meta::new(2, 11), 11).unwrap();
        assert_eq!(s.dispatch(20).unwrap().item, "b1");
        assert_eq!(
            *seen.lock().unwrap(),
            vec!["0:a:1:7:15:None:1:0@20", "2:b:2:0:10:Some(1010):3:-1@20"]
        );
    }
}
