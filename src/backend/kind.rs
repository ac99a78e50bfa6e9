//! The `kind` backend: node faults on the containers of a kind cluster,
//! found by kind's labels, through the docker (or podman) CLI.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use super::{Error, NodeFaults};
use crate::exec::{self, Cmd, Exec};
use crate::scenario::model::FaultKind;

/// kind's label naming a node container's cluster.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// kind's label with a node container's role (`control-plane`, `worker`).
pub const ROLE_LABEL: &str = "io.x-k8s.kind.role";
/// The docker network kind puts its nodes on.
pub const NETWORK: &str = "kind";

const TIMEOUT: Duration = Duration::from_secs(120);

/// A node container of a kind cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContainer {
    pub name: String,
    pub role: String,
}

#[derive(Debug)]
pub struct KindBackend<E: Exec> {
    pub cluster: String,
    /// `docker` or `podman`.
    pub runtime: String,
    /// Kubernetes node name -> container (kind names both the same).
    pub nodes: BTreeMap<String, NodeContainer>,
    /// The network the nodes are on (`kind`, unless `KIND_EXPERIMENTAL_DOCKER_NETWORK`).
    pub network: String,
    /// The address each node had on the kind network before it was cut off
    /// or powered off, to give it back the same one.
    addresses: BTreeMap<String, String>,
    /// A cluster `nodefall kind up` made: the host's sysctls, put back after
    /// a kubelet starts again (the kubelet writes host-global ones).
    host_sysctls: Option<BTreeMap<String, String>>,
    exec: E,
}

/// `docker`, unless asked otherwise or only podman is installed.
pub fn pick_runtime(requested: Option<&str>) -> String {
    if let Some(r) = requested {
        return r.to_owned();
    }
    let found = |p: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    if !found("docker") && found("podman") {
        "podman".into()
    } else {
        "docker".into()
    }
}

impl<E: Exec> KindBackend<E> {
    /// Finds the cluster's node containers by kind's labels.
    pub fn discover(cluster: &str, runtime: &str, exec: E) -> Result<KindBackend<E>, Error> {
        let filter = format!("label={CLUSTER_LABEL}={cluster}");
        let format = format!("{{{{.Names}}}}\t{{{{.Label \"{ROLE_LABEL}\"}}}}");
        let cmd = Cmd::new(
            runtime,
            &["ps", "-a", "--filter", &filter, "--format", &format],
        );
        let out = exec.run(&cmd, TIMEOUT).map_err(Error::Exec)?;
        let nodes: BTreeMap<String, NodeContainer> = out
            .lines()
            .filter_map(|l| {
                let (name, role) = l.split_once('\t')?;
                Some((
                    name.to_owned(),
                    NodeContainer {
                        name: name.to_owned(),
                        role: role.to_owned(),
                    },
                ))
            })
            .collect();
        if nodes.is_empty() {
            return Err(Error::NoKindCluster {
                cluster: cluster.to_owned(),
                runtime: runtime.to_owned(),
            });
        }
        let made = crate::kindlab::made(&crate::kindlab::state_root(), cluster);
        Ok(KindBackend {
            cluster: cluster.to_owned(),
            runtime: runtime.to_owned(),
            nodes,
            network: std::env::var("KIND_EXPERIMENTAL_DOCKER_NETWORK")
                .ok()
                .filter(|n| !n.is_empty())
                .or_else(|| made.as_ref().map(|m| m.network.clone()))
                .unwrap_or_else(|| NETWORK.to_owned()),
            addresses: BTreeMap::new(),
            host_sysctls: made.map(|m| m.sysctls),
            exec,
        })
    }

    fn container(&self, node: &str) -> Result<&str, Error> {
        self.nodes
            .get(node)
            .map(|c| c.name.as_str())
            .ok_or_else(|| Error::UnknownNode {
                node: node.to_owned(),
                what: "kind cluster's node containers",
                known: self.nodes.keys().cloned().collect(),
            })
    }

    /// The exact commands a fault runs.
    pub fn commands(&self, node: &str, fault: FaultKind) -> Result<Vec<Cmd>, Error> {
        let c = self.container(node)?;
        let ip = self
            .addresses
            .get(c)
            .cloned()
            .unwrap_or_else(|| "<its address before the fault>".into());
        Ok(fault_commands(&self.runtime, &self.network, c, &ip, fault))
    }
}

