//! The chart's Volumes section (pure): one row per PersistentVolume that
//! had a VolumeAttachment during the run, labelled with its claim when
//! known. Its segments are what its attachments were: attached to a node,
//! attaching, detaching, or attached to one node while the attach on
//! another waits (the Multi-Attach case). Its marks are each Multi-Attach
//! event naming it, each detach, each attach on another node than the last,
//! and the out-of-service taint that let it go.

use std::collections::BTreeMap;

use super::format::{rel, secs, t0_rel};
use super::rows::{Mark, Row, Segment, Tone};
use crate::record::RunResult;
use crate::timeline::{Attachments, Change, Ms, ObjectRef, Transition, multi_attach_volume};

/// The rows, in the order their volumes were first seen attached or
/// attaching; none for a run without VolumeAttachments.
pub(super) fn rows(r: &RunResult) -> Vec<Row> {
    let mut ts: Vec<&Transition> = r.transitions.iter().collect();
    ts.sort_by_key(|t| t.at);
    let mut volumes: BTreeMap<&str, Volume> = BTreeMap::new();
    let mut attachments = Attachments::default();
    let mut claims: BTreeMap<&str, &str> = BTreeMap::new();
    for t in ts {
        if let Some(a) = attachments.see(t) {
            // a deletion of an attachment never seen: nothing to carry
            let Some((volume, node)) = a.of else {
                continue;
            };
            let v = volumes
                .entry(volume)
                .or_insert_with(|| Volume::new(volume, t.at));
            v.change(r, t.at, a.name, a.attached.map(|yes| (node, yes)));
            continue;
        }
        match (&t.object, &t.change) {
            (ObjectRef::Pvc { name }, Change::PvcBound { volume }) => {
                claims.insert(volume, name);
            }
            (
                _,
                Change::Event {
                    reason,
                    involved,
                    message,
                    count,
                },
            ) => {
                // none for a volume never seen attached
                if let Some(v) =
                    multi_attach_volume(reason, message).and_then(|pv| volumes.get_mut(pv))
                {
                    v.multi_attach(r, t.at, involved, *count);
                }
            }
            _ => {}
        }
    }
    for d in &r.metrics.volume_detaches {
        let (Some(v), Some(at)) = (
            volumes.get_mut(d.volume.as_str()),
            r.t0_plus(d.out_of_service_at),
        ) else {
            continue;
        };
        let after = d.detach_after.map_or_else(
            || "not detached by the end".to_owned(),
            |ms| format!("detached {} later", secs(ms)),
        );
        v.marks.push(Mark {
            at,
            tone: Some(Tone::Cordon),
            title: format!(
                "out-of-service taint on {} at {}: {} {after}",
                d.node,
                t0_rel(d.out_of_service_at),
                d.volume
            ),
        });
    }
    let mut built: Vec<(Ms, Row)> = volumes
        .into_values()
        .filter_map(|v| {
            let claim = claims.get(v.pv).copied().or_else(|| {
                r.metrics
                    .volume_detaches
                    .iter()
                    .find(|d| d.volume == v.pv)
                    .and_then(|d| d.claim.as_deref())
            });
            let label = match claim {
                Some(c) => format!("{c} (pv {})", v.pv),
                None => format!("pv {}", v.pv),
            };
            let first = v.first;
            v.finish(label, r.finished).map(|row| (first, row))
        })
        .collect();
    // stable: volumes first seen at the same moment stay in name order
    built.sort_by_key(|(first, _)| *first);
    built.into_iter().map(|(_, row)| row).collect()
}

/// One VolumeAttachment of a volume, as last seen.
#[derive(Debug, Clone, Copy)]
struct Attachment<'a> {
    node: &'a str,
    attached: bool,
    /// Seen attached before: not attached since is a detach, not an attach.
    was_attached: bool,
}

/// What a volume was from one change to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    tone: Tone,
    what: String,
}

/// One PersistentVolume's row in the making.
#[derive(Debug)]
struct Volume<'a> {
    pv: &'a str,
    /// When its first attachment was seen.
    first: Ms,
    /// Its attachments by name.
    attachments: BTreeMap<&'a str, Attachment<'a>>,
    /// The node it was last attached to.
    last_node: Option<&'a str>,
    /// The pod a Multi-Attach error said waits for it, until it is attached
    /// anew or to no node: the replacement's attach is not even tried (no
    /// VolumeAttachment) while the old node holds it.
    waiting: Option<String>,
    open: Option<(Ms, State)>,
    stretches: Vec<(Ms, Ms, State)>,
    marks: Vec<Mark>,
}

