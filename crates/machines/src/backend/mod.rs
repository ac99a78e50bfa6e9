//! Fault injectors: how a scenario's node faults reach a cluster's machines.
//! The runner sees only the narrow [`NodeFaults`] trait.

pub mod any;
pub mod command;
pub mod kind;
pub mod libvirt;
pub mod sim;
pub mod ssh;
pub mod vagrant;

use std::future::Future;

use k8s_openapi::api::core::v1::Node;

use crate::record::machines::{PodContainer, Power};
use crate::scenario::model::FaultKind;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Exec(crate::exec::Error),
    #[error(
        "no kind cluster `{cluster}`: `{runtime} ps` shows no container labelled \
         io.x-k8s.kind.cluster={cluster}; create it with `kind create cluster --name {cluster}` \
         or pass --kind-cluster"
    )]
    NoKindCluster { cluster: String, runtime: String },
    #[error(
        "node `{node}` is not one of the {what} ({})",
        if .known.is_empty() { "none".to_owned() } else { .known.join(", ") }
    )]
    UnknownNode {
        node: String,
        /// What the backend knows nodes as (`kind cluster's node containers`).
        what: &'static str,
        known: Vec<String>,
    },
    #[error("libvirt: {op} of domain `{domain}` (node `{node}`) on {uri} failed: {message}")]
    Libvirt {
        op: String,
        node: String,
        domain: String,
        uri: String,
        message: String,
    },
    #[error(
        "node `{node}` has no machine: looked for {looked_for}; found: {}; {hint}",
        if .found.is_empty() { "none".to_owned() } else { .found.join(", ") }
    )]
    NoMachine {
        node: String,
        looked_for: String,
        found: Vec<String>,
        hint: &'static str,
    },
    #[error(
        "{machine} is not node `{node}`: its UUID is {uuid} but the node reports systemUUID \
         {system_uuid}; {hint}"
    )]
    WrongMachine {
        node: String,
        /// `domain `x``, `VirtualBox VM `x``.
        machine: String,
        uuid: String,
        system_uuid: String,
        hint: &'static str,
    },
    #[error(
        "{machine} of node `{node}` is {state}, not running: nodefall only breaks running \
         machines (start or resume it first)"
    )]
    NotRunning {
        node: String,
        /// `domain `x``, `VirtualBox VM `x``.
        machine: String,
        state: String,
    },
    #[error(
        "no interface of domain `{domain}` (node `{node}`) was chosen to cut; pass --nic NODE=MAC"
    )]
    NoNic { node: String, domain: String },
    #[error(
        "domain `{domain}` (node `{node}`) has {}; pass --nic {node}=MAC with one of its MACs",
        if .mac.is_empty() { format!("several interfaces ({}) and none is known to hold the node's InternalIP", .found.join(", ")) }
        else { format!("no interface with MAC {} (it has {})", .mac, .found.join(", ")) }
    )]
    NoNicNamed {
        node: String,
        domain: String,
        mac: String,
        found: Vec<String>,
    },
    #[error(
        "{machine} (node `{node}`) has no network adapter {index} (it has: {}); pass \
         --vagrant-nic with one of them",
        if .found.is_empty() { "none".to_owned() } else { .found.join(", ") }
    )]
    NoAdapter {
        node: String,
        /// `domain `x``, `VirtualBox VM `x``.
        machine: String,
        index: u8,
        found: Vec<String>,
    },
    #[error(
        "no SSH address for node `{node}`: it reports no address; pass --ssh-host {node}=HOST[:PORT]"
    )]
    NoSsh { node: String },
    #[error(
        "{machine} (node `{node}`) was still {state} {after}s after the {mode} shutdown \
         request: the guest ignored it or is still shutting down (does it handle the ACPI power \
         button: logind or acpid?); raise --shutdown-timeout or use poweroff"
    )]
    ShutdownTimeout {
        node: String,
        /// `domain `x``, `VirtualBox VM `x``.
        machine: String,
        mode: &'static str,
        after: u64,
        state: String,
    },
    #[error("{0}")]
    Command(Box<CommandFailure>),
    #[error("node `{node}`: {message}")]
    Template { node: String, message: String },
    #[error("{fault} on node `{node}`: {why}")]
    NotPrepared {
        node: String,
        fault: &'static str,
        why: String,
    },
    #[error("{what}")]
    NotBuilt { what: &'static str },
    /// A tool the backend needs is not there (or not on PATH).
    #[error("{0}")]
    Missing(String),
    #[error(transparent)]
    Vagrant(#[from] vagrant::project::Error),
    #[error("{fault} on node `{node}` failed")]
    Sim {
        fault: &'static str,
        node: String,
        #[source]
        source: Box<crate::sim::Error>,
    },
}

impl Error {
    /// The scenario or flags name a machine that is not there or not the
    /// node's: bad input (exit 2), found before anything was injected.
    pub fn invalid_input(&self) -> bool {
        matches!(
            self,
            Error::UnknownNode { .. }
                | Error::NoMachine { .. }
                | Error::WrongMachine { .. }
                | Error::NotRunning { .. }
                | Error::NoNicNamed { .. }
                | Error::NoAdapter { .. }
                | Error::NoSsh { .. }
                | Error::Template { .. }
                | Error::NotBuilt { .. }
                | Error::Missing(_)
        ) || matches!(self, Error::Vagrant(e) if !matches!(e, vagrant::project::Error::Read { .. }))
    }
}

/// A command of the command backend that failed, or a check that never
/// passed: its line and the end of its output.
#[derive(Debug)]
pub struct CommandFailure {
    pub node: String,
    pub fault: &'static str,
    /// `run`, `revert`, `check`, `revertCheck`.
    pub role: &'static str,
    pub line: String,
    pub status: String,
    /// `; stderr: ...; stdout: ...` (the end of each), or empty.
    pub output: String,
    /// A check that never passed: its time limit (ms) and attempts.
    pub check: Option<(u64, u32)>,
}

impl CommandFailure {
    /// `cmd` failed as `c` says (its status and the end of its output).
    pub fn new(
        node: &str,
        fault: FaultKind,
        role: &'static str,
        cmd: &crate::exec::Cmd,
        c: &crate::exec::Captured,
    ) -> CommandFailure {
        CommandFailure {
            node: node.to_owned(),
            fault: fault.name(),
            role,
            line: cmd.to_string(),
            status: c.status.clone(),
            output: command::output(c),
            check: None,
        }
    }
}

impl std::fmt::Display for CommandFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let CommandFailure {
            node,
            fault,
            role,
            line,
            status,
            output,
            check,
        } = self;
        match check {
            None => write!(
                f,
                "{role} of {fault} on node `{node}`: `{line}` failed ({status}){output}"
            ),
            Some((after, attempts)) => write!(
                f,
                "{role} of {fault} on node `{node}`: `{line}` did not pass within {} \
                 ({attempts} attempts; the last: {status}{output})",
                crate::duration::Dur(std::time::Duration::from_millis(*after))
            ),
        }
    }
}

