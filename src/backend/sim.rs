//! The `sim` backend: faults on a simulated cluster's node agents (kwok
//! processes). The mapping is documented in `docs/sim-backend.md`.

use super::{Error, NodeFaults};
use crate::scenario::model::FaultKind;
use crate::sim::SimCluster;

/// What the sim cannot do, and why.
pub fn supports(fault: FaultKind) -> Result<(), &'static str> {
    match fault {
        FaultKind::Shutdown => Err(
            "graceful node shutdown needs a real kubelet; run this scenario with --backend kind, \
             libvirt or vagrant (see docs/sim-backend.md)",
        ),
        _ => Ok(()),
    }
}

#[derive(Debug)]
pub struct SimBackend {
    pub cluster: SimCluster,
}

impl NodeFaults for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        let shard = self.cluster.node_state(node).ok().and_then(|n| n.shard);
        if let Some(k) = shard {
            let what = match fault {
                FaultKind::ResumeVm
                | FaultKind::RestoreNic
                | FaultKind::Poweron
                | FaultKind::StartKubelet => format!("back into kwok shard {k}"),
                FaultKind::Shutdown => "unsupported".to_owned(),
                _ => format!("out of kwok shard {k}"),
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
            FaultKind::Shutdown => "unsupported",
        };
        format!("{} {node} ({what})", fault.name())
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let c = &mut self.cluster;
        let result = match fault {
            FaultKind::PauseVm => c.pause_node(node).await,
            FaultKind::DropNic => c.freeze_node(node).await,
            FaultKind::ResumeVm | FaultKind::RestoreNic => c.thaw_node(node).await,
            FaultKind::Poweroff => c.kill_node(node).await,
            FaultKind::StopKubelet => c.stop_node(node).await,
            FaultKind::Poweron => c.boot_node(node).await,
            FaultKind::StartKubelet => c.start_node(node).await,
            FaultKind::Shutdown => {
                return Err(Error::Unsupported {
                    backend: "sim",
                    fault: fault.name(),
                });
            }
        };
        result.map_err(|source| Error::Sim {
            fault: fault.name(),
            node: node.to_owned(),
            source: Box::new(source),
        })
    }

    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        self.cluster
            .restore_node(node)
            .await
            .map_err(|source| Error::Sim {
                fault: revert.name(),
                node: node.to_owned(),
                source: Box::new(source),
            })
    }
}
