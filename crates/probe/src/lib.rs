//! ordo-probe: context-switch and run-queue measurements (the loop experiment and the pid sampler).
