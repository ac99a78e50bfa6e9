//! Judgement, pure: expectations judged against a timeline (`expect`), and
//! the run's other verdicts decided from recorded facts (`verdict`).
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_record::{record, timeline};

pub mod expect;
pub mod verdict;