/// Looks at nodes' machines for the witness, beside the faults: blocking
/// (the runner calls it on the blocking pool), never changing anything.
pub trait Eyes: Send + Sync {
    /// How it looks at `node`, in words (`docker exec NODE ctr -n k8s.io
    /// tasks ls`).
    fn how(&self, node: &str) -> String;
    /// The machine's power now and, when it can list them, the pods'
    /// running containers on it (else why not).
    fn look(&self, node: &str) -> (Power, Result<Vec<PodContainer>, String>);
    /// The other nodes worth looking at beside the failed ones, where a
    /// replacement may run (a kind cluster's: all of them; none where the
    /// cluster may be large or unseen).
    fn others(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Breaks and repairs nodes.
pub trait NodeFaults: Send {
    /// Backend name for reports (`sim`, `kind`, ...).
    fn name(&self) -> &'static str;
    /// What the fault does on this backend, in words (for plans and reports).
    fn describe(&self, node: &str, fault: FaultKind) -> String;
    /// Finds the machine of a target node and checks it is that node's,
    /// before anything is injected; `faults` are the ones planned for it.
    /// Returns what it resolved to, in words (empty: nothing to say).
    fn resolve(
        &mut self,
        _node: &Node,
        _faults: &[FaultKind],
    ) -> impl Future<Output = Result<String, Error>> + Send {
        async { Ok(String::new()) }
    }
    /// Runs a shell command on the node (libvirt: SSH; kind: `docker
    /// exec`), for facts only the node knows. None: this backend has no
    /// shell on nodes. Else how it got there (`ssh root@10.0.0.5`) and the
    /// command's stdout, or its failure in words.
    fn shell(
        &self,
        _node: &str,
        _command: &str,
    ) -> impl Future<Output = Option<(String, Result<String, String>)>> + Send {
        async { None }
    }
    /// The graceful node shutdown settings of a node whose kubelet the
    /// backend plays itself (sim): `shutdownGracePeriod`,
    /// `shutdownGracePeriodCriticalPods` and where they come from, in words.
    /// None: a real kubelet, whose configuration and logind lock are read
    /// from the node.
    fn played_shutdown_grace(
        &self,
        _node: &str,
    ) -> Option<(std::time::Duration, std::time::Duration, String)> {
        None
    }
    /// Injects (or reverts) `fault` on `node`; returns once it is done.
    fn inject(
        &mut self,
        node: &str,
        fault: FaultKind,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// Reverts a fault (`revert` is its revert, e.g. `resume-vm`) from
    /// whatever state the machine was left in: a run cut short in an inject
    /// or in an earlier revert leaves it half-way, and cleanup or `nodefall
    /// recover` must still bring it back. Returns what it found, in words
    /// (empty: nothing to say). The default injects `revert`, for backends
    /// whose reverts are already the same act from any state.
    fn restore(
        &mut self,
        node: &str,
        revert: FaultKind,
    ) -> impl Future<Output = Result<String, Error>> + Send {
        async move { self.inject(node, revert).await.map(|()| String::new()) }
    }
    /// What the backend must keep to revert `fault` on `node` from another
    /// process (`nodefall recover` after the run was killed): the undo
    /// journal stores it with the fault, before the fault is injected. kind
    /// keeps the node's address, libvirt its domain, the command backend the
    /// revert's command line.
    fn memo(&self, _node: &str, _fault: FaultKind) -> Option<String> {
        None
    }
    /// Gives back a memo read from the journal, before a revert.
    fn remember(&mut self, _node: &str, _memo: &str) {}
    /// What looks at the machines through the run (power and the pods'
    /// running containers), where the backend can; shares nothing the
    /// faults change, so it looks while they act.
    fn eyes(&self) -> Option<std::sync::Arc<dyn Eyes>> {
        None
    }
    /// The external commands run since the last call, with their output,
    /// for the report (backends that keep none return nothing).
    fn take_commands(&mut self) -> Vec<crate::record::CommandRecord> {
        Vec::new()
    }
    /// A copy that injects on one node of a set while other copies inject
    /// on the others, so a fault on a set hits its nodes at once; what it
    /// learnt comes back through [`NodeFaults::join`]. None (the default):
    /// this backend's faults go one node after another.
    fn fork(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Takes back what `fork` learnt while it acted on `node` alone (an
    /// address, a revert, the commands it ran).
    fn join(&mut self, _node: &str, _fork: Self)
    where
        Self: Sized,
    {
    }
    /// Whether `fault` on all of `nodes` goes as one batch the backend
    /// makes itself ([`NodeFaults::inject_batch`]; the sim's nodes that
    /// shared kwoks play). False (the default): forks, or one by one.
    fn batches(&self, _nodes: &[String], _fault: FaultKind) -> bool {
        false
    }
    /// `fault` on all of `nodes` together, at most `parallel` at a time:
    /// for each node, in `nodes`' order, when it began and ended and how it
    /// went (None: never begun, as a node refused first stops the batch).
    /// The default goes one node after another, stopping at a failure.
    fn inject_batch(
        &mut self,
        nodes: &[String],
        fault: FaultKind,
        _parallel: usize,
    ) -> impl Future<Output = Vec<Option<Batched>>> + Send {
        async move {
            let mut out = Vec::with_capacity(nodes.len());
            let mut failed = false;
            for node in nodes {
                if failed {
                    out.push(None);
                    continue;
                }
                let began = tokio::time::Instant::now();
                let r = self.inject(node, fault).await;
                failed = r.is_err();
                out.push(Some((began, tokio::time::Instant::now(), r)));
            }
            out
        }
    }
}

/// One node of a batch: when its inject began and ended, and how it went.
pub type Batched = (
    tokio::time::Instant,
    tokio::time::Instant,
    Result<(), Error>,
);
