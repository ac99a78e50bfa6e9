//! nodefall: test how a Kubernetes cluster survives node failures.
//!
//! Data flows one way: scenario file -> [`scenario`] (load, validate) ->
//! [`plan`] (resolved against a [`profile`]) -> runner -> backend/actions ->
//! observe -> timeline -> expect -> report.

pub mod actions;
pub mod audit;
pub mod backend;
pub mod cli;
pub mod discover;
pub mod duration;
pub mod errors;
pub mod exec;
pub mod exit;
pub mod expect;
pub mod gns;
pub mod kindlab;
pub mod logging;
pub mod observe;
pub mod plan;
pub mod probe;
pub mod profile;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod shutdown;
pub mod sim;
pub mod stats;
pub mod testpoint;
pub mod timeline;
