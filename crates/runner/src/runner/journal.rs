//! The crash-safe undo journal: before each side effect a run appends what it
//! is about to do and how to undo it, flushed to disk, so that whatever kills
//! the process (SIGKILL, OOM, a lost CI runner), `nodefall recover` can revert
//! what the run left behind.
//!
//! One JSON-lines file per run under the journal directory. A run that ends
//! normally appends `close` and moves its file to `closed/`; a file still in
//! the directory whose owner process (PID + start time) is gone is an
//! unfinished run.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use crate::backend::any::BackendRef;
use crate::scenario::checked::WorkloadKind;
use crate::scenario::model::{Cleanup, FaultKind, TaintEffect};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("journal {}: {what}", .path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("journal {}, line {line}: {message}", .path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// No `begin` record: an empty file, or one whose first line is not a
    /// journal's header.
    #[error("journal {}: {what}", .path.display())]
    NoHeader { path: PathBuf, what: &'static str },
    /// Something else under a journal's name (a directory, a device).
    #[error("journal {}: not a regular file", .path.display())]
    NotAFile { path: PathBuf },
}

impl Error {
    /// The file (or directory) the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::Corrupt { path, .. }
            | Error::NoHeader { path, .. }
            | Error::NotAFile { path } => path,
        }
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// Where journals live: `$NODEFALL_JOURNAL_DIR`, else
/// `$XDG_STATE_HOME/nodefall/runs`, else `~/.local/state/nodefall/runs`.
pub fn default_dir() -> PathBuf {
    match env_dir("NODEFALL_JOURNAL_DIR") {
        Some(dir) => dir,
        None => state_dir().join("runs"),
    }
}

/// Where a run's reports go when they cannot be written where asked (the
/// `--out` directory went away or became read-only during the run):
/// `$XDG_STATE_HOME/nodefall/reports`, else `~/.local/state/nodefall/reports`.
pub fn fallback_reports_dir() -> PathBuf {
    state_dir().join("reports")
}

/// nodefall's state: `$XDG_STATE_HOME/nodefall`, else
/// `~/.local/state/nodefall`.
fn state_dir() -> PathBuf {
    let home = env_dir("HOME").unwrap_or_else(|| PathBuf::from("/tmp"));
    env_dir("XDG_STATE_HOME")
        .unwrap_or_else(|| home.join(".local").join("state"))
        .join("nodefall")
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// How to reach the cluster's API again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeRef {
    /// A kubeconfig file (sim clusters have their own); else the default
    /// loading rules (KUBECONFIG, ~/.kube/config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// Who wrote the journal and for what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub run: String,
    pub pid: i32,
    /// The owner's start time (clock ticks since boot), so a recycled PID is
    /// never mistaken for the owner.
    pub pid_start: u64,
    pub started_at: Timestamp,
    pub scenario: String,
    pub file: String,
    pub namespace: String,
    pub cleanup: Cleanup,
    pub backend: BackendRef,
    pub kube: KubeRef,
}

/// A taint as it was before the run touched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintWas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// How to put back one change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "undo", rename_all = "camelCase")]
pub enum Undo {
    /// Inject `revert` on `node` (the run injected `fault`). `memo` is what
    /// the backend needs to revert it (kind: the node's address).
    #[serde(rename_all = "camelCase")]
    Fault {
        node: String,
        fault: FaultKind,
        revert: FaultKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        memo: Option<String>,
    },
    /// Set the node's taint `key:effect` back to `was` (absent when None).
    Taint {
        node: String,
        key: String,
        effect: TaintEffect,
        was: Option<TaintWas>,
    },
    /// Set the node's `spec.unschedulable` back to `was`.
    Unschedulable { node: String, was: bool },
    /// Delete an object the run created (it did not exist before).
    #[serde(rename_all = "camelCase")]
    Object {
        api_version: String,
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        name: String,
        /// Known once created: deletion then has a UID precondition.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<String>,
    },
    /// Delete the scenario namespace, which the run created.
    Namespace {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<String>,
    },
    /// Scale a workload that existed before the run back to `was` replicas.
    Replicas {
        kind: WorkloadKind,
        namespace: String,
        name: String,
        was: i32,
    },
    /// Tear down the throwaway simulated cluster the run started.
    Cluster { root: PathBuf, name: String },
    /// Put back host-global sysctls (a kind cluster's kubelets write them):
    /// each name's value before the cluster existed.
    Sysctls {
        values: std::collections::BTreeMap<String, String>,
    },
    /// Remove the Docker network made for kind cluster `cluster` (only
    /// while it carries that cluster's label).
    Network {
        runtime: String,
        name: String,
        cluster: String,
    },
    /// Delete the rule that drops what leaves a kind cluster's bridge, once
    /// none of its nodes is left.
    Guard { bridge: String, tag: String },
    /// Delete the kind cluster `nodefall kind up` made.
    KindCluster {
        kind: PathBuf,
        name: String,
        runtime: String,
        kubeconfig: PathBuf,
    },
}

impl Undo {
    /// True for what is reverted whatever the cleanup policy says: faults
    /// (a node is never left broken) and throwaway clusters.
    pub fn always(&self) -> bool {
        matches!(self, Undo::Fault { .. } | Undo::Cluster { .. }) || self.is_host()
    }

    /// A change to this host made for a contained kind cluster: undone
    /// together, in their own order (`cli::kind::teardown`), never one by one.
    pub fn is_host(&self) -> bool {
        matches!(
            self,
            Undo::Sysctls { .. }
                | Undo::Network { .. }
                | Undo::Guard { .. }
                | Undo::KindCluster { .. }
        )
    }

    /// The undo in words, for cleanup records and `recover`.
    pub fn describe(&self) -> String {
        match self {
            Undo::Fault { node, revert, .. } => format!("{} {node}", revert.name()),
            Undo::Taint {
                node,
                key,
                effect,
                was: None,
            } => format!("untaint {node} {key}:{effect}"),
            Undo::Taint {
                node,
                key,
                effect,
                was: Some(w),
            } => format!(
                "restore taint {node} {key}={}:{effect}",
                w.value.as_deref().unwrap_or("")
            ),
            Undo::Unschedulable { node, was: false } => format!("uncordon {node}"),
            Undo::Unschedulable { node, was: true } => format!("cordon {node} again"),
            Undo::Object {
                kind,
                namespace: Some(ns),
                name,
                ..
            } => format!("delete {kind} {ns}/{name}"),
            Undo::Object { kind, name, .. } => format!("delete {kind} {name}"),
            Undo::Namespace { name, .. } => format!("delete namespace {name}"),
            Undo::Replicas {
                kind,
                namespace,
                name,
                was,
            } => format!("scale {} {namespace}/{name} back to {was}", kind.name()),
            Undo::Cluster { name, .. } => format!("tear down throwaway sim cluster {name}"),
            Undo::Sysctls { values } => format!(
                "put back the host's sysctls {}",
                values
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Undo::Network { name, .. } => format!("remove Docker network {name}"),
            Undo::Guard { bridge, tag } => format!("remove the guard on {bridge} ({tag})"),
            Undo::KindCluster { name, .. } => format!("delete kind cluster {name}"),
        }
    }
}

/// How an entry was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Settled {
    /// Its undo ran.
    Reverted,
    /// A later step put it back (resume-vm after pause-vm, untaint after taint).
    Superseded,
    /// Left in place on purpose (the scenario's cleanup policy).
    Kept,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Record {
    Begin(Box<Header>),
    /// Written before the side effect.
    Will {
        id: u32,
        undo: Undo,
    },
    /// A refined undo, once the effect told more (an object's UID).
    Update {
        id: u32,
        undo: Undo,
    },
    Done {
        id: u32,
        how: Settled,
    },
    Close {
        at: Timestamp,
    },
    /// The work is set up to outlive its process (`nodefall kind up`): a
    /// plain `nodefall recover` leaves it; naming it (or `kind down`) ends it.
    Detach {
        at: Timestamp,
    },
}

/// An undo not settled yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: u32,
    pub undo: Undo,
}

/// The records folded: the header and what is still to undo, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub header: Option<Header>,
    pub pending: Vec<Pending>,
    pub closed: bool,
    /// Meant to outlive its process (see [`Record::Detach`]).
    pub detached: bool,
    /// The highest entry id written, settled or not.
    last_id: u32,
}

impl State {
    fn new() -> State {
        State {
            header: None,
            pending: Vec::new(),
            closed: false,
            detached: false,
            last_id: 0,
        }
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Begin(h) => self.header = Some(*h),
            Record::Will { id, undo } => {
                self.last_id = self.last_id.max(id);
                self.pending.push(Pending { id, undo });
            }
            Record::Update { id, undo } => {
                if let Some(p) = self.pending.iter_mut().find(|p| p.id == id) {
                    p.undo = undo;
                }
            }
            Record::Done { id, .. } => self.pending.retain(|p| p.id != id),
            Record::Close { .. } => self.closed = true,
            Record::Detach { .. } => self.detached = true,
        }
    }

    /// Pending undos in the order to run them: faults first (a node comes
    /// back before anything else is touched), then the rest newest first.
    pub fn undo_order(&self) -> Vec<Pending> {
        let mut faults: Vec<Pending> = self
            .pending
            .iter()
            .filter(|p| matches!(p.undo, Undo::Fault { .. }))
            .cloned()
            .collect();
        faults.reverse();
        let mut rest: Vec<Pending> = self
            .pending
            .iter()
            .filter(|p| !matches!(p.undo, Undo::Fault { .. } | Undo::Cluster { .. }))
            .cloned()
            .collect();
        rest.reverse();
        let clusters = self
            .pending
            .iter()
            .filter(|p| matches!(p.undo, Undo::Cluster { .. }))
            .cloned();
        faults.into_iter().chain(rest).chain(clusters).collect()
    }
}

