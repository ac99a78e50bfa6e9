//! The timeline chart of real runs, as a reader meets it: rows in scenario
//! order, cleanup in one row, a node's lane that ends where the Node was
//! deleted, a drain's refusals and cordons, labels that wrap instead of
//! being cut, and short phases still wide on a run of several minutes.
//! The charts are snapshots too (`tests/snapshots/timeline_svg__*.svg.snap`;
//! regenerate with `INSTA_UPDATE=always cargo test --test timeline_svg` and
//! look at them in a browser before committing).
//!
//! Fixtures: `kubelet-stop-long.json` is seed 001 on the sim with upstream
//! default timings (a 7.5-minute run: the Node deleted while Unknown, then
//! registered again); `drain-pdb.json` is seed 004 (two nodes drained
//! under a PodDisruptionBudget) with each eviction and refusal recorded.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::Path;

use nodefall::record::RunResult;
use nodefall::report::lanes::{self, Lanes, Row, Tone};
use nodefall::report::{self, svg};
use nodefall::timeline::{Change, ObjectRef};

const LONG: &str = "tests/fixtures/results/kubelet-stop-long.json";
const DRAIN: &str = "tests/fixtures/results/drain-pdb.json";
const SEEDS: [&str; 3] = [
    LONG,
    DRAIN,
    "tests/fixtures/results/statefulset-volumes.json",
];

fn fixture(path: &str) -> RunResult {
    report::read_result(&nodefall::disk::Disk, Path::new(path)).unwrap()
}

fn section<'a>(l: &'a Lanes, name: &str) -> &'a [Row] {
    &l.sections
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} section: {l:?}"))
        .rows
}

