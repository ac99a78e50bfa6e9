//! The rows seen on both sides, judged by their own latency (the time since
//! the row before them in the step, or since the step), and the controllers'
//! timers whose window allows a row further apart than the goal: each timer
//! names the mechanism and the figures behind its window.

use super::rows::{Row, RowVerdict, SLACK_MS, secs, span, within};
use crate::profile::TimingProfile;
use crate::timeline::Ms;

/// When kind's kubelets, shutting down gracefully (20 s / 5 s), reported a
/// pod stopped, after the shutdown: the range over five runs of
/// `kind-graceful-shutdown.yaml` (2026-11-25/26: 0.47-2.55 s), and when the
/// sim does (`sim::kubelet`'s `SHUTDOWN_STOP_AFTER`, after its Ready=False).
const SHUTDOWN_STOP_SEEN: (Ms, Ms) = (470, 2_550);
const SHUTDOWN_STOP_SIM: Ms = 1_500;
/// One token of the node lifecycle controller's NoExecute taint queue:
/// `--node-eviction-rate`'s default, 0.1 node/s (neither kind nor the sim
/// sets it).
pub(super) const EVICTION_TOKEN_MS: Ms = 10_000;
/// A kubelet's status manager reconciles its pods' statuses with the API
/// server's on a ticker (`syncPeriod`, 10 s, pkg/kubelet/status/
/// status_manager.go `syncBatch`/`needsReconcile`).
const STATUS_SYNC_MS: Ms = 10_000;

/// Judges each row seen on both sides by its own latency: the time since
/// the row before it in the same step (in kind's order) that both sides saw,
/// or since the step. A transition driven by a timer of its own (a
/// controller's period) then differs on its row alone, instead of moving
/// every row after it.
pub(super) fn judge_gaps(rows: &mut [(usize, Ms, Row)], profile: &TimingProfile) {
    let mut prev: Option<(usize, Ms, Ms)> = None;
    // A node's own last status in the step, on both sides: (step, node, kind, sim).
    let mut status: Option<(usize, String, Ms, Ms)> = None;
    // A node's last Ready change in the step, on both sides.
    let mut readiness: Option<(usize, String, Ms, Ms)> = None;
    for (step, _, r) in rows.iter_mut() {
        let (Some(k), Some(s)) = (r.kind, r.sim) else {
            continue;
        };
        let node = r.what.split_once(": ").map_or("", |(n, _)| n);
        let of_node = |seen: &Option<(usize, String, Ms, Ms)>| match seen {
            Some((st, n, sk, ss)) if st == step && n == node => Some((*sk, *ss)),
            _ => None,
        };
        let (mut posted, ready_change) = (of_node(&status), of_node(&readiness));
        if r.what.starts_with("pods on ") {
            // The pods on a node: its kubelet's status counts for them.
            posted = match &status {
                Some((st, _, sk, ss)) if st == step => Some((*sk, *ss)),
                _ => None,
            };
        }
        if r.what.ends_with(": Ready=False (KubeletNotReady)") {
            status = Some((*step, node.to_owned(), k, s));
        }
        if r.what.contains(": Ready=") {
            readiness = Some((*step, node.to_owned(), k, s));
        }
        let (pk, ps) = match prev {
            Some((p, pk, ps)) if p == *step => (pk, ps),
            _ => (0, 0),
        };
        r.kind_gap = Some(k - pk);
        r.sim_gap = Some(s - ps);
        if r.verdict != RowVerdict::Count {
            // Its own latency, or its time since the step (two transitions
            // of separate chains, e.g. the node's status and its pods', are
            // not each other's cause).
            r.verdict = if within(k - pk, s - ps) || within(k, s) {
                RowVerdict::Within
            } else {
                match timers(&r.what, profile, posted, ready_change)
                    .into_iter()
                    .find(|t| t.holds(k, s, k - pk, s - ps))
                {
                    Some(t) => RowVerdict::Timer { rule: t.rule },
                    None => RowVerdict::Off,
                }
            };
        }
        prev = Some((*step, k, s));
    }
}

/// A transition a controller makes on a timer of its own: when it comes
/// depends on where that timer's period stood at the fault (random, on
/// either cluster: they run the same kube-controller-manager), so two runs
/// differ by up to the period whatever plays the node. Both sides inside the
/// window the rule allows is what can be asked of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Timer {
    rule: String,
    /// The window, since `since`.
    from: Ms,
    to: Ms,
    since: Since,
}

/// What a timer's window counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Since {
    Step,
    RowBefore,
    /// A row of the step at these times after it (kind, sim).
    Row(Ms, Ms),
}

impl Timer {
    fn holds(&self, kind: Ms, sim: Ms, kind_gap: Ms, sim_gap: Ms) -> bool {
        let (k, s) = match self.since {
            Since::Step => (kind, sim),
            Since::RowBefore => (kind_gap, sim_gap),
            Since::Row(at_kind, at_sim) => (kind - at_kind, sim - at_sim),
        };
        let inside = |t: Ms| t >= self.from - SLACK_MS && t <= self.to + SLACK_MS;
        inside(k) && inside(s)
    }
}