/// An open journal, written by the run that owns it.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    next: u32,
    state: State,
}

impl Journal {
    /// Creates `<dir>/<header.run>.jsonl` and writes the header. The file
    /// appears under its name with its header already in it (written to a
    /// hidden file first, then renamed), so a journal without a header is
    /// always a damaged one, never a run that is just starting.
    pub fn create(dir: &Path, header: Header) -> Result<Journal> {
        let io = |what| {
            let path = dir.to_owned();
            move |source| Error::Io { path, what, source }
        };
        std::fs::create_dir_all(dir).map_err(io("creating the journal directory"))?;
        let path = dir.join(format!("{}.jsonl", header.run));
        let creating = |source| Error::Io {
            path: path.clone(),
            what: "creating",
            source,
        };
        if path.exists() {
            return Err(creating(std::io::ErrorKind::AlreadyExists.into()));
        }
        let new = dir.join(format!(".{}.jsonl.new", header.run));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&new)
            .map_err(creating)?;
        let mut journal = Journal {
            path: new.clone(),
            file,
            next: 1,
            state: State::new(),
        };
        let begun = journal
            .append(Record::Begin(Box::new(header)))
            .and_then(|()| std::fs::rename(&new, &path).map_err(creating));
        if let Err(e) = begun {
            std::fs::remove_file(&new).ok();
            return Err(e);
        }
        journal.path = path;
        Ok(journal)
    }

    /// Reopens an unfinished journal to settle it (`nodefall recover`).
    pub fn reopen(path: &Path) -> Result<Journal> {
        let state = read(path)?;
        let next = state.last_id + 1;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                what: "opening",
                source,
            })?;
        Ok(Journal {
            path: path.to_owned(),
            file,
            next,
            state,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    fn append(&mut self, record: Record) -> Result<()> {
        let io = |what| {
            let path = self.path.clone();
            move |source| Error::Io { path, what, source }
        };
        let mut line = serde_json::to_string(&record).map_err(|e| Error::Corrupt {
            path: self.path.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io("appending"))?;
        // On disk before the side effect it announces.
        self.file.sync_data().map_err(io("syncing"))?;
        self.state.apply(record);
        Ok(())
    }

    /// Records what is about to be done and how to undo it; call it before
    /// the side effect, and do not do it if this fails.
    pub fn will(&mut self, undo: Undo) -> Result<u32> {
        let id = self.next;
        self.next += 1;
        self.append(Record::Will { id, undo })?;
        Ok(id)
    }

    pub fn update(&mut self, id: u32, undo: Undo) -> Result<()> {
        self.append(Record::Update { id, undo })
    }

    pub fn settle(&mut self, id: u32, how: Settled) -> Result<()> {
        self.append(Record::Done { id, how })
    }

    /// Marks the journal's work as meant to outlive this process.
    pub fn detach(&mut self) -> Result<()> {
        self.append(Record::Detach {
            at: Timestamp::now(),
        })
    }

    /// Pending undos matching `pred` (newest last).
    pub fn find(&self, pred: impl Fn(&Undo) -> bool) -> Vec<Pending> {
        self.state
            .pending
            .iter()
            .filter(|p| pred(&p.undo))
            .cloned()
            .collect()
    }

    /// Closes the journal: writes `close` and moves the file to `closed/`.
    /// Pending entries stay recorded there (a revert that failed), but the
    /// run is no longer unfinished: its failures were reported.
    pub fn close(mut self) -> Result<PathBuf> {
        self.append(Record::Close {
            at: Timestamp::now(),
        })?;
        let dir = self
            .path
            .parent()
            .map_or_else(|| PathBuf::from("closed"), |p| p.join("closed"));
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            what: "creating closed/",
            source,
        })?;
        let to = dir.join(self.path.file_name().unwrap_or_default());
        std::fs::rename(&self.path, &to).map_err(|source| Error::Io {
            path: self.path.clone(),
            what: "moving to closed/",
            source,
        })?;
        Ok(to)
    }
}

