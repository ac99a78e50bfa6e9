//! The backends that fail machines (sim, kind, libvirt, command, Vagrant) and the contained kind lab.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_io::{actions, audit, discover, disk, exec, gns, observe, probe, testpoint};
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_record::{record, timeline};
pub use nodefall_sim::sim;

pub mod backend;
pub mod kindlab;
