//! The probe loop: one task per URL, each sending at most one request at a
//! time on a fixed tick, within the probe's request budget and time limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Fetch, Phase, ProbeRecord, ProbeSpec, RequestOutcome, Sample, StopReason};
use crate::timeline::Ms;

/// The run's clock: ms since the run started.
pub type Clock = Arc<dyn Fn() -> Ms + Send + Sync>;

/// A probe in progress; its tasks stop when it is stopped or dropped.
pub struct Running {
    spec: ProbeSpec,
    clock: Clock,
    started: Ms,
    tasks: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("probe", &self.spec.name)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Shared {
    samples: Mutex<Vec<Sample>>,
    /// Woken at each recorded request (and when a URL's task ends).
    answered: tokio::sync::Notify,
    /// Requests started (the budget is taken before sending).
    sent: AtomicU64,
    /// Why it stopped by itself, if it did.
    limit: Mutex<Option<StopReason>>,
}

/// Starts probing every URL of `spec` now.
pub fn spawn<F: Fetch>(spec: ProbeSpec, fetch: Arc<F>, clock: Clock) -> Running {
    let shared = Arc::new(Shared::default());
    let deadline = Instant::now() + spec.max_duration;
    let started = clock();
    let tasks = (0..spec.urls.len())
        .map(|i| {
            tokio::spawn(probe_url(
                spec.clone(),
                i,
                fetch.clone(),
                clock.clone(),
                shared.clone(),
                deadline,
            ))
        })
        .collect();
    Running {
        spec,
        clock,
        started,
        tasks,
        shared,
    }
}

async fn probe_url<F: Fetch>(
    spec: ProbeSpec,
    index: usize,
    fetch: Arc<F>,
    clock: Clock,
    shared: Arc<Shared>,
    deadline: Instant,
) {
    let url = &spec.urls[index];
    let mut tick = tokio::time::interval(spec.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let stop = |reason| {
        shared
            .limit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        shared.answered.notify_waiters();
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = tokio::time::sleep_until(deadline) => return stop(StopReason::MaxDuration),
        }
        if shared.sent.fetch_add(1, Ordering::SeqCst) >= spec.max_requests {
            return stop(StopReason::MaxRequests);
        }
        let at = clock();
        // A fetch is bounded by the timeout itself; this guards a slow fake.
        let guard = spec.timeout + std::time::Duration::from_millis(500);
        let sent = tokio::select! {
            r = tokio::time::timeout(guard, fetch.get(url, spec.timeout)) => r,
            () = tokio::time::sleep_until(deadline) => return stop(StopReason::MaxDuration),
        };
        let (outcome, latency) = sent.unwrap_or((
            RequestOutcome::Timeout {
                phase: Phase::Response,
            },
            guard,
        ));
        let outcome = match outcome {
            RequestOutcome::Ok { status } if !spec.accepts(status) => {
                RequestOutcome::BadStatus { status }
            }
            o => o,
        };
        shared
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Sample {
                at,
                url: index,
                latency: i64::try_from(latency.as_millis()).unwrap_or(i64::MAX),
                outcome,
            });
        shared.answered.notify_waiters();
    }
}

impl Running {
    /// Waits until each URL's last `consecutive` requests all succeeded,
    /// at most `limit`; returns the run clock's time then. Watches the
    /// requests as they are recorded (no polling).
    pub async fn settled(&self, consecutive: usize, limit: Duration) -> Result<Ms, super::Error> {
        let deadline = Instant::now() + limit;
        loop {
            let answered = self.shared.answered.notified();
            tokio::pin!(answered);
            // Registered before looking, so no request slips between.
            answered.as_mut().enable();
            let Some(url) = self.unsettled_url(consecutive) else {
                return Ok((self.clock)());
            };
            let gave_up = self.finished()
                || tokio::select! {
                    () = answered => false,
                    () = tokio::time::sleep_until(deadline) => true,
                };
            if gave_up {
                return Err(super::Error::Unsettled {
                    probe: self.spec.name.clone(),
                    url: self.spec.urls[url].to_string(),
                    waited: limit,
                    answered: self.answered(url),
                });
            }
        }
    }

