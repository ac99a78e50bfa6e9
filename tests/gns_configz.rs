//! The graceful-shutdown preflight's `/configz` read through a real
//! kube-apiserver's node proxy (`GET /api/v1/nodes/NAME/proxy/configz`).
//!
//! The sim's control plane runs with no nodes; the test plays the nodes'
//! kubelet endpoints itself, serving real KubeletConfigurations
//! (tests/fixtures/gns/README.md) over TLS with a self-signed certificate.
//! The sim's kube-apiserver has no `--kubelet-certificate-authority` (nor
//! client certificate flags), so, as with a kubelet's own self-signed serving
//! certificate, it does not verify it.
//!
//! The API server refuses to proxy to loopback or unspecified node addresses
//! (400 "address not allowed": `IsProxyableHostname`, measured below for
//! 127.0.0.1, 0.0.0.0 and `localhost`), so the Nodes carry documentation
//! addresses (198.51.100.0/24, RFC 5737) and the API server is started with
//! an egress selector whose `cluster` traffic goes through an HTTP CONNECT
//! proxy on a Unix socket in the test's directory. The proxy is the stand-in
//! kubelet: it records the CONNECT target, answers 200 and serves TLS on the
//! same stream. Nothing leaves this machine; the documentation addresses are
//! never dialled.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodefall::gns::{self, Error, Fact, GracefulShutdown, ShutdownVerdict, configz};
use nodefall::profile::TimingProfile;
use nodefall::record::Verdict as Outcome;
use nodefall::record::graceful::logind;
use nodefall::sim::{SimCluster, UpOptions};
use nodefall::verdict::graceful;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::UnixListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

const KUBESPRAY: &str = include_str!("fixtures/gns/configz-kubespray-defaults.json");
const DOCS: &str = include_str!("fixtures/gns/configz-k8s-docs.json");
const TYPHOON_LOCKS: &str = include_str!("fixtures/gns/inhibit-table-kubelet-typhoon.txt");
const BUSCTL_5S: &str = include_str!("fixtures/gns/busctl-inhibit-delay-arch.txt");

/// The documentation address every test node reports (never dialled).
const ADDR: &str = "198.51.100.7";

/// What the stand-in kubelet on a port does.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// 200 with this body on `/configz`, 404 elsewhere.
    Json(&'static str),
    /// 404 on `/configz` (a kubelet that does not serve it).
    NotFound,
    /// The proxy refuses the CONNECT: the kubelet cannot be reached.
    Unreachable,
    /// Accepts the request and never answers.
    Silent,
}

/// The CONNECT proxy and stand-in kubelets; stops when dropped.
struct Kubelets {
    /// CONNECT targets (`host:port`), in order.
    connects: Arc<Mutex<Vec<String>>>,
    /// Request lines the kubelets received.
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Kubelets {
    fn take_connects(&self) -> Vec<String> {
        std::mem::take(&mut *self.connects.lock().unwrap())
    }
}

fn tls() -> TlsAcceptor {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![key.cert.der().clone()], der)
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

const LIMIT: Duration = Duration::from_secs(10);

/// Reads an HTTP head (up to the blank line), bounded in size and time.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // byte by byte: nothing after the head may be consumed (TLS follows a CONNECT)
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 65_536 {
            return None;
        }
        match tokio::time::timeout(LIMIT, s.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn serve_kubelet<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    answer: Answer,
    acceptor: TlsAcceptor,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let Ok(Ok(mut tls)) = tokio::time::timeout(LIMIT, acceptor.accept(stream)).await else {
        return;
    };
    let Some(head) = read_head(&mut tls).await else {
        return;
    };
    let line = head.lines().next().unwrap_or_default().to_owned();
    let configz = line.split_whitespace().nth(1) == Some("/configz");
    requests.lock().unwrap().push(line);
    let (status, body) = match (answer, configz) {
        (Answer::Silent, _) => {
            // until the API server or the test gives up
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        (Answer::Json(body), true) => ("200 OK", body),
        _ => ("404 Not Found", "404 page not found\n"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(response.as_bytes()).await;
    let _ = tls.shutdown().await;
}

/// Starts the CONNECT proxy on `socket`; `answers` maps a kubelet port to
/// what the kubelet there does.
fn kubelets(socket: &Path, answers: HashMap<u16, Answer>) -> Kubelets {
    let listener = UnixListener::bind(socket).unwrap();
    let acceptor = tls();
    let connects = Arc::new(Mutex::new(Vec::new()));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (c, r) = (connects.clone(), requests.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, c, r, answers) =
                (acceptor.clone(), c.clone(), r.clone(), answers.clone());
            tokio::spawn(async move {
                let Some(head) = read_head(&mut conn).await else {
                    return;
                };
                let mut words = head.split_whitespace();
                let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
                    let _ = conn
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                        .await;
                    return;
                };
                c.lock().unwrap().push(target.to_owned());
                let port = target
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse::<u16>().ok());
                match port.and_then(|p| answers.get(&p)).copied() {
                    None | Some(Answer::Unreachable) => {
                        let _ = conn
                            .write_all(
                                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
                            )
                            .await;
                    }
                    Some(answer) => {
                        if conn
                            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            .await
                            .is_ok()
                        {
                            serve_kubelet(conn, answer, acceptor, r).await;
                        }
                    }
                }
            });
        }
    });
    Kubelets {
        connects,
        requests,
        task,
    }
}

