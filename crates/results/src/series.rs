//! `"kind": "series"`: generic charts of named (x, y) series, tables and notes, written by bench/ scripts
//! (e.g. `bench/adaptive-knee.sh`: an adaptive limit over time against the backend's knee) for measurements
//! no other kind describes; `ordo report` draws each chart as given.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The whole document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesResult {
    pub kind: String,
    pub version: u32,
    pub title: String,
    /// What was run (one line).
    #[serde(default)]
    pub subtitle: String,
    #[serde(default)]
    pub charts: Vec<SeriesChart>,
    #[serde(default)]
    pub tables: Vec<SeriesTable>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesChart {
    /// One sentence saying what the chart shows.
    pub caption: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<NamedSeries>,
}

/// One line: `points` are `[x, y]` pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamedSeries {
    pub name: String,
    pub points: Vec<[f64; 2]>,
    #[serde(default)]
    pub dashed: bool,
}

/// One table (all cells as text).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesTable {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}
