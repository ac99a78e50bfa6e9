//! Contained kind clusters on this machine (`nodefall kind up` / `down`):
//! the steps, each a narrow side effect; the session that journals them and
//! answers signals is `cli::kind`.
//!
//! Containment comes first: the cluster gets a Docker network of its own
//! (IPv4 only) whose bridge is guarded, before any node starts, by a rule that
//! drops every packet entering from the bridge and not leaving on it; CoreDNS
//! answers cluster names only; the pod network routes between nodes from the
//! start (the node image's CNI); the API server reaches kubelets by
//! InternalIP. The host-global sysctls the kubelets write are put back.
//! Volumes attach for real through nodefall's own CSI driver (`csi.rs`).

pub mod config;
pub mod csi;
pub mod host;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::exec::{Cmd, Exec};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Preflight(String),
    #[error(transparent)]
    Host(#[from] host::Error),
    #[error(transparent)]
    Command(#[from] crate::exec::Error),
    #[error("`kind create cluster` failed ({status}); its output: {log}\n{tail}")]
    Create {
        status: String,
        log: String,
        tail: String,
    },
    #[error("{what}: {message}")]
    Kube { what: String, message: String },
    #[error("timed out after {}s waiting for {what}", .after.as_secs())]
    Timeout { what: String, after: Duration },
    #[error(
        "`kind delete cluster --name {name}` left containers behind ({left}); the guard and \
         the network stay until they are gone"
    )]
    Leftover { name: String, left: String },
}

/// How long a Docker or kind step may take.
const STEP: Duration = Duration::from_secs(60);
/// `kind create cluster` (about 35 s here; images are preloaded).
const CREATE: Duration = Duration::from_secs(420);

/// A cluster name kind accepts and that stays a name (never a path).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a usable cluster name: use 1-40 of a-z, 0-9 and `-`, not starting \
             with `-`"
        ))
    }
}

/// The network of cluster `name`.
pub fn network_name(name: &str) -> String {
    format!("nodefall-{name}")
}

/// The node containers of cluster `name` (any state).
pub fn node_containers(exec: &dyn Exec, runtime: &str, name: &str) -> Result<Vec<String>, Error> {
    let filter = format!("label=io.x-k8s.kind.cluster={name}");
    let out = exec.run(
        &Cmd::new(
            runtime,
            &["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"],
        ),
        STEP,
    )?;
    Ok(out
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect())
}

/// What must hold before anything is made: the runtime answers, the image and
/// kind are there, Docker's `DOCKER-USER` chain exists (the guard goes in it),
/// and nothing of this name exists yet.
pub fn preflight(
    exec: &dyn Exec,
    runtime: &str,
    kind: &Path,
    image: &str,
    name: &str,
) -> Result<(), Error> {
    let fail = |m: String| Err(Error::Preflight(m));
    check_name(name).map_err(Error::Preflight)?;
    if let Err(e) = exec.run(
        &Cmd::new(runtime, &["info", "--format", "{{.ServerVersion}}"]),
        STEP,
    ) {
        return fail(format!("the container runtime does not answer: {e}"));
    }
    if !kind.is_file() {
        return fail(format!(
            "kind is not at {} (scripts/kind/image.sh builds it from its Go module; or pass \
             --kind-binary)",
            kind.display()
        ));
    }
    if exec
        .run(
            &Cmd::new(runtime, &["image", "inspect", "--format", "{{.Id}}", image]),
            STEP,
        )
        .is_err()
    {
        return fail(format!(
            "the node image {image} is not in {runtime}'s store (scripts/kind/image.sh builds \
             it and prints its tag)"
        ));
    }
    if let Err(e) = exec.run(&Cmd::new("iptables", &["-w", "-S", "DOCKER-USER"]), STEP) {
        return fail(format!(
            "the guard needs iptables and Docker's DOCKER-USER chain (a dockerd with iptables \
             enabled): {e}"
        ));
    }
    let nodes = node_containers(exec, runtime, name)?;
    if !nodes.is_empty() {
        return fail(format!(
            "a kind cluster named {name} exists already ({}); `nodefall kind down {name}` \
             removes one nodefall made, `kind delete cluster --name {name}` any other",
            nodes.join(", ")
        ));
    }
    let net = network_name(name);
    if exec
        .run(
            &Cmd::new(
                runtime,
                &["network", "inspect", "--format", "{{.Id}}", &net],
            ),
            STEP,
        )
        .is_ok()
    {
        return fail(format!(
            "the Docker network {net} exists already; `nodefall kind down {name}` removes what \
             an earlier `kind up` left (`nodefall recover` what a killed one left)"
        ));
    }
    Ok(())
}

