//! Reports (Markdown, JSON, JUnit, SVG) and statistics over runs. Pure.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_judge::{expect, verdict};
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_predict::predict;
pub use nodefall_record::{record, timeline};

pub mod report;
pub mod stats;
