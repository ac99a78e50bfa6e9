//! Real kubelets: a kind cluster made by `nodefall kind up` from the node
//! image scripts/kind/image.sh builds (Debian packages and Go modules, no
//! registry), with compressed timings. One test, one cluster, in order:
//!
//! 1. containment: a pod sends packets (ICMP, TCP, a DNS query) to a decoy
//!    address on a network namespace this test makes on the host (outside
//!    the cluster's bridge); the guard drops them and the decoy never
//!    receives one (a packet from the host itself does arrive: it listens);
//! 2. `scenarios/kind-pause-worker.yaml` through the kind backend passes, and
//!    no node but the paused one ever left Ready=True (no flapping); then
//!    every other fault on another worker (`tests/fixtures/kind/every-fault.yaml`:
//!    poweroff/poweron, drop/restore NIC, stop/start kubelet), where a
//!    kubelet started again writes the host's sysctls again and the kind
//!    backend puts them back;
//! 3. `nodefall kind down`: afterwards the host's sysctls, iptables rules,
//!    Docker containers, networks, volumes and images are as they were.
//!
//! A second test stops `nodefall kind up` with SIGTERM while kind creates the
//! nodes (it removes all it made) and kills it with SIGKILL once its network
//! and guard exist (`nodefall recover` removes them); the host as found both
//! times. The tests take turns (one cluster at a time: fixed host ports).
//!
//! Needs Docker (on this project's CI hosts with the runc wrapper, see
//! scripts/kind/host-quirks.sh), iptables, `ip netns`, and the node image and
//! kind binary built by scripts/kind/image.sh; under CI a missing one fails.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};

#[path = "support/skip.rs"]
mod skip;

const NAME: &str = "nftest";

