//! The zone rules against ZONES-FACTS.md's cases, and the forecast of the
//! scenarios under `scenarios/zones/` on the sim's nine nodes in two zones.

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `nodefall sim up --nodes 9 --zones a,b`: worker-1,3,5,7,9 in a,
/// worker-2,4,6,8 in b.
fn sim_nine() -> Vec<ZoneNode> {
    (1..=9)
        .map(|i| ZoneNode {
            name: format!("worker-{i}"),
            zone: if i % 2 == 1 { "a" } else { "b" }.into(),
            ready: true,
            excluded: false,
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn slots(f: &Forecast) -> Vec<Slot> {
    f.slots.iter().map(|s| s.slot).collect()
}

#[test]
fn the_zone_key_reads_the_beta_labels_first() {
    assert_eq!(zone_of(&labels(&[])), "");
    assert_eq!(zone_of(&labels(&[(ZONE_LABEL, "a")])), "a");
    assert_eq!(
        zone_of(&labels(&[(ZONE_LABEL, "a"), (BETA_ZONE_LABEL, "old")])),
        "old"
    );
    assert_eq!(
        zone_of(&labels(&[(REGION_LABEL, "eu"), (ZONE_LABEL, "a")])),
        "eu/a"
    );
    let n = ZoneNode::of("x", &labels(&[(EXCLUDE_DISRUPTION, "")]), true);
    assert!(n.excluded);
    assert_eq!(zone_name(""), "(no zone)");
}

#[test]
fn zone_states_follow_compute_zone_state() {
    // "more than 2" first: 2 of 3 down is Normal.
    assert_eq!(zone_state(2, 3, 0.55), ZoneState::Normal);
    assert_eq!(zone_state(3, 4, 0.55), ZoneState::PartialDisruption);
    assert_eq!(zone_state(4, 4, 0.55), ZoneState::FullDisruption);
    assert_eq!(zone_state(3, 6, 0.55), ZoneState::Normal);
    // 0.55 as float32 is just above 0.55: 11 of 20 is 0.55 exactly.
    assert_eq!(zone_state(11, 20, 0.55), ZoneState::PartialDisruption);
    assert_eq!(zone_state(0, 0, 0.55), ZoneState::Normal);
    // A kind cluster of one control plane and 3 workers, all workers down.
    assert_eq!(zone_state(3, 4, 0.55), ZoneState::PartialDisruption);
}

#[test]
fn the_pace_follows_the_state_the_size_and_the_rates() {
    let up = TimingProfile::upstream_default();
    let fast = TimingProfile::fast();
    assert_eq!(
        Pace::of(ZoneState::Normal, 3, false, &up),
        Pace::Every(secs(10))
    );
    assert_eq!(
        Pace::of(ZoneState::FullDisruption, 3, false, &up),
        Pace::Every(secs(10))
    );
    assert_eq!(
        Pace::of(ZoneState::PartialDisruption, 50, false, &up),
        Pace::Stopped(Stop::SmallZone)
    );
    assert_eq!(
        Pace::of(ZoneState::PartialDisruption, 51, false, &up),
        Pace::Every(secs(100))
    );
    assert_eq!(
        Pace::of(ZoneState::PartialDisruption, 5, false, &fast),
        Pace::Every(secs(20))
    );
    assert_eq!(
        Pace::of(ZoneState::Normal, 5, true, &fast),
        Pace::Stopped(Stop::AllDark)
    );
    let mut zero = up.clone();
    zero.node_eviction_interval = NEVER;
    assert_eq!(
        Pace::of(ZoneState::Normal, 3, false, &zero),
        Pace::Stopped(Stop::RateZero)
    );
}

/// The five scenarios of `scenarios/zones/` on the fast profile, as
/// measured on the sim (docs/zones.md).
#[test]
fn the_forecast_of_each_zone_scenario() {
    let p = TimingProfile::fast();
    let nodes = sim_nine();
    // 3 of zone b's 4: each only if the tainter takes it before the zone
    // tips (the first at once, the second a token later), none after.
    let f = forecast(&nodes, &set(&["worker-2", "worker-4", "worker-6"]), &p);
    let b = f.zones.iter().find(|z| z.zone == "b").unwrap();
    assert_eq!(
        (b.state, b.pace),
        (ZoneState::PartialDisruption, Pace::Stopped(Stop::SmallZone))
    );
    assert_eq!(
        slots(&f),
        [
            Slot::Maybe(Duration::ZERO),
            Slot::Maybe(secs(10)),
            Slot::Maybe(secs(20))
        ]
    );
    // Its control: 2 of 4 stays Normal, 10 s apart.
    let f = forecast(&nodes, &set(&["worker-2", "worker-4"]), &p);
    assert_eq!(f.zones[1].state, ZoneState::Normal);
    assert_eq!(slots(&f), [Slot::At(Duration::ZERO), Slot::At(secs(10))]);
    // 3 of zone a's 5 (large under fast): the secondary pace.
    let f = forecast(&nodes, &set(&["worker-1", "worker-3", "worker-5"]), &p);
    assert_eq!(f.zones[0].state, ZoneState::PartialDisruption);
    assert_eq!(
        slots(&f),
        [
            Slot::At(Duration::ZERO),
            Slot::At(secs(20)),
            Slot::At(secs(40))
        ]
    );
    // All of zone b while a is healthy: the normal pace.
    let f = forecast(
        &nodes,
        &set(&["worker-2", "worker-4", "worker-6", "worker-8"]),
        &p,
    );
    assert_eq!(f.zones[1].state, ZoneState::FullDisruption);
    assert!(!f.all_dark);
    assert_eq!(slots(&f)[3], Slot::At(secs(30)));
    // Every zone: none stays.
    let all: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let f = forecast(&nodes, &set(&all), &p);
    assert!(f.all_dark);
    assert!(slots(&f).iter().all(|s| *s == Slot::Never(Stop::AllDark)));
    let text = render(&f, &p);
    assert!(text.contains("every zone dark"), "{text}");
}

#[test]
fn excluded_and_already_down_nodes_change_the_counts() {
    let p = TimingProfile::upstream_default();
    let mut nodes = sim_nine();
    // Zone b with one node already down: 2 more tip it (3 of 4).
    nodes[1].ready = false; // worker-2
    let f = forecast(&nodes, &set(&["worker-4", "worker-6"]), &p);
    let b = &f.zones[1];
    assert_eq!((b.down_before, b.state), (1, ZoneState::PartialDisruption));
    assert_eq!(
        slots(&f),
        [Slot::Maybe(Duration::ZERO), Slot::Maybe(secs(10))]
    );
    // The same with worker-8 excluded: 3 counted, 3 down: fully disrupted.
    nodes[7].excluded = true;
    let f = forecast(&nodes, &set(&["worker-4", "worker-6"]), &p);
    assert_eq!(f.zones[1].state, ZoneState::FullDisruption);
    // A cluster with no zone labels and a control plane: kind with 3
    // workers, all down: a small zone, partially disrupted.
    let kind: Vec<ZoneNode> = ["cp", "w1", "w2", "w3"]
        .iter()
        .map(|n| ZoneNode {
            name: (*n).into(),
            zone: String::new(),
            ready: true,
            excluded: false,
        })
        .collect();
    let f = forecast(&kind, &set(&["w1", "w2", "w3"]), &p);
    assert_eq!(f.zones[0].state, ZoneState::PartialDisruption);
    assert_eq!(
        slots(&f),
        [
            Slot::Maybe(Duration::ZERO),
            Slot::Maybe(secs(10)),
            Slot::Maybe(secs(20))
        ]
    );
    // A zone already tipped by nodes down before: the first failed node
    // can only be a race too; a fourth never.
    let mut down_before = kind.clone();
    down_before.push(ZoneNode {
        name: "w4".into(),
        zone: String::new(),
        ready: true,
        excluded: false,
    });
    let four = forecast(&down_before, &set(&["w1", "w2", "w3", "w4"]), &p);
    assert_eq!(four.zones[0].state, ZoneState::PartialDisruption);
    assert_eq!(slots(&four)[3], Slot::Never(Stop::SmallZone));
    let text = render(&f, &p);
    assert!(text.contains("zone (no zone): 3 of 4 nodes fail"), "{text}");
    assert!(text.contains("no more than 50 nodes"), "{text}");
    assert!(text.contains("the first one or two"), "{text}");
    let f = forecast(&kind, &set(&["w1", "w2"]), &p);
    assert_eq!(f.zones[0].state, ZoneState::Normal);
    assert_eq!(slots(&f), [Slot::At(Duration::ZERO), Slot::At(secs(10))]);
}

#[test]
fn a_forecast_round_trips_through_json() {
    let p = TimingProfile::fast();
    let f = forecast(&sim_nine(), &set(&["worker-2", "worker-4", "worker-6"]), &p);
    let json = serde_json::to_string(&f).unwrap();
    let back: Forecast = serde_json::from_str(&json).unwrap();
    assert_eq!(back, f);
}
