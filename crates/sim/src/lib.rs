//! The simulator: a real control plane with KWOK playing the nodes.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_io::{actions, audit, discover, disk, exec, gns, observe, probe, testpoint};
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_record::{record, timeline};

pub mod sim;