/// Reads and folds a journal file. A torn last line (the process died
/// mid-write) is ignored: its side effect had not started. Any other line
/// that is not a record (not UTF-8, not JSON) makes the file corrupt.
pub fn read(path: &Path) -> Result<State> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        what: "reading",
        source,
    })?;
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // The last line with anything on it is the one a kill may have torn.
    let last = lines
        .iter()
        .rposition(|l| !l.trim_ascii().is_empty())
        .map_or(0, |i| i + 1);
    let mut state = State::new();
    for (i, line) in lines.iter().enumerate().take(last) {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let record = std::str::from_utf8(line)
            .map_err(|e| format!("not UTF-8 text ({e})"))
            .and_then(|text| serde_json::from_str::<Record>(text).map_err(|e| e.to_string()));
        match record {
            Ok(r) => state.apply(r),
            Err(_) if i + 1 == last => break,
            Err(message) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    line: i + 1,
                    message,
                });
            }
        }
    }
    Ok(state)
}

/// An unfinished journal found on disk.
#[derive(Debug, Clone)]
pub struct Unfinished {
    pub path: PathBuf,
    pub header: Header,
    pub state: State,
    /// The owner process still runs: not to be touched.
    pub owner_alive: bool,
}

impl Unfinished {
    /// Its process is still at work on it (a detached journal's process,
    /// `kind up`, has finished its part even while it lives): not to be
    /// touched.
    pub fn in_use(&self) -> bool {
        self.owner_alive && !self.state.detached
    }

