//! What clients see, end to end on the simulated cluster: `nodefall
//! scenario` powers off the worker running most pods of a Deployment behind a
//! NodePort Service, watches its endpoints leave the Service, and probes the
//! NodePort on 127.0.0.1.
//!
//! The sim has no data plane; nodefall's stand-in for kube-proxy and the
//! pods' servers (`crates/sim/src/sim/proxy.rs`) answers the probe: requests routed to
//! the dead node's pods get no answer until the endpoints are no longer
//! ready, as on kind. The probe's error window must then match the endpoint
//! window nodefall measured.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::Duration;

use nodefall::record::{RunVerdict, Verdict};
use nodefall::report::read_result;

#[path = "support/cli_run.rs"]
mod cli_run;
use cli_run::{Dirs, start_scenario};

const MANIFEST: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, nodePort: NODEPORT}]
"#;

const SCENARIO: &str = r#"name: clients-sim
namespace: clients-sim
setup:
  apply: web.yaml
  waitReady: {deployment: web, replicas: 4, timeout: 2m}
target: {mostPods: app=web}
probe: {name: web, url: "http://127.0.0.1:PORT/", interval: 200ms, timeout: 500ms, gap: 2s}
steps:
  - id: halt
    fault: poweroff
  - id: endpoints-gone
    expect: {service: web, on: target, readyEndpoints: 0, within: grace - lease .. grace + monitorPeriod + 10s}
  - name: clients fail no longer than the endpoints stay stale
    expect: {probe: web, errorWindow: "<= grace + monitorPeriod + 5s", since: halt}
  - name: deliberately too strict
    expect: {probe: web, errorWindow: "< 1s", since: halt}
  - name: no client error once the endpoints are gone
    expect: {probe: web, errors: 0, after: grace + monitorPeriod + 2s, since: halt}
  # the steps (and so the probe) go on past the window above
  - action: {wait: {duration: 8s}}
  - fault: poweron
  - expect: {node: target, ready: "True", within: 1m}
  - expect: {service: web, readyEndpoints: 4, within: 1m}
cleanup: always
"#;

/// One test at a time under plain `cargo test` (both probe NodePorts picked
/// from the process id); `scripts/test.sh` runs each in its own process.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A free loopback port in the API server's NodePort range (30000-32767,
/// below the ephemeral range), from where the process id says, so tests
/// side by side try different ones.
fn free_node_port() -> u16 {
    let offset = u16::try_from(std::process::id() % 2_768).unwrap_or(0);
    (0..2_768)
        .map(|i| 30_000 + (offset + i) % 2_768)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port in the NodePort range")
}

