//! nodefall: test how a Kubernetes cluster survives node failures.
//!
//! Data flows one way: scenario file -> [`scenario`] (load, validate) ->
//! [`plan`] (resolved against a [`profile`]) -> runner -> backend/actions ->
//! observe -> timeline -> expect -> report.

pub mod cli;
pub mod exit;
pub mod plan;
pub mod profile;
pub mod report;
pub mod scenario;
pub mod selector;
pub mod sim;
pub mod timeline;
