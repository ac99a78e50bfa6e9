//! The sim's stand-in for kube-proxy and the pods' servers, so a scenario's
//! HTTP probe on a NodePort gets the answers its clients would get on kind.
//!
//! On kind, `127.0.0.1:NODEPORT` reaches a node's kube-proxy rules, which
//! send each new connection to one ready endpoint of the Service at random
//! (to a serving, terminating one when none is ready, and rejected when
//! there is neither). What then happens depends on the pod's machine and
//! containers: a paused, powered-off or cut-off node answers nothing (the
//! client times out); a pod whose containers have stopped refuses; a
//! running one answers.
//!
//! Here, while a scenario runs on the sim ([`ServiceProxy::spawn`]), nodefall
//! listens on `127.0.0.1:NODEPORT` for every NodePort Service, keeps the
//! Services, EndpointSlices and Pods from watches, and the machines' state
//! from the backend's own faults ([`Machines`]). Each connection gets what
//! [`Routes::answer`] decides: `200` with the pod's name, a reset (a stopped
//! container), or silence until the client gives up (a dead machine, or a
//! pod the cluster no longer has, whose address is gone).
//!
//! What it does not play: kube-proxy's own delay in rewriting its rules
//! after an EndpointSlice change (it follows the watch at once), and a TCP
//! handshake that never completes (the listener accepts every connection, so
//! the client's timeout is a response timeout, not a connect timeout).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::observe::endpoints;

/// The label naming an EndpointSlice's Service.
const SERVICE_LABEL: &str = "kubernetes.io/service-name";
/// How long a connection to a silent machine is held at most (clients
/// time out long before).
const SILENCE: Duration = Duration::from_secs(60);
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Nodes whose machine answers nothing (paused, powered off, NIC down):
/// set by the sim backend as it injects and reverts faults.
#[derive(Debug, Clone, Default)]
pub struct Machines(Arc<Mutex<BTreeSet<String>>>);

impl Machines {
    pub fn set_down(&self, node: &str, down: bool) {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if down {
            set.insert(node.to_owned());
        } else {
            set.remove(node);
        }
    }

    fn is_down(&self, node: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(node)
    }
}

/// What a connection gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `200 OK` from this pod.
    Serve(String),
    /// Reset: no endpoint at all (kube-proxy's REJECT), or the pod's
    /// containers have stopped.
    Refuse,
    /// Nothing: the machine is down, or the pod's address is gone.
    Silence,
}

/// One endpoint as kube-proxy uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// `namespace/name` of its pod.
    pod: Option<String>,
    node: Option<String>,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// What the watches have shown: the pure part of the proxy.
#[derive(Debug, Default)]
pub struct Routes {
    /// `namespace/service` -> its node ports.
    node_ports: BTreeMap<String, Vec<u16>>,
    /// `namespace/slice` -> (`namespace/service`, endpoints).
    slices: BTreeMap<String, (String, Vec<Endpoint>)>,
    /// `namespace/pod` -> whether its containers run.
    pods: BTreeMap<String, bool>,
}

fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

impl Routes {
    pub fn service(&mut self, svc: &Service, present: bool) {
        let k = key(svc.metadata.namespace.as_deref(), &svc.name_any());
        let ports: Vec<u16> = svc
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .filter_map(|p| p.node_port.and_then(|n| u16::try_from(n).ok()))
            .collect();
        if present && !ports.is_empty() {
            self.node_ports.insert(k, ports);
        } else {
            self.node_ports.remove(&k);
        }
    }

    pub fn slice(&mut self, s: &EndpointSlice, present: bool) {
        let ns = s.metadata.namespace.as_deref();
        let k = key(ns, &s.name_any());
        let Some(service) = s.labels().get(SERVICE_LABEL).filter(|_| present) else {
            self.slices.remove(&k);
            return;
        };
        let endpoints = s
            .endpoints
            .iter()
            .map(|e| {
                let (ready, serving, terminating) = endpoints::conditions(e);
                Endpoint {
                    pod: endpoints::pod_ref(e)
                        .and_then(|r| Some(key(r.namespace.as_deref().or(ns), r.name.as_deref()?))),
                    node: e.node_name.clone(),
                    ready,
                    serving,
                    terminating,
                }
            })
            .collect();
        self.slices.insert(k, (key(ns, service), endpoints));
    }