impl<'a> Volume<'a> {
    fn new(pv: &'a str, first: Ms) -> Volume<'a> {
        Volume {
            pv,
            first,
            attachments: BTreeMap::new(),
            last_node: None,
            waiting: None,
            open: None,
            stretches: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// The attachment `name` seen on `node` with `attached` at `at`, or
    /// deleted (`None`).
    fn change(&mut self, r: &RunResult, at: Ms, name: &'a str, next: Option<(&'a str, bool)>) {
        let before = self.attachments.get(name).copied();
        let was = before.is_some_and(|a| a.attached);
        match next {
            Some((node, attached)) => {
                if was && !attached {
                    self.mark(at, Tone::Neutral, format!("detached from {node}"), r);
                }
                if attached && !was {
                    self.waiting = None;
                    if let Some(prev) = self.last_node.filter(|prev| *prev != node) {
                        let what = format!("attached again, on {node} (was on {prev})");
                        self.mark(at, Tone::Ok, what, r);
                    }
                    self.last_node = Some(node);
                }
                self.attachments.insert(
                    name,
                    Attachment {
                        node,
                        attached,
                        was_attached: attached || before.is_some_and(|a| a.was_attached),
                    },
                );
            }
            None => {
                if let Some(a) = self.attachments.remove(name).filter(|a| a.attached) {
                    let what = format!("detached from {} (attachment deleted)", a.node);
                    self.mark(at, Tone::Neutral, what, r);
                }
            }
        }
        if !self.attachments.values().any(|a| a.attached) {
            self.waiting = None;
        }
        let state = self.state();
        self.enter(at, state);
    }

    /// A Multi-Attach error naming it at `at`, for the pod `involved`.
    fn multi_attach(&mut self, r: &RunResult, at: Ms, involved: &str, count: Option<i32>) {
        let pod = involved
            .strip_prefix("Pod/")
            .map_or_else(|| involved.to_owned(), |p| format!("pod {p}"));
        let repeat = match count {
            Some(n) if n > 1 => format!(" (x{n})"),
            _ => String::new(),
        };
        self.marks.push(Mark {
            at,
            tone: Some(Tone::Bad),
            title: format!(
                "Multi-Attach error at {}: {pod} cannot attach {}{repeat}",
                rel(r, at),
                self.pv
            ),
        });
        if self.attachments.values().any(|a| a.attached) {
            self.waiting = Some(pod);
            let state = self.state();
            self.enter(at, state);
        }
    }

    fn mark(&mut self, at: Ms, tone: Tone, what: String, r: &RunResult) {
        self.marks.push(Mark {
            at,
            tone: Some(tone),
            title: format!("{} {what} at {}", self.pv, rel(r, at)),
        });
    }

    /// What its attachments make it now; `None` with none.
    fn state(&self) -> Option<State> {
        let (mut attached, mut attaching, mut detaching) = (Vec::new(), Vec::new(), Vec::new());
        for a in self.attachments.values() {
            match (a.attached, a.was_attached) {
                (true, _) => attached.push(a.node),
                (false, true) => detaching.push(a.node),
                (false, false) => attaching.push(a.node),
            }
        }
        for nodes in [&mut attached, &mut attaching, &mut detaching] {
            nodes.sort_unstable();
            nodes.dedup();
        }
        attaching.retain(|n| !attached.contains(n));
        detaching.retain(|n| !attached.contains(n));
        let waits = !attached.is_empty() && (!attaching.is_empty() || self.waiting.is_some());
        let mut parts = Vec::new();
        if waits && attaching.is_empty() {
            parts.push(format!(
                "attached to {} while {} waits for it (Multi-Attach)",
                attached.join(" and "),
                self.waiting.as_deref().unwrap_or("a pod")
            ));
        } else if waits {
            parts.push(format!(
                "attached to {} while the attach on {} waits (Multi-Attach)",
                attached.join(" and "),
                attaching.join(" and ")
            ));
        } else if !attached.is_empty() {
            parts.push(format!("attached to {}", attached.join(" and ")));
        }
        if !detaching.is_empty() {
            parts.push(format!("detaching from {}", detaching.join(" and ")));
        }
        if !waits && !attaching.is_empty() {
            parts.push(format!("attaching on {}", attaching.join(" and ")));
        }
        let tone = match (waits, attached.is_empty(), parts.is_empty()) {
            (_, _, true) => return None,
            (true, _, _) => Tone::Bad,
            (false, false, _) => Tone::Ok,
            (false, true, _) => Tone::Fault,
        };
        Some(State {
            tone,
            what: parts.join(", "),
        })
    }

    /// Ends the open state at `at` and begins `next` (`None`: no attachment).
    fn enter(&mut self, at: Ms, next: Option<State>) {
        if self.open.as_ref().map(|(_, s)| s) == next.as_ref() {
            return;
        }
        if let Some((from, state)) = self.open.take() {
            self.close(from, at, state);
        }
        self.open = next.map(|s| (at, s));
    }

    /// Keeps a stretch that lasted, joined to the one before when it is the
    /// same state (a moment's other state between them dropped).
    fn close(&mut self, from: Ms, to: Ms, state: State) {
        if to <= from {
            return;
        }
        if let Some(last) = self.stretches.last_mut()
            && last.1 == from
            && last.2 == state
        {
            last.1 = to;
            return;
        }
        self.stretches.push((from, to, state));
    }

    fn finish(mut self, label: String, end: Ms) -> Option<Row> {
        if let Some((from, state)) = self.open.take() {
            self.close(from, end, state);
        }
        let pv = self.pv;
        let segments: Vec<Segment> = self
            .stretches
            .into_iter()
            .map(|(from, to, s)| Segment {
                from,
                to,
                tone: s.tone,
                title: format!("{pv} {} for {}", s.what, secs(to - from)),
            })
            .collect();
        let mut marks = self.marks;
        marks.sort_by_key(|m| m.at);
        (!segments.is_empty() || !marks.is_empty()).then_some(Row {
            label,
            segments,
            marks,
        })
    }
}

#[cfg(test)]
#[path = "storage_lane_tests.rs"]
mod tests;
