//! The volume and event part of the [`World`]: VolumeAttachments, claims and
//! the events seen, folded from their transitions (pure).

use super::{Change, Ms, ObjectRef, Transition, World};

/// One VolumeAttachment as last seen: which PersistentVolume on which node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachmentView {
    pub node: String,
    /// The PersistentVolume's name (`spec.source.persistentVolumeName`).
    pub volume: String,
    /// `status.attached`.
    pub attached: bool,
}

/// One occurrence of an event: its first sight, or a repeat (count bumped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventView {
    /// When nodefall saw it.
    pub at: Ms,
    pub reason: String,
    /// The involved object's kind (`Pod`, `Node`, ...) and name.
    pub kind: String,
    pub name: String,
    pub message: String,
    pub count: Option<i32>,
}

impl World {
    /// Whether the PersistentVolume bound to `claim` is attached (`status.attached`)
    /// to `node` (any node when `None`). A claim not (yet) seen bound has no
    /// attachment anywhere.
    pub fn claim_attached(&self, claim: &str, node: Option<&str>) -> bool {
        let Some(volume) = self.claims.get(claim) else {
            return false;
        };
        self.attachments
            .values()
            .any(|a| a.attached && a.volume == *volume && node.is_none_or(|n| a.node == n))
    }

    /// Forgets the events seen so far: event conditions are about what
    /// happens from a point on (an expectation's anchor), not before.
    pub fn forget_events(&mut self) {
        self.events.clear();
    }
}

/// One VolumeAttachment transition with what it was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachmentChange<'t> {
    pub name: &'t str,
    /// Its PersistentVolume and node; a deletion's carried over from the
    /// attachment's last change (None: never seen before it was deleted).
    pub of: Option<(&'t str, &'t str)>,
    /// `status.attached`; None: deleted.
    pub attached: Option<bool>,
}

/// Reads VolumeAttachment transitions in order: a deleted attachment's
/// transition names only the attachment, so its volume and node are
/// carried over from the last change seen of it.
#[derive(Debug, Default)]
pub struct Attachments<'t> {
    last: std::collections::BTreeMap<&'t str, (&'t str, &'t str)>,
}

impl<'t> Attachments<'t> {
    /// `t` as an attachment change; None when it is about something else.
    pub fn see(&mut self, t: &'t Transition) -> Option<AttachmentChange<'t>> {
        let ObjectRef::VolumeAttachment { name } = &t.object else {
            return None;
        };
        match &t.change {
            Change::VolumeAttachment {
                node,
                volume,
                attached,
            } => {
                self.last.insert(name, (volume, node));
                Some(AttachmentChange {
                    name,
                    of: Some((volume, node)),
                    attached: Some(*attached),
                })
            }
            Change::VolumeAttachmentDeleted => Some(AttachmentChange {
                name,
                of: self.last.get(name.as_str()).copied(),
                attached: None,
            }),
            _ => None,
        }
    }
}

/// The event reason the attach-detach controller reports a failed attach with.
pub const FAILED_ATTACH: &str = "FailedAttachVolume";

/// How a Multi-Attach error's message begins; the PersistentVolume follows,
/// quoted (reconciler.go: `Multi-Attach error for volume "PV" Volume is
/// already exclusively attached to one node and can't be attached to another`).
const MULTI_ATTACH: &str = "Multi-Attach error for volume \"";

/// The PersistentVolume a Multi-Attach error names, from an event of
/// `reason` with `message`; None for any other event.
pub fn multi_attach_volume<'m>(reason: &str, message: &'m str) -> Option<&'m str> {
    if reason != FAILED_ATTACH {
        return None;
    }
    let (_, rest) = message.split_once(MULTI_ATTACH)?;
    rest.split_once('"').map(|(pv, _)| pv)
}

