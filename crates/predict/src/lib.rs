//! What a node failure would do to a cluster, read from a snapshot of it:
//! the rules nodefall measures (K8S-FACTS.md), applied to each pod's own
//! tolerations and owner, the cluster's discovered timings, its Services'
//! endpoints and its disruption budgets. Pure: the snapshot is read by
//! `nodefall_io::snapshot`, the prediction rendered by `nodefall_report`.
//!
//! Part of nodefall's workspace (ARCHITECTURE.md names each crate's layer).

pub use nodefall_model::{disruption, duration, errors, exit, files, plan, profile, scenario};
pub use nodefall_record::{record, timeline};

pub mod predict;