    pub fn pod(&mut self, p: &Pod, present: bool) {
        let k = key(p.metadata.namespace.as_deref(), &p.name_any());
        if present {
            self.pods.insert(k, runs(p));
        } else {
            self.pods.remove(&k);
        }
    }

    /// Every node port of every NodePort Service.
    pub fn ports(&self) -> BTreeSet<u16> {
        self.node_ports.values().flatten().copied().collect()
    }

    /// What a new connection to `port` gets; `pick` chooses one of `n`
    /// candidate endpoints (kube-proxy's random choice).
    pub fn answer(
        &self,
        port: u16,
        machines: &Machines,
        pick: impl FnOnce(usize) -> usize,
    ) -> Answer {
        let services: BTreeSet<&String> = self
            .node_ports
            .iter()
            .filter(|(_, ports)| ports.contains(&port))
            .map(|(k, _)| k)
            .collect();
        let endpoints: Vec<&Endpoint> = self
            .slices
            .values()
            .filter(|(svc, _)| services.contains(svc))
            .flat_map(|(_, eps)| eps)
            .collect();
        let mut candidates: Vec<&Endpoint> =
            endpoints.iter().copied().filter(|e| e.ready).collect();
        if candidates.is_empty() {
            candidates = endpoints
                .iter()
                .copied()
                .filter(|e| e.serving && e.terminating)
                .collect();
        }
        if candidates.is_empty() {
            return Answer::Refuse;
        }
        let e = candidates[pick(candidates.len()).min(candidates.len() - 1)];
        if e.node.as_deref().is_some_and(|n| machines.is_down(n)) {
            return Answer::Silence;
        }
        match e.pod.as_ref().map(|p| (p, self.pods.get(p))) {
            Some((pod, Some(true))) => Answer::Serve(pod.clone()),
            Some((_, Some(false))) => Answer::Refuse,
            // Gone from the API: its address with it.
            Some((_, None)) => Answer::Silence,
            None => Answer::Serve(String::new()),
        }
    }
}

/// Whether a pod's containers run: phase Running and none of them terminated.
fn runs(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running")
        && s.container_statuses
            .iter()
            .flatten()
            .all(|c| c.state.as_ref().is_none_or(|st| st.terminated.is_none()))
}

/// The proxy's tasks: run until this value is dropped.
#[derive(Debug)]
pub struct ServiceProxy {
    task: tokio::task::JoinHandle<()>,
}

