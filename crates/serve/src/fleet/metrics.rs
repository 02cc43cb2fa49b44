//! Fleet mode's metric families (registered once with the server's, in `crate::metrics`): whether Redis is
//! reachable, the workers leased per class, the live instances, and what failed or fell back.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::label::Escaped;

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct ClassLabel {
    class: Escaped,
}

impl ClassLabel {
    pub(crate) fn new(name: &str) -> ClassLabel {
        ClassLabel {
            class: Escaped(name.to_string()),
        }
    }
}

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct FleetMetrics {
    /// 1 while Redis answers, 0 while this instance runs on its local configuration.
    pub(crate) connected: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Workers leased to this instance per class (no series while no lease holds).
    pub(crate) lease: Family<ClassLabel, Gauge>,
    /// Instances that published their demand in the last sync (this one included).
    pub(crate) instances: Gauge,
    /// Redis calls that failed or timed out (syncs and rate-limit checks).
    pub(crate) sync_errors: Counter<u64, AtomicU64>,
    /// Times Redis came back after being unreachable.
    pub(crate) reconnects: Counter<u64, AtomicU64>,
    /// Rate-limit decisions taken locally because Redis was unreachable.
    pub(crate) local_decisions: Counter<u64, AtomicU64>,
}

impl FleetMetrics {
    pub(crate) fn register(registry: &mut Registry) -> FleetMetrics {
        let m = FleetMetrics::default();
        registry.register(
            "fleet_connected",
            "Fleet mode: 1 while Redis answers, 0 while this instance falls back to its local rate limits \
             and worker limits",
            m.connected.clone(),
        );
        registry.register(
            "fleet_lease",
            "Fleet mode: workers of the application's capacity (fleet_workers) leased to this instance, by \
             class",
            m.lease.clone(),
        );
        registry.register(
            "fleet_instances",
            "Fleet mode: instances that published their demand in the last sync",
            m.instances.clone(),
        );
        registry.register(
            "fleet_sync_errors",
            "Fleet mode: Redis calls (syncs and rate-limit checks) that failed or timed out",
            m.sync_errors.clone(),
        );
        registry.register(
            "fleet_reconnects",
            "Fleet mode: times Redis came back after being unreachable",
            m.reconnects.clone(),
        );
        registry.register(
            "fleet_local_decisions",
            "Fleet mode: rate-limit decisions taken on this instance alone because Redis was unreachable",
            m.local_decisions.clone(),
        );
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_ordo_serve_fleet() {
        let mut r = Registry::with_prefix("ordo_serve");
        let m = FleetMetrics::register(&mut r);
        m.connected.set(1);
        m.lease.get_or_create(&ClassLabel::new("gold")).set(8);
        m.lease.get_or_create(&ClassLabel::new("a\"b")).set(1);
        m.sync_errors.inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        for line in [
            "ordo_serve_fleet_connected 1",
            "ordo_serve_fleet_lease{class=\"gold\"} 8",
            "ordo_serve_fleet_lease{class=\"a\\\"b\"} 1",
            "ordo_serve_fleet_instances 0",
            "ordo_serve_fleet_sync_errors_total 1",
            "ordo_serve_fleet_reconnects_total 0",
            "ordo_serve_fleet_local_decisions_total 0",
        ] {
            assert!(out.contains(line), "{line} missing from {out}");
        }
    }
}
