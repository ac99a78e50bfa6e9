//! The verdicts nodefall reaches besides its expectations, each a pure
//! function of recorded facts:
//!
//! - [`remediation`]: how a failed node was remediated (acts, fencing,
//!   release, recovery, clean-up);
//! - [`windows`]: which of a probe's error windows counts over a span of
//!   the run, and how many requests failed there;
//! - [`graceful`]: whether a node's graceful shutdown will run, from the
//!   preflight's facts;
//! - [`audit`]: how close an observer came to the API server's audit log;
//! - [`fidelity`]: how close the simulator came to real kubelets on the
//!   same scenario (`nodefall report fidelity`).
//!
//! What the first four find is part of `result.json`, so their types are
//! the record's (`record::remediation`, `record::probe`, `record::graceful`,
//! `record::audit`); deciding them is here, beside `expect`. The I/O that
//! gathers the facts is the io crate's; the report crate renders verdicts.

pub mod audit;
pub mod fidelity;
pub mod graceful;
pub mod remediation;
pub mod windows;
