//! What clients see, end to end on the simulated cluster: `nodefall
//! scenario` powers off the worker running most pods of a Deployment behind a
//! Service, watches its endpoints leave the Service, and probes an HTTP
//! server on 127.0.0.1 run by this test.
//!
//! The sim has no data plane, so the test plays kube-proxy's part for the
//! probe: its server refuses connections from the moment nodefall logs the
//! poweroff until it logs that the failed node's endpoints are no longer
//! ready, as a client routed to the dead node's pods would see. The probe's
//! error window must then match the endpoint window nodefall measured.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::Duration;

use nodefall::report::read_result;
use nodefall::report::result::{RunVerdict, Verdict};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[path = "support/cli_run.rs"]
mod cli_run;
use cli_run::{Dirs, port_below_ephemeral_range, start_scenario};

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
  selector: {app: web}
  ports: [{port: 80}]
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

/// Answers `200 OK` to every request until dropped; its port then refuses.
struct Server(JoinHandle<()>);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn serve(addr: std::net::SocketAddr) -> Server {
    let listener = TcpListener::bind(addr).await.unwrap();
    Server(tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
                    )
                    .await;
                let _ = sock.shutdown().await;
            });
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_error_window_follows_the_stale_endpoints() {
    // The test's server stops and starts again on this port.
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port_below_ephemeral_range()));
    let up = serve(addr).await;
    let d = Dirs::new();
    d.write("web.yaml", MANIFEST);
    let file = d.write(
        "clients.yaml",
        &SCENARIO.replace("PORT", &addr.port().to_string()),
    );
    let mut run = start_scenario(&d, &file, &[]);
    // The waits read nodefall's stderr on this worker; the server runs on the other.
    tokio::task::block_in_place(|| run.wait_for("(halt): poweroff", Duration::from_secs(240)));
    drop(up); // the dead node's pods: connections fail
    tokio::task::block_in_place(|| {
        run.wait_for("(endpoints-gone): pass", Duration::from_secs(60));
    });
    let back = serve(addr).await; // kube-proxy stopped routing there
    let (code, log) = tokio::task::block_in_place(|| run.finish(Duration::from_secs(180)));
    drop(back);

    // The deliberately strict expectation fails the run, and nothing else.
    assert_eq!(code, Some(1), "{log}");
    let dirs: Vec<_> = std::fs::read_dir(d.out.path()).unwrap().collect();
    let dir = dirs[0].as_ref().unwrap().path();
    let r = read_result(&dir.join("result.json")).unwrap();
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
    assert_eq!(p.windows.len(), 1, "{:?}", p.windows);
    // The test's outage began at the poweroff log line and ended at the
    // endpoint log line: the same span as the endpoints, give or take one
    // interval + timeout and the log's own delay.
    assert!(
        (error_window - stale).abs() <= 1_200,
        "errorWindow {error_window} ms vs staleEndpointWindow {stale} ms"
    );
    // Refused while the server is down; a request caught by its stop may
    // end otherwise.
    let w = &p.windows[0];
    assert!(
        w.kinds.get("refused").copied().unwrap_or(0) + 2 >= w.errors,
        "{w:?}"
    );
    assert!(p.requests > 50 && p.errors == p.windows[0].errors, "{p:?}");
    let strict = r.expectations.iter().find(|e| e.index == 3).unwrap();
    assert!(
        strict.detail.starts_with("longest error window"),
        "{}",
        strict.detail
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## What clients see"), "{report}");
    assert!(report.contains("### Probe `web`"), "{report}");
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
