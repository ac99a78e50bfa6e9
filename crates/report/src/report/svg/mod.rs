//! Self-contained SVG charts (no scripts, fonts or links): the run's
//! timeline next to `report.md`, the distribution of each metric over
//! repeated runs, and two runs (or aggregates) side by side. They read the
//! same in any viewer that shows images.

mod axis;
mod data;
pub mod distribution;
mod draw;
pub mod forecast;
pub mod paired;
pub mod timeline;

pub use data::{Distribution, Paired, PairedRow, Point, Series, Unit};
