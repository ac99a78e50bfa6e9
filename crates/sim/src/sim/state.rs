//! The on-disk record of a simulated cluster: one directory per name holding
//! `state.json`, the kubeconfig, credentials, etcd data and component logs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Error;
use super::binaries::{Versions, env_path, home};
use super::process::ProcRecord;
use crate::profile::TimingProfile;

pub const SCHEMA: u32 = 1;

/// The root holding one directory per cluster: `$NODEFALL_STATE_DIR`, else
/// `$XDG_STATE_HOME/nodefall/sim`, else `~/.local/state/nodefall/sim`.
pub fn default_root() -> PathBuf {
    if let Some(dir) = env_path("NODEFALL_STATE_DIR") {
        return dir;
    }
    let base = env_path("XDG_STATE_HOME").unwrap_or_else(|| home().join(".local").join("state"));
    base.join("nodefall").join("sim")
}

/// What a node's agent (its kwok process, playing the kubelet) is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentState {
    Running,
    /// Frozen with SIGSTOP (`pause-vm`, `drop-nic`).
    Frozen,
    /// Not running (`poweroff`, `stop-kubelet`).
    Stopped,
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AgentState::Running => "running",
            AgentState::Frozen => "frozen",
            AgentState::Stopped => "stopped",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimNode {
    pub name: String,
    /// The InternalIP kwok reports for the node (never contacted).
    pub ip: String,
    /// The range kwok hands pod IPs out of.
    pub pod_cidr: String,
    pub agent_state: AgentState,
    /// The node's own kwok process while one exists (per-node mode).
    pub agent: Option<ProcRecord>,
    /// The shared kwok that manages the node (shared mode, see
    /// `agents.rs`); `agent_state` then says whether it is in the shard's
    /// managed set (running) or taken out (frozen or stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<usize>,
    /// Unix time (ms) the node was paused (`pause-vm`), while it is: a
    /// kubelet resumed after a long pause reports NotReady first
    /// (`kubelet.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at_ms: Option<u64>,
    /// Its zone ([`agents::ZONE_LABEL`](super::agents::ZONE_LABEL)), when
    /// the cluster has zones (`sim up --zones`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Registered as kubeadm registers a control plane's node (`sim up
    /// --control-plane-node`): labelled and tainted so it takes no pods,
    /// and counted in its zone by the node lifecycle controller.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control_plane: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub schema: u32,
    pub name: String,
    /// API server URL (loopback).
    pub server: String,
    pub versions: Versions,
    pub profile: TimingProfile,
    /// Unix time (ms) the cluster became ready.
    pub started_at_ms: u64,
    /// Control-plane processes, in start order.
    pub components: Vec<ProcRecord>,
    pub nodes: Vec<SimNode>,
    /// The `nodefall sim reap` process that tears a throwaway cluster down
    /// if the nodefall that started it dies first; none once the cluster is
    /// kept (detached) and for clusters from `sim up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaper: Option<ProcRecord>,
    /// Kept after its run (`sim up`, `scenario --keep`): no reaper may take
    /// it down, even one that missed the signal meant to stop it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
    /// How long a powered-on node takes to boot to its first status (ms;
    /// `sim up --node-boot`, see `kubelet.rs`).
    #[serde(default = "default_boot_ms")]
    pub node_boot_ms: u64,
    /// The kubelets' PLEG relist threshold (ms; the kubelet's own is 3 min,
    /// tests shorten it, see `kubelet.rs`).
    #[serde(default = "default_pleg_ms")]
    pub pleg_threshold_ms: u64,
    /// The kubelets' `shutdownGracePeriod` and
    /// `shutdownGracePeriodCriticalPods` (ms; 0: graceful node shutdown off;
    /// `sim up --shutdown-grace-period`, see `kubelet.rs`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shutdown_grace_ms: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shutdown_grace_critical_ms: u64,
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

fn default_boot_ms() -> u64 {
    millis(super::kubelet::DEFAULT_BOOT)
}

fn default_pleg_ms() -> u64 {
    millis(super::kubelet::PLEG_RELIST_THRESHOLD)
}

/// Whole milliseconds, as the state records a duration.
pub fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Paths inside a cluster directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
}

