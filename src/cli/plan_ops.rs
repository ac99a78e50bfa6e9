//! What `nodefall plan` prints after the timeline: the exact commands or
//! calls each fault makes on the chosen backend, resolved as far as can be
//! without touching anything (nothing here runs them).

use super::error::Error;
use super::{InvalidFlag, PlanArgs, machines};
use crate::plan;

/// The exact commands the kind backend runs for each fault (not run here).
pub fn kind_commands(plan: &plan::Plan) -> String {
    let rt = crate::backend::kind::pick_runtime(None);
    let mut out = format!(
        "\nCommands on kind ({rt}; <t> is the node container of target t, resolved at run time):\n"
    );
    let steps = fault_steps(plan);
    let shutdown = |t: &str| {
        steps
            .iter()
            .any(|(_, f, n)| *f == crate::scenario::model::FaultKind::Shutdown && n == t)
    };
    for (label, fault, target) in &steps {
        let node = format!("<{target}>");
        for cmd in crate::backend::kind::fault_commands(
            &rt,
            crate::backend::kind::NETWORK,
            &node,
            "<address before the fault>",
            shutdown(target).then_some("<its policy before the shutdown>"),
            *fault,
        ) {
            out.push_str(&format!("  {label:<12} {cmd}\n"));
        }
    }
    out
}

/// Every fault the plan injects, in order, cleanup's reverts last: (label,
/// fault, target).
fn fault_steps(plan: &plan::Plan) -> Vec<(String, crate::scenario::model::FaultKind, String)> {
    use crate::scenario::checked::StepKind;
    let faults = plan.scenario.steps.iter().filter_map(|s| match &s.kind {
        StepKind::Fault { fault, node } => Some((s.label(), *fault, node.clone())),
        _ => None,
    });
    let restores = plan
        .restores
        .iter()
        .map(|r| ("cleanup".to_owned(), r.fault, r.node.clone()));
    faults.chain(restores).collect()
}

/// The node a target names literally (`target: {name: k8s-2}`); None for
/// targets resolved at run time.
fn literal_node<'a>(plan: &'a plan::Plan, target: &str) -> Option<&'a str> {
    use crate::scenario::checked::TargetSelector;
    plan.scenario
        .targets
        .iter()
        .find(|t| t.name == target)
        .and_then(|t| match &t.selector {
            TargetSelector::Name(n) => Some(n.as_str()),
            _ => None,
        })
}

/// The command backend's lines for each fault: substituted where the
/// target names its node literally and the value needs only the node's
/// name, `<value of node>` for what only the Node object tells (not run).
pub fn command_lines(plan: &plan::Plan, args: &machines::CommandArgs) -> Result<String, Error> {
    let faults: Vec<_> = fault_steps(plan).iter().map(|(_, f, _)| *f).collect();
    let c = args.load(&plan.scenario, &faults)?;
    for w in &c.warnings {
        tracing::warn!("{w}");
    }
    let mut out = format!(
        "\nCommands of the command backend ({}; <v of t> is a value of target t's Node, read at \
         preflight; each revert is journaled, substituted, before its fault runs):\n",
        c.source
    );
    // A revert undoes the fault last injected on its target (poweron after
    // shutdown runs shutdown's revert).
    let mut last = std::collections::BTreeMap::new();
    for (label, fault, target) in fault_steps(plan) {
        let undoing = match fault.revert() {
            Some(_) => {
                last.insert(target.clone(), fault);
                None
            }
            None => last.get(&target).copied(),
        };
        let node = literal_node(plan, &target);
        for line in crate::backend::command::preview(&c.spec, node, &target, fault, undoing) {
            out.push_str(&format!("  {label:<12} {:<13} {line}\n", fault.name()));
        }
    }
    Ok(out)
}