/// The timers that may be behind a transition (none known: empty).
/// `posted`: when the node itself last posted a status in the step (a
/// kubelet shutting down gracefully reports Ready=False at once), on each
/// side; `ready_change`: when its Ready condition last changed in the step.
pub(super) fn timers(
    what: &str,
    p: &TimingProfile,
    posted: Option<(Ms, Ms)>,
    ready_change: Option<(Ms, Ms)>,
) -> Vec<Timer> {
    // The transition itself, without which of a group it is.
    let what = what
        .strip_suffix(" (first)")
        .or_else(|| what.strip_suffix(" (last)"))
        .or_else(|| what.rsplit_once(" (#").map(|(w, _)| w))
        .unwrap_or(what);
    let ms = |d: std::time::Duration| Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX);
    let (grace, period, lease) = (
        ms(p.node_monitor_grace_period),
        ms(p.node_monitor_period),
        ms(p.node_lease_duration),
    );
    let (gc, quarantine) = (ms(p.pod_gc_period), ms(p.orphan_quarantine));
    if what.ends_with(": Ready=Unknown (NodeStatusUnknown)") {
        let mut found = vec![Timer {
            rule: format!(
                "the node lifecycle controller: `grace` ({}) after the last lease renewal (every \
                 `lease`/4, {}), seen at its next pass (every `monitorPeriod`, {}): {} after the \
                 step",
                secs(grace),
                secs(lease / 4),
                secs(period),
                span(grace - lease / 4, grace + period)
            ),
            from: grace - lease / 4,
            to: grace + period,
            since: Since::Step,
        }];
        if let Some((k, s)) = posted {
            found.push(Timer {
                rule: format!(
                    "the node lifecycle controller: `grace` ({}) after the node's last status \
                     (its Ready=False above, posted during the step), which it takes at its next \
                     pass and judges at a later one (every `monitorPeriod`, {}): {} after that \
                     status",
                    secs(grace),
                    secs(period),
                    span(grace, grace + 2 * period)
                ),
                from: grace,
                to: grace + 2 * period,
                since: Since::Row(k, s),
            });
        }
        return found;
    }
    let no_execute = ["not-ready", "unreachable"]
        .iter()
        .any(|k| what.ends_with(&format!(" node.kubernetes.io/{k}:NoExecute")));
    if no_execute && what.contains(": taint ") {
        // Counted from the node's Ready change when the step has one.
        let (since, from_what) = match ready_change {
            Some((k, s)) => (Since::Row(k, s), "the node's Ready change"),
            None => (Since::RowBefore, "the row before"),
        };
        let mut found = vec![Timer {
            rule: format!(
                "the node lifecycle controller puts on or takes off a NoExecute taint at its next \
                 pass after the Ready change (every `monitorPeriod`, {}): up to that after \
                 {from_what}",
                secs(period)
            ),
            from: 0,
            to: period,
            since,
        }];
        if what.contains(": taint + ") {
            found.push(Timer {
                rule: format!(
                    "the node lifecycle controller's taint queue, rate-limited to \
                     `--node-eviction-rate` (0.1 node/s, one token every {}): a pass that read \
                     the node from its cache before the Ready change got there spends the token \
                     and drops the node, which waits for the next token: up to {} after \
                     {from_what} (kube-controller-manager v1.35 `doNoExecuteTaintingPass`)",
                    secs(EVICTION_TOKEN_MS),
                    secs(EVICTION_TOKEN_MS)
                ),
                from: 0,
                to: EVICTION_TOKEN_MS,
                since,
            });
        }
        return found;
    }
    let stopped = ["DisruptionTarget", "Ready=False", "phase Succeeded"]
        .iter()
        .any(|c| what.ends_with(&format!(": {c}")));
    if stopped && what.starts_with("pods on ") && posted.is_some() {
        return vec![Timer {
            rule: format!(
                "a kubelet shutting down gracefully stops each pod on its own pod worker and \
                 reports it stopped when that worker next syncs: {} after the shutdown, as \
                 kind's kubelets did over five runs (the sim: {} after its Ready=False)",
                span(SHUTDOWN_STOP_SEEN.0, SHUTDOWN_STOP_SEEN.1),
                secs(SHUTDOWN_STOP_SIM)
            ),
            from: SHUTDOWN_STOP_SEEN.0,
            to: SHUTDOWN_STOP_SEEN.1,
            since: Since::Step,
        }];
    }
    if what.starts_with("pods on ") && what.ends_with(": Ready=True") {
        return vec![Timer {
            rule: format!(
                "a returning kubelet re-reports the pods the node lifecycle controller marked not \
                 Ready when its status manager next reconciles them with the API server (a \
                 ticker, every {}: `syncPeriod`, pkg/kubelet/status/status_manager.go), once its \
                 informer has their Ready=False: up to that after the step (kind, after a resume: \
                 1.2-9.5 s over five runs; the sim: 2.4 s)",
                secs(STATUS_SYNC_MS)
            ),
            from: 0,
            to: STATUS_SYNC_MS,
            since: Since::Step,
        }];
    }
    if what.ends_with(": phase Failed") {
        return vec![
            Timer {
                rule: format!(
                    "pod garbage collection of the Terminating pods of an out-of-service node, at \
                     its next pass (every `podGc`, {}): {} after the step",
                    secs(gc),
                    span(0, gc)
                ),
                from: 0,
                to: gc,
                since: Since::Step,
            },
            Timer {
                rule: format!(
                    "pod garbage collection of a deleted node's pods: after `orphanQuarantine` \
                     ({}), at a pass (every `podGc`, {}): {} after the step",
                    secs(quarantine),
                    secs(gc),
                    span(quarantine, quarantine + 2 * gc)
                ),
                from: quarantine,
                to: quarantine + 2 * gc,
                since: Since::Step,
            },
        ];
    }
    Vec::new()
}
