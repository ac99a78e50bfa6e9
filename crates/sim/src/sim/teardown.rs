//! Stopping a simulated cluster's processes and removing its directory:
//! what [`SimCluster::down`], a dropped cluster and the reaper (`reaper.rs`)
//! share. It works from the cluster's recorded state alone, so the reaper
//! needs no [`SimCluster`].
//!
//! [`SimCluster`]: super::SimCluster
//! [`SimCluster::down`]: super::SimCluster::down

use std::collections::BTreeMap;
use std::time::Duration;

use super::Error;
use super::process::Proc;
use super::state::{Layout, State};

/// How long a component gets to exit on SIGTERM before SIGKILL.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(10);

/// Every process the state records (control-plane components and node
/// agents), adopted, by name. The reaper is not among them.
pub(super) fn adopt_recorded(state: &State) -> BTreeMap<String, Proc> {
    let mut procs = BTreeMap::new();
    for record in state
        .components
        .iter()
        .chain(state.nodes.iter().filter_map(|n| n.agent.as_ref()))
    {
        procs.insert(record.name.clone(), Proc::adopt(record.clone()));
    }
    procs
}

/// Processes another invocation started on this cluster since `procs` was
/// read from its state (a node agent replaced by a run with `--cluster`, or
/// by `recover`): adopted from the state file, so they stop too.
fn adopt_newer(layout: &Layout, procs: &mut BTreeMap<String, Proc>) {
    let Ok(disk) = State::load(&layout.state()) else {
        return;
    };
    for record in disk
        .components
        .iter()
        .chain(disk.nodes.iter().filter_map(|n| n.agent.as_ref()))
    {
        let known = procs
            .values()
            .any(|p| p.record.pid == record.pid && p.record.start_ticks == record.start_ticks);
        if !known {
            let key = format!("{}#{}", record.name, record.pid);
            procs.insert(key, Proc::adopt(record.clone()));
        }
    }
}

/// Stops every process of the cluster: `procs` (with any the state file
/// records that they miss), node agents first, then the control plane in
/// reverse start order, then anything else, then the reaper. Returns the
/// ones that needed SIGKILL.
pub(super) fn stop_all(
    layout: &Layout,
    state: &State,
    procs: &mut BTreeMap<String, Proc>,
    reaper: Option<Proc>,
) -> Vec<String> {
    adopt_newer(layout, procs);
    let mut killed = Vec::new();
    // Node agents first, then the control plane in reverse start order.
    let mut order: Vec<String> = state
        .nodes
        .iter()
        .filter_map(|n| n.agent.as_ref().map(|a| a.name.clone()))
        .collect();
    order.extend(state.components.iter().rev().map(|c| c.name.clone()));
    // Anything else this value holds (e.g. a component that failed to record).
    let extra: Vec<String> = procs
        .keys()
        .filter(|k| !order.contains(k))
        .cloned()
        .collect();
    order.extend(extra);
    for name in order {
        if let Some(mut p) = procs.remove(&name)
            && p.stop(STOP_GRACE)
        {
            killed.push(name);
        }
    }
    // The reaper goes last: if this process dies half-way through, the
    // reaper finishes the job. When the reaper itself runs this, it must
    // not signal its own process group.
    if let Some(mut reaper) = reaper
        && u32::try_from(reaper.record.pid).ok() != Some(std::process::id())
        && reaper.stop(STOP_GRACE)
    {
        killed.push(reaper.record.name.clone());
    }
    killed
}

/// Removes the cluster's directory (after [`stop_all`]).
pub(super) fn remove_dir(layout: &Layout) -> Result<(), Error> {
    std::fs::remove_dir_all(&layout.dir)
        .map_err(|e| Error::io(format!("removing {}", layout.dir.display()), e))
}

/// Takes down the cluster recorded in `state`, as `nodefall sim down` does:
/// stops all its processes, the recorded reaper last, and removes its
/// directory. Returns the processes that needed SIGKILL.
pub(super) fn down(layout: &Layout, state: &State) -> Result<Vec<String>, Error> {
    let mut procs = adopt_recorded(state);
    let reaper = state.reaper.clone().map(Proc::adopt);
    let killed = stop_all(layout, state, &mut procs, reaper);
    remove_dir(layout)?;
    Ok(killed)
}
