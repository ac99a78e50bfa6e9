//! The node lifecycle controller's zone rules on a real control plane (issue
//! 62): the five scenarios of `scenarios/zones/` on one sim of nine nodes in
//! two zones (`--zones a,b`: zone a worker-1,3,5,7,9, large under the fast
//! profile; zone b worker-2,4,6,8, small), each planned against the cluster
//! (its forecast checked) and run (its expectations, then the zone states
//! and the explanations its record keeps). Each scenario's windows are its
//! negative control: a run without the rule would miss them; and
//! `partial-small-control.yaml` is the small zone's control.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

#[path = "support/cli_run.rs"]
mod cli_run;

use std::path::Path;

use nodefall::disruption::{Stop, ZoneState};
use nodefall::profile::TimingProfile;
use nodefall::record::RunResult;
use nodefall::report::read_result;
use nodefall::sim::{SimCluster, UpOptions};
use nodefall::timeline::zones::ZonesRecord;

const NAME: &str = "zones";

/// `plan FILE --cluster zones`: its stdout.
fn plan(d: &cli_run::Dirs, file: &str) -> String {
    let out = d
        .command(&["plan", file, "--cluster", NAME])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "plan {file}: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// `scenario FILE --cluster zones`, which must pass; its result. On a
/// failure the run's report is printed whole: which window missed, by how
/// much, and each node's taints.
fn run(d: &cli_run::Dirs, file: &str) -> RunResult {
    let name = Path::new(file).file_stem().unwrap().to_str().unwrap();
    let out_dir = d.out.path().join(name);
    let out = d
        .command(&[
            "scenario",
            file,
            "--cluster",
            NAME,
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    // `--out DIR` holds one directory per run.
    let run_dir = std::fs::read_dir(&out_dir)
        .ok()
        .and_then(|mut e| e.next())
        .and_then(Result::ok)
        .map(|e| e.path())
        .unwrap_or_default();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{file}: {}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_result(&nodefall::disk::Disk, &run_dir.join("result.json")).unwrap()
}

fn zones(r: &RunResult) -> &ZonesRecord {
    r.zones.as_ref().expect("a set's run records its zones")
}

/// The states zone `zone` went through, in order.
fn states(z: &ZonesRecord, zone: &str) -> Vec<ZoneState> {
    z.states
        .iter()
        .filter(|c| c.zone == zone)
        .map(|c| c.state)
        .collect()
}

#[test]
fn each_zone_rule_is_forecast_and_seen_on_a_real_control_plane() {
    let d = cli_run::Dirs::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Torn down when dropped, however the test ends.
    let _cluster: SimCluster = rt.block_on(async {
        let mut opts = UpOptions::new(NAME, TimingProfile::fast());
        opts.root = d.state.path().to_owned();
        opts.nodes = 9;
        opts.zones = vec!["a".into(), "b".into()];
        let mut quiet = |_: &str| {};
        SimCluster::up(&opts, &mut quiet).await.unwrap()
    });

    // A small zone partially disrupted: its tainting stops.
    let f = "scenarios/zones/partial-small.yaml";
    let said = plan(&d, f);
    for want in [
        "zone b: 3 of 4 nodes fail (0 down before): PartialDisruption, NoExecute taints stopped (a small zone)",
        "worker-2 (zone b, turn 1): NoExecute taint at once if taken before the zone tips, else never",
        "worker-6 (zone b, turn 3): NoExecute taint +20s if taken before the zone tips, else never",
        "no more than 4 nodes (largeClusterSizeThreshold)",
    ] {
        assert!(said.contains(want), "`{want}` not in:\n{said}");
    }
    let r = run(&d, f);
    let z = zones(&r);
    assert_eq!(
        states(z, "b"),
        [
            ZoneState::Normal,
            ZoneState::PartialDisruption,
            ZoneState::Normal
        ],
        "{z:?}"
    );
    assert!(
        !z.untainted.is_empty() && z.untainted.iter().all(|u| u.rule == Some(Stop::SmallZone)),
        "{z:?}"
    );

    // Its control: two of four, both tainted at the normal pace.
    let f = "scenarios/zones/partial-small-control.yaml";
    let said = plan(&d, f);
    assert!(
        said.contains(
            "zone b: 2 of 4 nodes fail (0 down before): Normal, NoExecute taints one node per 10s"
        ) && said.contains("worker-4 (zone b, turn 2): NoExecute taint +10s"),
        "{said}"
    );
    let r = run(&d, f);
    let z = zones(&r);
    assert_eq!(states(z, "b"), [ZoneState::Normal], "{z:?}");
    assert!(z.untainted.is_empty(), "{z:?}");

    // A large zone partially disrupted: the secondary pace.
    let f = "scenarios/zones/partial-large.yaml";
    let said = plan(&d, f);
    assert!(
        said.contains("zone a: 3 of 5 nodes fail (0 down before): PartialDisruption, NoExecute taints one node per 20s")
            && said.contains("worker-5 (zone a, turn 3): NoExecute taint +40s"),
        "{said}"
    );
    let r = run(&d, f);
    let z = zones(&r);
    assert!(
        states(z, "a").contains(&ZoneState::PartialDisruption),
        "{z:?}"
    );
    assert!(z.untainted.is_empty(), "{z:?}");

    // A whole zone while the other is healthy: the normal pace.
    let f = "scenarios/zones/whole-zone.yaml";
    let said = plan(&d, f);
    assert!(
        said.contains("zone b: 4 of 4 nodes fail (0 down before): FullDisruption, NoExecute taints one node per 10s")
            && said.contains("worker-8 (zone b, turn 4): NoExecute taint +30s"),
        "{said}"
    );
    let r = run(&d, f);
    let z = zones(&r);
    assert!(states(z, "b").contains(&ZoneState::FullDisruption), "{z:?}");
    assert!(z.dark.is_empty() && z.untainted.is_empty(), "{z:?}");

    // Every zone: taints removed, none evicted after; last, as it leaves
    // every node with a fresh grace period.
    let f = "scenarios/zones/every-zone.yaml";
    let said = plan(&d, f);
    assert!(said.contains("every zone dark"), "{said}");
    let r = run(&d, f);
    let z = zones(&r);
    assert!(!z.dark.is_empty(), "{z:?}");
    assert!(
        z.untainted.iter().all(|u| u.rule == Some(Stop::AllDark)),
        "{z:?}"
    );
    // Each node kept was tainted, its taint there when the dark ended;
    // every other taint was gone before.
    for n in &r.metrics.nodes {
        let Some(added) = n.no_execute_taint else {
            assert!(!z.kept_dark.contains(&n.node), "{n:?} {z:?}");
            continue;
        };
        let ends: Vec<i64> = z
            .dark
            .iter()
            .map(|(_, to)| to.unwrap_or(i64::MAX))
            .collect();
        let stayed = ends
            .iter()
            .any(|end| added < *end && n.no_execute_removed.is_none_or(|rm| rm >= *end));
        assert_eq!(stayed, z.kept_dark.contains(&n.node), "{n:?} {z:?}");
    }
    assert!(d.unfinished().is_empty(), "{:?}", d.unfinished());
}
