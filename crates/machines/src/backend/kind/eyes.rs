//! The kind backend's eyes: what a node container runs, as the witness
//! sees it (`docker inspect` for its state, containerd's task list inside).

use std::collections::BTreeMap;
use std::time::Duration;

use super::Eyes;
use crate::exec::{self, Cmd, Exec};
use crate::record::machines::{PodContainer, Power};

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
pub(super) struct KindEyes<E> {
    pub(super) runtime: String,
    /// Node name -> container.
    pub(super) nodes: BTreeMap<String, String>,
    /// Held while a look runs: a pause waits for it (gate.rs).
    pub(super) gates: super::gate::Gates,
    pub(super) exec: E,
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
        let gate = self.gates.hold_blocking(c);
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
        drop(gate);
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
