//! The `sim` backend's cluster: a real Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler) on loopback, with
//! nodes played by one kwok process each, or by a few shared ones for large
//! clusters (`agents.rs`). See `docs/sim-backend.md`.

mod agents;
mod args;
pub mod batch;
pub mod binaries;
mod cluster;
pub mod csi;
pub mod evidence;
mod faults;
mod kubeadm_config;
pub mod kubelet;
pub mod kubelet_volumes;
mod pki;
pub mod process;
pub mod provisioner;
pub mod proxy;
pub mod reaper;
mod shutdown;
pub mod state;
mod state_dir;
mod teardown;
mod up;
pub mod volume_agent;
mod waits;

use std::path::PathBuf;
use std::process::ExitStatus;

/// A write's outcome when its object may have gone meanwhile (a pod deleted,
/// a Node removed as a remedy): `Ok(true)` done, `Ok(false)` nothing there
/// to write to, which is fine; other errors as they were.
fn done_unless_gone<T>(r: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

pub use agents::{
    MAX_NODES, SHARD_LABEL, SIM_NODE_LABEL, ZONE_LABEL, auto_shards, throwaway_nodes,
};
pub use args::egress_selector_config;
pub use cluster::{CONTEXT, SimCluster, UpOptions};
pub use state::{AgentState, State, default_root};
pub use waits::{is_ready, ready_for_pods};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
    #[error(
        "provisioning the simulated cluster's binaries failed ({status}); still missing: {}",
        list_paths(.missing)
    )]
    Provision {
        status: ExitStatus,
        missing: Vec<PathBuf>,
    },
    #[error("could not start {component} ({})", .program.display())]
    Spawn {
        component: String,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{component} exited ({status}); {}", evidence::said(.log, .tail))]
    Exited {
        component: String,
        status: ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "timed out waiting for {what}: {:.1}s into this stage, whose deadline is {}s from its \
         start (--timeout); {}",
        .waited.as_secs_f64(),
        .limit.as_secs(),
        evidence::said(.log, .tail)
    )]
    Timeout {
        what: String,
        /// How long this stage waited.
        waited: std::time::Duration,
        /// Its deadline, from the stage's start.
        limit: std::time::Duration,
        log: PathBuf,
        tail: String,
    },
    #[error("{what}")]
    Kube {
        what: String,
        #[source]
        source: crate::actions::ApiError,
    },
    #[error("cannot read cluster state {}", .path.display())]
    State {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("credentials for the simulated cluster")]
    Pki(#[from] rcgen::Error),
    #[error(
        "a simulated cluster named `{name}` is already running ({}); use it with --cluster {name}, \
         or pick another --name, or stop it with `nodefall sim down --name {name}`",
        .dir.display()
    )]
    AlreadyRunning { name: String, dir: PathBuf },
    #[error(
        "no simulated cluster named `{name}` under {}{}; start one with `nodefall sim up --name {name}`",
        .root.display(),
        known_clusters(.known)
    )]
    NoCluster {
        name: String,
        root: PathBuf,
        known: Vec<String>,
    },
    #[error(
        "`{name}` cannot name a simulated cluster: {why}; {}",
        state::NAME_RULE
    )]
    BadName { name: String, why: String },
    #[error("node `{node}` is not in simulated cluster `{cluster}` (its nodes: {})", .known.join(", "))]
    UnknownNode {
        node: String,
        cluster: String,
        known: Vec<String>,
    },
    #[error("the agent of node `{node}` is {state}, but this fault needs it {wanted}")]
    AgentState {
        node: String,
        state: AgentState,
        wanted: &'static str,
    },
    #[error("{component} (pid {pid}) is not running")]
    NotRunning { component: String, pid: i32 },
    #[error("sending {signal} to {component} (pid {pid})")]
    Signal {
        component: String,
        pid: i32,
        signal: &'static str,
        #[source]
        errno: nix::errno::Errno,
    },
}

impl Error {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
    pub fn io_msg(what: impl Into<String>) -> Error {
        Error::Other(what.into())
    }

    /// No simulated cluster of that name (`--cluster`, `sim ... --name`):
    /// bad input, exit 2, whatever the command.
    pub fn is_unknown_cluster(&self) -> bool {
        matches!(self, Error::NoCluster { .. } | Error::BadName { .. })
    }

    /// The request does not fit the cluster: no such cluster or node, or the
    /// node's agent is in the wrong state for the operation (bad input, exit
    /// 2, for `sim node`); nothing was changed.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::NoCluster { .. }
                | Error::BadName { .. }
                | Error::UnknownNode { .. }
                | Error::AgentState { .. }
        )
    }
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn known_clusters(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!(" (running: {})", known.join(", "))
    }
}
