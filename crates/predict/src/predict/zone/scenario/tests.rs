use super::*;
use crate::files::Memory;
use crate::predict::Fault;
use crate::predict::zone::tests::cluster;
use crate::predict::zone::{Set, forecast};
use crate::profile::TimingProfile;
use crate::scenario::{load::load_str, validate::validate};

fn written(snap: &Snapshot, zone: &str) -> String {
    let set = Set::zone(snap, zone).unwrap();
    let f = forecast(snap, &TimingProfile::fast(), Fault::Pause, &[set]).unwrap();
    write(&f, snap, "shop").unwrap()
}

#[test]
fn a_dark_zone_is_written_with_its_taints_evictions_and_the_fit() {
    let mut snap = cluster();
    // the other zones full (500m each, a pod of 500m on each) but for a2's
    // room for two more: solo's replacement and one of web's
    for n in &mut snap.nodes {
        if !n.name.starts_with('b') {
            n.allocatable.as_mut().unwrap().cpu_milli = 500;
        }
    }
    snap.nodes
        .iter_mut()
        .find(|n| n.name == "a2")
        .unwrap()
        .allocatable
        .as_mut()
        .unwrap()
        .cpu_milli = 1500;
    let text = written(&snap, "b");
    for line in [
        "targets:\n  lost: {nodes: \"kubernetes.io/hostname in (b0,b1,b2)\"}",
        "  - id: fault\n    fault: pause-vm\n    node: lost",
        "expect: {node: lost, taint: \"node.kubernetes.io/unreachable:NoExecute\", within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 3*evictionInterval + 20s, since: fault}",
        "expect: {service: solo, readyEndpoints: 0,",
        "expect: {pods: \"app=web\", on: lost, terminating: true, within: grace - 0.25*lease + 299s .. grace + monitorPeriod + 3*evictionInterval + 323s, since: fault}",
        // 6 web: 4 elsewhere, one of two replacements fits (a2's 1000m left)
        "name: Deployment/web runs 5 of 6 off the set (1 replaced)",
        "expect: {pods: \"app=web\", notOn: lost, ready: 5, count: 6, holdsFor: 10s}",
        "name: StatefulSet/db stuck Terminating",
        "  - fault: resume-vm\n    node: lost",
    ] {
        assert!(text.contains(line), "{line}\nin\n{text}");
    }
    // the text is a scenario nodefall loads, validates and plans, every
    // window reachable after the steps before it
    let checked = load_str("zone-b.yaml", std::path::Path::new("."), &text)
        .and_then(|l| validate(l, &Memory::default()))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    crate::plan::resolve(checked, &TimingProfile::fast(), None)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
}

#[test]
fn one_set_is_written_and_a_small_partial_zone_writes_no_taint_it_cannot_promise() {
    let snap = cluster();
    let f = forecast(
        &snap,
        &TimingProfile::fast(),
        Fault::Pause,
        &Set::zones(&snap),
    )
    .unwrap();
    assert_eq!(write(&f, &snap, "shop"), Err(Error::NotOneSet(3)));
    let mut snap = cluster();
    snap.nodes
        .push(crate::predict::snapshot::Node::in_zone("b3", "b", 4000));
    let set = Set::selected(&snap, "three of b", |l| {
        l.get("kubernetes.io/hostname")
            .is_some_and(|h| ["b0", "b1", "b2"].contains(&h.as_str()))
    })
    .unwrap();
    let f = forecast(&snap, &TimingProfile::fast(), Fault::Pause, &[set]).unwrap();
    let text = write(&f, &snap, "shop").unwrap();
    assert!(
        text.contains("# zone b: PartialDisruption, its taints stopped"),
        "{text}"
    );
    assert!(!text.contains("taint:"), "{text}");
    assert!(!text.contains("terminating: true, within"), "{text}");
}
