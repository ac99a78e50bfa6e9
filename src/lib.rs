//! nodefall: test how a Kubernetes cluster survives node failures.
//!
//! Data flows one way: scenario file -> [`scenario`] (load, validate) ->
//! [`plan`] (resolved against a [`profile`]) -> runner -> backend/actions ->
//! observe -> timeline -> expect -> report. Each layer is a crate of the
//! workspace (ARCHITECTURE.md); this one is the command line, and re-exports
//! the layers' modules under one name for the integration tests.

pub use nodefall_io::{
    actions, audit, discover, disk, exec, gns, memory, observe, probe, snapshot, testpoint,
};
pub use nodefall_judge::{expect, verdict};
pub use nodefall_machines::{backend, kindlab};
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_predict::predict;
pub use nodefall_record::{record, timeline};
pub use nodefall_report::{report, stats};
pub use nodefall_runner::{kind_up, logging, runner, shutdown};
pub use nodefall_sim::sim;

pub mod cli;
