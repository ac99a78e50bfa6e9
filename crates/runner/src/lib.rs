//! The run: journal, steps, cleanup, signals, and the run session that ends in reports.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_io::{
    actions, audit, discover, disk, exec, gns, memory, observe, probe, testpoint,
};
pub use nodefall_judge::{expect, verdict};
pub use nodefall_machines::{backend, kindlab};
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_record::{record, timeline};
pub use nodefall_report::{report, stats};
pub use nodefall_sim::sim;

pub mod kind_up;
pub mod logging;
pub mod runner;
pub mod shutdown;