/// `#12 (x) ...` -> 12.
fn index(label: &str) -> Option<usize> {
    label
        .strip_prefix('#')?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn rows_follow_the_scenario_and_cleanup_is_one_row() {
    for path in SEEDS {
        let r = fixture(path);
        let l = lanes::build(&r);
        let steps = section(&l, "Steps");
        assert!(steps[0].label.starts_with("setup"), "{path}: {steps:?}");
        let numbers: Vec<usize> = steps.iter().filter_map(|s| index(&s.label)).collect();
        assert!(
            numbers.windows(2).all(|w| w[0] <= w[1]),
            "{path}: rows out of scenario order: {numbers:?}"
        );
        let cleanup: Vec<&Row> = steps
            .iter()
            .filter(|s| s.label.starts_with("cleanup"))
            .collect();
        assert_eq!(cleanup.len(), 1, "{path}: {cleanup:?}");
        assert_eq!(
            steps.last().unwrap().label,
            cleanup[0].label,
            "{path}: cleanup comes last"
        );
        // one segment per cleanup step, each with its description
        assert_eq!(cleanup[0].segments.len(), r.cleanup.len(), "{path}");
        for (seg, step) in cleanup[0].segments.iter().zip(&r.cleanup) {
            assert!(seg.title.starts_with(&step.description), "{seg:?}");
        }
    }
}

#[test]
fn a_deleted_node_lane_ends_where_the_node_was_deleted() {
    let r = fixture(LONG);
    let node = &r.targets["target"];
    let at = |want: &Change| {
        r.transitions
            .iter()
            .find(|t| {
                matches!(&t.object, ObjectRef::Node { name } if name == node) && &t.change == want
            })
            .unwrap()
            .at
    };
    let deleted = at(&Change::NodeDeleted);
    let added_again = r
        .transitions
        .iter()
        .filter(|t| {
            matches!(&t.object, ObjectRef::Node { name } if name == node)
                && t.change == Change::NodeAdded
        })
        .map(|t| t.at)
        .max()
        .unwrap();
    assert!(added_again > deleted);
    let l = lanes::build(&r);
    let lane = section(&l, "Nodes")
        .iter()
        .find(|row| row.label == *node)
        .unwrap();
    let tones: Vec<Tone> = lane.segments.iter().map(|s| s.tone).collect();
    assert_eq!(
        tones,
        [Tone::Ok, Tone::Bad, Tone::Neutral, Tone::Ok],
        "Ready, Unknown, deleted, Ready: {lane:?}"
    );
    let (unknown, gone) = (&lane.segments[1], &lane.segments[2]);
    assert_eq!(unknown.to, deleted, "Unknown ends at the deletion");
    assert_eq!((gone.from, gone.to), (deleted, added_again));
    assert!(gone.title.contains("deleted"), "{gone:?}");
}

#[test]
fn a_drain_shows_its_refusals_evictions_and_cordons() {
    let r = fixture(DRAIN);
    let drain = r
        .steps
        .iter()
        .find(|s| s.description.starts_with("drain"))
        .unwrap();
    let refused = drain.evictions.iter().filter(|e| e.refused).count();
    assert!(refused >= 1, "the fixture has a 429: {drain:?}");
    let l = lanes::build(&r);
    let steps = section(&l, "Steps");
    let at = steps
        .iter()
        .position(|s| s.label.starts_with(&drain.label))
        .unwrap();
    let (evicted, refusals) = (&steps[at + 1], &steps[at + 2]);
    assert_eq!(
        evicted.label,
        format!(
            "{} pods evicted: {}",
            drain.label,
            drain.evictions.len() - refused
        )
    );
    assert_eq!(
        refusals.label,
        format!("{} evictions refused (429): {refused}", drain.label)
    );
    assert!(evicted.marks.iter().all(|m| m.tone == Some(Tone::Cordon)));
    assert_eq!(refusals.marks.len(), refused);
    assert!(refusals.marks.iter().all(|m| m.tone == Some(Tone::Fault)));
    for (m, e) in refusals
        .marks
        .iter()
        .zip(drain.evictions.iter().filter(|e| e.refused))
    {
        assert_eq!(m.at, e.at);
        assert!(m.title.ends_with(&e.pod), "{m:?}");
    }
    let cordons: Vec<&Row> = section(&l, "Nodes")
        .iter()
        .filter(|row| row.label.contains("cordoned"))
        .collect();
    assert_eq!(cordons.len(), 2, "both drained nodes: {cordons:?}");
    for c in cordons {
        assert!(c.segments.iter().all(|s| s.tone == Tone::Cordon), "{c:?}");
        // uncordoned by the scenario before it ended
        assert!(c.segments[0].to < r.finished, "{c:?}");
    }
    // a drain is not a failure: no node lane goes NotReady or Unknown
    for row in section(&l, "Nodes") {
        assert!(
            row.segments
                .iter()
                .all(|s| matches!(s.tone, Tone::Ok | Tone::Cordon)),
            "{row:?}"
        );
    }
}

/// The rect whose tooltip starts with `title`, its width.
fn rect_width(svg: &str, title: &str) -> f64 {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .find(|n| {
            n.children()
                .any(|c| c.has_tag_name("title") && c.text().is_some_and(|t| t.starts_with(title)))
        })
        .unwrap_or_else(|| panic!("no rect titled {title:?}"))
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_long_run_keeps_its_short_phases_wide() {
    let r = fixture(LONG);
    let l = lanes::build(&r);
    let svg = svg::timeline::render(&l);
    // 7.5 minutes on 672 px is 1.5 px a second: the 5.5 s between the node
    // being Ready again and the end would be 8 px wide
    let back = section(&l, "Nodes")[0].segments.last().unwrap();
    assert!(back.title.contains("Ready"), "{back:?}");
    let seconds = (back.to - back.from) as f64 / 1000.0;
    let px = rect_width(&svg, &back.title);
    assert!(
        px / seconds >= 8.0,
        "{px} px for {seconds} s at the end of a {} s run",
        r.finished / 1000
    );
    assert!(svg.contains("skipped: nothing began or ended"), "a break");
}

#[test]
fn labels_wrap_instead_of_being_cut() {
    for path in SEEDS {
        let svg = svg::timeline::render(&lanes::build(&fixture(path)));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        for t in doc.descendants().filter(|n| n.has_tag_name("text")) {
            let text: String = t.children().filter_map(|c| c.text()).collect();
            assert!(!text.contains('…'), "{path}: cut label {text:?}");
        }
    }
}

#[test]
fn timeline_snapshots() {
    insta::assert_snapshot!(
        "kubelet-stop-long.svg",
        svg::timeline::render(&lanes::build(&fixture(LONG)))
    );
    insta::assert_snapshot!(
        "drain-pdb.svg",
        svg::timeline::render(&lanes::build(&fixture(DRAIN)))
    );
}