/// A Node whose status sends the API server's proxy to `addresses` and `port`.
async fn node_at(client: &kube::Client, name: &str, addresses: &[(&str, &str)], port: u16) {
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
    let addresses: Vec<serde_json::Value> = addresses
        .iter()
        .map(|(t, a)| serde_json::json!({"type": t, "address": a}))
        .collect();
    let status = serde_json::json!({"status": {
        "addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

#[test]
fn configz_through_the_api_server_proxy() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(through_the_proxy());
}

async fn through_the_proxy() {
    let root = tempfile::tempdir().unwrap();
    let socket = root.path().join("egress.sock");
    let answers = HashMap::from([
        (10250, Answer::Json(KUBESPRAY)),
        (10251, Answer::Json(DOCS)),
        (10252, Answer::NotFound),
        (10253, Answer::Unreachable),
        (10254, Answer::Silent),
    ]);
    let kubelets = kubelets(&socket, answers);
    let egress = root.path().join("egress.yaml");
    std::fs::write(&egress, nodefall::sim::egress_selector_config(&socket)).unwrap();
    let mut opts = UpOptions::new("gns", TimingProfile::fast());
    opts.root = root.path().to_owned();
    opts.nodes = 0;
    opts.extra_apiserver_args = vec![
        "--egress-selector-config-file".into(),
        egress.display().to_string(),
    ];
    let mut progress = |m: &str| eprintln!("sim: {m}");
    let cluster = SimCluster::up(&opts, &mut progress).await.unwrap();
    // The API server neither verifies kubelets nor presents a client certificate.
    let apiserver = cluster
        .state()
        .components
        .iter()
        .find(|c| c.name == "kube-apiserver")
        .unwrap();
    assert!(
        !apiserver
            .args
            .iter()
            .any(|a| a.starts_with("--kubelet-c") || a.starts_with("--kubelet-client")),
        "{:?}",
        apiserver.args
    );
    let config = cluster.config().await.unwrap();
    // Refusals reported as they are, not retried until the timeout.
    let mut strict = config.clone();
    strict.default_retry = false;
    let client = kube::Client::try_from(strict).unwrap();
    let t = Duration::from_secs(10);

    // The kubespray defaults, read through the proxy.
    node_at(&client, "kubespray", &[("InternalIP", ADDR)], 10250).await;
    let c = configz::fetch(&client, "kubespray", t).await.unwrap();
    assert_eq!(
        (c.grace_period(), c.critical_pods()),
        (Duration::from_secs(60), Duration::from_secs(20))
    );
    assert_eq!(kubelets.take_connects(), vec![format!("{ADDR}:10250")]);
    let fact = gns::read_config(&client, "kubespray", t).await;
    assert!(
        matches!(&fact, Fact::Known { source, .. } if source == "GET /api/v1/nodes/kubespray/proxy/configz"),
        "{fact:?}"
    );
    // With the lock held and logind's stock 5 s, the drain is cut short ...
    let locks = logind::inhibitors_from(Ok(TYPHOON_LOCKS), "ssh kubespray: systemd-inhibit --list");
    let report = graceful::node_report(
        "kubespray",
        vec!["target".into()],
        0,
        fact.clone(),
        locks.clone(),
        logind::inhibit_delay_from(Ok(BUSCTL_5S), "ssh kubespray: busctl"),
    );
    eprintln!("kubespray, 5 s: {}", report.verdict.summary());
    assert!(
        report.verdict.summary().starts_with(
            "graceful shutdown will NOT run: logind InhibitDelayMaxSec 5 s is shorter than the requested 1 min"
        ),
        "{:?}",
        report.verdict
    );
    // ... and with the 90 s kubespray's kubelet would have set, it runs.
    let report = graceful::node_report(
        "kubespray",
        vec!["target".into()],
        0,
        fact,
        locks,
        logind::inhibit_delay_from(Ok("t 90000000\n"), "ssh kubespray: busctl"),
    );
    assert_eq!(
        report.verdict.summary(),
        "graceful shutdown will run: 40 s for pods, 20 s for critical pods"
    );
    assert_eq!(
        nodefall::expect::graceful::decide(GracefulShutdown::WillRun, &report.verdict).0,
        Outcome::Pass
    );

    // The documented default configuration: graceful shutdown off.
    node_at(&client, "docs", &[("InternalIP", ADDR)], 10251).await;
    let fact = gns::read_config(&client, "docs", t).await;
    let v = graceful::evaluate(
        &fact,
        &Fact::not_collected("no SSH"),
        &Fact::not_collected("no SSH"),
    );
    assert_eq!(
        v.summary(),
        "graceful shutdown will NOT run: shutdownGracePeriod is 0s (graceful node shutdown disabled)"
    );

    // A kubelet that does not serve /configz: the verdict is unknown, with why.
    node_at(&client, "no-configz", &[("InternalIP", ADDR)], 10252).await;
    let e = configz::fetch(&client, "no-configz", t).await.unwrap_err();
    eprintln!("no-configz: {e}");
    assert!(matches!(e, Error::NotServed { code: 404, .. }), "{e:?}");
    let fact = gns::read_config(&client, "no-configz", t).await;
    let v = graceful::evaluate(
        &fact,
        &Fact::not_collected("no SSH"),
        &Fact::not_collected("no SSH"),
    );
    assert!(
        matches!(&v, ShutdownVerdict::Unknown { reason } if reason.contains("did not serve /configz through the API server (HTTP 404")),
        "{v:?}"
    );

    // A kubelet the API server cannot reach.
    node_at(&client, "unreachable", &[("InternalIP", ADDR)], 10253).await;
    kubelets.take_connects();
    let started = Instant::now();
    let e = configz::fetch(&client, "unreachable", t).await.unwrap_err();
    eprintln!("unreachable after {:?}: {e}", started.elapsed());
    assert!(matches!(e, Error::KubeletUnreachable { .. }), "{e:?}");
    assert_eq!(kubelets.take_connects(), vec![format!("{ADDR}:10253")]);
    // The default client retries the 503 until the bound, which it keeps.
    let retrying = kube::Client::try_from(config.clone()).unwrap();
    let started = Instant::now();
    let e = configz::fetch(&retrying, "unreachable", Duration::from_secs(3))
        .await
        .unwrap_err();
    let took = started.elapsed();
    eprintln!("unreachable, retrying client, after {took:?}: {e}");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A kubelet that never answers: our bound ends the wait.
    node_at(&client, "silent", &[("InternalIP", ADDR)], 10254).await;
    let started = Instant::now();
    let e = configz::fetch(&client, "silent", Duration::from_secs(2))
        .await
        .unwrap_err();
    let took = started.elapsed();
    eprintln!("silent after {took:?}: {e}");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");

    // Which address the API server dials: the sim's names InternalIP alone
    // (`--kubelet-preferred-address-types InternalIP`), so a Hostname
    // address is never resolved nor dialled (upstream's default would try it
    // first, through the host's DNS), and an ExternalIP is passed over.
    node_at(
        &client,
        "with-hostname",
        &[("InternalIP", ADDR), ("Hostname", "198.51.100.8")],
        10250,
    )
    .await;
    node_at(
        &client,
        "with-external",
        &[("ExternalIP", "198.51.100.9"), ("InternalIP", ADDR)],
        10250,
    )
    .await;
    kubelets.take_connects();
    configz::fetch(&client, "with-hostname", t).await.unwrap();
    configz::fetch(&client, "with-external", t).await.unwrap();
    assert_eq!(
        kubelets.take_connects(),
        vec![format!("{ADDR}:10250"), format!("{ADDR}:10250")]
    );

    // Loopback and unspecified node addresses are refused before any dial;
    // a node with a Hostname alone has no address the sim's API server uses.
    for (name, addr) in [
        ("loopback", ("InternalIP", "127.0.0.1")),
        ("unspecified", ("InternalIP", "0.0.0.0")),
    ] {
        node_at(&client, name, &[addr], 10250).await;
        let e = configz::fetch(&client, name, t).await.unwrap_err();
        eprintln!("{name}: {e}");
        assert!(
            matches!(&e, Error::ProxyRefused { message, .. } if message.contains("address not allowed")),
            "{e:?}"
        );
    }
    node_at(&client, "localhost", &[("Hostname", "localhost")], 10250).await;
    let e = configz::fetch(&client, "localhost", t).await.unwrap_err();
    eprintln!("localhost: {e}");
    assert!(
        matches!(&e, Error::KubeletUnreachable { message, .. } if message.contains("no preferred addresses")),
        "{e:?}"
    );
    assert!(kubelets.take_connects().is_empty());

    // No such node.
    let e = configz::fetch(&client, "nope", t).await.unwrap_err();
    assert!(matches!(e, Error::NodeNotFound { .. }), "{e:?}");

    // A user without `nodes/proxy`: named in the error.
    let mut viewer = config.clone();
    viewer.default_retry = false;
    viewer.auth_info.impersonate = Some("gns-viewer".into());
    let viewer = kube::Client::try_from(viewer).unwrap();
    let e = configz::fetch(&viewer, "kubespray", t).await.unwrap_err();
    eprintln!("forbidden: {e}");
    assert!(matches!(e, Error::Forbidden { .. }), "{e:?}");
    assert!(e.to_string().contains("`nodes/proxy`"), "{e}");

    // Every request the stand-in kubelets got was the API server's GET /configz.
    let requests = kubelets.requests.lock().unwrap().clone();
    assert!(requests.len() >= 6, "{requests:?}");
    assert!(
        requests.iter().all(|r| r == "GET /configz HTTP/1.1"),
        "{requests:?}"
    );
    drop(kubelets);
    cluster.down().unwrap();
}
