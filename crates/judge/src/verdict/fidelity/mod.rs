//! The simulator against real kubelets (pure): the same scenario run on the
//! sim and on kind, each transition's time on both, the difference and a
//! verdict (`nodefall report fidelity`, docs/fidelity.md; the report crate
//! renders it).
//!
//! A run's transitions become *points* ([`points()`]): the target nodes' own
//! transitions (named by role, so `worker-1` on the sim meets
//! `nfscen-worker` on kind), and the pods' and endpoints' grouped by where
//! they were (on a target, elsewhere, a replacement) with the first and the
//! last of each kind. Each point is timed from the fault or action step it
//! followed: both runs take the same steps, but not at the same times (a
//! step waits for the one before). Two points match when their names and
//! steps match, and make a row (`rows`).
//!
//! The rows are then judged in passes, each an allowance that names the
//! mechanism behind it: a transition on either side of a step's start is
//! one row, a pod the node authorizer delayed is what the sim cannot
//! show, and the rows a thawed kubelet's first status makes are one race
//! when the two sides' kubelets came back differently (`races`); each row
//! by its own latency, or by the window of the timer that makes it
//! (`gaps`); the probes' rows by
//! kube-proxy's random routing (`routing`); and the order of a step's
//! rows (`order`).

mod gaps;
mod order;
mod points;
mod races;
mod routing;
mod rows;

use std::collections::HashMap;

pub use points::points;
pub use races::AUTHORIZER_LACK;
pub use rows::{
    Inversion, Point, Row, RowVerdict, SLACK_MS, SLACK_SHARE, ScenarioFidelity, within,
};

use crate::record::{RunResult, RunVerdict};
use crate::timeline::Ms;
use gaps::judge_gaps;
use order::inversions;
use points::anchors;
use races::{
    authorizer_races, excuse_authorizer_races, join_boundary_races, judge_thaw_races, thaw_races,
};
use routing::judge_random_routing;
use rows::row;

/// What a sim lacks whose probes never reached the workload (a run by a
/// build before the sim's service proxy, or a probe of no NodePort).
pub const PROBES_LACK: &str = "containers and kube-proxy: no request reaches a pod KWOK plays, \
                               so the clients' figures exist on kind only";

/// A run with probes none of whose requests succeeded.
fn never_reached(run: &RunResult) -> bool {
    !run.probes.is_empty() && run.probes.iter().all(|p| p.errors == p.requests)
}

/// Compares a kind run and a sim run of one scenario.
pub fn compare(kind: &RunResult, sim: &RunResult) -> ScenarioFidelity {
    // A sim run that never got past its setup has nothing to compare: what
    // the setup waited for is what the sim lacks.
    if sim.t0.is_none() && sim.verdict == RunVerdict::Error {
        let why = sim.error.as_deref().unwrap_or("no error recorded");
        let mut f = cannot_run(
            kind,
            &format!("what the scenario's setup needs (on the sim: {why})"),
        );
        f.sim_verdict = verdict(sim);
        return f;
    }
    let (k, s) = (points(kind), points(sim));
    let key = |p: &Point| (p.step_index, p.step.clone(), p.what.clone());
    let sim_by: HashMap<_, &Point> = s.iter().map(|p| (key(p), p)).collect();
    let kind_by: HashMap<_, &Point> = k.iter().map(|p| (key(p), p)).collect();
    let mut rows: Vec<(usize, Ms, Row)> = Vec::new();
    for p in &k {
        let other = sim_by.get(&key(p)).copied();
        rows.push((p.step_index, p.after, row(Some(p), other)));
    }
    for p in s.iter().filter(|p| !kind_by.contains_key(&key(p))) {
        rows.push((p.step_index, p.after, row(None, Some(p))));
    }
    join_boundary_races(&mut rows, &anchors(sim));
    rows.sort_by_key(|r| (r.0, r.1));
    judge_gaps(&mut rows, &kind.profile);
    excuse_authorizer_races(&mut rows, &authorizer_races(kind), &authorizer_races(sim));
    let (kind_thaws, sim_thaws) = (thaw_races(kind), thaw_races(sim));
    judge_thaw_races(&mut rows, &kind_thaws, &sim_thaws);
    judge_random_routing(&mut rows, kind);
    let mut rows: Vec<Row> = rows.into_iter().map(|(_, _, r)| r).collect();
    if never_reached(sim) && !never_reached(kind) {
        rows.push(Row {
            what: "clients: the HTTP probes' requests and error windows".into(),
            step: "-".into(),
            kind: None,
            sim: None,
            kind_count: kind.probes.len(),
            sim_count: sim.probes.len(),
            kind_gap: None,
            sim_gap: None,
            verdict: RowVerdict::Cannot {
                lacks: PROBES_LACK.into(),
            },
        });
    }
    // A row the thaw race made comes where the race put it on each side.
    let raced: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| matches!(r.verdict, RowVerdict::Race { .. }))
        .map(|r| (r.step.as_str(), r.what.as_str()))
        .collect();
    let inversions = inversions(&k, &s, &kind.profile)
        .into_iter()
        .filter(|i| {
            !raced
                .iter()
                .any(|&(step, what)| step == i.step && (what == i.first || what == i.then))
        })
        .collect();
    ScenarioFidelity {
        scenario: kind.scenario.clone(),
        kind_verdict: verdict(kind),
        sim_verdict: verdict(sim),
        inversions,
        rows,
    }
}

/// A scenario the sim cannot run at all (its setup needs what the sim
/// lacks): one row saying so.
pub fn cannot_run(kind: &RunResult, lacks: &str) -> ScenarioFidelity {
    ScenarioFidelity {
        scenario: kind.scenario.clone(),
        kind_verdict: verdict(kind),
        sim_verdict: "CANNOT RUN".into(),
        rows: vec![Row {
            what: "the whole scenario".into(),
            step: "-".into(),
            kind: None,
            sim: None,
            kind_count: kind.transitions.len(),
            sim_count: 0,
            kind_gap: None,
            sim_gap: None,
            verdict: RowVerdict::Cannot {
                lacks: lacks.to_owned(),
            },
        }],
        inversions: Vec::new(),
    }
}

fn verdict(run: &RunResult) -> String {
    let held = run
        .expectations
        .iter()
        .filter(|e| e.verdict == crate::record::Verdict::Pass)
        .count();
    format!("{:?} {held}/{}", run.verdict, run.expectations.len()).to_uppercase()
}

#[cfg(test)]
mod tests;
