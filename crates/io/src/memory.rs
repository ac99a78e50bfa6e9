//! This process's memory at the end of each phase of a run: the kernel's
//! high-water mark of resident memory so far (`VmHWM` in
//! `/proc/self/status`) and what is resident now (`VmRSS`). The mark is
//! never reset (resetting it through `/proc/self/clear_refs` also resets
//! the figure `getrusage` and `wait4` report, measured: `/usr/bin/time` then
//! saw only the last phase), so the phase that raised the peak is the one
//! whose line first shows it.
//!
//! With them, where the binary counts its allocations ([`count_heap_with`]),
//! the heap in use then: unlike the resident set, it does not move with
//! what the allocator keeps of freed memory, so it shows what stays
//! allocated (a copy of the record kept by mistake) at a size where the
//! resident set's ups and downs would hide it.
//!
//! Logged at debug level (`nodefall -v`, or `RUST_LOG=nodefall_io::memory=debug`):
//! `memory: after the reports: peak RSS 148.9 MiB so far, 96.2 MiB resident,
//! 41.3 MiB of heap in use`. Where `/proc` says nothing, nothing is logged.

use std::sync::OnceLock;

/// What the process has allocated now, in bytes (the binary's counting
/// allocator), once set.
static HEAP: OnceLock<fn() -> usize> = OnceLock::new();

/// Counts the heap in use through `allocated` from now on (once: a second
/// call changes nothing).
pub fn count_heap_with(allocated: fn() -> usize) {
    let _ = HEAP.set(allocated);
}

/// Logs the peak resident memory so far and the resident memory now, at
/// the end of `phase`.
pub fn phase_done(phase: &str) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    if let (Some(peak), Some(now)) = (kib(&status, "VmHWM:"), kib(&status, "VmRSS:")) {
        let heap = HEAP.get().map_or(String::new(), |allocated| {
            let kib = u64::try_from(allocated() / 1024).unwrap_or(u64::MAX);
            format!(", {:.1} MiB of heap in use", mib(kib))
        });
        tracing::debug!(
            "memory: after {phase}: peak RSS {:.1} MiB so far, {:.1} MiB resident{heap}",
            mib(peak),
            mib(now)
        );
    }
}

#[allow(clippy::cast_precision_loss, reason = "a figure for a log line")]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A `/proc/<pid>/status` field in KiB (`VmHWM:`, `VmRSS:`).
fn kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_read_from_the_status_text() {
        let status = "Name:\tnodefall\nVmPeak:\t 1000 kB\nVmHWM:\t  121344 kB\nVmRSS:\t 90000 kB\n";
        assert_eq!(kib(status, "VmHWM:"), Some(121_344));
        assert_eq!(kib(status, "VmRSS:"), Some(90_000));
        assert_eq!(kib("Name:\tx\n", "VmHWM:"), None);
    }

    #[test]
    fn the_mark_keeps_a_freed_peak() {
        let read = |field| {
            std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| kib(&s, field))
        };
        let Some(before) = read("VmHWM:") else {
            return; // not Linux
        };
        // 64 MiB touched, then freed (a block this large goes back to the
        // system at once): the mark keeps it, the resident size does not.
        let block = vec![1u8; 64 << 20];
        assert_eq!(block.iter().map(|&b| u64::from(b)).sum::<u64>(), 64 << 20);
        drop(block);
        let (peak, now) = (
            read("VmHWM:").expect("VmHWM"),
            read("VmRSS:").expect("VmRSS"),
        );
        assert!(peak >= before.max(64 * 1024), "{peak} KiB");
        assert!(
            now + 32 * 1024 < peak,
            "resident {now} KiB of a {peak} KiB peak"
        );
    }
}
