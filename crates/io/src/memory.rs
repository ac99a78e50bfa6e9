//! This process's peak memory, phase by phase: the kernel's high-water mark
//! of resident memory (`VmHWM` in `/proc/self/status`), read at the end of a
//! phase and then reset (`5` into `/proc/self/clear_refs`, Linux 4.0+), so
//! the next reading is the next phase's own peak. `getrusage`'s `ru_maxrss`
//! is not reset: the whole process's peak stays available there.
//!
//! Logged at debug level (`nodefall -v`): `memory: peak RSS 118.4 MiB in
//! the run`. Where `/proc` says nothing, nothing is logged.

/// Logs the peak resident memory since the last call (or since the process
/// began) as `phase`'s, then starts the next phase's count.
pub fn phase_done(phase: &str) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    if let Some(kib) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .as_deref()
        .and_then(high_water_kib)
    {
        // KiB to MiB for the log line; precision is not at stake.
        #[allow(clippy::cast_precision_loss, reason = "a figure for a log line")]
        let mib = kib as f64 / 1024.0;
        tracing::debug!("memory: peak RSS {mib:.1} MiB in {phase}");
    }
    // Best effort: without it the next figure is the peak so far.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// `VmHWM` from the text of `/proc/<pid>/status`, in KiB.
fn high_water_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_water_mark_is_read_from_the_status_text() {
        let status = "Name:\tnodefall\nVmPeak:\t 1000 kB\nVmHWM:\t  121344 kB\nVmRSS:\t 90000 kB\n";
        assert_eq!(high_water_kib(status), Some(121_344));
        assert_eq!(high_water_kib("Name:\tx\n"), None);
    }

    #[test]
    fn a_reset_drops_the_mark_to_what_is_resident_now() {
        let read = || {
            std::fs::read_to_string("/proc/self/status")
                .ok()
                .as_deref()
                .and_then(high_water_kib)
        };
        if read().is_none() {
            return; // not Linux
        }
        // 64 MiB touched, then freed (a block this large goes back to the
        // system at once): the mark keeps it until the reset.
        let block = vec![1u8; 64 << 20];
        assert_eq!(block.iter().map(|&b| u64::from(b)).sum::<u64>(), 64 << 20);
        drop(block);
        let peak = read().expect("VmHWM");
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let after = read().expect("VmHWM");
        assert!(
            after + 32 * 1024 < peak,
            "the reset left {after} KiB of a {peak} KiB peak"
        );
    }
}
