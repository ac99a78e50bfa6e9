//! The cluster-side work: processes, the Kubernetes API (observe, actions, discover, graceful-shutdown preflight, audit check) and HTTP probes.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_judge::verdict;
pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_predict::predict;
pub use nodefall_record::{record, timeline};

pub mod actions;
pub mod audit;
pub mod discover;
pub mod disk;
pub mod exec;
pub mod gns;
pub mod memory;
pub mod observe;
pub mod probe;
pub mod snapshot;
pub mod testpoint;
