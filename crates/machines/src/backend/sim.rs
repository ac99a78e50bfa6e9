//! The `sim` backend: faults on a simulated cluster's node agents (kwok
//! processes). The mapping is documented in `docs/sim-backend.md`.

#![deny(clippy::wildcard_enum_match_arm)]

use std::time::Duration;

use super::{Error, Eyes, NodeFaults};
use crate::duration::format_duration;
use crate::record::machines::{PodContainer, Power};
use crate::scenario::model::{Does, Effect, FaultKind};
use crate::sim::SimCluster;
use crate::sim::batch::BatchOp;
use crate::sim::provisioner::{self, Provisioner};
use crate::sim::proxy::{Machines, ServiceProxy};

#[derive(Debug)]
pub struct SimBackend {
    pub cluster: SimCluster,
    /// The stand-in for kind's local-path provisioner while a run uses the
    /// cluster (`sim::provisioner`); none when only reverting faults.
    storage: Option<Provisioner>,
    /// The stand-in for kube-proxy and the pods' servers while a run uses
    /// the cluster (`sim::proxy`), and the machines it knows to be down.
    proxy: Option<ServiceProxy>,
    machines: Machines,
    /// Each node's machine as the faults left it (the witness's view).
    power: SimEyes,
}

/// The sim's machines are its own faults: a paused or killed kwok. Its
/// nodes run no containers (kwok plays their pods), so none are listed.
#[derive(Debug, Clone, Default)]
struct SimEyes(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Power>>>);

impl SimEyes {
    fn set(&self, node: &str, fault: FaultKind) {
        let power = match fault.does() {
            Does::Breaks(Effect::Paused) => Power::Paused,
            Does::Breaks(Effect::Off) => Power::Off,
            Does::Breaks(Effect::CutOff | Effect::KubeletStopped) | Does::Restores(_) => Power::On,
        };
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(node.to_owned(), power);
    }
}

impl Eyes for SimEyes {
    fn how(&self, _node: &str) -> String {
        "the sim's own account of its faults (its nodes run no containers)".into()
    }

    fn look(&self, node: &str) -> (Power, Result<Vec<PodContainer>, String>) {
        let power = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(node)
            .copied()
            .unwrap_or(Power::On);
        (
            power,
            Err("a sim node runs no containers (kwok plays its pods)".into()),
        )
    }
}

impl SimBackend {
    /// A backend that reverts faults (`nodefall recover`).
    pub fn new(cluster: SimCluster) -> SimBackend {
        SimBackend {
            cluster,
            storage: None,
            proxy: None,
            machines: Machines::default(),
            power: SimEyes::default(),
        }
    }

    /// A backend for a run: the cluster's default StorageClass `standard`
    /// is there and provisioned, and NodePort Services answer on 127.0.0.1,
    /// for as long as the run lasts.
    pub async fn for_run(mut cluster: SimCluster) -> Result<SimBackend, crate::sim::Error> {
        let client = cluster.client().await?;
        cluster.share_client(Some(client.clone()));
        provisioner::ensure_class(&client).await?;
        let machines = Machines::default();
        Ok(SimBackend {
            cluster,
            storage: Some(Provisioner::spawn(client.clone())),
            proxy: Some(ServiceProxy::spawn(client, machines.clone())),
            machines,
            power: SimEyes::default(),
        })
    }

    /// The cluster back, the provisioner and the proxy stopped.
    pub fn into_cluster(mut self) -> SimCluster {
        drop(self.storage);
        drop(self.proxy);
        self.cluster.share_client(None);
        self.cluster
    }
}

/// The batch a fault on many shared nodes is (none: a graceful shutdown,
/// played node by node).
fn batch_op(fault: FaultKind) -> Option<BatchOp> {
    match fault {
        FaultKind::PauseVm => Some(BatchOp::Freeze { paused: true }),
        FaultKind::DropNic => Some(BatchOp::Freeze { paused: false }),
        FaultKind::Poweroff | FaultKind::StopKubelet => Some(BatchOp::Stop),
        FaultKind::ResumeVm | FaultKind::RestoreNic => Some(BatchOp::Thaw),
        FaultKind::Poweron => Some(BatchOp::Boot),
        FaultKind::StartKubelet => Some(BatchOp::Start),
        FaultKind::Shutdown => None,
    }
}

