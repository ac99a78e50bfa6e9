//! The HTTP probe's timing under tokio's paused time, through a fake
//! `Fetch` (an outage's error window, the request budget, the time limit:
//! exact counts, no race with a busy machine), and the real client against
//! real sockets on 127.0.0.1: a server that never answers (timeout), a
//! closed port (refused), a server answering 503 (bad status, or success
//! when expected), one that closes the connection at once (reset), and one
//! answering 200 until the probe's budget is spent. Every server task is
//! aborted and every listener dropped when its test ends.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nodefall::probe::{self, Fetch, Http, Phase, ProbeSpec, RequestOutcome, StopReason};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[derive(Clone, Copy)]
enum Mode {
    Status(u16),
    /// Accept and never answer (the connection stays open).
    Silent,
    /// Accept and close at once.
    Close,
}

/// A tiny HTTP/1.1 server; stops (its port then refuses) when dropped.
struct Server(JoinHandle<()>);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn serve(listener: TcpListener, mode: Mode) -> Server {
    Server(tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            match mode {
                Mode::Silent => held.push(sock),
                Mode::Close => drop(sock),
                Mode::Status(code) => {
                    tokio::spawn(async move {
                        let mut buf = [0u8; 4096];
                        let _ = sock.read(&mut buf).await;
                        let body = "ok\n";
                        let reply = format!(
                            "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = sock.write_all(reply.as_bytes()).await;
                        let _ = sock.shutdown().await;
                    });
                }
            }
        }
    }))
}

async fn server(mode: Mode) -> (Server, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (serve(listener, mode).await, port)
}

fn spec(port: u16, interval_ms: u64, timeout_ms: u64) -> ProbeSpec {
    ProbeSpec {
        name: "web".into(),
        urls: vec![format!("http://127.0.0.1:{port}/").parse().unwrap()],
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(timeout_ms),
        expect: vec![(200, 399)],
        max_requests: 10_000,
        max_duration: Duration::from_secs(60),
        gap: Duration::from_secs(1),
    }
}

fn clock(start: Instant) -> Arc<dyn Fn() -> i64 + Send + Sync> {
    Arc::new(move || i64::try_from(start.elapsed().as_millis()).unwrap())
}

/// The fake behind `Fetch` for paused time: every request takes [`LATENCY`]
/// and is refused while `down` is set (checked when it is sent, as a
/// refused connection is refused at once), answered 200 otherwise.
struct Switch {
    down: AtomicBool,
}

/// How long the fake takes to answer: not zero, so a request sent at the
/// probe's deadline is still in flight when the deadline is checked.
const LATENCY: Duration = Duration::from_millis(10);

impl Fetch for Switch {
    async fn get(&self, _: &http::Uri, _: Duration) -> (RequestOutcome, Duration) {
        let outcome = if self.down.load(Ordering::SeqCst) {
            RequestOutcome::Refused
        } else {
            RequestOutcome::Ok { status: 200 }
        };
        tokio::time::sleep(LATENCY).await;
        (outcome, LATENCY)
    }
}

fn switch() -> Arc<Switch> {
    Arc::new(Switch {
        down: AtomicBool::new(false),
    })
}

/// The run's clock on tokio's (paused) clock: ms since `t0`.
fn paused_clock(t0: tokio::time::Instant) -> Arc<dyn Fn() -> i64 + Send + Sync> {
    Arc::new(move || i64::try_from(t0.elapsed().as_millis()).unwrap())
}

/// Sleeps (paused time: auto-advances) until `ms` after `t0`.
async fn until(t0: tokio::time::Instant, ms: u64) {
    tokio::time::sleep_until(t0 + Duration::from_millis(ms)).await;
}