/// The libvirt calls of each fault, with the `virsh` line that does the
/// same by hand (not run here; domains are resolved at run time).
pub fn libvirt_operations(
    plan: &plan::Plan,
    args: &machines::MachineArgs,
) -> Result<String, Error> {
    use crate::backend::libvirt;
    use crate::backend::ssh::SshTarget;
    let scenario = &plan.scenario.libvirt;
    let settings = args
        .libvirt_settings(scenario)
        .map_err(|e| Error::from(InvalidFlag(e)))?;
    let uri = args.uri(scenario);
    let mut out = format!(
        "\nOperations on libvirt ({uri}; <t> is the domain of target t's node: {}; \
         checked against the node's systemUUID at preflight):\n",
        match (&settings.prefix, settings.domains.is_empty()) {
            (Some(p), _) => format!("`{p}<node>` unless --domain maps it"),
            (None, true) => "the domain named like the node".to_owned(),
            (None, false) => "as --domain maps it, else named like the node".to_owned(),
        }
    );
    for (label, fault, target) in fault_steps(plan) {
        let ssh = SshTarget::at(format!("<address of {target}>"), None);
        for op in libvirt::operations(
            &uri,
            &format!("<{target}>"),
            "<MAC of its node NIC>",
            &ssh,
            &settings,
            fault,
        ) {
            out.push_str(&format!("  {label:<12} {op}\n"));
        }
    }
    Ok(out)
}

/// The VBoxManage lines (or libvirt calls) of each fault on the Vagrant
/// project's machines: with each machine's UUID from `.vagrant` for
/// targets named literally, placeholders for the others.
pub fn vagrant_operations(plan: &plan::Plan, args: &PlanArgs) -> Result<String, Error> {
    use crate::backend::libvirt;
    use crate::backend::ssh::SshTarget;
    use crate::backend::vagrant::{project::Provider, vbox};

    let m = &args.machines;
    let settings = m
        .vagrant_settings(&plan.scenario.libvirt)
        .map_err(|e| Error::from(InvalidFlag(e)))?;
    let project = m.vagrant.project(&args.file);
    let mut out = match &project {
        Ok(p) => format!(
            "\nCommands on the Vagrant machines of {} (read from {}; SSH as `vagrant ssh-config` \
             says, read at preflight; each machine is checked at preflight):\n",
            p.root.display(),
            p.data.join("machines").display()
        ),
        Err(e) => format!(
            "\nCommands on Vagrant machines ({e}; shown with placeholders, as VirtualBox \
             machines):\n"
        ),
    };
    let lv = settings.libvirt();
    for (label, fault, target) in fault_steps(plan) {
        let node = literal_node(plan, &target);
        let machine = node
            .map(|n| settings.machine(n).to_owned())
            .unwrap_or_else(|| format!("the machine of {target}"));
        let created = match (&project, &node) {
            (Ok(p), Some(n)) => Some(p.machine(n, &machine)),
            _ => None,
        };
        // A fault done in the guest (the kubelet's) is an SSH line.
        let in_guest = settings.kubelet_line(&machine, None, fault);
        let lines = match (created, in_guest) {
            (Some(Err(e)), _) => vec![format!("<not runnable: {e}>")],
            (_, Some(line)) => vec![line],
            (Some(Ok(c)), None) if c.provider == Provider::Libvirt => {
                let ssh = SshTarget::at(format!("<address of {machine}>"), None);
                libvirt::operations(
                    &settings.libvirt_uri,
                    &c.id,
                    &format!("<MAC of its NIC {}>", settings.nic),
                    &ssh,
                    &lv,
                    fault,
                )
            }
            (Some(Ok(c)), None) => vbox::lines(
                &settings.vboxmanage,
                &c.id,
                settings.nic,
                fault,
                settings.shutdown_timeout_secs,
            ),
            // A placeholder the command line does not quote.
            (None, None) => vbox::lines(
                &settings.vboxmanage,
                "UUID",
                settings.nic,
                fault,
                settings.shutdown_timeout_secs,
            )
            .into_iter()
            .map(|l| l.replace(" UUID", &format!(" <UUID of {machine}>")))
            .collect(),
        };
        for line in lines {
            out.push_str(&format!("  {label:<12} {:<13} {line}\n", fault.name()));
        }
    }
    Ok(out)
}
