//! Faults on one node of a simulated cluster, and their reverts: each node's
//! agent (its kwok process, or its place in a shared kwok's managed set) is
//! frozen, killed, stopped, thawed or started again, and the node's kubelet
//! is played where KWOK does not (its first report on return, a graceful
//! shutdown).

use std::time::Duration;

use nix::sys::signal::Signal;

use super::Error;
use super::agents;
use super::binaries::Binaries;
use super::cluster::{SimCluster, unix_ms};
use super::kubelet::{self, Comeback, Shutdown, ShutdownGrace};
use super::process::{self, Proc};
use super::shutdown::{self, Which};
use super::state::{AgentState, SimNode};
use super::teardown::STOP_GRACE;
use crate::testpoint;

/// Posts what `node`'s kubelet reports first on its return `how`, and the
/// times it takes over its pods.
pub(super) async fn report_first(
    client: &kube::Client,
    kubelet: &kubelet::Kubelet,
    node: &str,
    how: Comeback,
) -> Result<(), Error> {
    let now = jiff::Timestamp::now();
    agents::report_return(client, node, &kubelet.first_report(how), now).await?;
    // Its kubelet takes a moment over its pods, too.
    match kubelet.pod_times(how) {
        Some(times) => agents::time_pods(client, node, &times, now).await,
        None => Ok(()),
    }
}