    /// Killed before it could clean up: its process is gone and it was not
    /// left on purpose (detached: a cluster `kind up` made).
    pub fn abandoned(&self) -> bool {
        !self.owner_alive && !self.state.detached
    }
}

/// What the journal directory holds that is not closed: the runs' journals,
/// and the files under a journal's name that cannot be read as one.
#[derive(Debug, Default)]
pub struct Scan {
    /// Readable journals without a `close` record, oldest first.
    pub runs: Vec<Unfinished>,
    /// Files named like journals that are not readable ones (each error
    /// names its path and what is wrong); what their runs left is unknown.
    pub damaged: Vec<Error>,
}

/// Every journal in `dir` without a `close` record, oldest first. A damaged
/// one (unreadable, not UTF-8, a corrupt line, no header, a directory) is
/// listed apart and does not hide the others; only a directory that cannot
/// be listed is an error.
pub fn unfinished(dir: &Path) -> Result<Scan> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Scan::default()),
        Err(source) => {
            return Err(Error::Io {
                path: dir.to_owned(),
                what: "listing",
                source,
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    let mut scan = Scan::default();
    for path in paths {
        match read_unfinished(&path) {
            Ok(Some(u)) => scan.runs.push(u),
            Ok(None) => {}
            Err(e) => scan.damaged.push(e),
        }
    }
    Ok(scan)
}

/// One file of the journal directory: None when its run closed it.
fn read_unfinished(path: &Path) -> Result<Option<Unfinished>> {
    let is_file = std::fs::metadata(path)
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            what: "reading",
            source,
        })?
        .is_file();
    if !is_file {
        return Err(Error::NotAFile {
            path: path.to_owned(),
        });
    }
    let state = read(path)?;
    if state.closed {
        return Ok(None);
    }
    let Some(header) = state.header.clone() else {
        let empty = std::fs::metadata(path).is_ok_and(|m| m.len() == 0);
        return Err(Error::NoHeader {
            path: path.to_owned(),
            what: if empty {
                "empty (no `begin` record says whose run it is)"
            } else {
                "no `begin` record says whose run it is"
            },
        });
    };
    let owner_alive = crate::sim::process::runs(header.pid, header.pid_start);
    Ok(Some(Unfinished {
        path: path.to_owned(),
        header,
        state,
        owner_alive,
    }))
}

