//! The verdicts nodefall reaches about a run besides its expectations, each
//! a pure function of recorded facts: how close the observer came to the
//! API server's audit log ([`audit`]), whether a node's graceful shutdown
//! will run ([`graceful`]), how a failed node was remediated
//! ([`remediation`]), which of a probe's error windows counts over a span
//! ([`windows`]). What each finds is part of `result.json`, so its types
//! are the record's; deciding them is here, beside `expect`.

pub mod audit;
pub mod graceful;
pub mod remediation;
pub mod windows;
