//! What the failed nodes' machines did through the run, by the backend's
//! own account (the witness: `docker inspect` and the container runtime's
//! list inside the node, once a second), and the duplicate windows judged
//! from it: how long a replaced pod's original still ran on its node while
//! its replacement ran elsewhere. Pure: samples in, spans and windows out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::timeline::metrics::PodRecovery;
use crate::timeline::volumes::{self, SharedVolume};
use crate::timeline::{Ms, ObjectRef, Transition, World};

/// The machine's power, as the backend sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Power {
    On,
    /// Frozen: its processes do not run until it is resumed.
    Paused,
    Off,
    /// The backend could not tell.
    Unknown,
}

/// A pod's container running on the machine, from the container runtime's
/// own list (not the API server's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodContainer {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub container: String,
}

/// One look at a machine at `at` (ms since start): its power and, when the
/// backend could list them, the pods' running containers (else why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub at: Ms,
    pub power: Power,
    pub containers: Result<Vec<PodContainer>, String>,
}

/// A span of time, ms since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub from: Ms,
    pub to: Ms,
}

/// Samples where the machine was on but its containers could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blind {
    pub from: Ms,
    pub to: Ms,
    pub why: String,
}

/// A pod whose containers were seen running on the machine: the spans of
/// consecutive samples that listed one of them (first to last such sample).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSeen {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub running: Vec<Span>,
}

/// A failed node's machine through the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineTrack {
    pub node: String,
    /// How the backend looked (`docker exec NODE ctr -n k8s.io tasks ls`).
    pub how: String,
    /// The interval it looked at (ms).
    pub every: Ms,
    pub samples: u32,
    /// First and last look (ms since start).
    pub from: Ms,
    pub to: Ms,
    /// The power at the first look and at each change.
    pub power: Vec<(Ms, Power)>,
    /// Where the machine was on (or unknown) and its containers unseen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blind: Vec<Blind>,
    /// Pods with containers seen running (sandboxes excluded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodSeen>,
}

impl MachineTrack {
    /// The track of `looks` (in time order) at `node`.
    pub fn of(node: &str, how: &str, every: Ms, looks: &[Look]) -> MachineTrack {
        let mut power: Vec<(Ms, Power)> = Vec::new();
        let mut blind: Vec<Blind> = Vec::new();
        let mut pods: BTreeMap<(String, String, String), Vec<Span>> = BTreeMap::new();
        let mut last_at: Option<Ms> = None;
        for look in looks {
            if power.last().is_none_or(|(_, p)| *p != look.power) {
                power.push((look.at, look.power));
            }
            match &look.containers {
                Ok(running) => {
                    let mut uids: Vec<(String, String, String)> = running
                        .iter()
                        .map(|c| (c.namespace.clone(), c.pod.clone(), c.uid.clone()))
                        .collect();
                    uids.dedup();
                    for key in uids {
                        let spans = pods.entry(key).or_default();
                        match spans.last_mut() {
                            // seen at the previous look too: the span goes on
                            Some(s) if Some(s.to) == last_at => s.to = look.at,
                            _ => spans.push(Span {
                                from: look.at,
                                to: look.at,
                            }),
                        }
                    }
                }
                Err(why) if matches!(look.power, Power::On | Power::Unknown) => {
                    match blind.last_mut() {
                        Some(b) if Some(b.to) == last_at && b.why == *why => b.to = look.at,
                        _ => blind.push(Blind {
                            from: look.at,
                            to: look.at,
                            why: why.clone(),
                        }),
                    }
                }
                // paused or off: nothing runs, nothing to list
                Err(_) => {}
            }
            last_at = Some(look.at);
        }
        MachineTrack {
            node: node.to_owned(),
            how: how.to_owned(),
            every,
            samples: u32::try_from(looks.len()).unwrap_or(u32::MAX),
            from: looks.first().map_or(0, |l| l.at),
            to: looks.last().map_or(0, |l| l.at),
            power,
            blind,
            pods: pods
                .into_iter()
                .map(|((namespace, pod, uid), running)| PodSeen {
                    namespace,
                    pod,
                    uid,
                    running,
                })
                .collect(),
        }
    }

    /// The power at `at` (ms since start): the last look at or before it.
    pub fn power_at(&self, at: Ms) -> Option<Power> {
        self.power
            .iter()
            .take_while(|(t, _)| *t <= at)
            .last()
            .map(|(_, p)| *p)
    }

    /// The first look, at or after `from`, that found the machine off
    /// (`from` itself when it was off then).
    pub fn off_from(&self, from: Ms) -> Option<Ms> {
        if self.power_at(from) == Some(Power::Off) {
            return Some(from);
        }
        self.power
            .iter()
            .find(|(t, p)| *t > from && *p == Power::Off)
            .map(|(t, _)| *t)
    }
}

/// How long a replaced pod's original ran on its node while its
/// replacement ran: the two copies at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DuplicateWindow {
    pub pod: String,
    /// The failed node the original was on.
    pub node: String,
    pub replacement: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_node: Option<String>,
    /// When the replacement's containers started by the API server (its
    /// phase Running seen), relative to T0.
    pub replacement_running: Ms,
    /// When the witness first saw the replacement's containers running on
    /// its node, relative to T0 (None: that node was not looked at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_seen: Option<Ms>,
    /// When the original's containers were last seen running on its node,
    /// relative to T0 (None: never after the replacement started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_last_seen: Option<Ms>,
    /// The two copies at once (ms): where the witness saw both, the looks
    /// that saw both running times the interval (each stands for one
    /// interval: within one look of the truth); else from the
    /// replacement's start by the API server to the original's last
    /// sighting. 0 when the original was not seen running after the
    /// replacement started; None when it could not be known (the machine
    /// was on and its containers unseen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Ms>,
    /// Why it could not be known, or what made it 0 (the machine off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The original's volumes attached to the replacement's node after T0:
    /// what both copies had, were they running at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<SharedVolume>,
}

