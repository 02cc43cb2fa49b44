//! The edge duties' metric families (registered once with the server's, in `crate::metrics`): requests
//! refused by a rate limit or by access control, per route, and access-log lines dropped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::label::Escaped;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: Escaped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeniedLabel {
    route: Escaped,
    reason: &'static str,
}

/// See the module documentation.
#[derive(Debug)]
pub struct EdgeMetrics {
    rate_limited: Family<RouteLabel, Counter>,
    access_denied: Family<DeniedLabel, Counter>,
    /// Access-log lines dropped (only with `access_log.overflow = "drop"`).
    pub(crate) access_log_dropped: Counter,
}

impl EdgeMetrics {
    pub(crate) fn register(registry: &mut Registry) -> EdgeMetrics {
        let m = EdgeMetrics {
            rate_limited: Family::default(),
            access_denied: Family::default(),
            access_log_dropped: Counter::default(),
        };
        registry.register(
            "rate_limited",
            "Requests answered 429 by a rate limit, by route prefix",
            m.rate_limited.clone(),
        );
        registry.register(
            "access_denied",
            "Requests refused by access control, by route prefix and reason (address: 403, \
             credentials: 401)",
            m.access_denied.clone(),
        );
        registry.register(
            "access_log_dropped_lines",
            "Access-log lines dropped because the buffer was full (only with overflow = \"drop\")",
            m.access_log_dropped.clone(),
        );
        m
    }

    pub(crate) fn rate_limited(&self, route: &str) {
        self.rate_limited
            .get_or_create(&RouteLabel {
                route: Escaped(route.to_string()),
            })
            .inc();
    }

    pub(crate) fn access_denied(&self, route: &str, reason: &'static str) {
        self.access_denied
            .get_or_create(&DeniedLabel {
                route: Escaped(route.to_string()),
                reason,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_labels_are_escaped() {
        let mut r = Registry::with_prefix("ordo_serve");
        let m = EdgeMetrics::register(&mut r);
        m.rate_limited("/a\"b\\c");
        m.access_denied("/x", "address");
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(
            out.contains(r#"ordo_serve_rate_limited_total{route="/a\"b\\c"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"ordo_serve_access_denied_total{route="/x",reason="address"} 1"#),
            "{out}"
        );
        assert!(
            out.contains("ordo_serve_access_log_dropped_lines_total 0"),
            "{out}"
        );
    }
}
