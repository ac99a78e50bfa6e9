//! A fault on many nodes of a large simulated cluster at once. Its nodes are
//! played by shared kwoks (`agents.rs`), so a node fails by leaving its
//! shard's managed set (a label on the Node) and returns by going back into
//! it: API calls, which a batch makes together, at most `parallel` at a
//! time. Every node is checked first, and a node the checks refuse stops the
//! batch before anything changes; the states failing nodes go to are then
//! recorded with one save before any call, those a return leads to once the
//! calls are done. Faults on a node with
//! a kwok of its own, and a graceful `shutdown`, go one node at a time
//! (`faults.rs`).

use futures::StreamExt;
use tokio::time::Instant;

use super::Error;
use super::agents;
use super::cluster::{SimCluster, unix_ms};
use super::kubelet::Comeback;
use super::state::AgentState;

/// What a batch does to each of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp {
    /// `pause-vm` (`paused`, remembered for the kubelet's return) or
    /// `drop-nic`: out of the managed set, recorded frozen.
    Freeze { paused: bool },
    /// `poweroff`, `stop-kubelet`: out of the managed set, recorded stopped.
    Stop,
    /// `resume-vm`, `restore-nic`: a frozen node's kubelet reports its
    /// return, and it goes back into the managed set.
    Thaw,
    /// `poweron`: a stopped node boots, then goes back.
    Boot,
    /// `start-kubelet`: a stopped node goes back.
    Start,
}

/// One node of a batch: when its calls began and ended, and how they went
/// (None: never begun, the checks refused another node).
#[derive(Debug)]
pub struct Hit {
    pub node: String,
    pub done: Option<(Instant, Instant, Result<(), Error>)>,
}

impl SimCluster {
    /// Whether a fault on all of `nodes` goes as one batch: two or more
    /// nodes, every one played by a shared kwok.
    pub fn batches(&self, nodes: &[String]) -> bool {
        nodes.len() > 1
            && nodes
                .iter()
                .all(|n| self.node_state(n).is_ok_and(|s| s.shard.is_some()))
    }

    /// `op` on every node of `nodes` (all shared: [`SimCluster::batches`]),
    /// in their order.
    pub async fn batch(&mut self, nodes: &[String], op: BatchOp, parallel: usize) -> Vec<Hit> {
        let not_begun = |error: Option<(usize, Error)>| {
            let mut error = error;
            nodes
                .iter()
                .enumerate()
                .map(|(i, node)| Hit {
                    node: node.clone(),
                    done: error
                        .take_if(|(at, _)| *at == i)
                        .map(|(_, e)| (Instant::now(), Instant::now(), Err(e))),
                })
                .collect()
        };
        let mut plans = Vec::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            match self.plan_one(node, op) {
                Ok(plan) => plans.push(plan),
                Err(e) => return not_begun(Some((i, e))),
            }
        }
        // Failing: recorded so before any call (see `restore_node`).
        let failing = match op {
            BatchOp::Freeze { .. } => Some(AgentState::Frozen),
            BatchOp::Stop => Some(AgentState::Stopped),
            BatchOp::Thaw | BatchOp::Boot | BatchOp::Start => None,
        };
        if let Some(state) = failing {
            let paused = matches!(op, BatchOp::Freeze { paused: true });
            for node in nodes {
                if let Ok(entry) = self.node_entry(node) {
                    entry.agent_state = state;
                    if paused {
                        entry.paused_at_ms = Some(unix_ms());
                    }
                }
            }
        }
        if let Err(e) = self.save() {
            return not_begun(Some((0, e)));
        }
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => return not_begun(Some((0, e))),
        };
        let (csi, kubelet) = (self.runs_csi(), self.kubelet());
        let client = &client;
        let calls = plans.into_iter().map(|(spec, comeback)| async move {
            let began = Instant::now();
            let r = async {
                if let Some(how) = comeback {
                    super::faults::report_first(client, &kubelet, &spec.name, how).await?;
                }
                let back = matches!(op, BatchOp::Thaw | BatchOp::Boot | BatchOp::Start);
                agents::set_managed(client, &spec, back, csi).await
            }
            .await;
            (spec.name, began, Instant::now(), r)
        });
        let mut done: Vec<_> = futures::stream::iter(calls)
            .buffer_unordered(parallel.max(1))
            .collect()
            .await;
        done.sort_by_key(|(node, ..)| nodes.iter().position(|n| n == node));
        // Back: recorded running once it is back in its set.
        if matches!(op, BatchOp::Thaw | BatchOp::Boot | BatchOp::Start) {
            let mut saved = Ok(());
            for (node, .., r) in &done {
                if r.is_ok() {
                    saved = saved.and(self.node_entry(node).map(|e| {
                        e.agent_state = AgentState::Running;
                        e.paused_at_ms = None;
                    }));
                }
            }
            if let Err(e) = saved.and_then(|()| self.save()) {
                tracing::warn!("recording the nodes back: {e}");
            }
        }
        done.into_iter()
            .map(|(node, began, ended, r)| Hit {
                node,
                done: Some((began, ended, r)),
            })
            .collect()
    }

    /// Checks `op` on `node` (changing nothing), and returns its record and,
    /// for a return, how its kubelet comes back.
    fn plan_one(
        &mut self,
        node: &str,
        op: BatchOp,
    ) -> Result<(super::state::SimNode, Option<Comeback>), Error> {
        let spec = self.node_state(node)?.clone();
        self.check_shard(&spec)?;
        let comeback = match op {
            BatchOp::Freeze { .. } | BatchOp::Stop => {
                self.check_not_stopped(node, "running or frozen")?;
                None
            }
            BatchOp::Thaw => {
                if spec.agent_state != AgentState::Frozen {
                    return Err(Error::AgentState {
                        node: node.to_owned(),
                        state: spec.agent_state,
                        wanted: "frozen",
                    });
                }
                Some(match spec.paused_at_ms {
                    Some(at) => Comeback::resumed(node, at, unix_ms()),
                    None => Comeback::Restarted,
                })
            }
            BatchOp::Boot => {
                self.check_stopped(node)?;
                Some(Comeback::Booted)
            }
            BatchOp::Start => {
                self.check_stopped(node)?;
                None
            }
        };
        Ok((spec, comeback))
    }
}