/// A run id: `<scenario>-<UTC time>-<pid>`, also the journal's file name.
pub fn run_id(scenario: &str, at: Timestamp) -> String {
    let stamp = at.strftime("%Y%m%dT%H%M%SZ");
    format!("{scenario}-{stamp}-{}", std::process::id())
}

/// A journal header for tests: a kind run of scenario `t` in namespace `ns`.
#[cfg(test)]
pub fn test_header(run: &str) -> Header {
    Header {
        run: run.into(),
        pid: 1,
        pid_start: 0,
        started_at: Timestamp::UNIX_EPOCH,
        scenario: "t".into(),
        file: "t.yaml".into(),
        namespace: "ns".into(),
        cleanup: Cleanup::Always,
        backend: BackendRef::Kind {
            cluster: "kind".into(),
            runtime: "docker".into(),
        },
        kube: KubeRef::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        test_header("t-1")
    }

    fn pause(node: &str) -> Undo {
        Undo::Fault {
            node: node.into(),
            fault: FaultKind::PauseVm,
            revert: FaultKind::ResumeVm,
            memo: None,
        }
    }

    #[test]
    fn pending_survives_a_reread_and_settled_entries_drop_out() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tmp".into(),
            what: "tempdir",
            source,
        })?;
        let mut j = Journal::create(dir.path(), header())?;
        let ns = j.will(Undo::Namespace {
            name: "ns".into(),
            uid: None,
        })?;
        j.update(
            ns,
            Undo::Namespace {
                name: "ns".into(),
                uid: Some("u1".into()),
            },
        )?;
        let p = j.will(pause("w1"))?;
        let t = j.will(Undo::Unschedulable {
            node: "w1".into(),
            was: false,
        })?;
        j.settle(t, Settled::Superseded)?;
        let path = j.path().to_owned();
        drop(j);
        let state = read(&path)?;
        assert!(!state.closed);
        let ids: Vec<u32> = state.pending.iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![ns, p]);
        assert_eq!(
            state.pending[0].undo,
            Undo::Namespace {
                name: "ns".into(),
                uid: Some("u1".into())
            }
        );
        let found = unfinished(dir.path())?;
        assert_eq!(found.runs.len(), 1);
        assert!(found.damaged.is_empty());
        // PID 1 with start time 0 is not this header's owner.
        assert!(!found.runs[0].owner_alive);
        let mut j = Journal::reopen(&path)?;
        // Ids go on after the highest written, the settled one included.
        let again = j.will(pause("w3"))?;
        assert_eq!(again, t + 1);
        j.settle(again, Settled::Reverted)?;
        let closed = j.close()?;
        assert!(closed.ends_with("closed/t-1.jsonl"));
        assert!(unfinished(dir.path())?.runs.is_empty());
        Ok(())
    }

    #[test]
    fn faults_are_undone_first_then_the_rest_newest_first_and_clusters_last() {
        let mut s = State::new();
        let recs = [
            Undo::Cluster {
                root: "/r".into(),
                name: "c".into(),
            },
            Undo::Namespace {
                name: "ns".into(),
                uid: None,
            },
            pause("w1"),
            Undo::Taint {
                node: "w1".into(),
                key: "k".into(),
                effect: TaintEffect::NoExecute,
                was: None,
            },
            pause("w2"),
        ];
        for (i, undo) in recs.into_iter().enumerate() {
            s.apply(Record::Will {
                id: u32::try_from(i).unwrap_or(0),
                undo,
            });
        }
        let order: Vec<u32> = s.undo_order().iter().map(|p| p.id).collect();
        assert_eq!(order, vec![4, 2, 3, 1, 0]);
    }

    #[test]
    fn a_torn_last_line_is_ignored_but_a_torn_middle_line_is_an_error() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tmp".into(),
            what: "tempdir",
            source,
        })?;
        let path = dir.path().join("x.jsonl");
        let begin = serde_json::to_string(&Record::Begin(Box::new(header()))).unwrap_or_default();
        std::fs::write(&path, format!("{begin}\n{{\"op\":\"wi")).map_err(|source| Error::Io {
            path: path.clone(),
            what: "writing",
            source,
        })?;
        assert!(read(&path)?.header.is_some());
        std::fs::write(&path, format!("{{\"op\":\"wi\n{begin}\n")).map_err(|source| Error::Io {
            path: path.clone(),
            what: "writing",
            source,
        })?;
        assert!(matches!(read(&path), Err(Error::Corrupt { line: 1, .. })));
        Ok(())
    }

    #[test]
    fn damaged_files_are_listed_apart_and_do_not_hide_the_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.path().join(name), bytes).expect("written");
        };
        let begin = serde_json::to_string(&Record::Begin(Box::new(header()))).unwrap_or_default();
        write("a-binary.jsonl", b"\xff\xfe\n\x80\n");
        write("b-empty.jsonl", b"");
        write(
            "c-torn.jsonl",
            format!("{begin}\n{{\"op\":\"wi\n{begin}\n").as_bytes(),
        );
        write(
            "d-no-header.jsonl",
            b"{\"op\":\"done\",\"id\":1,\"how\":\"kept\"}\n",
        );
        std::fs::create_dir(dir.path().join("e-dir.jsonl")).expect("dir");
        // A torn last line, even mid-character, is a write cut short.
        write(
            "f-run.jsonl",
            &[begin.as_bytes(), b"\n{\"op\":\"will\",\"undo\":\"\xc3"].concat(),
        );
        write("not-a-journal.txt", b"\xff");
        let scan = unfinished(dir.path()).expect("the directory is listed");
        let runs: Vec<_> = scan.runs.iter().map(|u| u.path.clone()).collect();
        assert_eq!(runs, vec![dir.path().join("f-run.jsonl")]);
        let damaged: Vec<String> = scan.damaged.iter().map(ToString::to_string).collect();
        let p = |n: &str| dir.path().join(n).display().to_string();
        assert_eq!(
            damaged,
            vec![
                format!(
                    "journal {}, line 1: not UTF-8 text (invalid utf-8 sequence of 1 bytes from \
                     index 0)",
                    p("a-binary.jsonl")
                ),
                format!(
                    "journal {}: empty (no `begin` record says whose run it is)",
                    p("b-empty.jsonl")
                ),
                format!(
                    "journal {}, line 2: EOF while parsing a string at line 1 column 9",
                    p("c-torn.jsonl")
                ),
                format!(
                    "journal {}: no `begin` record says whose run it is",
                    p("d-no-header.jsonl")
                ),
                format!("journal {}: not a regular file", p("e-dir.jsonl")),
            ]
        );
        assert_eq!(scan.damaged[4].path(), dir.path().join("e-dir.jsonl"));
    }

    #[test]
    fn a_journal_appears_with_its_header_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().expect("temp dir");
        let j = Journal::create(dir.path(), header()).expect("created");
        assert_eq!(j.path(), dir.path().join("t-1.jsonl"));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("t-1.jsonl")]);
        assert_eq!(read(j.path()).expect("read").header, Some(header()));
        // The same run id again is refused, the first journal untouched.
        assert!(matches!(
            Journal::create(dir.path(), header()),
            Err(Error::Io {
                what: "creating",
                ..
            })
        ));
        assert_eq!(unfinished(dir.path()).expect("listed").runs.len(), 1);
    }
}