    /// How long [`Running::settled`] may wait for this probe: [`super::SETTLE_LIMIT`],
    /// or longer where its interval needs it (the answers in a row, two
    /// more intervals, one timeout).
    pub fn settle_limit(&self) -> Duration {
        let n = u32::try_from(super::SETTLE_SUCCESSES + 2).unwrap_or(u32::MAX);
        super::SETTLE_LIMIT.max(self.spec.interval.saturating_mul(n) + self.spec.timeout)
    }

    /// The first URL whose last `n` requests did not all succeed.
    fn unsettled_url(&self, n: usize) -> Option<usize> {
        let samples = self
            .shared
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (0..self.spec.urls.len()).find(|&url| {
            let last: Vec<&Sample> = samples
                .iter()
                .rev()
                .filter(|s| s.url == url)
                .take(n)
                .collect();
            last.len() < n || last.iter().any(|s| s.outcome.is_error())
        })
    }

    /// What URL `url`'s requests met so far, for an error.
    fn answered(&self, url: usize) -> String {
        let samples = self
            .shared
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.url == url).collect();
        let Some(last) = mine.last() else {
            return "nothing: no request was answered or timed out".into();
        };
        let kinds = super::windows::kinds_text(&super::windows::kinds(mine.iter().copied()));
        let last = match &last.outcome {
            RequestOutcome::Error { message } => format!("error: {message}"),
            o => o.kind(),
        };
        format!("{} requests: {kinds}; the last: {last}", mine.len())
    }

    /// Whether it stopped by itself (request budget or time limit).
    pub fn finished(&self) -> bool {
        self.tasks.iter().all(JoinHandle::is_finished)
    }

    /// Stops the probe and returns what it recorded, the requests sent
    /// before `baseline_until` (the first step) as its baseline. A request
    /// in flight is abandoned and not recorded: its answer would come after
    /// the steps.
    pub async fn stop(mut self, baseline_until: Option<Ms>) -> ProbeRecord {
        let stopped = (self.clock)();
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        let samples = std::mem::take(
            &mut *self
                .shared
                .samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let reason = self
            .shared
            .limit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(StopReason::Stopped);
        // A probe that stopped by itself stopped at its last request.
        let stopped = match reason {
            StopReason::Stopped => stopped,
            _ => samples
                .iter()
                .map(|s| s.at + s.latency)
                .max()
                .unwrap_or(stopped)
                .min(stopped),
        };
        self.spec
            .record(samples, [self.started, stopped], baseline_until, reason)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Answers 200 after `delay` (paused time), counting requests in flight.
    struct Fake {
        delay: Duration,
        in_flight: AtomicU64,
        most: AtomicU64,
    }

    impl Fetch for Fake {
        async fn get(&self, _: &http::Uri, _: Duration) -> (RequestOutcome, Duration) {
            let n = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            (RequestOutcome::Ok { status: 200 }, self.delay)
        }
    }

    fn spec(urls: usize, interval_ms: u64) -> ProbeSpec {
        ProbeSpec {
            name: "web".into(),
            urls: (0..urls)
                .map(|i| {
                    format!("http://127.0.0.1:{}/", 30080 + i)
                        .parse()
                        .unwrap_or_default()
                })
                .collect(),
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_secs(1),
            expect: vec![(200, 399)],
            max_requests: 1_000_000,
            max_duration: Duration::from_secs(3600),
            gap: Duration::from_secs(5),
        }
    }

    fn fake(delay_ms: u64) -> Arc<Fake> {
        Arc::new(Fake {
            delay: Duration::from_millis(delay_ms),
            in_flight: AtomicU64::new(0),
            most: AtomicU64::new(0),
        })
    }

    fn paused_clock() -> Clock {
        let t0 = Instant::now();
        Arc::new(move || i64::try_from(t0.elapsed().as_millis()).unwrap_or(0))
    }

    #[tokio::test(start_paused = true)]
    async fn sends_one_request_per_interval_per_url() {
        let f = fake(5);
        let p = spawn(spec(2, 100), f.clone(), paused_clock());
        tokio::time::sleep(Duration::from_millis(10_000)).await;
        let r = p.stop(None).await;
        // ticks at 0, 100, ..., 9_900 (the one at 10_000 may not have answered)
        for url in 0..2 {
            let n = r.samples.iter().filter(|s| s.url == url).count();
            assert!((100..=101).contains(&n), "url {url}: {n}");
        }
        assert_eq!(f.most.load(Ordering::SeqCst), 2, "one in flight per URL");
        assert_eq!(r.stop_reason, StopReason::Stopped);
        assert!(r.windows.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_request_does_not_cause_a_burst() {
        // Each answer takes 3 intervals: one request per 300 ms, never more.
        let f = fake(300);
        let p = spawn(spec(1, 100), f.clone(), paused_clock());
        tokio::time::sleep(Duration::from_millis(3_000)).await;
        let r = p.stop(None).await;
        let gaps: Vec<Ms> = r.samples.windows(2).map(|w| w[1].at - w[0].at).collect();
        assert!(gaps.iter().all(|g| *g >= 300), "{gaps:?}");
        assert!((9..=10).contains(&r.samples.len()), "{}", r.samples.len());
        assert_eq!(f.most.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_request_budget_across_urls() {
        let mut s = spec(3, 100);
        s.max_requests = 25;
        let p = spawn(s, fake(1), paused_clock());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(p.finished());
        let r = p.stop(None).await;
        assert_eq!(r.samples.len(), 25);
        assert_eq!(r.stop_reason, StopReason::MaxRequests);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_its_time_limit() {
        let mut s = spec(1, 100);
        s.max_duration = Duration::from_secs(2);
        let p = spawn(s, fake(1), paused_clock());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(p.finished());
        let r = p.stop(None).await;
        assert_eq!(r.stop_reason, StopReason::MaxDuration);
        assert!((20..=21).contains(&r.samples.len()), "{}", r.samples.len());
        assert!(r.samples.iter().all(|s| s.at < 2_000));
    }

    /// Answers `Reset` to the first `resets` requests, then 200.
    struct Settling {
        resets: u64,
        sent: AtomicU64,
    }

    impl Fetch for Settling {
        async fn get(&self, _: &http::Uri, _: Duration) -> (RequestOutcome, Duration) {
            let n = self.sent.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            if n < self.resets {
                (RequestOutcome::Reset, Duration::from_millis(2))
            } else {
                (RequestOutcome::Ok { status: 200 }, Duration::from_millis(2))
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_step_waits_for_several_answers_in_a_row() {
        let f = Arc::new(Settling {
            resets: 3,
            sent: AtomicU64::new(0),
        });
        let p = spawn(spec(1, 250), f, paused_clock());
        let at = p.settled(5, Duration::from_secs(60)).await.unwrap();
        // 3 resets (0, 250, 500 ms), then 5 answers from 750 ms to 1,750 ms.
        assert_eq!(at, 1_752);
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let r = p.stop(Some(at)).await;
        let b = r.baseline.unwrap();
        assert_eq!((b.requests, b.errors), (8, 3));
        assert_eq!(r.errors, 0);
        assert!(r.windows.is_empty());
    }

    #[test]
    fn a_slow_probe_is_given_the_time_its_interval_needs() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let quick = spawn(spec(1, 500), fake(1), paused_clock());
            assert_eq!(quick.settle_limit(), Duration::from_secs(60));
            let slow = spawn(spec(1, 20_000), fake(1), paused_clock());
            // 7 intervals of 20 s and a 1 s timeout.
            assert_eq!(slow.settle_limit(), Duration::from_secs(141));
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_url_that_never_settles_is_named_with_what_it_answered() {
        let f = Arc::new(Settling {
            resets: u64::MAX,
            sent: AtomicU64::new(0),
        });
        let p = spawn(spec(1, 500), f, paused_clock());
        let e = p.settled(5, Duration::from_secs(10)).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "probe `web`: http://127.0.0.1:30080/ did not answer 5 requests in a row within 10s \
             before the first step (nothing was injected); it answered 20 requests: reset ×20; \
             the last: reset: check the URL and that the Service answers from this machine"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_outside_the_expected_ones_is_an_error() {
        let mut s = spec(1, 100);
        s.expect = vec![(500, 599)];
        let p = spawn(s, fake(1), paused_clock());
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let r = p.stop(None).await;
        assert!(
            r.samples
                .iter()
                .all(|s| s.outcome == RequestOutcome::BadStatus { status: 200 })
        );
        assert_eq!(r.windows.len(), 1);
    }
}