/// The duplicate window of every pod that was on a failed node at T0 and
/// was replaced while the run looked at that node. `t0` is ms since start;
/// windows are relative to it.
pub fn duplicate_windows(
    transitions: &[Transition],
    t0: Ms,
    pods: &[PodRecovery],
    tracks: &[MachineTrack],
) -> Vec<DuplicateWindow> {
    let world = World::at(transitions, t0);
    let mut out = Vec::new();
    for p in pods {
        let (Some(replacement), Some(running)) = (&p.replacement, p.replacement_running) else {
            continue;
        };
        let Some(track) = tracks.iter().find(|t| t.node == p.node) else {
            continue;
        };
        // The original: the pod of that name on the node at T0.
        let original = world
            .pods
            .values()
            .find(|v| v.name == p.pod && v.node.as_deref() == Some(p.node.as_str()))
            .map(|v| v.uid.clone())
            .or_else(|| original_uid(transitions, t0, &p.pod));
        let is_original = |s: &PodSeen| match &original {
            Some(uid) => s.uid == *uid,
            None => s.pod == p.pod,
        };
        let originals: Vec<Span> = track
            .pods
            .iter()
            .filter(|s| is_original(s))
            .flat_map(|s| s.running.iter().copied())
            .collect();
        // The replacement, where the witness looked at its node: same name
        // (a Deployment's: its own), another uid.
        let replacements: Vec<Span> = tracks
            .iter()
            .filter(|t| p.replacement_node.as_deref().is_none_or(|n| n == t.node))
            .flat_map(|t| t.pods.iter())
            .filter(|s| s.pod == *replacement && !is_original(s))
            .flat_map(|s| s.running.iter().copied())
            .filter(|s| s.to >= t0)
            .collect();
        let started = t0 + running;
        let replacement_seen = replacements.iter().map(|s| s.from).min();
        let from = replacement_seen.unwrap_or(started);
        let last = originals
            .iter()
            .filter(|s| s.to >= from)
            .map(|s| s.to)
            .max();
        // Unseen while on: the original may have run then, unless the
        // machine was off since its last sighting and its pod was deleted
        // (a container does not outlive a power-off, and the kubelet
        // starts only pods that exist).
        let gone_for_good = |b: &Blind| {
            let since = originals.iter().map(|s| s.to).max().unwrap_or(t0);
            let off_between = track
                .power
                .iter()
                .any(|(t, p)| *p == Power::Off && *t >= since && *t <= b.from);
            off_between && p.deleted_at.is_some_and(|d| t0 + d <= b.from)
        };
        let blind_after = track
            .blind
            .iter()
            .find(|b| b.to >= from && !gone_for_good(b));
        let (window, note) = match (last, blind_after) {
            (Some(last), _) if replacements.is_empty() => (Some(last - started), None),
            (Some(_), _) => (Some(both(&originals, &replacements, track.every)), None),
            (None, Some(b)) => (
                None,
                Some(format!(
                    "unknown: {} on and its containers unseen from {} ({})",
                    track.node,
                    crate::duration::format_millis(b.from - t0),
                    b.why
                )),
            ),
            (None, None) if from > track.to => (
                None,
                Some(format!(
                    "unknown: the replacement started after the last look at {}",
                    track.node
                )),
            ),
            (None, None) => {
                let off_since = track
                    .power
                    .iter()
                    .filter(|(t, p)| *p == Power::Off && *t <= from)
                    .map(|(t, _)| *t)
                    .max();
                let note = match track.power_at(from) {
                    Some(Power::Off) => Some(format!("{} off", track.node)),
                    _ if off_since.is_some() => {
                        Some(format!("{} off since the original last ran", track.node))
                    }
                    Some(Power::Paused) => Some(format!("{} paused", track.node)),
                    _ => None,
                };
                (Some(0), note)
            }
        };
        let volumes = match (&original, &p.replacement_node) {
            (Some(uid), Some(node)) => volumes::attached_after(transitions, t0, uid, node),
            _ => Vec::new(),
        };
        out.push(DuplicateWindow {
            volumes,
            pod: p.pod.clone(),
            node: p.node.clone(),
            replacement: replacement.clone(),
            replacement_node: p.replacement_node.clone(),
            replacement_running: running,
            replacement_seen: replacement_seen.map(|s| s - t0),
            original_last_seen: last.map(|s| s - t0),
            window,
            note,
        });
    }
    out
}

/// The time both ran, from looks taken together (the witness looks at every
/// node at each tick): each look that saw both stands for one interval.
fn both(a: &[Span], b: &[Span], every: Ms) -> Ms {
    let mut total = 0;
    for x in a {
        for y in b {
            let (from, to) = (x.from.max(y.from), x.to.min(y.to));
            if from <= to {
                total += to - from + every;
            }
        }
    }
    total
}

/// The uid of the last pod named `name` added before `t0`.
fn original_uid(transitions: &[Transition], t0: Ms, name: &str) -> Option<String> {
    transitions
        .iter()
        .filter(|t| t.at <= t0)
        .filter_map(|t| match &t.object {
            ObjectRef::Pod { name: n, uid } if n == name => Some(uid.clone()),
            _ => None,
        })
        .next_back()
}

#[cfg(test)]
#[path = "machines_tests.rs"]
mod tests;
