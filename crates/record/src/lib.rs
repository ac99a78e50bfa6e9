//! What a run saw and what it wrote down: the timeline of observed transitions and the run record (result.json's schema). Pure.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};

pub mod record;
pub mod timeline;
