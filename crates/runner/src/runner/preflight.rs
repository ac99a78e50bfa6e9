//! Preflight, before any fault: every target resolved to a node and its
//! machine (by the backend), every namespace an action names present, none
//! of the objects the scenario applies already in the cluster (the run would
//! change what it did not create, and cleanup could not put it back), and
//! the graceful-shutdown verdict for nodes a `shutdown` fault hits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::ResourceExt as _;
use kube::api::Api;

use super::{Error, Run};
use crate::actions;
use crate::backend::NodeFaults;
use crate::scenario::checked::{Action, StepKind, TargetSelector};
use crate::scenario::model::FaultKind;
use crate::scenario::resolve::{self, NodeLabels};

impl Run<'_> {
    /// Resolves every manifest the run will apply (setup and `apply`
    /// actions) once, into `self.manifests`, and refuses to go on if any
    /// object exists already.
    pub(super) async fn check_objects(&mut self, ns: &str) -> Result<(), Error> {
        let c = &self.plan.scenario;
        let backend = self.plan.backend;
        let actions = c.steps.iter().filter_map(|step| match &step.kind {
            StepKind::Action(Action::Apply(list)) => Some(list),
            _ => None,
        });
        let mut files: Vec<&std::path::Path> = Vec::new();
        for f in c.setup.apply.iter().chain(actions.flatten()) {
            if f.applies_to(backend) && !files.contains(&f.path.as_path()) {
                files.push(&f.path);
            }
        }
        let mut objects: Vec<actions::ManifestObject> = Vec::new();
        let mut existing = Vec::new();
        for path in files {
            let resolved = actions::resolve_manifest(&self.client, path, ns)
                .await
                .map_err(|e| Error::Preflight(crate::errors::chain(&e)))?;
            for o in resolved {
                // The same object in two files (a later `apply` changing
                // it) is checked once, and applied from each file.
                let seen = objects
                    .iter()
                    .any(|k| k.kind == o.kind && k.namespace == o.namespace && k.name == o.name);
                if !seen
                    && actions::existing_uid(&self.client, &o)
                        .await
                        .map_err(|e| Error::Target(crate::errors::chain(&e)))?
                        .is_some()
                {
                    existing.push(format!("{} (from {})", o.describe(), o.file.display()));
                }
                objects.push(o);
            }
        }
        self.check_csi_drivers(&objects).await?;
        if !existing.is_empty() {
            return Err(Error::Preflight(format!(
                "the scenario applies objects that already exist: {}. nodefall only changes and \
                 deletes what a run creates; delete them first, or give the scenario a namespace \
                 of its own",
                existing.join(", ")
            )));
        }
        self.manifests = objects;
        Ok(())
    }

    /// Every CSI driver the scenario's PersistentVolumes name is registered
    /// on some node (a CSINode lists it; a driver needs no CSIDriver object):
    /// a volume of a driver no kubelet knows never mounts, and its pods would
    /// wait out `waitReady` for nothing.
    async fn check_csi_drivers(&self, objects: &[actions::ManifestObject]) -> Result<(), Error> {
        let named: Vec<(&str, &actions::ManifestObject)> = objects
            .iter()
            .filter_map(|o| o.csi_driver().map(|d| (d, o)))
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        let csinodes: Api<CSINode> = Api::all(self.client.clone());
        let registered: std::collections::BTreeSet<String> = csinodes
            .list(&Default::default())
            .await
            .map_err(|e| Error::Target(format!("listing CSINodes: {}", actions::api_text(&e))))?
            .items
            .into_iter()
            .flat_map(|c| c.spec.drivers.into_iter().map(|d| d.name))
            .collect();
        let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (driver, o) in named {
            if !registered.contains(driver) {
                missing.entry(driver).or_default().push(format!(
                    "{} (from {})",
                    o.describe(),
                    o.file.display()
                ));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let said: Vec<String> = missing
            .iter()
            .map(|(driver, pvs)| format!("{} use the CSI driver {driver}", pvs.join(", ")))
            .collect();
        Err(Error::Preflight(format!(
            "{}, which this cluster does not have (no node's CSINode lists it): their volumes \
             would never mount. nodefall's driver ({}) comes with `nodefall kind up` and with the \
             simulated cluster (where Go could build it); on another cluster, install the driver \
             first",
            said.join("; "),
            "csi.nodefall.dev, scripts/kind/csi/"
        )))
    }

    /// The resolved objects of one manifest file, in document order.
    pub(super) fn manifest_objects(&self, path: &std::path::Path) -> Vec<actions::ManifestObject> {
        self.manifests
            .iter()
            .filter(|o| o.file == path)
            .cloned()
            .collect()
    }

    /// Resolves every target to a node before anything is injected;
    /// returns the cluster's nodes as listed for it.
    pub(super) async fn resolve_targets(&mut self) -> Result<Vec<Node>, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let nodes = actions::list_paged(&api, |mut n: Node| {
            n.metadata.managed_fields = None;
            Some(n)
        })
        .await
        .map_err(|source| Error::Target(format!("listing nodes: {source}")))?;
        // Read pods from the API, not the recorder: right after setup the
        // watch may not have delivered the last pods yet. Only what
        // `mostPods` needs of each (its node and labels), only if a target
        // uses it.
        let most_pods = self
            .plan
            .scenario
            .targets
            .iter()
            .any(|t| matches!(t.selector, TargetSelector::MostPods(_)));
        let pods = if most_pods {
            let api: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(self.client.clone(), &self.plan.scenario.namespace);
            actions::list_paged(&api, |p: k8s_openapi::api::core::v1::Pod| {
                let node = p.spec.and_then(|s| s.node_name)?;
                p.metadata
                    .deletion_timestamp
                    .is_none()
                    .then(|| (node, p.metadata.labels.unwrap_or_default()))
            })
            .await
            .map_err(|source| Error::Target(format!("listing pods: {source}")))?
        } else {
            Vec::new()
        };
        let labelled: Vec<NodeLabels> =
            nodes.iter().map(crate::discover::nodes::labelled).collect();
        let resolved = resolve::resolve(&self.plan.scenario.targets, &labelled, &pods)
            .map_err(Error::Preflight)?;
        for line in &resolved.lines {
            self.progress.log(line);
        }
        self.targets.extend(resolved.targets);
        self.sets.extend(resolved.sets);
        Ok(nodes)
    }

    /// The backend finds each target node's machine and checks it is that
    /// node's (a libvirt domain by name or UUID, its systemUUID), before
    /// any fault: a missing or mismatched machine is bad input.
    pub(super) async fn resolve_machines<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        nodes: &[Node],
    ) -> Result<(), Error> {
        let mut planned: BTreeMap<String, Vec<FaultKind>> = BTreeMap::new();
        for step in &self.plan.scenario.steps {
            if let StepKind::Fault { fault, node } = &step.kind {
                for name in self.nodes_of(node)? {
                    let faults = planned.entry(name).or_default();
                    faults.push(*fault);
                    faults.extend(fault.revert());
                }
            }
        }
        for (name, faults) in planned {
            let node = nodes
                .iter()
                .find(|n| n.name_any() == name)
                .ok_or_else(|| Error::Target(format!("node {name} was not listed")))?;
            match backend.resolve(node, &faults).await {
                Ok(what) if what.is_empty() => {}
                Ok(what) => self.progress.log(&format!("{}: {what}", backend.name())),
                Err(e) if e.invalid_input() => return Err(Error::Preflight(e.to_string())),
                Err(e) => return Err(Error::Fault(Box::new(e))),
            }
        }
        Ok(())
    }

    /// The graceful-shutdown preflight (docs/graceful-shutdown.md): for every
    /// node a `shutdown` fault hits, its kubelet's configuration through the
    /// API server and, through the backend's shell on the node (SSH, `docker
    /// exec`), logind's inhibitor locks and InhibitDelayMaxSec; then the
    /// verdict. Never fails the run: a fact that cannot be read makes the
    /// verdict unknown, with the reason.
    pub(super) async fn graceful_shutdown_preflight<B: NodeFaults>(&mut self, backend: &B) {
        use crate::gns::{self, logind};
        use crate::verdict::graceful;
        let nodes: Vec<(String, String)> = graceful::targets_to_check(&self.plan.scenario)
            .into_iter()
            .flat_map(|t| {
                let nodes = self.nodes_of(&t).unwrap_or_default();
                nodes.into_iter().map(move |n| (t.clone(), n))
            })
            .collect();
        for (target, node) in nodes {
            if let Some(r) = self.gns.iter_mut().find(|r| r.node == node) {
                r.targets.push(target);
                continue;
            }
            if let Some((all, critical, source)) = backend.played_shutdown_grace(&node) {
                let report = graceful::played_report(
                    node.clone(),
                    target,
                    self.now(),
                    all,
                    critical,
                    &source,
                );
                self.progress
                    .log(&format!("node {node}: {}", report.verdict.summary()));
                self.gns.push(report);
                continue;
            }
            let config = gns::read_config(&self.strict, &node, gns::CONFIGZ_TIMEOUT).await;
            let inhibitors = backend.shell(&node, logind::INHIBITORS_COMMAND).await;
            let delay = backend.shell(&node, logind::INHIBIT_DELAY_COMMAND).await;
            let (inhibitors, delay) = match (inhibitors, delay) {
                (Some((via, i)), Some((_, d))) => (
                    crate::record::graceful::logind::inhibitors_from(
                        i.as_deref().map_err(String::as_str),
                        &format!("{via}: systemd-inhibit --list"),
                    ),
                    crate::record::graceful::logind::inhibit_delay_from(
                        d.as_deref().map_err(String::as_str),
                        &format!("{via}: InhibitDelayMaxUSec"),
                    ),
                ),
                _ => {
                    let why = format!(
                        "the {} backend has no shell on the node (give --ssh-* flags where it does)",
                        backend.name()
                    );
                    (
                        gns::Fact::not_collected(why.clone()),
                        gns::Fact::not_collected(why),
                    )
                }
            };
            let report = graceful::node_report(
                node.clone(),
                vec![target],
                self.now(),
                config,
                inhibitors,
                delay,
            );
            self.progress
                .log(&format!("node {node}: {}", report.verdict.summary()));
            self.gns.push(report);
        }
    }

    /// A drain that would leave no schedulable node strands every pod it
    /// evicts (and a PodDisruptionBudget then refuses the rest until the
    /// timeout): refused before anything is cordoned, with what to do.
    pub(super) fn check_drains(&self, nodes: &[Node]) -> Result<(), Error> {
        let schedulable: Vec<String> = nodes
            .iter()
            .filter(|n| schedulable(n))
            .map(|n| n.name_any())
            .collect();
        let mut cordoned: Vec<String> = Vec::new();
        for step in &self.plan.scenario.steps {
            let StepKind::Action(action) = &step.kind else {
                continue;
            };
            match action {
                Action::Cordon { node } => cordoned.push(self.node(node)?),
                Action::Uncordon { node } => {
                    let node = self.node(node)?;
                    cordoned.retain(|c| *c != node);
                }
                Action::Drain(drain) => {
                    let mut drained = Vec::new();
                    for target in &drain.nodes {
                        drained.push(self.node(target)?);
                    }
                    cordoned.extend(drained.iter().cloned());
                    if let Some(why) = strands(&schedulable, &cordoned, &drained) {
                        return Err(Error::Preflight(format!("step {}: {why}", step.label())));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Namespaces that actions name must exist before any fault.
    pub(super) async fn check_namespaces(&self) -> Result<(), Error> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        for step in &self.plan.scenario.steps {
            if let StepKind::Action(Action::DeleteNamespace { name }) = &step.kind {
                let found = api.get_opt(name).await.map_err(|source| {
                    let source = actions::ApiError::from(source);
                    Error::Target(format!("reading namespace {name}: {source}"))
                })?;
                if found.is_none() {
                    return Err(Error::Preflight(format!(
                        "step {} deletes namespace `{name}`, which does not exist (and setup does not create it)",
                        step.label()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A node the scheduler may place an ordinary pod on: not cordoned, and no
/// taint that keeps pods off (the control plane's `NoSchedule`, a NotReady
/// node's `NoExecute`).
fn schedulable(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    !spec.and_then(|s| s.unschedulable).unwrap_or(false)
        && !spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.effect != "PreferNoSchedule"))
}

/// Why draining `drained` (with `cordoned`, which includes it, off limits)
/// leaves no schedulable node, if it does.
fn strands(schedulable: &[String], cordoned: &[String], drained: &[String]) -> Option<String> {
    if schedulable.iter().any(|n| !cordoned.contains(n)) {
        return None;
    }
    let now = if schedulable.is_empty() {
        "none".to_owned()
    } else {
        schedulable.join(", ")
    };
    Some(format!(
        "draining {} leaves no schedulable node for the evicted pods (schedulable before the \
         run: {now}); give the cluster one more schedulable node (for a kind cluster: `nodefall \
         kind up --workers {}`) or drain fewer nodes",
        drained.join(", "),
        schedulable.len() + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};

    fn node(name: &str, unschedulable: bool, taint: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(NodeSpec {
            unschedulable: Some(unschedulable),
            taints: taint.map(|effect| {
                vec![Taint {
                    key: "k".into(),
                    effect: effect.into(),
                    ..Taint::default()
                }]
            }),
            ..NodeSpec::default()
        });
        n
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn schedulable_means_uncordoned_and_untainted_for_ordinary_pods() {
        assert!(schedulable(&node("w", false, None)));
        assert!(schedulable(&node("w", false, Some("PreferNoSchedule"))));
        assert!(!schedulable(&node("cp", false, Some("NoSchedule"))));
        assert!(!schedulable(&node("w", false, Some("NoExecute"))));
        assert!(!schedulable(&node("w", true, None)));
    }

    #[test]
    fn a_drain_that_leaves_a_node_passes_and_one_that_leaves_none_says_what_to_do() {
        let two = names(&["w1", "w2"]);
        assert_eq!(strands(&two, &names(&["w1"]), &names(&["w1"])), None);
        let why = strands(&two, &two, &two).unwrap();
        assert!(
            why.contains("draining w1, w2 leaves no schedulable node"),
            "{why}"
        );
        assert!(why.contains("before the run: w1, w2"), "{why}");
        assert!(why.contains("--workers 3"), "{why}");
        let three = names(&["w1", "w2", "w3"]);
        assert_eq!(strands(&three, &two, &two), None);
        // An earlier cordon counts.
        assert!(strands(&three, &three, &names(&["w3"])).is_some());
        assert!(
            strands(&[], &[], &names(&["w1"]))
                .unwrap()
                .contains("run: none")
        );
    }
}
