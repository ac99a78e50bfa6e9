//! What the distribution and paired charts are drawn from: series of
//! values with their unit, built by `report/aggregate.rs` and
//! `report/compare.rs`.
//!
//! A leaf beside `svg/mod.rs`: the charts (and `draw.rs`'s value labels)
//! import these types from here, so no chart imports its parent module.

/// How a series' values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds, shown as seconds (`12.3s`).
    Ms,
    /// A count (pods, requests).
    Count,
}

/// Per metric, each run's value: the aggregate's distribution chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub title: String,
    pub series: Vec<Series>,
}

/// One metric over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub unit: Unit,
    /// The runs that observed it.
    pub points: Vec<Point>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

/// One run's value of a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The run's number, from 1.
    pub run: usize,
    pub value: f64,
    /// The slowest run (drawn apart).
    pub highlight: bool,
}

/// Two runs or aggregates, metric by metric: `report compare`'s chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    pub title: String,
    pub base_label: String,
    pub new_label: String,
    pub rows: Vec<PairedRow>,
}

/// One metric of both sides (absent where a side did not observe it).
#[derive(Debug, Clone, PartialEq)]
pub struct PairedRow {
    pub name: String,
    pub unit: Unit,
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// Over its threshold: drawn as a regression.
    pub regressed: bool,
}
