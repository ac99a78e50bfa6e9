//! The kind backend on a real Docker engine. No image can be pulled here, so
//! the test builds a tiny node image (`docker import` of a busybox-static
//! rootfs), starts containers labelled exactly as kind labels its nodes, and
//! runs one kwok per container (host network, binary bind-mounted) against a
//! bare simulated control plane; a `systemctl` shim in the image stops and
//! starts that kwok as the "kubelet". The faults then go through the real
//! backend code: pause/unpause, kill/start, systemctl stop/start kubelet.
//!
//! Every container and image the test makes is removed, also on failure.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::backend::NodeFaults as _;
use nodefall::backend::kind::KindBackend;
use nodefall::exec::System;
use nodefall::profile::TimingProfile;
use nodefall::scenario::model::FaultKind;
use nodefall::sim::binaries::{Binaries, Versions, cache_root};
use nodefall::sim::{SimCluster, UpOptions};

#[path = "support/skip.rs"]
mod skip;

const INIT: &str = r#"#!/bin/sh
# PID 1 of a test node: start the "kubelet", then wait for a stop signal.
trap 'kill "$(cat /run/kubelet.pid)" 2>/dev/null; exit 0' TERM INT
/usr/bin/systemctl start kubelet
while :; do sleep 1; done
"#;

const SYSTEMCTL: &str = r#"#!/bin/sh
# systemctl shim: the kubelet is a kwok process playing this node.
case "$1 $2" in
  "start kubelet")
    /kwok/kwok --kubeconfig "$KUBECONFIG" --config "$STAGES" --manage-single-node "$NODE" \
      --node-lease-duration-seconds 4 --server-address 127.0.0.1:0 >>/var/log/kubelet.log 2>&1 &
    echo $! >/run/kubelet.pid ;;
  "stop kubelet")
    kill "$(cat /run/kubelet.pid)" ;;
  "is-active kubelet")
    kill -0 "$(cat /run/kubelet.pid)" 2>/dev/null ;;
  *)
    echo "systemctl shim: unsupported: $*" >&2; exit 1 ;;
esac
"#;

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker").args(args).output().unwrap()
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes what the test made, whatever happens.
struct Cleanup {
    containers: Vec<String>,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = docker(&["rm", "-f", c]);
        }
        let _ = docker(&["rmi", "-f", &self.image]);
    }
}

fn busybox() -> PathBuf {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("busybox-static (apt-get install busybox-static)")
}

/// A rootfs with busybox, /init and the systemctl shim, imported as an image.
fn build_image(tag: &str) {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for d in ["bin", "usr/bin", "run", "var/log", "tmp", "kwok", "etc"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::copy(busybox(), r.join("bin/busybox")).unwrap();
    for applet in ["sh", "sleep", "kill", "cat", "echo"] {
        std::os::unix::fs::symlink("busybox", r.join("bin").join(applet)).unwrap();
    }
    let exe = |path: &Path, text: &str| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(&r.join("init"), INIT);
    exe(&r.join("usr/bin/systemctl"), SYSTEMCTL);
    let archive = root.path().with_extension("tar");
    let tar = Command::new("tar")
        .arg("-C")
        .arg(r)
        .arg("-cf")
        .arg(&archive)
        .arg(".")
        .status()
        .unwrap();
    assert!(tar.success(), "tar of the rootfs");
    let archive_arg = archive.display().to_string();
    docker_ok(&["import", "--change", "CMD [\"/init\"]", &archive_arg, tag]);
    std::fs::remove_file(&archive).unwrap();
}

fn ready(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

async fn wait_ready(client: &kube::Client, name: &str, want: &str, timeout: Duration) -> Duration {
    let start = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    // A broken watch is retried (with backoff) until the timeout.
    let mut stream = std::pin::pin!(
        watcher(api, config)
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
    );
    let r = tokio::time::timeout(timeout, async {
        while let Some(n) = stream.next().await {
            if ready(&n).as_deref() == Some(want) {
                return;
            }
        }
    })
    .await;
    assert!(r.is_ok(), "{name} not Ready={want} within {timeout:?}");
    start.elapsed()
}

fn docker_usable() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn kind_faults_on_docker_containers() {
    if !docker_usable() {
        skip::skip(
            "kind_faults_on_docker_containers",
            "no Docker engine (docker info failed)",
        );
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(faults());
}

async fn faults() {
    let id = std::process::id();
    let cluster_name = format!("nftest{id}");
    let image = format!("nodefall-test-node:{id}");
    let workers = [
        format!("{cluster_name}-worker"),
        format!("{cluster_name}-worker2"),
    ];
    let _cleanup = Cleanup {
        containers: workers.to_vec(),
        image: image.clone(),
    };
    build_image(&image);

    // A bare control plane; the containers bring the nodes.
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("kind-docker", TimingProfile::fast());
    opts.root = root.path().to_owned();
    opts.nodes = 0;
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    let dir = cluster.dir().display().to_string();
    let kwok = Binaries::at(&cache_root(), Versions::from_env()).kwok;
    let kwok_dir = kwok.parent().unwrap().display().to_string();

    let nodes: Api<Node> = Api::all(client.clone());
    for w in &workers {
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": w, "labels": {"kubernetes.io/hostname": w},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        docker_ok(&[
            "run",
            "-d",
            "--name",
            w,
            "--hostname",
            w,
            "--network",
            "host",
            "--label",
            &format!("io.x-k8s.kind.cluster={cluster_name}"),
            "--label",
            "io.x-k8s.kind.role=worker",
            "-v",
            &format!("{dir}:{dir}:ro"),
            "-v",
            &format!("{kwok_dir}:/kwok:ro"),
            "-e",
            &format!("NODE={w}"),
            "-e",
            &format!("KUBECONFIG={dir}/kubeconfig"),
            "-e",
            &format!("STAGES={dir}/kwok-stages.yaml"),
            &image,
        ]);
    }
    for w in &workers {
        wait_ready(&client, w, "True", Duration::from_secs(60)).await;
    }

    // The backend finds the containers by kind's labels.
    let mut backend = KindBackend::discover(&cluster_name, "docker", System).unwrap();
    assert_eq!(
        backend.nodes.keys().cloned().collect::<Vec<_>>(),
        workers.to_vec()
    );
    assert!(backend.nodes.values().all(|c| c.role == "worker"));
    let p = TimingProfile::fast();
    // Slack for a controller (and dockerd) slowed by a loaded 2-core machine.
    let unknown_within =
        p.node_monitor_grace_period + p.node_monitor_period + Duration::from_secs(20);
    let w = workers[0].as_str();

    // pause -> Ready Unknown; unpause -> Ready.
    backend.inject(w, FaultKind::PauseVm).await.unwrap();
    let took = wait_ready(&client, w, "Unknown", unknown_within).await;
    eprintln!("docker pause: Unknown after {took:?}");
    assert!(
        took >= p.node_monitor_grace_period - p.node_lease_duration / 4,
        "{took:?}"
    );
    backend.inject(w, FaultKind::ResumeVm).await.unwrap();
    wait_ready(&client, w, "True", Duration::from_secs(60)).await;

    // kill -> Unknown; start -> Ready (the kubelet starts with the container).
    backend.inject(w, FaultKind::Poweroff).await.unwrap();
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{.State.Running}}", w]).trim(),
        "false"
    );
    wait_ready(&client, w, "Unknown", unknown_within).await;
    backend.inject(w, FaultKind::Poweron).await.unwrap();
    wait_ready(&client, w, "True", Duration::from_secs(60)).await;

    // systemctl stop/start kubelet inside the node.
    let w2 = workers[1].as_str();
    backend.inject(w2, FaultKind::StopKubelet).await.unwrap();
    wait_ready(&client, w2, "Unknown", unknown_within).await;
    backend.inject(w2, FaultKind::StartKubelet).await.unwrap();
    wait_ready(&client, w2, "True", Duration::from_secs(60)).await;

    // A failing command is reported with its command line and stderr.
    let err = backend.inject(w2, FaultKind::ResumeVm).await.unwrap_err();
    let text = format!("{err}");
    assert!(
        text.contains(&format!("docker unpause {w2}")) && text.contains("not paused"),
        "{text}"
    );

    cluster.down().unwrap();
}