/// Runs `kind create cluster` (its [`create_command`]), its output kept in `log`.
pub fn create(cmd: &Cmd, log: &Path) -> Result<Duration, Error> {
    let c = crate::exec::System.capture(cmd, CREATE)?;
    let text = format!("$ {cmd}\n{}{}", c.stdout, c.stderr);
    std::fs::write(log, &text).ok();
    if !c.success() {
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        return Err(Error::Create {
            status: c.status,
            log: log.display().to_string(),
            tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    Ok(c.elapsed)
}

/// The `kind create cluster` command line (through `env`, which sets the
/// network kind puts the nodes on and the runtime it drives).
pub fn create_command(
    runtime: &str,
    kind: &Path,
    name: &str,
    image: &str,
    config: &Path,
    kubeconfig: &Path,
) -> Cmd {
    let net = format!("KIND_EXPERIMENTAL_DOCKER_NETWORK={}", network_name(name));
    let provider = format!("KIND_EXPERIMENTAL_PROVIDER={runtime}");
    Cmd::new(
        "env",
        &[
            &net,
            &provider,
            &kind.display().to_string(),
            "create",
            "cluster",
            "--name",
            name,
            "--image",
            image,
            "--config",
            &config.display().to_string(),
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--retain",
        ],
    )
}

/// `kind delete cluster`, then a check that no node container is left.
pub fn delete(
    exec: &dyn Exec,
    runtime: &str,
    kind: &Path,
    name: &str,
    kubeconfig: &Path,
) -> Result<(), Error> {
    if !node_containers(exec, runtime, name)?.is_empty() {
        let provider = format!("KIND_EXPERIMENTAL_PROVIDER={runtime}");
        exec.run(
            &Cmd::new(
                "env",
                &[
                    &provider,
                    &kind.display().to_string(),
                    "delete",
                    "cluster",
                    "--name",
                    name,
                    "--kubeconfig",
                    &kubeconfig.display().to_string(),
                ],
            ),
            Duration::from_secs(120),
        )?;
    }
    let left = node_containers(exec, runtime, name)?;
    if !left.is_empty() {
        return Err(Error::Leftover {
            name: name.to_owned(),
            left: left.join(", "),
        });
    }
    Ok(())
}

/// Waits (watching) until `count` nodes are Ready without the not-ready taint.
pub async fn wait_nodes_ready(
    client: &kube::Client,
    count: usize,
    limit: Duration,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + limit;
    match watch_until_count(api, count, deadline, crate::sim::ready_for_pods, "nodes").await? {
        Counted::Reached => Ok(()),
        Counted::TimedOut(so_far) => Err(Error::Timeout {
            what: format!("{count} nodes Ready ({so_far} so far)"),
            after: limit,
        }),
    }
}

/// How a [`watch_until_count`] ended.
enum Counted {
    Reached,
    /// The deadline passed with this many objects holding.
    TimedOut(usize),
}

/// Watches every `K` until `count` of them hold `holds` at once, or `deadline`.
async fn watch_until_count<K>(
    api: Api<K>,
    count: usize,
    deadline: Instant,
    holds: impl Fn(&K) -> bool,
    what: &str,
) -> Result<Counted, Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut holding = BTreeSet::new();
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while holding.len() < count {
        let next = tokio::time::timeout_at(deadline.into(), stream.try_next()).await;
        let object = match next {
            Err(_) => return Ok(Counted::TimedOut(holding.len())),
            Ok(Err(e)) => {
                return Err(Error::Kube {
                    what: format!("watching {what}"),
                    message: crate::actions::api_text(&e),
                });
            }
            Ok(Ok(None)) => continue,
            Ok(Ok(Some(o))) => o,
        };
        let name = object.meta().name.clone().unwrap_or_default();
        if holds(&object) {
            holding.insert(name);
        } else {
            holding.remove(&name);
        }
    }
    Ok(Counted::Reached)
}

/// CoreDNS answers cluster names only: its Corefile loses `forward` and its
/// pods restart with it; returns once the new pods are available.
pub async fn contain_dns(client: &kube::Client, limit: Duration) -> Result<bool, Error> {
    let kube = |what: &str| {
        let what = what.to_owned();
        move |e: kube::Error| Error::Kube {
            what,
            message: crate::actions::api_text(&e),
        }
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let cm = cms
        .get("coredns")
        .await
        .map_err(kube("reading ConfigMap kube-system/coredns"))?;
    let corefile = cm
        .data
        .as_ref()
        .and_then(|d| d.get("Corefile"))
        .cloned()
        .unwrap_or_default();
    let Some(contained) = config::corefile_without_forward(&corefile) else {
        return Ok(false);
    };
    let pp = PatchParams::default();
    cms.patch(
        "coredns",
        &pp,
        &Patch::Merge(serde_json::json!({"data": {"Corefile": contained}})),
    )
    .await
    .map_err(kube("updating the Corefile"))?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    let now = jiff::Timestamp::now().to_string();
    let patched = deployments
        .patch(
            "coredns",
            &pp,
            &Patch::Merge(
                serde_json::json!({"spec": {"template": {"metadata": {"annotations": {
                "nodefall.io/restartedAt": now}}}}}),
            ),
        )
        .await
        .map_err(kube("restarting CoreDNS"))?;
    let generation = patched.metadata.generation.unwrap_or(0);
    let rolled = kube::runtime::wait::await_condition(
        deployments,
        "coredns",
        move |d: Option<&Deployment>| {
            d.is_some_and(|d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                d.status.as_ref().is_some_and(|s| {
                    s.observed_generation.unwrap_or(0) >= generation
                        && s.updated_replicas.unwrap_or(0) == want
                        && s.available_replicas.unwrap_or(0) == want
                        && s.replicas.unwrap_or(0) == want
                })
            })
        },
    );
    match tokio::time::timeout(limit, rolled).await {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => Err(Error::Kube {
            what: "waiting for CoreDNS".into(),
            message: crate::actions::api_text(&e),
        }),
        Err(_) => Err(Error::Timeout {
            what: "CoreDNS restarted without `forward`".into(),
            after: limit,
        }),
    }
}

/// Where `nodefall kind up` keeps a cluster's files (its kind configuration,
/// kubeconfig and kind's output): `$XDG_STATE_HOME/nodefall/kind/NAME`.
pub fn cluster_dir(state: &Path, name: &str) -> PathBuf {
    state.join("kind").join(name)
}

/// The kubeconfig `nodefall kind up` writes for cluster `name` (never
/// ~/.kube/config); its context is `kind-NAME`.
pub fn kubeconfig_file(state: &Path, name: &str) -> PathBuf {
    cluster_dir(state, name).join("kubeconfig")
}

/// nodefall's state directory (`$XDG_STATE_HOME/nodefall`).
pub fn state_root() -> PathBuf {
    crate::sim::state::default_root()
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// What `nodefall kind up` tells later runs on the cluster (the kind
/// backend): its network, and the host's sysctls to put back after a
/// kubelet starts again (power-on, start-kubelet).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Made {
    pub network: String,
    pub sysctls: std::collections::BTreeMap<String, String>,
}

/// The file holding [`Made`] for cluster `name`.
pub fn made_file(state: &Path, name: &str) -> PathBuf {
    cluster_dir(state, name).join("made.json")
}

/// [`Made`] for cluster `name`, if `nodefall kind up` made it.
pub fn made(state: &Path, name: &str) -> Option<Made> {
    let text = std::fs::read_to_string(made_file(state, name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The kind release `scripts/kind/image.sh` builds (its Go module).
pub const KIND_VERSION: &str = "v0.33.0";

/// The kind binary scripts/kind/image.sh builds.
pub fn default_kind_binary() -> PathBuf {
    crate::sim::binaries::cache_root()
        .join("kind")
        .join("bin")
        .join(format!("kind-{KIND_VERSION}"))
        .join("kind")
}

/// This host's quirks, read from the kernel (as scripts/kind/host-quirks.sh).
pub fn host_quirks() -> config::Quirks {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    config::Quirks {
        cgroup_v1: !Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
        restrict_oom_score_adj: !has_sys_resource(&status),
    }
}

/// Whether CAP_SYS_RESOURCE (24) is in the bounding set of `/proc/self/status`.
fn has_sys_resource(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_none_or(|caps| caps >> 24 & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounding_set_tells_whether_containerd_must_restrict_oom_scores() {
        assert!(!has_sys_resource("Name:\tx\nCapBnd:\t000001fffeffffff\n"));
        assert!(has_sys_resource("CapBnd:\t000001ffffffffff\n"));
        assert!(has_sys_resource("no such line\n"));
    }
}