impl ServiceProxy {
    /// Starts watching and listening (on the current tokio runtime).
    pub fn spawn(client: kube::Client, machines: Machines) -> ServiceProxy {
        ServiceProxy {
            task: tokio::spawn(run(client, machines)),
        }
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Seen<K> {
    Present(Box<K>),
    Gone(Box<K>),
    Relisted,
}

/// A watch event as the proxy uses it; an error is logged (the watcher
/// retries with its backoff).
fn seen<K: Clone>(e: Result<Event<K>, watcher::Error>) -> Vec<Seen<K>> {
    match e {
        Ok(Event::Apply(o) | Event::InitApply(o)) => vec![Seen::Present(Box::new(o))],
        Ok(Event::Delete(o)) => vec![Seen::Gone(Box::new(o))],
        Ok(Event::Init | Event::InitDone) => vec![Seen::Relisted],
        Err(e) => {
            tracing::debug!(
                "sim service proxy: watch error, the watcher retries: {}",
                crate::actions::api_text(&e)
            );
            Vec::new()
        }
    }
}

enum Watched {
    Service(Seen<Service>),
    Slice(Seen<EndpointSlice>),
    Pod(Seen<Pod>),
}

async fn run(client: kube::Client, machines: Machines) {
    let routes = Arc::new(Mutex::new(Routes::default()));
    let cfg = watcher::Config::default;
    let services = watcher::watcher(Api::<Service>::all(client.clone()), cfg())
        .default_backoff()
        .flat_map(|e| futures::stream::iter(seen(e)))
        .map(Watched::Service);
    let slices = watcher::watcher(Api::<EndpointSlice>::all(client.clone()), cfg())
        .default_backoff()
        .flat_map(|e| futures::stream::iter(seen(e)))
        .map(Watched::Slice);
    let pods = watcher::watcher(Api::<Pod>::all(client), cfg())
        .default_backoff()
        .flat_map(|e| futures::stream::iter(seen(e)))
        .map(Watched::Pod);
    let mut events = std::pin::pin!(futures::stream::select(
        services,
        futures::stream::select(slices, pods)
    ));
    // Dropped with this task (the proxy dropped): every listener aborted.
    let mut tasks = JoinSet::new();
    let mut listening: BTreeMap<u16, tokio::task::AbortHandle> = BTreeMap::new();
    while let Some(w) = events.next().await {
        {
            let mut r = routes.lock().unwrap_or_else(PoisonError::into_inner);
            match w {
                Watched::Service(Seen::Present(s)) => r.service(&s, true),
                Watched::Service(Seen::Gone(s)) => r.service(&s, false),
                Watched::Slice(Seen::Present(s)) => r.slice(&s, true),
                Watched::Slice(Seen::Gone(s)) => r.slice(&s, false),
                Watched::Pod(Seen::Present(p)) => r.pod(&p, true),
                Watched::Pod(Seen::Gone(p)) => r.pod(&p, false),
                // A relist re-applies every object; one deleted while the
                // watch was down stays known (a local API server's watches
                // rarely break during a run; the gap is the proxy's).
                Watched::Service(Seen::Relisted)
                | Watched::Slice(Seen::Relisted)
                | Watched::Pod(Seen::Relisted) => {}
            }
        }
        let ports = routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ports();
        listening.retain(|port, task| {
            let keep = ports.contains(port);
            if !keep {
                task.abort();
            }
            keep
        });
        while tasks.try_join_next().is_some() {}
        for port in ports {
            if listening.contains_key(&port) {
                continue;
            }
            match TcpListener::bind(("127.0.0.1", port)).await {
                Ok(l) => {
                    tracing::debug!("sim service proxy: listening on 127.0.0.1:{port}");
                    let task = tasks.spawn(accept(l, port, routes.clone(), machines.clone()));
                    listening.insert(port, task);
                }
                Err(e) => {
                    tracing::warn!(
                        "sim service proxy: cannot listen on 127.0.0.1:{port} ({e}); clients of that NodePort will not reach the sim's pods"
                    );
                    listening.insert(port, tasks.spawn(async {}));
                }
            }
        }
    }
    tasks.abort_all();
}

async fn accept(l: TcpListener, port: u16, routes: Arc<Mutex<Routes>>, machines: Machines) {
    let mut conns = JoinSet::new();
    let mut n: u64 = 0;
    loop {
        let Ok((stream, _)) = l.accept().await else {
            // Out of descriptors, say: let connections end first.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        n = n.wrapping_add(1);
        let answer = routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .answer(port, &machines, |len| pick(n, len));
        conns.spawn(reply(stream, answer));
        while conns.try_join_next().is_some() {}
    }
}

/// A well-spread choice of one of `len` for the `n`th connection.
fn pick(n: u64, len: usize) -> usize {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    usize::try_from(h.finish() % u64::try_from(len).unwrap_or(1)).unwrap_or(0)
}

async fn reply(mut stream: TcpStream, answer: Answer) {
    match answer {
        Answer::Serve(pod) => {
            if read_request(&mut stream).await {
                let body = format!("{pod}\n");
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        }
        Answer::Refuse => {
            // Linger 0: the close resets the connection.
            let _ = stream.set_zero_linger();
        }
        Answer::Silence => {
            let mut sink = [0u8; 1024];
            let _ = tokio::time::timeout(SILENCE, async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
    }
}

/// Reads a request's head; false when the client sent none in time.
async fn read_request(stream: &mut TcpStream) -> bool {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.len() > 16 * 1024 {
                        return true;
                    }
                }
            }
        }
    });
    read.await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn routes() -> Routes {
        let mut r = Routes::default();
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}
        }))
        .unwrap();
        r.service(&svc, true);
        r
    }

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "web-x", "namespace": "ns", "labels": {SERVICE_LABEL: "web"}},
            "addressType": "IPv4",
            "endpoints": endpoints
        }))
        .unwrap()
    }

    fn pod(name: &str, phase: &str, terminated: bool) -> Pod {
        let state = if terminated {
            json!({"terminated": {"exitCode": 0}})
        } else {
            json!({"running": {}})
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "status": {"phase": phase, "containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0, "state": state
            }]}
        }))
        .unwrap()
    }

    fn ep(pod: &str, node: &str, ready: bool) -> serde_json::Value {
        json!({"addresses": [format!("10.0.0.{}", pod.len())], "nodeName": node,
               "conditions": {"ready": ready, "serving": ready, "terminating": false},
               "targetRef": {"kind": "Pod", "name": pod, "namespace": "ns"}})
    }

    #[test]
    fn a_ready_endpoint_on_a_live_node_with_a_running_pod_serves() {
        let mut r = routes();
        r.slice(
            &slice(json!([ep("a", "w1", true), ep("bb", "w2", false)])),
            true,
        );
        r.pod(&pod("a", "Running", false), true);
        let m = Machines::default();
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Serve("ns/a".into()));
        // Only ready endpoints are candidates.
        assert_eq!(r.answer(30080, &m, |_| 1), Answer::Serve("ns/a".into()));
        // Another port: nothing there.
        assert_eq!(r.answer(30081, &m, |_| 0), Answer::Refuse);
    }

    #[test]
    fn a_down_machine_is_silent_a_stopped_pod_refuses_a_gone_one_is_silent() {
        let mut r = routes();
        r.slice(&slice(json!([ep("a", "w1", true)])), true);
        let m = Machines::default();
        r.pod(&pod("a", "Running", false), true);
        m.set_down("w1", true);
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Silence);
        m.set_down("w1", false);
        r.pod(&pod("a", "Running", true), true);
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Refuse);
        r.pod(&pod("a", "Succeeded", false), true);
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Refuse);
        r.pod(&pod("a", "Running", false), false);
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Silence);
    }

    #[test]
    fn no_ready_endpoint_falls_back_to_serving_terminating_then_refuses() {
        let mut r = routes();
        let terminating = json!({"addresses": ["10.0.0.7"], "nodeName": "w1",
            "conditions": {"ready": false, "serving": true, "terminating": true},
            "targetRef": {"kind": "Pod", "name": "t", "namespace": "ns"}});
        r.slice(&slice(json!([terminating])), true);
        r.pod(&pod("t", "Running", false), true);
        let m = Machines::default();
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Serve("ns/t".into()));
        r.slice(&slice(json!([ep("a", "w1", false)])), true);
        assert_eq!(r.answer(30080, &m, |_| 0), Answer::Refuse);
        // The Service gone: its port with it.
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"}}))
        .unwrap();
        r.service(&svc, false);
        assert!(r.ports().is_empty());
    }

    #[test]
    fn picks_spread_over_every_candidate() {
        let seen: BTreeSet<usize> = (0..200).map(|n| pick(n, 4)).collect();
        assert_eq!(seen, (0..4).collect());
    }

    #[tokio::test]
    async fn a_connection_gets_its_answer_over_tcp() {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            reply(s, Answer::Serve("ns/a".into())).await;
            let (s, _) = l.accept().await.unwrap();
            reply(s, Answer::Refuse).await;
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).await.unwrap();
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        assert!(got.ends_with("ns/a\n"), "{got}");
        let mut c = TcpStream::connect(addr).await.unwrap();
        let _ = c.write_all(b"GET / HTTP/1.1\r\n\r\n").await;
        let mut buf = [0u8; 16];
        let r = c.read(&mut buf).await;
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
                || matches!(r, Ok(0)),
            "{r:?}"
        );
        server.await.unwrap();
    }
}