impl SimCluster {
    /// `pause-vm` / `drop-nic`: freezes the node's agent (SIGSTOP), so it
    /// neither renews its lease nor touches its pods. A shared node is taken
    /// out of its shard's managed set instead, with the same effect.
    pub async fn freeze_node(&mut self, node: &str) -> Result<(), Error> {
        // The state is recorded before the act, so a process stopped
        // between the two leaves a record that says where the node was
        // going (see `restore_node`).
        if self.is_shared(node)? {
            self.check_not_stopped(node, "running or frozen")?;
            self.set_agent_state(node, AgentState::Frozen)?;
            testpoint::reached(|| "sim:freeze".to_owned()).await;
            return self.take_out(node, "running or frozen").await;
        }
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Frozen)?;
        self.agent(node)?.signal(Signal::SIGSTOP)?;
        testpoint::reached(|| "sim:freeze".to_owned()).await;
        Ok(())
    }

    /// `pause-vm`: freezes the node as [`freeze_node`] does, remembering
    /// when, since a kubelet resumed after a long pause reports NotReady
    /// first (`kubelet.rs`).
    ///
    /// [`freeze_node`]: SimCluster::freeze_node
    pub async fn pause_node(&mut self, node: &str) -> Result<(), Error> {
        let before = self.node_entry(node)?.paused_at_ms.replace(unix_ms());
        let frozen = self.freeze_node(node).await;
        if frozen.is_err() {
            // Refused (a node not running, say): no pause began.
            self.node_entry(node)?.paused_at_ms = before;
        }
        frozen
    }

    /// `resume-vm` / `restore-nic`: the node comes back. The frozen agent is
    /// replaced by a fresh one rather than thawed with SIGCONT: a thawed
    /// kwok acts on its stale cache and deletes pods by name without a UID
    /// precondition, so it would delete a StatefulSet's replacement pod that
    /// reused the name on another node, which a real kubelet never does. A
    /// shared node goes back into its shard's managed set, whose kwok never
    /// stopped and lists the node's pods afresh.
    pub async fn thaw_node(&mut self, node: &str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state != AgentState::Frozen {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted: "frozen",
            });
        }
        let how = match self.node_entry(node)?.paused_at_ms.take() {
            Some(at) => Comeback::resumed(node, at, unix_ms()),
            None => Comeback::Restarted,
        };
        self.report_return(node, how).await?;
        if self.is_shared(node)? {
            self.bring_back(node).await?;
            return self.set_agent_state(node, AgentState::Running);
        }
        self.agent(node)?.kill_async().await;
        self.forget_agent(node)?;
        // The frozen agent is gone and recorded so; no new one yet.
        testpoint::reached(|| "sim:thaw".to_owned()).await;
        self.start_node(node).await
    }

    /// `poweron`: starts the node as [`start_node`] does, after which it
    /// reports Ready only once it has booted (`sim up --node-boot`).
    ///
    /// [`start_node`]: SimCluster::start_node
    pub async fn boot_node(&mut self, node: &str) -> Result<(), Error> {
        self.check_stopped(node)?;
        self.report_return(node, Comeback::Booted).await?;
        self.start_node(node).await
    }

    /// Posts what the node's kubelet reports first on its return `how`
    /// (`kubelet.rs`): Ready=False when it says so, and when KWOK may report
    /// it Ready. A Node that no longer exists is registered afresh instead.
    async fn report_return(&mut self, node: &str, how: Comeback) -> Result<(), Error> {
        let client = self.client().await?;
        report_first(&client, &self.kubelet(), node, how).await
    }

    /// The nodes' kubelets, as the cluster plays them.
    pub(super) fn kubelet(&self) -> kubelet::Kubelet {
        kubelet::Kubelet {
            status_update: self.state.profile.node_status_update_frequency,
            boot: Duration::from_millis(self.state.node_boot_ms),
            pleg_threshold: Duration::from_millis(self.state.pleg_threshold_ms),
        }
    }

    /// `poweroff`: kills the agent at once (SIGKILL), like pulling the plug.
    pub async fn kill_node(&mut self, node: &str) -> Result<(), Error> {
        if self.is_shared(node)? {
            self.take_out(node, "running or frozen").await?;
            return self.set_agent_state(node, AgentState::Stopped);
        }
        // Recorded before the wait, so a run cut short in it leaves a state
        // that says where the node was going (see `restore_node`).
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Stopped)?;
        self.agent(node)?.kill_async().await;
        testpoint::reached(|| "sim:kill".to_owned()).await;
        self.forget_agent(node)
    }

    /// `shutdown`: logind announces a shutdown to the node's kubelet. With
    /// graceful node shutdown on (`sim up --shutdown-grace-period`) it
    /// reports the node NotReady, stops its pods, the critical ones last,
    /// and lets the machine power off (`kubelet.rs`, `shutdown.rs`); with it
    /// off the node goes down as on `poweroff`. The agent goes at once: from
    /// then on nodefall plays the kubelet's last acts.
    pub async fn shutdown_node(&mut self, node: &str) -> Result<(), Error> {
        let began = tokio::time::Instant::now();
        let now = jiff::Timestamp::now();
        self.kill_node(node).await?;
        let Shutdown::Graceful { pods, critical } = self.shutdown_grace().shutdown() else {
            return Ok(());
        };
        let client = self.client().await?;
        shutdown::report_shutting_down(&client, node, now).await?;
        tokio::time::sleep_until(began + pods).await;
        shutdown::stop_pods(&client, node, Which::Others, jiff::Timestamp::now()).await?;
        tokio::time::sleep_until(began + critical).await;
        shutdown::stop_pods(&client, node, Which::Critical, jiff::Timestamp::now()).await?;
        Ok(())
    }

    /// The kubelets' graceful node shutdown settings.
    pub fn shutdown_grace(&self) -> ShutdownGrace {
        ShutdownGrace {
            all: Duration::from_millis(self.state.shutdown_grace_ms),
            critical: Duration::from_millis(self.state.shutdown_grace_critical_ms),
        }
    }

    /// `stop-kubelet`: stops the agent cleanly (SIGTERM).
    pub async fn stop_node(&mut self, node: &str) -> Result<(), Error> {
        if self.is_shared(node)? {
            self.take_out(node, "running or frozen").await?;
            return self.set_agent_state(node, AgentState::Stopped);
        }
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Stopped)?;
        testpoint::reached(|| "sim:stop".to_owned()).await;
        self.agent(node)?.stop_async(STOP_GRACE).await;
        self.forget_agent(node)
    }

    /// The revert of every node fault: brings the node's agent back to
    /// running from whatever state it was left in, including one an inject
    /// or a revert cut short by a signal left half-way (a frozen agent
    /// killed but no new one started yet, an agent recorded frozen that is
    /// gone, a fresh one already running). Says what it found.
    pub async fn restore_node(&mut self, node: &str) -> Result<String, Error> {
        self.node_entry(node)?.paused_at_ms = None;
        let spec = self.node_state(node)?.clone();
        if spec.shard.is_some() {
            // Putting the shard label back is the same act from any state.
            self.bring_back(node).await?;
            self.set_agent_state(node, AgentState::Running)?;
            return Ok(format!("found it {}", spec.agent_state));
        }
        let found = match &spec.agent {
            None => format!("found it {} with no agent", spec.agent_state),
            Some(record) => {
                let pid = record.pid;
                let alive = self.agent(node)?.is_alive();
                // Stopped by a signal whatever the record says (a freeze cut
                // short before its record was written, or someone's SIGSTOP).
                let stopped = process::is_stopped(record);
                if alive && !stopped && spec.agent_state == AgentState::Running {
                    return Ok(format!("found it running (kwok pid {pid}); nothing to do"));
                }
                // A frozen kwok is replaced, never thawed (see `thaw_node`);
                // one cut short on its way down is finished off.
                self.agent(node)?.kill_async().await;
                testpoint::reached(|| "sim:restore".to_owned()).await;
                let was = match (alive, stopped) {
                    (false, _) => " but gone",
                    (true, true) if spec.agent_state != AgentState::Frozen => " but frozen",
                    _ => "",
                };
                format!("found it {}{was} (kwok pid {pid})", spec.agent_state)
            }
        };
        self.forget_agent(node)?;
        self.start_node(node).await?;
        Ok(format!("{found}; started a new kwok"))
    }

    /// `poweron` / `start-kubelet`: starts a new agent for the node,
    /// registering the Node again first if it was deleted meanwhile (as a
    /// kubelet does on start).
    pub async fn start_node(&mut self, node: &str) -> Result<(), Error> {
        self.check_stopped(node)?;
        if self.is_shared(node)? {
            self.bring_back(node).await?;
            return self.set_agent_state(node, AgentState::Running);
        }
        let client = self.client().await?;
        self.start_agent(&client, node).await?;
        self.save()
    }

    /// A start needs the node's agent stopped.
    pub(super) fn check_stopped(&self, node: &str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state != AgentState::Stopped {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted: "stopped",
            });
        }
        Ok(())
    }

    /// Whether a shard (not its own kwok) plays the node.
    fn is_shared(&self, node: &str) -> Result<bool, Error> {
        Ok(self.node_state(node)?.shard.is_some())
    }

    /// Takes a shared node out of its shard's managed set; its agent must
    /// not be stopped already (as a per-node agent must exist).
    async fn take_out(&mut self, node: &str, wanted: &'static str) -> Result<(), Error> {
        self.check_not_stopped(node, wanted)?;
        let spec = self.node_state(node)?.clone();
        self.check_shard(&spec)?;
        let client = self.client().await?;
        agents::set_managed(&client, &spec, false, self.runs_csi()).await
    }

    /// Whether the cluster runs the CSI driver's attacher (its nodes then
    /// register the driver, as a kubelet does once the node plugin runs).
    pub(super) fn runs_csi(&self) -> bool {
        self.state
            .components
            .iter()
            .any(|c| c.name == super::csi::ATTACHER)
    }

    /// A shared node's fault needs it in its shard's managed set or frozen.
    pub(super) fn check_not_stopped(&self, node: &str, wanted: &'static str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state == AgentState::Stopped {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted,
            });
        }
        Ok(())
    }

    /// Puts a shared node back in its shard's managed set.
    async fn bring_back(&mut self, node: &str) -> Result<(), Error> {
        let spec = self.node_state(node)?.clone();
        self.check_shard(&spec)?;
        let client = self.client().await?;
        agents::set_managed(&client, &spec, true, self.runs_csi()).await
    }

    /// A fault on a shared node needs its shard's kwok running (else a node
    /// put back would stay NotReady with nobody to say why).
    pub(super) fn check_shard(&mut self, node: &SimNode) -> Result<(), Error> {
        let Some(k) = node.shard else { return Ok(()) };
        let name = agents::shard_name(k);
        match self.procs.get_mut(&name) {
            Some(p) => {
                if p.is_alive() {
                    Ok(())
                } else {
                    Err(Error::NotRunning {
                        component: name,
                        pid: p.record.pid,
                    })
                }
            }
            None => Err(Error::io_msg(format!(
                "cluster `{}` records no {name} for node {}",
                self.state.name, node.name
            ))),
        }
    }

    // ----- node agents -----

    /// Registers the node (again, if it was deleted), drops its stale lease
    /// and starts a kwok of its own for it.
    pub(super) async fn start_agent(
        &mut self,
        client: &kube::Client,
        node: &str,
    ) -> Result<(), Error> {
        let spec = self.node_state(node)?.clone();
        agents::register(client, &spec, self.runs_csi()).await?;
        agents::drop_stale_lease(client, node).await?;
        testpoint::reached(|| "sim:start".to_owned()).await;
        let binaries = Binaries::at(&super::binaries::cache_root(), self.state.versions.clone());
        let name = format!("kwok/{node}");
        let args = agents::single_args(&self.layout, &spec, &self.state.profile);
        let proc = Proc::spawn(&name, &binaries.kwok, &args, &self.layout.log(&name))?;
        let record = proc.record.clone();
        self.procs.insert(name, proc);
        let entry = self.node_entry(node)?;
        entry.agent = Some(record);
        entry.agent_state = AgentState::Running;
        self.save()
    }

    /// The node's own kwok process; an error if it has none.
    fn agent(&mut self, node: &str) -> Result<&mut Proc, Error> {
        let state = self.node_state(node)?;
        let Some(record) = &state.agent else {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state: state.agent_state,
                wanted: "running or frozen",
            });
        };
        let name = record.name.clone();
        let record = record.clone();
        Ok(self
            .procs
            .entry(name)
            .or_insert_with(|| Proc::adopt(record)))
    }

    /// Drops the node's (gone) agent from the record: stopped.
    fn forget_agent(&mut self, node: &str) -> Result<(), Error> {
        let entry = self.node_entry(node)?;
        if let Some(record) = entry.agent.take() {
            self.procs.remove(&record.name);
        }
        self.set_agent_state(node, AgentState::Stopped)
    }

    /// Records the agent's state, saved at once.
    fn set_agent_state(&mut self, node: &str, state: AgentState) -> Result<(), Error> {
        self.node_entry(node)?.agent_state = state;
        self.save()
    }
}
