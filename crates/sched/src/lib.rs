//! ordo-sched: the request-scheduling core — classes, per-class queues and dispatch policies, with no I/O and
//! no clock of its own, so every property can be tested deterministically.
