//! A Prometheus label value written escaped, shared by every metric family of the server (the core's in
//! `metrics`, the edge duties', fleet mode's): a leaf module, so the families that `metrics` registers can
//! use it without a module cycle.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// A label value written escaped (`\\`, `\"`, `\n`), as both exposition formats require: prometheus-client
/// writes `String` values as they are, so a class named `a"b` broke every line it appeared on.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Escaped(pub(crate) String);

impl EncodeLabelValue for Escaped {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        let mut rest = self.0.as_str();
        while let Some(i) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..i])?;
            encoder.write_str(match rest.as_bytes()[i] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[i + 1..];
        }
        encoder.write_str(rest)
    }
}