/// Folds a transition of an Event, a VolumeAttachment or a claim.
pub(super) fn apply(world: &mut World, t: &Transition) {
    match (&t.object, &t.change) {
        (
            ObjectRef::VolumeAttachment { name },
            Change::VolumeAttachment {
                node,
                volume,
                attached,
            },
        ) => {
            world.attachments.insert(
                name.clone(),
                AttachmentView {
                    node: node.clone(),
                    volume: volume.clone(),
                    attached: *attached,
                },
            );
        }
        (ObjectRef::VolumeAttachment { name }, Change::VolumeAttachmentDeleted) => {
            world.attachments.remove(name);
        }
        (ObjectRef::Pvc { name }, Change::PvcBound { volume }) => {
            world.claims.insert(name.clone(), volume.clone());
        }
        (ObjectRef::Pvc { name }, Change::PvcDeleted) => {
            world.claims.remove(name);
        }
        (
            ObjectRef::Event { .. },
            Change::Event {
                reason,
                involved,
                message,
                count,
            },
        ) => {
            // `involved` is recorded as `Kind/name`.
            let (kind, name) = involved.split_once('/').unwrap_or(("", involved));
            world.events.push(EventView {
                at: t.at,
                reason: reason.clone(),
                kind: kind.to_owned(),
                name: name.to_owned(),
                message: message.clone(),
                count: *count,
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::seen as t;

    fn va(name: &str) -> ObjectRef {
        ObjectRef::VolumeAttachment { name: name.into() }
    }
    fn attach(node: &str, attached: bool) -> Change {
        Change::VolumeAttachment {
            node: node.into(),
            volume: "pv-1".into(),
            attached,
        }
    }

    #[test]
    fn a_deleted_attachment_carries_its_volume_and_node() {
        let ts = [
            t(0, va("csi-a"), attach("w1", true)),
            t(1, va("csi-a"), Change::VolumeAttachmentDeleted),
            t(2, va("csi-z"), Change::VolumeAttachmentDeleted),
            t(3, ObjectRef::Pvc { name: "c".into() }, Change::PvcDeleted),
        ];
        let mut seen = Attachments::default();
        let changes: Vec<_> = ts.iter().map(|t| seen.see(t)).collect();
        let of = Some(("pv-1", "w1"));
        assert_eq!(
            changes,
            [
                Some(AttachmentChange {
                    name: "csi-a",
                    of,
                    attached: Some(true)
                }),
                Some(AttachmentChange {
                    name: "csi-a",
                    of,
                    attached: None
                }),
                Some(AttachmentChange {
                    name: "csi-z",
                    of: None,
                    attached: None
                }),
                None,
            ]
        );
    }

    #[test]
    fn a_multi_attach_error_names_its_volume() {
        let m = "Multi-Attach error for volume \"pv-7\" Volume is already exclusively attached \
                 to one node and can't be attached to another";
        assert_eq!(multi_attach_volume(FAILED_ATTACH, m), Some("pv-7"));
        assert_eq!(multi_attach_volume("FailedMount", m), None);
        assert_eq!(
            multi_attach_volume(FAILED_ATTACH, "AttachVolume.Attach failed"),
            None
        );
    }

    #[test]
    fn folds_claims_attachments_and_events() {
        let claim = ObjectRef::Pvc {
            name: "data-web-0".into(),
        };
        let ts = vec![
            t(0, va("csi-a"), attach("w1", true)),
            t(
                1,
                claim.clone(),
                Change::PvcBound {
                    volume: "pv-1".into(),
                },
            ),
            t(
                5,
                ObjectRef::Event { name: "e1".into() },
                Change::Event {
                    reason: "FailedAttachVolume".into(),
                    involved: "Pod/web-0".into(),
                    message: "Multi-Attach error for volume \"pv-1\"".into(),
                    count: Some(1),
                },
            ),
            t(10, va("csi-a"), attach("w1", false)),
            t(12, va("csi-a"), Change::VolumeAttachmentDeleted),
            t(15, va("csi-b"), attach("w2", false)),
            t(16, va("csi-b"), attach("w2", true)),
            t(20, claim, Change::PvcDeleted),
        ];
        let w = World::at(&ts, 5);
        assert!(w.claim_attached("data-web-0", Some("w1")));
        assert!(w.claim_attached("data-web-0", None));
        assert!(!w.claim_attached("data-web-0", Some("w2")));
        assert!(!w.claim_attached("other", None), "unknown claim");
        assert_eq!(w.events.len(), 1);
        assert_eq!(
            (w.events[0].kind.as_str(), w.events[0].name.as_str()),
            ("Pod", "web-0")
        );
        let w = World::at(&ts, 10);
        assert!(!w.claim_attached("data-web-0", None), "attached: false");
        assert_eq!(World::at(&ts, 12).attachments.len(), 0);
        let w = World::at(&ts, 15);
        assert!(
            !w.claim_attached("data-web-0", Some("w2")),
            "not yet attached"
        );
        let w = World::at(&ts, 16);
        assert!(w.claim_attached("data-web-0", Some("w2")));
        assert!(!World::at(&ts, 20).claim_attached("data-web-0", None));
        let mut w = World::at(&ts, 20);
        w.forget_events();
        assert!(w.events.is_empty());
    }
}
