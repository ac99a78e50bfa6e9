//! The HTTP probe against real sockets on 127.0.0.1: a server the test
//! stops and starts again (the measured error window must match the
//! outage), a server that never answers (timeout), a closed port (refused),
//! a server answering 503 (bad status, or success when expected), and one
//! that closes the connection at once (reset). Every server task is aborted
//! and every listener dropped when its test ends.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodefall::probe::{self, Http, Outcome, Phase, ProbeSpec, StopReason};
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

fn ms(start: Instant) -> i64 {
    i64::try_from(start.elapsed().as_millis()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_window_matches_the_outage() {
    let start = Instant::now();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let up = serve(listener, Mode::Status(200)).await;
    let (interval, timeout): (i64, i64) = (100, 500);
    let p = probe::spawn(spec(addr.port(), 100, 500), Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // The outage: nothing listens on the port for 2 s.
    drop(up);
    let down_at = ms(start);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let back = serve(TcpListener::bind(addr).await.unwrap(), Mode::Status(200)).await;
    let up_at = ms(start);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let r = p.stop().await;
    drop(back);

    assert_eq!(r.windows.len(), 1, "{:?}", r.windows);
    let w = &r.windows[0];
    let outage = up_at - down_at;
    let slack = interval + timeout;
    assert!(
        (w.duration - outage).abs() <= slack,
        "window {} ms vs outage {outage} ms (slack {slack} ms): {w:?}",
        w.duration
    );
    assert!(
        (w.start - down_at).abs() <= slack,
        "{w:?} down at {down_at}"
    );
    // Refused while nothing listens. A request caught by the stop itself
    // (the listening socket closing under it) may end otherwise.
    assert!(
        w.kinds.get("refused").copied().unwrap_or(0) + 2 >= w.errors,
        "{w:?}"
    );
    assert!(w.errors >= 10 && w.errors <= w.total, "{w:?}");
    // About one request per interval throughout, never more.
    let elapsed = r.stopped - r.started;
    assert!(
        r.requests <= u64::try_from(elapsed / interval + 1).unwrap(),
        "{r:?}"
    );
    assert!(
        r.requests >= u64::try_from(elapsed / interval / 2).unwrap(),
        "{r:?}"
    );
    assert_eq!(r.stop_reason, StopReason::Stopped);
    println!(
        "outage {outage} ms, error window {} ms ({} of {} requests failed)",
        w.duration, w.errors, w.total
    );
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
    let r = p.stop().await;
    let of = |url: usize| -> Vec<&Outcome> {
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
            == Outcome::Timeout {
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
    assert!(of(1).iter().all(|o| **o == Outcome::Refused), "{:?}", of(1));
    assert!(of(2).iter().all(|o| **o == Outcome::Reset), "{:?}", of(2));
    assert!(
        of(3)
            .iter()
            .all(|o| **o == Outcome::BadStatus { status: 503 }),
        "{:?}",
        of(3)
    );
    assert!(r.samples.iter().all(|x| x.outcome.is_error()));

    // 503 counted as success when the probe expects it.
    s.urls = vec![format!("http://127.0.0.1:{failing_port}/").parse().unwrap()];
    s.expect = vec![(500, 599)];
    let p = probe::spawn(s, Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = p.stop().await;
    assert!(r.requests >= 2);
    assert!(
        r.samples
            .iter()
            .all(|x| x.outcome == Outcome::Ok { status: 503 }),
        "{r:?}"
    );
    assert!(r.windows.is_empty());
    drop((silent, closing, failing));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_budget_and_time_limit_stop_the_probe() {
    let start = Instant::now();
    let (up, port) = server(Mode::Status(200)).await;
    let mut s = spec(port, 100, 500);
    s.max_requests = 5;
    let p = probe::spawn(s.clone(), Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(p.finished());
    let r = p.stop().await;
    assert_eq!((r.requests, r.stop_reason), (5, StopReason::MaxRequests));

    s.max_requests = 10_000;
    s.max_duration = Duration::from_millis(700);
    let p = probe::spawn(s, Arc::new(Http), clock(start));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(p.finished());
    let r = p.stop().await;
    assert_eq!(r.stop_reason, StopReason::MaxDuration);
    assert!((6..=8).contains(&r.requests), "{}", r.requests);
    drop(up);
}