/// Send times `from, from + step, ..., to`.
fn every(from: i64, step: i64, to: i64) -> Vec<i64> {
    (from..=to)
        .step_by(usize::try_from(step).unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_error_window_matches_the_outage() {
    // Paused time: the probe ticks at exactly 0, 100, 200, ... ms and every
    // answer takes exactly 10 ms, so every count below is exact. The outage
    // starts and ends between ticks (1_050 and 3_050), never on one, so no
    // two timers fire at the same instant and the order cannot vary.
    let t0 = tokio::time::Instant::now();
    let fetch = switch();
    let interval: i64 = 100;
    let p = probe::spawn(spec(8080, 100, 500), fetch.clone(), paused_clock(t0));
    until(t0, 1_050).await;
    fetch.down.store(true, Ordering::SeqCst);
    let down_at = 1_050;
    until(t0, 3_050).await;
    fetch.down.store(false, Ordering::SeqCst);
    let up_at = 3_050;
    until(t0, 4_050).await;
    let r = p.stop(None).await;

    // One request per tick, 0 to 4_000 ms (the one at 4_000 answered at 4_010).
    let sent: Vec<i64> = r.samples.iter().map(|s| s.at).collect();
    assert_eq!(sent, every(0, interval, 4_000), "{r:?}");
    assert_eq!((r.started, r.stopped), (0, 4_050));
    assert_eq!(r.stop_reason, StopReason::Stopped);

    // Refused from the first tick after the outage began (1_100) to the
    // last one before it ended (3_000); the window ends at the first
    // success (3_100).
    assert_eq!(r.windows.len(), 1, "{:?}", r.windows);
    let w = &r.windows[0];
    assert_eq!((w.start, w.end, w.duration), (1_100, Some(3_100), 2_000));
    assert_eq!((w.errors, w.total), (20, 20), "{w:?}");
    assert_eq!(w.kinds.get("refused"), Some(&20), "{w:?}");
    assert_eq!(r.errors, 20);
    // The general claim: the window is the outage to within one interval.
    let outage = up_at - down_at;
    assert!((w.duration - outage).abs() < interval, "{w:?} vs {outage}");
    assert!((0..interval).contains(&(w.start - down_at)), "{w:?}");
    assert!((0..interval).contains(&(w.end.unwrap() - up_at)), "{w:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_refusals_resets_and_bad_statuses_are_told_apart() {
    let start = Instant::now();
    let (silent, silent_port) = server(Mode::Silent).await;
    let (closing, closing_port) = server(Mode::Close).await;
    let (failing, failing_port) = server(Mode::Status(503)).await;
    // A port nobody listens on: bind one, note it, close it.
    let closed_port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let mut s = spec(silent_port, 200, 300);
    s.urls = [silent_port, closed_port, closing_port, failing_port]
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}/").parse().unwrap())
        .collect();
    let p = probe::spawn(s.clone(), Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let r = p.stop(None).await;
    let of = |url: usize| -> Vec<&RequestOutcome> {
        r.samples
            .iter()
            .filter(|x| x.url == url)
            .map(|x| &x.outcome)
            .collect()
    };
    let timeouts = of(0);
    assert!(!timeouts.is_empty());
    assert!(
        timeouts.iter().all(|o| **o
            == RequestOutcome::Timeout {
                phase: Phase::Response
            }),
        "{timeouts:?}"
    );
    // A timed-out request took the whole timeout, and the next tick waited for it.
    assert!(
        r.samples
            .iter()
            .filter(|x| x.url == 0)
            .all(|x| x.latency >= 300)
    );
    assert!(
        of(1).iter().all(|o| **o == RequestOutcome::Refused),
        "{:?}",
        of(1)
    );
    assert!(
        of(2).iter().all(|o| **o == RequestOutcome::Reset),
        "{:?}",
        of(2)
    );
    assert!(
        of(3)
            .iter()
            .all(|o| **o == RequestOutcome::BadStatus { status: 503 }),
        "{:?}",
        of(3)
    );
    assert!(r.samples.iter().all(|x| x.outcome.is_error()));

    // 503 counted as success when the probe expects it.
    s.urls = vec![format!("http://127.0.0.1:{failing_port}/").parse().unwrap()];
    s.expect = vec![(500, 599)];
    let p = probe::spawn(s, Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = p.stop(None).await;
    assert!(r.requests >= 2);
    assert!(
        r.samples
            .iter()
            .all(|x| x.outcome == RequestOutcome::Ok { status: 503 }),
        "{r:?}"
    );
    assert!(r.windows.is_empty());
    drop((silent, closing, failing));
}

#[tokio::test(start_paused = true)]
async fn the_request_budget_and_time_limit_stop_the_probe() {
    // The budget: 5 requests at 100 ms. Ticks at 0..=400 send them (each
    // answered 10 ms later); the tick at 500 finds the budget spent and
    // ends the probe there, so it runs at 499 ms and is done at 501 ms.
    let t0 = tokio::time::Instant::now();
    let mut s = spec(8080, 100, 500);
    s.max_requests = 5;
    let p = probe::spawn(s.clone(), switch(), paused_clock(t0));
    until(t0, 499).await;
    assert!(!p.finished(), "stopped before its budget was spent");
    until(t0, 501).await;
    assert!(p.finished(), "still running with its budget spent");
    until(t0, 1_500).await;
    let r = p.stop(None).await;
    assert_eq!((r.requests, r.stop_reason), (5, StopReason::MaxRequests));
    let sent: Vec<i64> = r.samples.iter().map(|s| s.at).collect();
    assert_eq!(sent, every(0, 100, 400));
    // A probe that stopped by itself stopped at its last answer.
    assert_eq!(r.stopped, 410);

    // The time limit: 700 ms at 100 ms. Ticks at 0..=600 send 7 requests.
    // The tick at 700 is the deadline's instant: whichever of the two the
    // probe's select sees first, a request sent then is still in flight
    // (10 ms) at the deadline and is dropped unrecorded, so exactly 7.
    let t0 = tokio::time::Instant::now();
    s.max_requests = 10_000;
    s.max_duration = Duration::from_millis(700);
    let p = probe::spawn(s, switch(), paused_clock(t0));
    until(t0, 699).await;
    assert!(!p.finished(), "stopped before its time limit");
    until(t0, 701).await;
    assert!(p.finished(), "still running past its time limit");
    until(t0, 1_500).await;
    let r = p.stop(None).await;
    assert_eq!(r.stop_reason, StopReason::MaxDuration);
    let sent: Vec<i64> = r.samples.iter().map(|s| s.at).collect();
    assert_eq!(sent, every(0, 100, 600), "{r:?}");
    assert_eq!(r.stopped, 610);
}

/// The one test of the budget on real sockets (a real listener, the real
/// [`Http`] client): its bounds hold however slow the machine is. The count
/// is exact because the budget is taken before each request and a URL has
/// one request in flight at a time: every request sent is recorded (answer
/// or timeout) before the next tick can find the budget spent. The time
/// limit is far away and only waited for by polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_client_stops_at_its_budget_against_a_real_server() {
    let start = Instant::now();
    let (up, port) = server(Mode::Status(200)).await;
    let mut s = spec(port, 100, 5_000);
    s.max_requests = 5;
    s.max_duration = Duration::from_secs(600);
    let p = probe::spawn(s, Arc::new(Http), clock(start));
    let limit = Instant::now() + Duration::from_secs(120);
    while !p.finished() {
        assert!(Instant::now() < limit, "no stop after 120 s: {p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = p.stop(None).await;
    assert_eq!((r.requests, r.stop_reason), (5, StopReason::MaxRequests));
    assert!(
        r.samples
            .iter()
            .any(|x| x.outcome == RequestOutcome::Ok { status: 200 }),
        "{r:?}"
    );
    drop(up);
}