impl NodeFaults for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn eyes(&self) -> Option<std::sync::Arc<dyn Eyes>> {
        Some(std::sync::Arc::new(self.power.clone()))
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        let shard = self.cluster.node_state(node).ok().and_then(|n| n.shard);
        if let Some(k) = shard {
            let what = match fault.does() {
                Does::Restores(_) => format!("back into kwok shard {k}"),
                Does::Breaks(_) => format!("out of kwok shard {k}"),
            };
            return format!("{} {node} ({what})", fault.name());
        }
        let what = match fault {
            FaultKind::PauseVm | FaultKind::DropNic => "SIGSTOP the node's kwok",
            FaultKind::ResumeVm | FaultKind::RestoreNic => "replace the frozen kwok by a fresh one",
            FaultKind::Poweroff => "SIGKILL the node's kwok",
            FaultKind::StopKubelet => "SIGTERM the node's kwok",
            FaultKind::Poweron => "start a new kwok for the node, Ready once booted",
            FaultKind::StartKubelet => "start a new kwok for the node",
            FaultKind::Shutdown if self.cluster.shutdown_grace().all.is_zero() => {
                "graceful shutdown off: SIGKILL the node's kwok"
            }
            FaultKind::Shutdown => {
                "SIGKILL the node's kwok; its kubelet's graceful shutdown played by nodefall"
            }
        };
        format!("{} {node} ({what})", fault.name())
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let c = &mut self.cluster;
        // A machine that stops answering does so before the fault is
        // complete on the sim; one that comes back answers once it is.
        let m = &self.machines;
        let result = match fault {
            FaultKind::PauseVm => {
                m.set_down(node, true);
                c.pause_node(node).await
            }
            FaultKind::DropNic => {
                m.set_down(node, true);
                c.freeze_node(node).await
            }
            FaultKind::ResumeVm | FaultKind::RestoreNic => c
                .thaw_node(node)
                .await
                .inspect(|()| m.set_down(node, false)),
            FaultKind::Poweroff => {
                m.set_down(node, true);
                c.kill_node(node).await
            }
            FaultKind::StopKubelet => c.stop_node(node).await,
            FaultKind::Poweron => c
                .boot_node(node)
                .await
                .inspect(|()| m.set_down(node, false)),
            FaultKind::StartKubelet => c.start_node(node).await,
            FaultKind::Shutdown => {
                let r = c.shutdown_node(node).await;
                // Off once the kubelet has stopped its pods.
                m.set_down(node, true);
                r
            }
        };
        if result.is_ok() {
            self.power.set(node, fault);
        }
        result.map_err(|source| Error::Sim {
            fault: fault.name(),
            node: node.to_owned(),
            source: Box::new(source),
        })
    }

    fn batches(&self, nodes: &[String], fault: FaultKind) -> bool {
        batch_op(fault).is_some() && self.cluster.batches(nodes)
    }

    /// The nodes out of (or back into) their shards together; the machines
    /// seen down (or up) as [`NodeFaults::inject`] does it, node by node.
    async fn inject_batch(
        &mut self,
        nodes: &[String],
        fault: FaultKind,
        parallel: usize,
    ) -> Vec<Option<super::Batched>> {
        let Some(op) = batch_op(fault) else {
            return nodes.iter().map(|_| None).collect();
        };
        let down = matches!(fault.does(), Does::Breaks(_)) && fault != FaultKind::StopKubelet;
        if down {
            for node in nodes {
                self.machines.set_down(node, true);
            }
        }
        let hits = self.cluster.batch(nodes, op, parallel).await;
        hits.into_iter()
            .map(|hit| {
                let (began, ended, r) = hit.done?;
                if r.is_ok() {
                    if matches!(fault.does(), Does::Restores(_)) && fault != FaultKind::StartKubelet
                    {
                        self.machines.set_down(&hit.node, false);
                    }
                    self.power.set(&hit.node, fault);
                }
                let r = r.map_err(|source| Error::Sim {
                    fault: fault.name(),
                    node: hit.node.clone(),
                    source: Box::new(source),
                });
                Some((began, ended, r))
            })
            .collect()
    }

    fn played_shutdown_grace(&self, _node: &str) -> Option<(Duration, Duration, String)> {
        let g = self.cluster.shutdown_grace();
        let how = if g.all.is_zero() {
            "off: the cluster was started without --shutdown-grace-period".to_owned()
        } else {
            format!(
                "`nodefall sim up --shutdown-grace-period {} --shutdown-grace-period-critical-pods {}`",
                format_duration(g.all),
                format_duration(g.critical)
            )
        };
        Some((
            g.all,
            g.critical,
            format!("the sim plays the kubelet ({how})"),
        ))
    }

    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        let restored = self.cluster.restore_node(node).await;
        if restored.is_ok() {
            self.machines.set_down(node, false);
            self.power.set(node, revert);
        }
        restored.map_err(|source| Error::Sim {
            fault: revert.name(),
            node: node.to_owned(),
            source: Box::new(source),
        })
    }
}
