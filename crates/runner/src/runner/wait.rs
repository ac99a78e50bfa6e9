//! The one way the runner waits on the cluster: until the recorder sees a
//! new transition or a deadline on the run clock passes, whichever is first.
//! Callers re-check their condition after each wake-up, so a missed
//! notification costs at most the time left, never a decision.

use std::time::Duration;

use tokio::sync::watch;

use crate::timeline::Ms;

/// After a change, how long more changes are let in before the caller looks
/// again: a burst (thousands of pods at once) is judged once, not once per
/// transition. Decisions use the transitions' own times, so this delays only
/// when the runner moves on, never what it measures.
const SETTLE: Duration = Duration::from_millis(20);

/// Sleeps until `rx` reports a change (and [`SETTLE`] more) or `deadline`
/// (ms on the run clock, now being `now`) has passed; returns at once when
/// it already has.
pub(super) async fn change_or_deadline(rx: &mut watch::Receiver<u64>, now: Ms, deadline: Ms) {
    let left = Duration::from_millis(u64::try_from((deadline - now).max(0) + 1).unwrap_or(1));
    let start = tokio::time::Instant::now();
    // Err: the recorder is gone or the deadline passed; either way the
    // caller looks again and decides.
    if let Ok(Ok(())) = tokio::time::timeout(left, rx.changed()).await {
        let settle = SETTLE.min(left.saturating_sub(start.elapsed()));
        tokio::time::sleep(settle).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wakes_on_a_change_before_the_deadline() {
        let (tx, mut rx) = watch::channel(0u64);
        let start = tokio::time::Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            tx.send_replace(1);
            // Keep the sender alive past the deadline.
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        change_or_deadline(&mut rx, 0, 5_000).await;
        assert_eq!(start.elapsed(), Duration::from_millis(300) + SETTLE);
    }

    #[tokio::test(start_paused = true)]
    async fn wakes_at_the_deadline_without_a_change() {
        let (_tx, mut rx) = watch::channel(0u64);
        let start = tokio::time::Instant::now();
        change_or_deadline(&mut rx, 1_000, 3_000).await;
        assert_eq!(start.elapsed(), Duration::from_millis(2_001));
    }
}
