//! The `kind` backend: node faults on the containers of a kind cluster,
//! found by kind's labels, through the docker (or podman) CLI.

#![deny(clippy::wildcard_enum_match_arm)]

mod eyes;
mod gate;
pub mod network;

use eyes::KindEyes;
pub use eyes::{LOOK_SCRIPT, parse_look};

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use super::{Error, Eyes, NodeFaults};
use crate::exec::{self, Cmd, Exec};
use crate::scenario::model::{Does, Effect, FaultKind};

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

#[derive(Debug, Clone)]
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
    /// Docker's restart policy of each node container a `shutdown` is
    /// planned for, read before any fault (kind's is `on-failure:1`).
    restart_before: BTreeMap<String, String>,
    /// The containers whose restart policy a `shutdown` turned off: put
    /// back on power-on.
    restart_off: std::collections::BTreeSet<String>,
    /// A cluster `nodefall kind up` made: the host's sysctls, put back after
    /// a kubelet starts again (the kubelet writes host-global ones).
    host_sysctls: Option<BTreeMap<String, String>>,
    /// Between the witness's looks into each node and a pause of it.
    gates: gate::Gates,
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
            network: std::env::var("KIND_EXPERIMENTAL_DOCKER_NETWORK")
                .ok()
                .filter(|n| !n.is_empty())
                .or_else(|| made.as_ref().map(|m| m.network.clone()))
                .unwrap_or_else(|| NETWORK.to_owned()),
            addresses: BTreeMap::new(),
            restart_before: BTreeMap::new(),
            restart_off: std::collections::BTreeSet::new(),
            host_sysctls: made.map(|m| m.sysctls),
            gates: gate::Gates::new(nodes.values().map(|c| c.name.clone())),
            nodes,
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
        let restart = self
            .restart_off
            .contains(c)
            .then(|| self.restart_before.get(c).map(String::as_str))
            .flatten();
        Ok(fault_commands(
            &self.runtime,
            &self.network,
            c,
            &ip,
            restart,
            fault,
        ))
    }
}

/// What the undo journal keeps of a kind node before a fault: its address
/// on the network and, before a `shutdown`, its restart policy. Written as
/// JSON; a plain address is read too (journals of earlier versions).
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Memo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    restart: Option<String>,
}