/// Removes a network the test made.
struct NetworkCleanup {
    container: String,
    network: String,
    image: String,
}

impl Drop for NetworkCleanup {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.container]);
        let _ = docker(&["network", "rm", &self.network]);
        let _ = docker(&["rmi", "-f", &self.image]);
    }
}

fn address(container: &str, network: &str) -> String {
    let format = format!(
        "{{{{with index .NetworkSettings.Networks \"{network}\"}}}}{{{{.IPAddress}}}}{{{{end}}}}"
    );
    docker_ok(&["inspect", "--format", &format, container])
        .trim()
        .to_owned()
}

#[test]
fn network_faults_and_poweron_keep_the_node_address() {
    if !docker_usable() {
        skip::skip(
            "network_faults_and_poweron_keep_the_node_address",
            "no Docker engine (docker info failed)",
        );
        return;
    }
    let id = std::process::id();
    let cluster = format!("nfnet{id}");
    let network = format!("nfnet{id}");
    let container = format!("{cluster}-worker");
    let image = format!("nodefall-test-net:{id}");
    let _cleanup = NetworkCleanup {
        container: container.clone(),
        network: network.clone(),
        image: image.clone(),
    };
    build_image(&image);
    // A /24 no other network on this engine holds (another run's, whose PID
    // may be equal modulo 250): the first that docker accepts.
    let _subnet = (0..250)
        .map(|k| format!("10.213.{}.0/24", (id + k) % 250))
        .find(|subnet| {
            let out = docker(&["network", "create", "--subnet", subnet, &network]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() || err.contains("overlap"),
                "docker network create --subnet {subnet}: {err}"
            );
            out.status.success()
        })
        .expect("a free 10.213.x.0/24 for the test's network");
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &container,
        "--network",
        &network,
        "--label",
        &format!("io.x-k8s.kind.cluster={cluster}"),
        "--label",
        "io.x-k8s.kind.role=worker",
        &image,
        "sh",
        "-c",
        "trap 'exit 0' TERM; while :; do sleep 1; done",
    ]);
    let before = address(&container, &network);
    assert!(!before.is_empty());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut backend = KindBackend::discover(&cluster, "docker", System).unwrap();
        backend.network.clone_from(&network);

        backend
            .inject(&container, FaultKind::DropNic)
            .await
            .unwrap();
        assert_eq!(address(&container, &network), "", "off the network");
        backend
            .inject(&container, FaultKind::RestoreNic)
            .await
            .unwrap();
        assert_eq!(address(&container, &network), before, "same address back");

        backend
            .inject(&container, FaultKind::Poweroff)
            .await
            .unwrap();
        assert_eq!(
            docker_ok(&["inspect", "-f", "{{.State.Running}}", &container]).trim(),
            "false"
        );
        backend
            .inject(&container, FaultKind::Poweron)
            .await
            .unwrap();
        assert_eq!(
            docker_ok(&["inspect", "-f", "{{.State.Running}}", &container]).trim(),
            "true"
        );
        assert_eq!(
            address(&container, &network),
            before,
            "same address after poweron"
        );
    });
}