/// The test's directories with the Deployment and its Service written as
/// `web.yaml`, and the Service's NodePort.
fn with_manifest() -> (Dirs, String) {
    let port = free_node_port().to_string();
    let d = Dirs::new();
    d.write("web.yaml", &MANIFEST.replace("NODEPORT", &port));
    (d, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_error_window_follows_the_stale_endpoints() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (d, port) = with_manifest();
    let file = d.write("clients.yaml", &SCENARIO.replace("PORT", &port));
    let run = start_scenario(&d, &file, &[]);
    let (code, log) = tokio::task::block_in_place(|| run.finish(Duration::from_secs(480)));

    // The deliberately strict expectation fails the run, and nothing else.
    assert_eq!(code, Some(1), "{log}");
    let dirs: Vec<_> = std::fs::read_dir(d.out.path()).unwrap().collect();
    let dir = dirs[0].as_ref().unwrap().path();
    let r = read_result(&nodefall::disk::Disk, &dir.join("result.json")).unwrap();
    assert_eq!(r.verdict, RunVerdict::Fail);
    let failed: Vec<&str> = r
        .expectations
        .iter()
        .filter(|e| e.verdict != Verdict::Pass)
        .map(|e| e.label.as_str())
        .collect();
    assert_eq!(failed, ["#4 (deliberately too strict)"], "{log}");

    let stale = r.metrics.endpoints.stale_endpoint_window.unwrap();
    let error_window = r.metrics.error_window.unwrap();
    let p = &r.probes[0];
    // One error window, or two when a run of requests all routed to live
    // pods split it: the stand-in for kube-proxy routes each request to a
    // random ready endpoint, as kube-proxy does (seen once in CI, the sim
    // tier beside the real tier: 2 errors, then 1.8 s of answers, then 8;
    // the fidelity judgement counts windows as chance for the same reason).
    assert!((1..=2).contains(&p.windows.len()), "{:?}", p.windows);
    // Requests routed to the dead node's pods fail from the poweroff until
    // its endpoints are no longer ready: the same span as the endpoints,
    // give or take one interval + timeout. While the dead node's endpoints
    // are still listed, a request reaches a live pod with a chance of at
    // most 1/2 (the target holds most of the 4 pods). So the first error
    // can come some requests after the fault and the last some before the
    // endpoints go (CI once saw the window 1.4 s short): 15 requests (3 s at
    // 200 ms) all missing the dead node has a chance under 1 in 30,000 at
    // each end. The errors can never outlast the stale endpoints by more
    // than one request's timeout and interval.
    let first = &p.windows[0];
    let last = &p.windows[p.windows.len() - 1];
    let span = last.end.unwrap_or(last.start) - first.start;
    assert!(
        error_window <= span && span <= stale + 1_200 && span >= stale - 2 * 3_000,
        "errors over {span} ms (longest window {error_window} ms) vs staleEndpointWindow {stale} ms: {:?}",
        p.windows
    );
    // A dead machine answers nothing: every error is a timeout.
    for w in &p.windows {
        assert_eq!(
            w.kinds.get("timeout").copied().unwrap_or(0),
            w.errors,
            "{w:?}"
        );
    }
    // Only some requests fail: those routed to the live worker are served.
    let errors: u64 = p.windows.iter().map(|w| w.errors).sum();
    let total: u64 = p.windows.iter().map(|w| w.total).sum();
    assert!(errors < total, "{:?}", p.windows);
    assert!(p.requests > 50 && p.errors == errors, "{p:?}");
    // The requests before the first step are the baseline: the stand-in
    // answered each URL 5 times in a row before the fault.
    let baseline = p.baseline.as_ref().expect("a baseline");
    assert!(
        baseline.requests >= 5 && baseline.to <= r.t0.unwrap(),
        "{baseline:?}"
    );
    let strict = r.expectations.iter().find(|e| e.index == 3).unwrap();
    assert!(
        strict.detail.starts_with("longest error window"),
        "{}",
        strict.detail
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## What clients see"), "{report}");
    assert!(report.contains("### Probe `web`"), "{report}");
    assert!(report.contains(". **Baseline**, from setup"), "{report}");
    assert!(
        report.contains("![Timeline of the run](timeline.svg)"),
        "{report}"
    );
    let chart = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(chart.contains(">Clients</text>"), "{chart}");
    assert!(chart.contains("web errors "), "{chart}");
    println!(
        "staleEndpointWindow {stale} ms, errorWindow {error_window} ms, {} requests, {} failed",
        p.requests, p.errors
    );
    // Kept for the report snapshot when asked (a real run's figures).
    if let Some(to) = std::env::var_os("NODEFALL_KEEP_RESULT") {
        std::fs::copy(dir.join("result.json"), to).unwrap();
    }
    assert!(std::fs::read_dir(d.state.path()).unwrap().next().is_none());
    assert!(d.orphans().is_empty(), "{:?}", d.orphans());
}

/// A probe whose URL never answers stops the run before the first step,
/// naming the URL and what it answered; nothing is injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_that_never_settles_stops_the_run_before_any_fault() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (d, port) = with_manifest();
    // Nothing listens there: every request is refused.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let scenario = SCENARIO.replace("PORT", &port).replacen(
        &format!("http://127.0.0.1:{port}/"),
        &format!("http://127.0.0.1:{dead}/"),
        1,
    );
    let file = d.write("clients.yaml", &scenario);
    let run = start_scenario(&d, &file, &[]);
    let (code, log) = tokio::task::block_in_place(|| run.finish(Duration::from_secs(240)));
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains(&format!(
            "probe `web`: http://127.0.0.1:{dead}/ did not answer 5 requests in a row within 60s \
             before the first step (nothing was injected); it answered"
        )) && log.contains("refused ×"),
        "{log}"
    );
    assert!(
        !log.contains("#1 (halt): poweroff"),
        "a fault was injected:\n{log}"
    );
    assert!(std::fs::read_dir(d.state.path()).unwrap().next().is_none());
    assert!(d.orphans().is_empty(), "{:?}", d.orphans());
}