/// The longest cluster name: a DNS label's limit, which kind's names share.
pub const NAME_MAX: usize = 63;

/// Why `name` cannot name a simulated cluster, if it cannot. A cluster's
/// name is a name, never a path: it becomes one directory right under the
/// state root, so it must be a DNS label (1-63 of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit). That excludes `/`, `.` and
/// `..`, so no name reaches outside the root or onto another cluster's files.
pub fn name_problem(name: &str) -> Option<String> {
    let len = name.chars().count();
    if name.is_empty() {
        return Some("it is empty".to_owned());
    }
    if len > NAME_MAX {
        return Some(format!("it is {len} characters long, over {NAME_MAX}"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!("`{}` is not allowed", c.escape_debug()));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("it starts or ends with `-`".to_owned());
    }
    None
}

/// [`name_problem`] as an error ([`Error::BadName`], bad input).
pub fn check_name(name: &str) -> Result<(), Error> {
    match name_problem(name) {
        None => Ok(()),
        Some(why) => Err(Error::BadName {
            name: name.to_owned(),
            why,
        }),
    }
}

/// A clap value parser for `--name`/`--cluster`: the same rule, refused
/// before anything runs.
pub fn parse_name(name: &str) -> Result<String, String> {
    match name_problem(name) {
        None => Ok(name.to_owned()),
        Some(why) => Err(format!("{why}; {NAME_RULE}")),
    }
}

/// The rule, as error messages give it.
pub const NAME_RULE: &str = "a cluster name is 1-63 lowercase letters, digits and `-`, \
     starting and ending with a letter or digit (a name, never a path)";

impl Layout {
    /// The directory of cluster `name` under `root`; refused unless `name`
    /// is a valid cluster name ([`check_name`]).
    pub fn new(root: &Path, name: &str) -> Result<Layout, Error> {
        check_name(name)?;
        Ok(Layout {
            dir: root.join(name),
        })
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
    pub fn pki(&self) -> PathBuf {
        self.dir.join("pki")
    }
    pub fn etcd_data(&self) -> PathBuf {
        self.dir.join("etcd")
    }
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    pub fn log(&self, component: &str) -> PathBuf {
        self.logs()
            .join(format!("{}.log", component.replace('/', "-")))
    }
    pub fn audit_policy(&self) -> PathBuf {
        self.dir.join("audit-policy.yaml")
    }
    /// The API server's egress selector configuration (see `args.rs`).
    pub fn egress_config(&self) -> PathBuf {
        self.dir.join("egress.yaml")
    }
    /// Where that configuration sends the API server's traffic to nodes and
    /// pods: a socket nothing listens on.
    pub fn no_egress_socket(&self) -> PathBuf {
        self.dir.join("no-egress.sock")
    }
    /// The API server's audit log (JSON lines; see `args.rs`).
    pub fn audit_log(&self) -> PathBuf {
        self.logs().join("audit.log")
    }
    /// The CSI attacher's records (`csi.rs`): which nodes each volume of
    /// `csi.nodefall.dev` is published to, as on a kind cluster.
    pub fn csi(&self) -> PathBuf {
        self.dir.join("csi")
    }
    pub fn stages(&self) -> PathBuf {
        self.dir.join("kwok-stages.yaml")
    }
    /// Locked (flock) by invocations that change a running cluster's state
    /// (`sim node`, `sim down`), so they take turns.
    pub fn lock(&self) -> PathBuf {
        self.dir.join("state.lock")
    }
}

impl State {
    pub fn load(path: &Path) -> Result<State, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let state: State = serde_json::from_str(&text).map_err(|source| Error::State {
            path: path.to_owned(),
            source,
        })?;
        if state.schema != SCHEMA {
            return Err(Error::io_msg(format!(
                "{} has schema {} but this nodefall reads schema {SCHEMA}; remove the directory",
                path.display(),
                state.schema
            )));
        }
        Ok(state)
    }

    /// Writes atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|source| Error::State {
            path: path.to_owned(),
            source,
        })?;
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    pub fn node(&self, name: &str) -> Option<&SimNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// The names of the clusters recorded under `root`, sorted.
pub fn list(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("state.json").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}
