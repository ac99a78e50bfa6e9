//! The scenario model: the file format (scenarios and command files), timing profiles and the plan a scenario resolves to. Pure: no I/O runtime, no Kubernetes client.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub mod disruption;
pub mod duration;
pub mod errors;
pub mod exit;
pub mod files;
pub mod plan;
pub mod profile;
pub mod scenario;
