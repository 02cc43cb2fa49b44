//! The proxy's upstreams in the metrics: whether each takes requests, how often it was ejected, and what
//! is in flight to it — refreshed from the running configuration at each scrape (nothing on the request
//! path).

use std::sync::RwLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Escaped;
use crate::backend::proxy::{HealthState, UpstreamSnapshot};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    route: Escaped,
    upstream: Escaped,
}

/// Gauges per route and upstream.
pub(super) struct UpstreamMetrics {
    healthy: Family<UpstreamLabel, Gauge>,
    ejected: Family<UpstreamLabel, Gauge>,
    ejections: Family<UpstreamLabel, Gauge<u64, AtomicU64>>,
    in_flight: Family<UpstreamLabel, Gauge>,
    /// Upstreams seen at earlier scrapes (their gauges zeroed once gone from the configuration).
    seen: RwLock<Vec<UpstreamLabel>>,
}

impl UpstreamMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = UpstreamMetrics {
            healthy: Family::default(),
            ejected: Family::default(),
            ejections: Family::default(),
            in_flight: Family::default(),
            seen: RwLock::new(Vec::new()),
        };
        registry.register(
            "upstream_healthy",
            "1 while the proxy upstream takes requests (not ejected, not marked down by health checks)",
            m.healthy.clone(),
        );
        registry.register(
            "upstream_ejected",
            "1 while the upstream is ejected after consecutive failures",
            m.ejected.clone(),
        );
        registry.register(
            "upstream_ejections",
            "Ejections of the upstream since the configuration was loaded",
            m.ejections.clone(),
        );
        registry.register(
            "upstream_in_flight",
            "Requests in flight to the upstream (balance = least_requests or p2c_ewma; else 0)",
            m.in_flight.clone(),
        );
        m
    }

    /// Set from the proxy routes' snapshots: `(route prefix, its upstreams)`.
    pub(super) fn refresh(&self, routes: &[(String, Vec<UpstreamSnapshot>)]) {
        let mut seen = self.seen.write().unwrap_or_else(|p| p.into_inner());
        let now: Vec<UpstreamLabel> = routes
            .iter()
            .flat_map(|(r, ups)| {
                ups.iter().map(move |u| UpstreamLabel {
                    route: Escaped(r.clone()),
                    upstream: Escaped(u.address.clone()),
                })
            })
            .collect();
        for gone in seen.iter().filter(|l| !now.contains(l)) {
            self.healthy.get_or_create(gone).set(0);
            self.ejected.get_or_create(gone).set(0);
            self.in_flight.get_or_create(gone).set(0);
        }
        let snaps = routes.iter().flat_map(|(_, ups)| ups.iter());
        for (l, u) in now.iter().zip(snaps) {
            self.healthy
                .get_or_create(l)
                .set(i64::from(u.state == HealthState::Up));
            self.ejected
                .get_or_create(l)
                .set(i64::from(matches!(u.state, HealthState::Ejected(_))));
            self.ejections.get_or_create(l).set(u.ejections);
            self.in_flight
                .get_or_create(l)
                .set(u.in_flight.unwrap_or(0) as i64);
        }
        *seen = now;
    }
}
