//! The `kind` backend: node faults on the containers of a kind cluster,
//! found by kind's labels, through the docker (or podman) CLI.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use super::{Error, Eyes, NodeFaults};
use crate::exec::{self, Cmd, Exec};
use crate::record::machines::{PodContainer, Power};
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
    /// Docker's restart policy of each node container a `shutdown` is
    /// planned for, read before any fault (kind's is `on-failure:1`).
    restart_before: BTreeMap<String, String>,
    /// The containers whose restart policy a `shutdown` turned off: put
    /// back on power-on.
    restart_off: std::collections::BTreeSet<String>,
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
            restart_before: BTreeMap::new(),
            restart_off: std::collections::BTreeSet::new(),
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
        if faults.iter().any(|f| {
            matches!(
                f,
                FaultKind::Poweroff | FaultKind::Shutdown | FaultKind::DropNic
            )
        }) && let Some(ip) = self.address(&container).await
        {
            said.push_str(&format!(", address {ip}"));
            self.addresses.insert(container.clone(), ip);
        }
        if faults.contains(&FaultKind::Shutdown) {
            let policy = self.restart_policy(&container).await?;
            said.push_str(&format!(", restart policy {policy}"));
            self.restart_before.insert(container, policy);
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
        if fault == FaultKind::Poweron {
            self.restart_off.remove(&container);
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

/// Inside a node: the running tasks of containerd's Kubernetes namespace
/// (`ctr`: the node image has no crictl), each with the CRI annotations of
/// its OCI spec (pod namespace, name, uid; container name and type). It
/// works while the node is cut off: `docker exec` does not go through the
/// node's network.
pub const LOOK_SCRIPT: &str = r#"t=$(ctr -n k8s.io tasks ls) || exit 1
printf '%s\n' "$t" | while read -r id pid status; do
  [ "$status" = RUNNING ] || continue
  f=/run/containerd/io.containerd.runtime.v2.task/k8s.io/$id/config.json
  [ -r "$f" ] || continue
  echo "$id $(grep -o '"io.kubernetes.cri.\(container-type\|container-name\|sandbox-name\|sandbox-namespace\|sandbox-uid\)":"[^"]*"' "$f" | tr '\n' ' ')"
done"#;

/// The pods' containers (not their sandboxes) in [`LOOK_SCRIPT`]'s output.
pub fn parse_look(text: &str) -> Vec<PodContainer> {
    let mut out: Vec<PodContainer> = text
        .lines()
        .filter_map(|line| {
            let mut fields = BTreeMap::new();
            for w in line.split_whitespace().skip(1) {
                let (k, v) = w.split_once("\":\"")?;
                let k = k
                    .trim_start_matches('"')
                    .strip_prefix("io.kubernetes.cri.")?;
                fields.insert(k, v.trim_end_matches('"'));
            }
            let get = |k: &str| fields.get(k).map(|v| (*v).to_owned());
            (fields.get("container-type") == Some(&"container")).then_some(())?;
            Some(PodContainer {
                namespace: get("sandbox-namespace")?,
                pod: get("sandbox-name")?,
                uid: get("sandbox-uid")?,
                container: get("container-name").unwrap_or_default(),
            })
        })
        .collect();
    out.sort();
    out
}

/// The kind backend's eyes: `docker inspect` for the node container's
/// state, `docker exec` of [`LOOK_SCRIPT`] for its pods' containers.
struct KindEyes<E> {
    runtime: String,
    /// Node name -> container.
    nodes: BTreeMap<String, String>,
    exec: E,
}

/// The most nodes the witness looks at besides the failed ones, each once a
/// second (a `docker exec` each).
const MAX_OTHERS: usize = 8;

/// A look that takes longer is a look that failed (the machine is busy
/// or stuck): the witness looks again a second later.
const LOOK_TIMEOUT: Duration = Duration::from_secs(5);

impl<E: Exec> Eyes for KindEyes<E> {
    fn how(&self, node: &str) -> String {
        let c = self.nodes.get(node).map_or(node, String::as_str);
        format!(
            "`{} inspect {c}` and `{} exec {c} ctr -n k8s.io tasks ls` every second",
            self.runtime, self.runtime
        )
    }

    /// A kind cluster's nodes, at most [`MAX_OTHERS`] of them.
    fn others(&self) -> Vec<String> {
        self.nodes.keys().take(MAX_OTHERS).cloned().collect()
    }

    fn look(&self, node: &str) -> (Power, Result<Vec<PodContainer>, String>) {
        let Some(c) = self.nodes.get(node) else {
            return (Power::Unknown, Err(format!("no container for node {node}")));
        };
        let exec = Cmd::new(&self.runtime, &["exec", c, "sh", "-c", LOOK_SCRIPT]);
        let listed = self
            .exec
            .run(&exec, LOOK_TIMEOUT)
            .map(|out| parse_look(&out))
            .map_err(|e| match e {
                exec::Error::Timeout { after, .. } => format!(
                    "`{} exec` did not answer within {}s",
                    self.runtime,
                    after.as_secs()
                ),
                exec::Error::Failed { stderr, status, .. } => format!(
                    "`{} exec` failed ({status}): {}",
                    self.runtime,
                    stderr.lines().next().unwrap_or_default()
                ),
                other => other.to_string(),
            });
        if listed.is_ok() {
            return (Power::On, listed);
        }
        let inspect = Cmd::new(
            &self.runtime,
            &["inspect", "--format", "{{.State.Status}}", c],
        );
        let power = match self
            .exec
            .run(&inspect, LOOK_TIMEOUT)
            .as_deref()
            .map(str::trim)
        {
            Ok("running") => Power::On,
            Ok("paused") => Power::Paused,
            Ok("exited" | "created" | "dead") => Power::Off,
            _ => Power::Unknown,
        };
        (power, listed)
    }
}

async fn run_blocking<E: Exec + Clone + 'static>(exec: &E, cmd: Cmd) -> Result<String, Error> {
    exec::run_blocking(exec, cmd, TIMEOUT)
        .await
        .map_err(Error::Exec)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::exec::fake::Fake;

    /// What `docker ps` and `docker inspect` answer unless a test says
    /// otherwise.
    const ANSWERS: &[(&str, &str)] = &[
        (
            "docker ps",
            "kind-control-plane\tcontrol-plane\nkind-worker\tworker\nkind-worker2\tworker\n",
        ),
        ("docker inspect", "172.18.0.3\n"),
    ];

    /// Records commands; the first answer whose prefix a command line starts
    /// with (those in `first`, then [`ANSWERS`]) is what it prints.
    fn fake_with(first: &[(&str, &str)]) -> Fake {
        let f = Fake::default();
        for (prefix, out) in first.iter().chain(ANSWERS) {
            f.answer(prefix, 0, out, "");
        }
        f
    }

    fn fake() -> Fake {
        fake_with(&[])
    }

    /// The look script's output as a kind node printed it (kind 1.35,
    /// containerd 1.6): a sandbox and a container of one pod.
    #[test]
    fn a_look_lists_the_pods_containers_not_their_sandboxes() {
        let out = concat!(
            "8bab5bc8 \"io.kubernetes.cri.container-type\":\"sandbox\" ",
            "\"io.kubernetes.cri.sandbox-name\":\"kind-cni-2gtck\" ",
            "\"io.kubernetes.cri.sandbox-namespace\":\"kube-system\" ",
            "\"io.kubernetes.cri.sandbox-uid\":\"9dffdc6a\" \n",
            "716558c5 \"io.kubernetes.cri.container-name\":\"kind-cni\" ",
            "\"io.kubernetes.cri.container-type\":\"container\" ",
            "\"io.kubernetes.cri.sandbox-name\":\"kind-cni-2gtck\" ",
            "\"io.kubernetes.cri.sandbox-namespace\":\"kube-system\" ",
            "\"io.kubernetes.cri.sandbox-uid\":\"9dffdc6a\" \n",
            // a task whose spec was gone: no annotations, not a pod's
            "0badc0de \n",
        );
        assert_eq!(
            parse_look(out),
            vec![PodContainer {
                namespace: "kube-system".into(),
                pod: "kind-cni-2gtck".into(),
                uid: "9dffdc6a".into(),
                container: "kind-cni".into(),
            }]
        );
    }

    #[test]
    fn eyes_read_the_container_s_state_when_the_shell_is_refused() {
        let fake = Fake::default();
        fake.answer(
            "docker exec",
            1,
            "",
            "Error response from daemon: container is paused",
        );
        for (prefix, out) in [("docker inspect", "paused\n")].iter().chain(ANSWERS) {
            fake.answer(prefix, 0, out, "");
        }
        let b = KindBackend::discover("kind", "docker", fake).unwrap();
        let eyes = b.eyes().unwrap();
        let (power, listed) = eyes.look("kind-worker");
        assert_eq!(power, Power::Paused);
        assert!(listed.is_err());
    }

    #[test]
    fn finds_nodes_by_kind_labels_and_maps_faults_to_commands() {
        let f = fake();
        let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
        assert_eq!(
            b.nodes.keys().collect::<Vec<_>>(),
            ["kind-control-plane", "kind-worker", "kind-worker2"]
        );
        assert_eq!(b.nodes["kind-worker"].role, "worker");
        assert_eq!(
            f.lines()[0],
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
        let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
        let (via, out) = b
            .shell("kind-worker", "systemd-inhibit --list")
            .await
            .expect("kind has a shell on its nodes");
        assert_eq!(via, "docker exec kind-worker");
        assert!(out.is_ok());
        assert_eq!(
            f.lines().last().map(String::as_str),
            Some("docker exec kind-worker sh -c 'systemd-inhibit --list'")
        );
        assert!(b.shell("kind-worker9", "true").await.is_none());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn poweron_gives_the_node_its_old_address_back() {
        let f = fake();
        let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
        b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
        b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
        let ran = f.lines();
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

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.to_owned());
        n
    }

    #[test]
    fn restart_policies_read_as_docker_update_takes_them() {
        assert_eq!(restart_flag("on-failure:1"), "on-failure:1");
        assert_eq!(restart_flag("on-failure:0"), "on-failure");
        assert_eq!(restart_flag("always:0"), "always");
        assert_eq!(restart_flag("unless-stopped:0"), "unless-stopped");
        assert_eq!(restart_flag("no:0"), "no");
        assert_eq!(restart_flag(":0"), "no");
        assert_eq!(Memo::parse("172.18.0.3").ip.as_deref(), Some("172.18.0.3"));
    }

    /// kind's `on-failure:1` and systemd's exit 130 on poweroff would make
    /// Docker start a shut-down node again: the policy is off from before
    /// the poweroff until the power-on puts back the one the journal holds.
    #[tokio::test(flavor = "multi_thread")]
    async fn shutdown_turns_the_restart_policy_off_and_poweron_puts_it_back() {
        let f = fake_with(&[(
            "docker inspect --format '{{.HostConfig.RestartPolicy",
            "on-failure:1\n",
        )]);
        let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
        let said = b
            .resolve(
                &node("kind-worker"),
                &[FaultKind::Shutdown, FaultKind::Poweron],
            )
            .await
            .unwrap();
        assert_eq!(
            said,
            "node kind-worker = container kind-worker, address 172.18.0.3, restart policy on-failure:1"
        );
        // What the journal gets before the shutdown: enough to undo it.
        let memo = b.memo("kind-worker", FaultKind::Shutdown).unwrap();
        assert_eq!(memo, r#"{"ip":"172.18.0.3","restart":"on-failure:1"}"#);
        f.clear();
        b.inject("kind-worker", FaultKind::Shutdown).await.unwrap();
        b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
        let ran = f.lines();
        let ran: Vec<_> = ran
            .iter()
            .filter(|l| !l.starts_with("docker inspect"))
            .collect();
        assert_eq!(
            ran,
            [
                "docker update --restart=no kind-worker",
                "docker exec kind-worker systemctl poweroff",
                "docker wait kind-worker",
                "docker network disconnect --force kind kind-worker",
                "docker network connect --ip 172.18.0.3 kind kind-worker",
                "docker start kind-worker",
                "docker update --restart=on-failure:1 kind-worker",
            ]
        );
        // A poweroff's power-on leaves the policy alone.
        f.clear();
        b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
        b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
        assert!(
            !f.lines().iter().any(|l| l.contains("update")),
            "{:?}",
            f.lines()
        );

        // `nodefall recover` after a kill between the policy's change and
        // the poweroff: the node still runs, the policy is put back.
        let (f, mut b) = in_state("running\n");
        b.remember("kind-worker", &memo);
        let found = b.restore("kind-worker", FaultKind::Poweron).await.unwrap();
        assert_eq!(
            found,
            "found container running; put back its restart policy"
        );
        assert_eq!(
            f.lines().last().map(String::as_str),
            Some("docker update --restart=on-failure:1 kind-worker")
        );
    }

    /// A backend whose node containers report `status` to `docker inspect`.
    fn in_state(status: &'static str) -> (Fake, KindBackend<Fake>) {
        let f = fake_with(&[("docker inspect --format '{{.State.Status}}'", status)]);
        let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
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
            f.lines().iter().any(|l| l == "docker start kind-worker"),
            "{:?}",
            f.lines()
        );
        // Powered on by the interrupted revert already: nothing to undo.
        let (f, mut b) = in_state("running\n");
        let found = b.restore("kind-worker", FaultKind::Poweron).await.unwrap();
        assert_eq!(found, "found container running; nothing to do");
        assert_eq!(f.lines().len(), 2, "ps and inspect only");
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
        let ran = f.lines();
        assert_eq!(
            ran[2..],
            [
                "docker unpause kind-worker",
                "docker exec kind-worker systemctl start kubelet"
            ]
        );
    }
}
