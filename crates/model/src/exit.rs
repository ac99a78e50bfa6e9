//! Process exit codes, documented in `nodefall --help` and the README.

use std::process::ExitCode;

/// Every expectation passed (or the command succeeded).
pub const PASS: u8 = 0;
/// The scenario ran, and at least one expectation failed or an abort guard fired.
pub const EXPECTATION_FAILED: u8 = 1;
/// Bad input: unreadable or invalid scenario, bad arguments. Nothing was injected.
pub const INVALID_INPUT: u8 = 2;
/// Infrastructure error: cluster unreachable, backend command failed, timeout.
pub const INFRASTRUCTURE: u8 = 3;
/// Interrupted by Ctrl-C (after restoring the cluster).
pub const INTERRUPTED: u8 = 130;

pub fn code(c: u8) -> ExitCode {
    ExitCode::from(c)
}