/// One cluster at a time, also under a plain `cargo test` (its tests run in
/// threads): the clusters map the same host ports.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
const DECOY_PORT: u16 = 5999;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `bash -c script`: its stdout, or None when it failed.
fn sh(script: &str) -> Option<String> {
    let out = Command::new("bash").args(["-c", script]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn must(script: &str) -> String {
    let out = Command::new("bash").args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "`{script}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the host has that the cluster may change: compared before and after.
#[derive(Debug, PartialEq, Eq)]
struct HostState {
    sysctls: BTreeMap<String, String>,
    iptables: Vec<String>,
    containers: BTreeSet<String>,
    networks: BTreeSet<String>,
    volumes: BTreeSet<String>,
    images: BTreeSet<String>,
}

fn lines(s: &str) -> BTreeSet<String> {
    s.lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

fn host_state() -> HostState {
    let sysctls = nodefall::kindlab::host::read_sysctls(
        Path::new("/proc/sys"),
        &nodefall::kindlab::host::KUBELET_SYSCTLS,
    )
    .unwrap();
    // Rules only (no counters), filter and nat tables.
    let mut iptables: Vec<String> = must("iptables -w -S; iptables -w -t nat -S")
        .lines()
        .map(str::to_owned)
        .collect();
    iptables.sort();
    HostState {
        sysctls,
        iptables,
        containers: lines(&must("docker ps -a -q --no-trunc")),
        networks: lines(&must("docker network ls -q --no-trunc")),
        volumes: lines(&must("docker volume ls -q")),
        images: lines(&must("docker images -q --no-trunc")),
    }
}

/// The node image's tag, if it is built.
fn node_image() -> Result<String, String> {
    let tag = sh(&format!(
        "bash {}/scripts/kind/image.sh --tag",
        repo().display()
    ))
    .ok_or("scripts/kind/image.sh --tag failed")?;
    let tag = tag.trim().to_owned();
    if sh(&format!("docker image inspect {tag} >/dev/null 2>&1")).is_none() {
        return Err(format!(
            "the node image {tag} is not built (scripts/kind/image.sh)"
        ));
    }
    Ok(tag)
}

/// Everything this test makes, removed on drop (also when it fails): the
/// cluster (through `nodefall kind down`) and the decoy namespace.
struct Made {
    name: &'static str,
    state: tempfile::TempDir,
    netns: Option<String>,
    host_veth: Option<String>,
}

impl Made {
    fn new(name: &'static str) -> Made {
        Made {
            name,
            state: tempfile::tempdir().unwrap(),
            netns: None,
            host_veth: None,
        }
    }

    fn nodefall(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nodefall"));
        c.args(args)
            .env("XDG_STATE_HOME", self.state.path())
            .env(
                "KIND_EXPERIMENTAL_DOCKER_NETWORK",
                format!("nodefall-{}", self.name),
            )
            .env("KUBECONFIG", self.kubeconfig())
            .env_remove("NODEFALL_TEST_SIGNAL_AT")
            .current_dir(repo());
        c
    }

    /// Runs nodefall with `args` to its end; its status and its stdout and
    /// stderr together (printed, for a failure's log).
    fn run(&self, args: &[&str]) -> (std::process::ExitStatus, String) {
        let o = self.nodefall(args).output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("$ nodefall {}\n{said}", args.join(" "));
        (o.status, said)
    }

    fn kubeconfig(&self) -> PathBuf {
        self.state
            .path()
            .join("nodefall")
            .join("kind")
            .join(self.name)
            .join("kubeconfig")
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        let down = self.nodefall(&["kind", "down", self.name]).output();
        if let Ok(o) = down {
            eprintln!(
                "cleanup `nodefall kind down {}`: {}\n{}{}",
                self.name,
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        if let Some(v) = &self.host_veth {
            sh(&format!("ip link del {v} 2>/dev/null"));
        }
        if let Some(ns) = &self.netns {
            sh(&format!("ip netns del {ns}"));
        }
    }
}

/// A network namespace with one address (the decoy) behind a veth pair, and
/// a rule in it counting every IPv4 packet that reaches it.
fn make_decoy(made: &mut Made) -> (String, String) {
    let id = std::process::id() % 10_000;
    let ns = format!("nfdecoy{id}");
    let (host, peer) = (format!("nfdh{id}"), format!("nfdp{id}"));
    let (host_ip, decoy_ip) = ("10.254.77.1", "10.254.77.2");
    must(&format!("ip netns add {ns}"));
    made.netns = Some(ns.clone());
    must(&format!("ip link add {host} type veth peer name {peer}"));
    made.host_veth = Some(host.clone());
    must(&format!(
        "ip link set {peer} netns {ns} && ip addr add {host_ip}/30 dev {host} && ip link set {host} up \
         && ip netns exec {ns} ip addr add {decoy_ip}/30 dev {peer} && ip netns exec {ns} ip link set {peer} up \
         && ip netns exec {ns} ip link set lo up \
         && ip netns exec {ns} ip route add default via {host_ip} \
         && ip netns exec {ns} iptables -w -A INPUT -j ACCEPT"
    ));
    (ns, decoy_ip.to_owned())
}

/// IPv4 packets the decoy has received.
fn decoy_received(ns: &str) -> u64 {
    let listing = must(&format!("ip netns exec {ns} iptables -w -L INPUT -n -v -x"));
    // The rule's line starts with its packet count (the chain's header line
    // names its policy, ACCEPT too, but starts with `Chain`).
    listing
        .lines()
        .filter(|l| l.contains("ACCEPT"))
        .find_map(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn guard_drops() -> u64 {
    let listing = must("iptables -w -L DOCKER-USER -n -v -x");
    listing
        .lines()
        .filter(|l| l.contains("/* nodefall:kind-up-nftest-"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_contained_kind_cluster_runs_kind_pause_worker() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(image) = prerequisites("a_contained_kind_cluster_runs_kind_pause_worker") else {
        return;
    };
    let before = host_state();
    let mut made = Made::new(NAME);
    let (ns, decoy) = make_decoy(&mut made);

    // The decoy listens: a packet from the host itself arrives.
    UdpSocket::bind("0.0.0.0:0")
        .unwrap()
        .send_to(b"control", (decoy.as_str(), DECOY_PORT))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        decoy_received(&ns),
        1,
        "the decoy did not get the host's packet"
    );

    let (status, up_out) = made.run(&[
        "kind",
        "up",
        "--name",
        NAME,
        "--image",
        &image,
        "--profile",
        "fast",
    ]);
    assert!(status.success(), "nodefall kind up failed:\n{up_out}");
    assert!(
        up_out.contains("CoreDNS restarted without `forward`"),
        "{up_out}"
    );
    assert_eq!(
        host_state().sysctls,
        before.sysctls,
        "the kubelets' sysctls were not put back after kind up"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let kubeconfig = made.kubeconfig();
    let client = rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(config).unwrap()
    });

    // Nothing in a node can reboot the host: its guard unit ran, the sysrq
    // trigger (where the kernel has one) is read-only, no watchdog device.
    for node in ["control-plane", "worker", "worker2"] {
        let c = format!("{NAME}-{node}");
        let said = must(&format!(
            "docker exec {c} sh -c 'systemctl is-active nodefall-host-guard; \
             if [ -e /proc/sysrq-trigger ]; then grep \" /proc/sysrq-trigger \" /proc/self/mountinfo; \
             else echo no-sysrq; fi; ls /dev | grep -c watchdog || true'"
        ));
        let mut said = said.lines();
        assert_eq!(said.next(), Some("active"), "{c}: nodefall-host-guard");
        let sysrq = said.next().unwrap_or_default();
        assert!(
            sysrq == "no-sysrq" || sysrq.contains(" ro,") || sysrq.contains(" ro "),
            "{c}: {sysrq}"
        );
        assert_eq!(said.next(), Some("0"), "{c}: a watchdog device in /dev");
    }

    // 1. Containment.
    let drops_before = guard_drops();
    let phase = rt.block_on(leak_attempt(&client, &decoy));
    assert_eq!(phase, "Succeeded", "the leaking pod did not finish");
    assert_eq!(
        decoy_received(&ns),
        1,
        "a pod's packet reached the decoy outside the cluster: the guard let it out"
    );
    let drops = guard_drops();
    assert!(
        drops >= drops_before + 3,
        "the guard dropped {} packets during the attempt, expected at least 3",
        drops - drops_before
    );

    // 2. The scenario, with every node's Ready watched beside it.
    let flips = Arc::new(Mutex::new(BTreeMap::<String, Vec<String>>::new()));
    let watch = rt.spawn(watch_ready(client.clone(), Arc::clone(&flips)));
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().display().to_string();
    let (status, run_out) = made.run(&[
        "scenario",
        "scenarios/kind-pause-worker.yaml",
        "--backend",
        "kind",
        "--kind-cluster",
        NAME,
        "--profile",
        "fast",
        "--out",
        &out_dir,
    ]);
    watch.abort();
    assert!(
        status.success(),
        "kind-pause-worker.yaml failed on kind:\n{run_out}"
    );
    let flips = flips.lock().unwrap().clone();
    let left: Vec<_> = flips.iter().filter(|(_, v)| !v.is_empty()).collect();
    assert_eq!(
        left.len(),
        1,
        "exactly the paused node leaves Ready=True; seen: {flips:?}"
    );
    let (paused, seen) = left[0];
    assert!(paused.contains("worker"), "{paused}: {seen:?}");
    assert_eq!(
        seen.iter().filter(|s| s.as_str() == "Unknown").count(),
        1,
        "{paused} went Unknown more than once (flapping): {seen:?}"
    );

    // Every other fault on a worker, each reverted: a powered-on node gets
    // its address back (the network has a subnet of its own for that); a
    // kubelet started again writes the host's sysctls again and the kind
    // backend puts them back (the run waits for that before it exits).
    let (status, restart_out) = made.run(&[
        "scenario",
        "tests/fixtures/kind/every-fault.yaml",
        "--backend",
        "kind",
        "--kind-cluster",
        NAME,
        "--out",
        &out_dir,
    ]);
    assert!(status.success(), "every-fault.yaml:\n{restart_out}");
    assert!(
        restart_out.contains("host sysctls a kubelet wrote, put back"),
        "{restart_out}"
    );
    assert_eq!(
        host_state().sysctls,
        before.sysctls,
        "after the faults that start a kubelet"
    );

    // 3. Down, and the host as it was.
    drop(rt);
    let (status, down_out) = made.run(&["kind", "down", NAME]);
    assert!(status.success(), "nodefall kind down:\n{down_out}");
    let ns_name = made.netns.take().unwrap();
    sh(&format!("ip netns del {ns_name}"));
    made.host_veth = None; // gone with its peer's namespace
    assert_as_found(&before, "after kind down");
}

/// The node image's tag when everything the tests need is here; else the
/// test is skipped (under CI: fails).
fn prerequisites(test: &str) -> Option<String> {
    if sh("docker info >/dev/null 2>&1").is_none() {
        skip::skip(test, "no Docker engine (docker info failed)");
        return None;
    }
    for tool in ["iptables", "ip"] {
        if sh(&format!("command -v {tool}")).is_none() {
            skip::skip(test, &format!("{tool} is not installed"));
            return None;
        }
    }
    match node_image() {
        Ok(t) => Some(t),
        Err(why) => {
            skip::skip(test, &why);
            None
        }
    }
}

/// What may differ after a cluster's life: nothing but the node image.
fn assert_as_found(before: &HostState, what: &str) {
    let after = host_state();
    assert_eq!(after.sysctls, before.sysctls, "{what}: sysctls");
    assert_eq!(
        after.containers, before.containers,
        "{what}: containers left"
    );
    assert_eq!(
        after.networks, before.networks,
        "{what}: Docker networks left"
    );
    assert_eq!(after.volumes, before.volumes, "{what}: Docker volumes left");
    assert_eq!(after.images, before.images, "{what}: images left");
    assert_eq!(
        after.iptables, before.iptables,
        "{what}: iptables rules left"
    );
}

#[test]
fn kind_up_stopped_by_sigterm_or_killed_leaves_the_host_as_found() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(image) =
        prerequisites("kind_up_stopped_by_sigterm_or_killed_leaves_the_host_as_found")
    else {
        return;
    };
    let before = host_state();
    let made = Made::new("nfsig");
    let up = [
        "kind",
        "up",
        "--name",
        "nfsig",
        "--image",
        &image,
        "--profile",
        "fast",
    ];

    // SIGTERM while kind creates the nodes: the step ends, then all goes.
    let mut child = made
        .nodefall(&up)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    for line in std::io::BufRead::lines(stdout) {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("creating kind cluster") {
            must(&format!("kill -TERM {}", child.id()));
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{seen}{stderr}");
    assert!(stderr.contains("delete kind cluster nfsig: ok"), "{stderr}");
    assert_as_found(&before, "after SIGTERM during kind create");

    // SIGKILL once the network and the guard exist: `recover` removes them.
    let killed = made
        .nodefall(&up)
        .env("NODEFALL_TEST_SIGNAL_AT", "kind:guarded")
        .env("NODEFALL_TEST_SIGNAL", "KILL")
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        Some(9),
        "{}",
        String::from_utf8_lossy(&killed.stderr)
    );
    assert!(must("iptables -w -S DOCKER-USER").contains("nodefall:kind-up-nfsig-"));
    assert!(sh("docker network inspect nodefall-nfsig >/dev/null").is_some());
    let (status, said) = made.run(&["recover"]);
    assert!(status.success(), "{said}");
    assert!(said.contains("remove the guard on"), "{said}");
    assert_as_found(&before, "after SIGKILL and recover");
}

/// A pod pings the decoy, opens a TCP connection to it and asks it a DNS
/// question (busybox's tools); returns the pod's final phase.
async fn leak_attempt(client: &kube::Client, decoy: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "leak"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "leak",
                "image": "docker.io/library/busybox:nodefall",
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", format!(
                    "ping -c 3 -W 1 {decoy}; wget -T 2 -q -O- http://{decoy}:{DECOY_PORT}/; \
                     nslookup nodefall.invalid {decoy}; true")],
            }],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let done = kube::runtime::wait::await_condition(pods.clone(), "leak", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
    });
    let pod = tokio::time::timeout(Duration::from_secs(120), done)
        .await
        .expect("the leaking pod did not finish in 120 s")
        .unwrap()
        .unwrap();
    pods.delete("leak", &kube::api::DeleteParams::default())
        .await
        .ok();
    pod.status.and_then(|s| s.phase).unwrap_or_default()
}

/// Records each node's Ready status whenever it is not True.
async fn watch_ready(client: kube::Client, flips: Arc<Mutex<BTreeMap<String, Vec<String>>>>) {
    let api: Api<Node> = Api::all(client);
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(Ok(node)) = stream.next().await {
        let name = node.metadata.name.clone().unwrap_or_default();
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status)
            .unwrap_or_default();
        let mut f = flips.lock().unwrap();
        let entry = f.entry(name.clone()).or_default();
        if last.get(&name) != Some(&ready) {
            if ready != "True" {
                entry.push(ready.clone());
            }
            last.insert(name, ready);
        }
    }
}