impl Memo {
    fn parse(text: &str) -> Memo {
        serde_json::from_str(text).unwrap_or_else(|_| Memo {
            ip: Some(text.to_owned()).filter(|t| !t.is_empty()),
            restart: None,
        })
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

    /// Docker's restart policy of the container, as `docker update
    /// --restart` takes it (`no`, `always`, `unless-stopped`,
    /// `on-failure:1`).
    async fn restart_policy(&self, container: &str) -> Result<String, Error> {
        let format =
            "{{.HostConfig.RestartPolicy.Name}}:{{.HostConfig.RestartPolicy.MaximumRetryCount}}";
        let cmd = Cmd::new(&self.runtime, &["inspect", "--format", format, container]);
        Ok(restart_flag(run_blocking(&self.exec, cmd).await?.trim()))
    }

    /// After a shutdown cut short before its power-on: the restart policy
    /// the node had, back on a running container. True when it did that.
    async fn put_back_restart_policy(&mut self, container: &str) -> Result<bool, Error> {
        let Some(policy) = self
            .restart_off
            .contains(container)
            .then(|| self.restart_before.get(container).cloned())
            .flatten()
        else {
            return Ok(false);
        };
        let cmd = Cmd::new(
            &self.runtime,
            &["update", &format!("--restart={policy}"), container],
        );
        run_blocking(&self.exec, cmd).await?;
        self.restart_off.remove(container);
        Ok(true)
    }

    /// How the network hands out addresses (read once, for the preflight).
    async fn shape(&self) -> network::Shape {
        let cmd = Cmd::new(
            &self.runtime,
            &[
                "network",
                "inspect",
                "--format",
                network::INSPECT_FORMAT,
                &self.network,
            ],
        );
        match run_blocking(&self.exec, cmd).await {
            Ok(out) => network::Shape::parse(&out),
            Err(e) => network::Shape::Unknown(format!("cannot be read ({e})")),
        }
    }

    /// Connects the node to the network on the address Docker gives it.
    async fn connect(&self, container: &str) -> Result<(), Error> {
        let plain = Cmd::new(
            &self.runtime,
            &["network", "connect", &self.network, container],
        );
        run_blocking(&self.exec, plain).await?;
        Ok(())
    }

    /// A running node reconnected on a new address: the old one replaced in
    /// its kubelet's flags and static pods, its kubelet restarted.
    async fn readdress(&self, container: &str) -> Result<(), Error> {
        let (Some(old), Some(new)) = (
            self.addresses.get(container).cloned(),
            self.address(container).await,
        ) else {
            return Ok(());
        };
        if old == new {
            return Ok(());
        }
        run_blocking(
            &self.exec,
            network::readdress(&self.runtime, container, &old, &new),
        )
        .await?;
        tracing::info!(
            "{container}: back on network {} at {new} (was {old}); kubelet flags and static pods \
             moved to it, kubelet restarted",
            self.network
        );
        Ok(())
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

    fn eyes(&self) -> Option<std::sync::Arc<dyn Eyes>> {
        Some(std::sync::Arc::new(KindEyes {
            runtime: self.runtime.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|(n, c)| (n.clone(), c.name.clone()))
                .collect(),
            gates: self.gates.clone(),
            exec: self.exec.clone(),
        }))
    }

    fn memo(&self, node: &str, fault: FaultKind) -> Option<String> {
        let container = self.container(node).ok()?;
        let memo = Memo {
            ip: self.addresses.get(container).cloned(),
            restart: (fault == FaultKind::Shutdown)
                .then(|| self.restart_before.get(container).cloned())
                .flatten(),
        };
        (memo != Memo::default()).then(|| serde_json::to_string(&memo).unwrap_or_default())
    }

    /// Each node is its own container, acted on by its own commands.
    fn fork(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn join(&mut self, node: &str, fork: Self) {
        let Ok(container) = self.container(node).map(str::to_owned) else {
            return;
        };
        let KindBackend {
            mut addresses,
            mut restart_before,
            restart_off,
            ..
        } = fork;
        if let Some(ip) = addresses.remove(&container) {
            self.addresses.insert(container.clone(), ip);
        }
        if let Some(policy) = restart_before.remove(&container) {
            self.restart_before.insert(container.clone(), policy);
        }
        match restart_off.contains(&container) {
            true => self.restart_off.insert(container),
            false => self.restart_off.remove(&container),
        };
    }

    fn remember(&mut self, node: &str, memo: &str) {
        if let Ok(container) = self.container(node) {
            let container = container.to_owned();
            let memo = Memo::parse(memo);
            if let Some(ip) = memo.ip {
                self.addresses.insert(container.clone(), ip);
            }
            if let Some(policy) = memo.restart {
                // Whether the shutdown got as far as turning it off or not,
                // the policy it had is the one to have.
                self.restart_before.insert(container.clone(), policy);
                self.restart_off.insert(container);
            }
        }
    }

    /// Also reads, before any fault, what a revert will need: the node's
    /// address (poweroff, shutdown, drop-nic) and, for a shutdown, Docker's
    /// restart policy, so the journal has both before anything changes.
    async fn resolve(&mut self, node: &Node, faults: &[FaultKind]) -> Result<String, Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let container = self.container(&name)?.to_owned();
        let mut said = format!("node {name} = container {container}");
        let mut revert = None;
        if faults.iter().any(|f| revert_needs_address(*f))
            && let Some(ip) = self.address(&container).await
        {
            said.push_str(&format!(", address {ip}"));
            self.addresses.insert(container.clone(), ip);
            revert = Some(self.shape().await.revert_plan(&self.network));
        }
        if faults.contains(&FaultKind::Shutdown) {
            let policy = self.restart_policy(&container).await?;
            said.push_str(&format!(", restart policy {policy}"));
            self.restart_before.insert(container, policy);
        }
        if let Some(revert) = revert {
            said.push_str("; ");
            said.push_str(&revert);
        }
        Ok(said)
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
            "running" => {
                if revert == FaultKind::Poweron && self.put_back_restart_policy(&container).await? {
                    did.push("put back its restart policy");
                }
            }
            "paused" => {
                self.inject(node, FaultKind::ResumeVm).await?;
                did.push("unpaused it");
            }
            _ => {
                self.inject(node, FaultKind::Poweron).await?;
                did.push("started it");
            }
        }
        match revert.does() {
            Does::Restores(Effect::KubeletStopped) => {
                self.inject(node, revert).await?;
                did.push("started the kubelet");
            }
            Does::Restores(Effect::CutOff) if self.address(&container).await.is_none() => {
                self.inject(node, revert).await?;
                did.push("reconnected it");
            }
            // Running again is all the rest need.
            Does::Restores(Effect::CutOff | Effect::Off | Effect::Paused) | Does::Breaks(_) => {}
        }
        if did.is_empty() {
            did.push("nothing to do");
        }
        Ok(format!("found container {status}; {}", did.join(", ")))
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let container = self.container(node)?.to_owned();
        if fault == FaultKind::Shutdown {
            // Docker would start the node again: kind runs its nodes with
            // the policy `on-failure:1`, and systemd exits 130 on poweroff.
            // Turned off first (the journal has the old policy), put back
            // on power-on.
            if !self.restart_before.contains_key(&container) {
                let policy = self.restart_policy(&container).await?;
                self.restart_before.insert(container.clone(), policy);
            }
            self.restart_off.insert(container.clone());
        }
        if revert_needs_address(fault)
            && let Some(ip) = self.address(&container).await
        {
            self.addresses.insert(container.clone(), ip);
        }
        let keep_address = self.addresses.contains_key(&container);
        let mut moved = false;
        for cmd in self.commands(node, fault)? {
            let network = cmd.args.first().is_some_and(|a| a == "network");
            if network && !keep_address {
                // Not on the kind network before the fault (a host-network
                // node): there is no address to give back.
                if fault == FaultKind::RestoreNic {
                    self.connect(&container).await?;
                }
                continue;
            }
            if network && cmd.args.iter().any(|a| a == "--force") {
                // Already disconnected is fine before the reconnect.
                let _ = run_blocking(&self.exec, cmd).await;
                continue;
            }
            if network && cmd.args.iter().any(|a| a == "--ip") {
                // Refused on a network whose IPv4 subnet Docker chose (a
                // stock kind network), or the address was taken meanwhile.
                // It is connected on the address Docker gives: a running
                // node (restore-nic) is moved to it below as kind moves a
                // restarted one; a stopped one (poweron) gets that from
                // kind's entrypoint when it starts.
                if let Err(refused) = run_blocking(&self.exec, cmd).await {
                    tracing::info!(
                        "{container}: Docker refused its old address on network {} ({refused}); \
                         connecting it on the address Docker gives",
                        self.network
                    );
                    self.connect(&container).await?;
                    moved = true;
                }
                continue;
            }
            // A pause waits for the witness's look in flight (gate.rs).
            let _gate = if fault == FaultKind::PauseVm {
                self.gates.hold(&container).await
            } else {
                None
            };
            run_blocking(&self.exec, cmd).await?;
        }
        if moved && fault == FaultKind::RestoreNic {
            self.readdress(&container).await?;
        }
        if fault == FaultKind::Poweron {
            self.restart_off.remove(&container);
        }
        // A kubelet started: powered on, started, or restarted on the node's
        // new address (a stock network's restore-nic, `readdress`).
        let kubelet_started = match fault.does() {
            Does::Restores(Effect::Off | Effect::KubeletStopped) => true,
            Does::Restores(Effect::CutOff) => moved,
            Does::Restores(Effect::Paused) | Does::Breaks(_) => false,
        };
        if kubelet_started && let Some(values) = self.host_sysctls.clone() {
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

/// Whether the revert of `fault` puts the node back on its address
/// (`network connect --ip`: power-on and restore-nic), which must then be
/// read before the fault.
fn revert_needs_address(fault: FaultKind) -> bool {
    match fault.does() {
        Does::Breaks(Effect::Off | Effect::CutOff) => true,
        Does::Breaks(Effect::Paused | Effect::KubeletStopped) | Does::Restores(_) => false,
    }
}

/// The commands of `fault` on `container` (also for `nodefall plan`, with
/// placeholders for what is only known at run time).
/// `restart` is the restart policy a power-on puts back (after a shutdown
/// turned it off).
pub fn fault_commands(
    rt: &str,
    net: &str,
    c: &str,
    ip: &str,
    restart: Option<&str>,
    fault: FaultKind,
) -> Vec<Cmd> {
    match fault {
        FaultKind::PauseVm => vec![Cmd::new(rt, &["pause", c])],
        FaultKind::ResumeVm => vec![Cmd::new(rt, &["unpause", c])],
        FaultKind::Poweroff => vec![Cmd::new(rt, &["kill", c])],
        // systemd as PID 1 halts cleanly on `systemctl poweroff`, through
        // logind, so the kubelet's graceful node shutdown can run. It exits
        // 130 then, which kind's restart policy (`on-failure:1`) would
        // answer by starting the node again: turned off first.
        FaultKind::Shutdown => vec![
            Cmd::new(rt, &["update", "--restart=no", c]),
            Cmd::new(rt, &["exec", c, "systemctl", "poweroff"]),
            Cmd::new(rt, &["wait", c]),
        ],
        // Reconnect with the old address first: a restarted node may be
        // given another IP (kind issues 2045, 2715), breaking the cluster.
        FaultKind::Poweron => {
            let mut cmds = vec![
                Cmd::new(rt, &["network", "disconnect", "--force", net, c]),
                Cmd::new(rt, &["network", "connect", "--ip", ip, net, c]),
                Cmd::new(rt, &["start", c]),
            ];
            if let Some(policy) = restart {
                cmds.push(Cmd::new(rt, &["update", &format!("--restart={policy}"), c]));
            }
            cmds
        }
        FaultKind::StopKubelet => vec![Cmd::new(rt, &["exec", c, "systemctl", "stop", "kubelet"])],
        FaultKind::StartKubelet => {
            vec![Cmd::new(rt, &["exec", c, "systemctl", "start", "kubelet"])]
        }
        FaultKind::DropNic => vec![Cmd::new(rt, &["network", "disconnect", net, c])],
        FaultKind::RestoreNic => vec![Cmd::new(rt, &["network", "connect", "--ip", ip, net, c])],
    }
}

/// `docker inspect`'s `NAME:COUNT` as `docker update --restart` takes it:
/// the count only with `on-failure`, an empty name is `no`.
fn restart_flag(inspected: &str) -> String {
    let (name, count) = inspected.split_once(':').unwrap_or((inspected, "0"));
    match name {
        "" | "no" => "no".to_owned(),
        "on-failure" if count != "0" && !count.is_empty() => format!("on-failure:{count}"),
        other => other.to_owned(),
    }
}

async fn run_blocking<E: Exec + Clone + 'static>(exec: &E, cmd: Cmd) -> Result<String, Error> {
    exec::run_blocking(exec, cmd, TIMEOUT)
        .await
        .map_err(Error::Exec)
}

#[cfg(test)]
mod tests;
