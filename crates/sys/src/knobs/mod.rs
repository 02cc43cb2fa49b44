//! Scheduler and system knobs behind one interface with a configurable root directory and a journal of
//! original values, so every change can be restored — after each configuration, on error, on signals and
//! after a crash (`ordo tune recover`).