impl<E: Exec + Clone + 'static> KindBackend<E> {
    /// The container's state as the runtime says it (`running`, `paused`,
    /// `exited`, `created`, ...).
    async fn status(&self, container: &str) -> Result<String, Error> {
        let cmd = Cmd::new(
            &self.runtime,
            &["inspect", "--format", "{{.State.Status}}", container],
        );
        Ok(run_blocking(&self.exec, cmd).await?.trim().to_owned())
    }

    /// The node's current address on the kind network, if it has one.
    async fn address(&self, container: &str) -> Option<String> {
        let format = format!(
            "{{{{with index .NetworkSettings.Networks \"{}\"}}}}{{{{.IPAddress}}}}{{{{end}}}}",
            self.network
        );
        let cmd = Cmd::new(&self.runtime, &["inspect", "--format", &format, container]);
        let ip = run_blocking(&self.exec, cmd).await.ok()?.trim().to_owned();
        (!ip.is_empty()).then_some(ip)
    }
}

impl<E: Exec + Clone + 'static> NodeFaults for KindBackend<E> {
    fn name(&self) -> &'static str {
        "kind"
    }

    fn memo(&self, node: &str, _: FaultKind) -> Option<String> {
        let container = self.container(node).ok()?;
        self.addresses.get(container).cloned()
    }

    fn remember(&mut self, node: &str, memo: &str) {
        if let Ok(container) = self.container(node) {
            let container = container.to_owned();
            self.addresses.insert(container, memo.to_owned());
        }
    }

    async fn resolve(&mut self, node: &Node, _: &[FaultKind]) -> Result<String, Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let container = self.container(&name)?;
        Ok(format!("node {name} = container {container}"))
    }

    async fn shell(&self, node: &str, command: &str) -> Option<(String, Result<String, String>)> {
        let container = self.container(node).ok()?.to_owned();
        let cmd = Cmd::new(&self.runtime, &["exec", &container, "sh", "-c", command]);
        let via = format!("{} exec {container}", self.runtime);
        Some((
            via,
            run_blocking(&self.exec, cmd)
                .await
                .map_err(|e| e.to_string()),
        ))
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        match self.commands(node, fault) {
            Ok(cmds) => format!(
                "{} {node} ({})",
                fault.name(),
                cmds.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Err(e) => format!("{} {node} ({e})", fault.name()),
        }
    }

    /// The container is brought to running from whatever state a fault, or
    /// a run cut short in one, left it in (paused: unpaused; stopped:
    /// started on its old address), then the revert's own part is done (the
    /// network reconnected if it is off it, the kubelet started).
    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        let container = self.container(node)?.to_owned();
        let status = self.status(&container).await?;
        let mut did = Vec::new();
        match status.as_str() {
            "running" => {}
            "paused" => {
                self.inject(node, FaultKind::ResumeVm).await?;
                did.push("unpaused it");
            }
            _ => {
                self.inject(node, FaultKind::Poweron).await?;
                did.push("started it");
            }
        }
        match revert {
            FaultKind::StartKubelet => {
                self.inject(node, revert).await?;
                did.push("started the kubelet");
            }
            FaultKind::RestoreNic if self.address(&container).await.is_none() => {
                self.inject(node, revert).await?;
                did.push("reconnected it");
            }
            _ => {}
        }
        if did.is_empty() {
            did.push("nothing to do");
        }
        Ok(format!("found container {status}; {}", did.join(", ")))
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let container = self.container(node)?.to_owned();
        if matches!(
            fault,
            FaultKind::Poweroff | FaultKind::Shutdown | FaultKind::DropNic
        ) && let Some(ip) = self.address(&container).await
        {
            self.addresses.insert(container.clone(), ip);
        }
        let keep_address = self.addresses.contains_key(&container);
        for cmd in self.commands(node, fault)? {
            let network = cmd.args.first().is_some_and(|a| a == "network");
            if network && !keep_address {
                // Not on the kind network before the fault (a host-network
                // node): there is no address to give back.
                if fault == FaultKind::RestoreNic {
                    let plain = Cmd::new(
                        &self.runtime,
                        &["network", "connect", &self.network, &container],
                    );
                    run_blocking(&self.exec, plain).await?;
                }
                continue;
            }
            if network && cmd.args.iter().any(|a| a == "--force") {
                // Already disconnected is fine before the reconnect.
                let _ = run_blocking(&self.exec, cmd).await;
                continue;
            }
            run_blocking(&self.exec, cmd).await?;
        }
        if matches!(fault, FaultKind::Poweron | FaultKind::StartKubelet)
            && let Some(values) = self.host_sysctls.clone()
        {
            // In the background: the step goes on while the kubelet starts.
            tokio::task::spawn_blocking(move || {
                let r = crate::kindlab::host::restore_after_kubelet_start(
                    std::path::Path::new("/proc/sys"),
                    &values,
                    Duration::from_secs(60),
                    Duration::from_millis(500),
                );
                match r {
                    Ok(put) if !put.is_empty() => {
                        tracing::info!(
                            "host sysctls a kubelet wrote, put back: {}",
                            put.join(", ")
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("putting back the host's sysctls: {e}"),
                }
            });
        }
        Ok(())
    }
}

/// The commands of `fault` on `container` (also for `nodefall plan`, with
/// placeholders for what is only known at run time).
pub fn fault_commands(rt: &str, net: &str, c: &str, ip: &str, fault: FaultKind) -> Vec<Cmd> {
    match fault {
        FaultKind::PauseVm => vec![Cmd::new(rt, &["pause", c])],
        FaultKind::ResumeVm => vec![Cmd::new(rt, &["unpause", c])],
        FaultKind::Poweroff => vec![Cmd::new(rt, &["kill", c])],
        // systemd as PID 1 halts cleanly on `systemctl poweroff`, through
        // logind, so the kubelet's graceful node shutdown can run.
        FaultKind::Shutdown => vec![
            Cmd::new(rt, &["exec", c, "systemctl", "poweroff"]),
            Cmd::new(rt, &["wait", c]),
        ],
        // Reconnect with the old address first: a restarted node may be
        // given another IP (kind issues 2045, 2715), breaking the cluster.
        FaultKind::Poweron => vec![
            Cmd::new(rt, &["network", "disconnect", "--force", net, c]),
            Cmd::new(rt, &["network", "connect", "--ip", ip, net, c]),
            Cmd::new(rt, &["start", c]),
        ],
        FaultKind::StopKubelet => vec![Cmd::new(rt, &["exec", c, "systemctl", "stop", "kubelet"])],
        FaultKind::StartKubelet => {
            vec![Cmd::new(rt, &["exec", c, "systemctl", "start", "kubelet"])]
        }
        FaultKind::DropNic => vec![Cmd::new(rt, &["network", "disconnect", net, c])],
        FaultKind::RestoreNic => vec![Cmd::new(rt, &["network", "connect", "--ip", ip, net, c])],
    }
}

async fn run_blocking<E: Exec + Clone + 'static>(exec: &E, cmd: Cmd) -> Result<String, Error> {
    exec::run_blocking(exec, cmd, TIMEOUT)
        .await
        .map_err(Error::Exec)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records commands and answers from a script.
    #[derive(Default)]
    struct Fake {
        ran: Mutex<Vec<String>>,
        answers: Vec<(&'static str, &'static str)>,
    }

    impl Exec for Arc<Fake> {
        fn run(&self, cmd: &Cmd, _t: Duration) -> Result<String, exec::Error> {
            let line = cmd.to_string();
            self.ran.lock().unwrap().push(line.clone());
            Ok(self
                .answers
                .iter()
                .find(|(prefix, _)| line.starts_with(prefix))
                .map(|(_, a)| (*a).to_owned())
                .unwrap_or_default())
        }
    }

    fn fake() -> Arc<Fake> {
        Arc::new(Fake {
            ran: Mutex::default(),
            answers: vec![
                (
                    "docker ps",
                    "kind-control-plane\tcontrol-plane\nkind-worker\tworker\nkind-worker2\tworker\n",
                ),
                ("docker inspect", "172.18.0.3\n"),
            ],
        })
    }

    #[test]
    fn finds_nodes_by_kind_labels_and_maps_faults_to_commands() {
        let f = fake();
        let b = KindBackend::discover("kind", "docker", Arc::clone(&f)).unwrap();
        assert_eq!(
            b.nodes.keys().collect::<Vec<_>>(),
            ["kind-control-plane", "kind-worker", "kind-worker2"]
        );
        assert_eq!(b.nodes["kind-worker"].role, "worker");
        assert_eq!(
            f.ran.lock().unwrap()[0],
            "docker ps -a --filter label=io.x-k8s.kind.cluster=kind --format '{{.Names}}\t{{.Label \"io.x-k8s.kind.role\"}}'"
        );
        let line = |fault| {
            b.commands("kind-worker", fault)
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        assert_eq!(line(FaultKind::PauseVm), "docker pause kind-worker");
        assert_eq!(
            line(FaultKind::StopKubelet),
            "docker exec kind-worker systemctl stop kubelet"
        );
        assert_eq!(
            line(FaultKind::DropNic),
            "docker network disconnect kind kind-worker"
        );
        assert!(b.commands("kind-worker9", FaultKind::PauseVm).is_err());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_nodes_shell_is_docker_exec() {
        let f = fake();
        let b = KindBackend::discover("kind", "docker", Arc::clone(&f)).unwrap();
        let (via, out) = b
            .shell("kind-worker", "systemd-inhibit --list")
            .await
            .expect("kind has a shell on its nodes");
        assert_eq!(via, "docker exec kind-worker");
        assert!(out.is_ok());
        assert_eq!(
            f.ran.lock().unwrap().last().map(String::as_str),
            Some("docker exec kind-worker sh -c 'systemd-inhibit --list'")
        );
        assert!(b.shell("kind-worker9", "true").await.is_none());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn poweron_gives_the_node_its_old_address_back() {
        let f = fake();
        let mut b = KindBackend::discover("kind", "docker", Arc::clone(&f)).unwrap();
        b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
        b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
        let ran = f.ran.lock().unwrap().clone();
        assert_eq!(
            ran[1..],
            [
                "docker inspect --format '{{with index .NetworkSettings.Networks \"kind\"}}{{.IPAddress}}{{end}}' kind-worker",
                "docker kill kind-worker",
                "docker network disconnect --force kind kind-worker",
                "docker network connect --ip 172.18.0.3 kind kind-worker",
                "docker start kind-worker",
            ]
        );
    }

    /// A backend whose node containers report `status` to `docker inspect`.
    fn in_state(status: &'static str) -> (Arc<Fake>, KindBackend<Arc<Fake>>) {
        let mut f = fake();
        Arc::get_mut(&mut f)
            .expect("not shared yet")
            .answers
            .insert(0, ("docker inspect --format '{{.State.Status}}'", status));
        let b = KindBackend::discover("kind", "docker", Arc::clone(&f)).unwrap();
        (f, b)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_revert_brings_the_container_back_from_whatever_state_it_is_in() {
        // A resume cut short: the container is not paused but stopped.
        let (f, mut b) = in_state("exited\n");
        b.remember("kind-worker", "172.18.0.3");
        let found = b.restore("kind-worker", FaultKind::ResumeVm).await.unwrap();
        assert_eq!(found, "found container exited; started it");
        assert!(
            f.ran
                .lock()
                .unwrap()
                .iter()
                .any(|l| l == "docker start kind-worker"),
            "{:?}",
            f.ran.lock().unwrap()
        );
        // Powered on by the interrupted revert already: nothing to undo.
        let (f, mut b) = in_state("running\n");
        let found = b.restore("kind-worker", FaultKind::Poweron).await.unwrap();
        assert_eq!(found, "found container running; nothing to do");
        assert_eq!(f.ran.lock().unwrap().len(), 2, "ps and inspect only");
        // A stop-kubelet whose node was also paused: unpaused, then the kubelet.
        let (f, mut b) = in_state("paused\n");
        let found = b
            .restore("kind-worker", FaultKind::StartKubelet)
            .await
            .unwrap();
        assert_eq!(
            found,
            "found container paused; unpaused it, started the kubelet"
        );
        let ran = f.ran.lock().unwrap().clone();
        assert_eq!(
            ran[2..],
            [
                "docker unpause kind-worker",
                "docker exec kind-worker systemctl start kubelet"
            ]
        );
    }
}
