//! Volume metrics (pure): how long after the out-of-service taint each
//! volume on a target node was detached, and how long each replacement pod
//! waited for its claim's volume on its new node.

use serde::{Deserialize, Serialize};

use super::{Change, Ms, ObjectRef, Transition, World};

/// The taint that lets the attach-detach controller detach at once (KEP-2268).
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// One volume attached to a target node at T0, on a node that later got the
/// out-of-service taint. Times relative to T0 (ms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeDetach {
    /// The VolumeAttachment's name.
    pub attachment: String,
    /// The PersistentVolume.
    pub volume: String,
    /// The claim bound to it, when the claim was watched (scenario namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    pub node: String,
    /// When the out-of-service taint was seen on the node.
    pub out_of_service_at: Ms,
    /// When the attachment was seen detached (`attached: false`) or deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detached_at: Option<Ms>,
    /// `detached_at - out_of_service_at` (negative: detached before the taint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach_after: Option<Ms>,
}

/// Every volume attached to a target node at T0 whose node later got the
/// out-of-service taint, with when it was detached.
pub(super) fn detaches(
    transitions: &[Transition],
    t0: Ms,
    targets: &[String],
) -> Vec<VolumeDetach> {
    let rel = |at: Ms| at - t0;
    let mut out = Vec::new();
    let before = World::at(transitions, t0 - 1);
    let after = || transitions.iter().filter(|t| t.at >= t0);
    for (name, a) in &before.attachments {
        if !a.attached || !targets.contains(&a.node) {
            continue;
        }
        let Some(taint) = after().find(|t| {
            matches!(&t.object, ObjectRef::Node { name } if *name == a.node)
                && matches!(&t.change, Change::TaintAdded { key, .. } if key == OUT_OF_SERVICE)
        }) else {
            continue;
        };
        let detached = after()
            .filter(|t| matches!(&t.object, ObjectRef::VolumeAttachment { name: n } if n == name))
            .find(|t| {
                matches!(
                    t.change,
                    Change::VolumeAttachmentDeleted
                        | Change::VolumeAttachment {
                            attached: false,
                            ..
                        }
                )
            })
            .map(|t| t.at);
        out.push(VolumeDetach {
            attachment: name.clone(),
            volume: a.volume.clone(),
            claim: before
                .claims
                .iter()
                .find(|(_, v)| **v == a.volume)
                .map(|(c, _)| c.clone()),
            node: a.node.clone(),
            out_of_service_at: rel(taint.at),
            detached_at: detached.map(rel),
            detach_after: detached.map(|d| d - taint.at),
        });
    }
    out
}

/// When a replacement pod's volumes were all attached on its node, and how
/// long after it was scheduled (`created` and `scheduled` relative to T0):
/// `None` when it has no claim or they were never seen attached there.
pub(super) fn replacement_wait(
    transitions: &[Transition],
    t0: Ms,
    name: &str,
    node: &str,
    created: Ms,
    scheduled: Ms,
) -> Option<(Ms, Ms)> {
    let rel = |at: Ms| at - t0;
    let claims = transitions
        .iter()
        .find_map(|t| match (&t.object, &t.change) {
            (ObjectRef::Pod { name: n, .. }, Change::PodAdded { claims, .. })
                if n == name && rel(t.at) == created =>
            {
                Some(claims.clone())
            }
            _ => None,
        });
    let claims = claims.filter(|c| !c.is_empty())?;
    // The pod can start once every claim's volume is attached on its node.
    let attached: Option<Vec<Ms>> = claims
        .iter()
        .map(|claim| attached_on(transitions, claim, node, t0 + scheduled))
        .collect();
    let last = attached?.into_iter().max()?;
    Some((rel(last), last - (t0 + scheduled)))
}

/// A volume a pod's two copies both had: the original's claim, its volume
/// seen attached to the replacement's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedVolume {
    pub claim: String,
    /// The PersistentVolume bound to the claim then.
    pub volume: String,
    /// The node it was attached to.
    pub node: String,
    /// When it was first seen attached there after T0, relative to T0.
    pub attached_at: Ms,
}

/// The volumes of the pod `uid` (its claims as it was added) first seen
/// attached to `node` after `t0` (ms since start; times relative to it):
/// where a replacement on `node` took the original's volumes.
pub fn attached_after(
    transitions: &[Transition],
    t0: Ms,
    uid: &str,
    node: &str,
) -> Vec<SharedVolume> {
    let claims = transitions
        .iter()
        .find_map(|t| match (&t.object, &t.change) {
            (ObjectRef::Pod { uid: u, .. }, Change::PodAdded { claims, .. }) if u == uid => {
                Some(claims.clone())
            }
            _ => None,
        })
        .unwrap_or_default();
    claims
        .into_iter()
        .filter_map(|claim| {
            // attached there before T0: not taken over
            let at = attached_on(transitions, &claim, node, t0)?;
            if at <= t0 {
                return None;
            }
            let volume = World::at(transitions, at).claims.get(&claim)?.clone();
            Some(SharedVolume {
                claim,
                volume,
                node: node.to_owned(),
                attached_at: at - t0,
            })
        })
        .collect()
}

/// When, at or after `from`, the volume bound to `claim` was first seen
/// attached to `node` (`from` itself when it already was).
fn attached_on(transitions: &[Transition], claim: &str, node: &str, from: Ms) -> Option<Ms> {
    let mut world = World::default();
    let mut i = 0;
    while i < transitions.len() && transitions[i].at <= from {
        world.apply(&transitions[i]);
        i += 1;
    }
    if world.claim_attached(claim, Some(node)) {
        return Some(from);
    }
    for t in &transitions[i..] {
        world.apply(t);
        if world.claim_attached(claim, Some(node)) {
            return Some(t.at);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::metrics::compute;
    use crate::timeline::seen as t;

    fn pod(uid: &str) -> ObjectRef {
        ObjectRef::Pod {
            name: "web-0".into(),
            uid: uid.into(),
        }
    }
    fn va(name: &str) -> ObjectRef {
        ObjectRef::VolumeAttachment { name: name.into() }
    }
    fn attach(node: &str, attached: bool) -> Change {
        Change::VolumeAttachment {
            node: node.into(),
            volume: "pv-0".into(),
            attached,
        }
    }
    fn added() -> Change {
        Change::PodAdded {
            labels: std::sync::Arc::new([("app".to_owned(), "web".to_owned())].into()),
            owner: Some("StatefulSet/web".into()),
            claims: vec!["data-web-0".into()],
        }
    }

    /// The seed-000 shape with fake times: T0 = 1 s; out-of-service taint at
    /// 61 s; old attachment detached at 63.5 s and deleted at 64 s; the
    /// replacement scheduled on b at 70 s, its volume attached there at 72 s.
    fn seed000() -> Vec<Transition> {
        let a = || ObjectRef::Node { name: "a".into() };
        vec![
            t(
                0,
                ObjectRef::Pvc {
                    name: "data-web-0".into(),
                },
                Change::PvcBound {
                    volume: "pv-0".into(),
                },
            ),
            t(0, pod("old"), added()),
            t(0, pod("old"), Change::PodScheduled { node: "a".into() }),
            t(0, pod("old"), Change::PodReady { ready: true }),
            t(0, va("csi-a"), attach("a", true)),
            t(
                61_000,
                a(),
                Change::TaintAdded {
                    key: OUT_OF_SERVICE.into(),
                    value: Some("nodeshutdown".into()),
                    effect: "NoExecute".into(),
                },
            ),
            t(62_000, pod("old"), Change::PodDeleted),
            t(63_500, va("csi-a"), attach("a", false)),
            t(64_000, va("csi-a"), Change::VolumeAttachmentDeleted),
            t(69_000, pod("new"), added()),
            t(
                70_000,
                pod("new"),
                Change::PodScheduled { node: "b".into() },
            ),
            t(70_500, va("csi-b"), attach("b", false)),
            t(72_000, va("csi-b"), attach("b", true)),
        ]
    }

    #[test]
    fn detach_after_the_taint_and_the_replacements_wait() {
        let m = compute(
            &seed000(),
            1_000,
            &["a".into()],
            90_000,
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            m.volume_detaches,
            [VolumeDetach {
                attachment: "csi-a".into(),
                volume: "pv-0".into(),
                claim: Some("data-web-0".into()),
                node: "a".into(),
                out_of_service_at: 60_000,
                detached_at: Some(62_500),
                detach_after: Some(2_500),
            }]
        );
        assert_eq!(m.detach_after_out_of_service_max, Some(2_500));
        let p = &m.pods[0];
        assert_eq!(p.replacement_scheduled, Some(69_000));
        assert_eq!(p.replacement_volume_attached, Some(71_000));
        assert_eq!(p.replacement_volume_wait, Some(2_000));
    }

    #[test]
    fn no_taint_no_detach_metric_and_no_attach_no_wait() {
        let ts: Vec<Transition> = seed000()
            .into_iter()
            .filter(|t| !matches!(t.change, Change::TaintAdded { .. }))
            .filter(|t| t.at != 72_000)
            .collect();
        let m = compute(
            &ts,
            1_000,
            &["a".into()],
            90_000,
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert!(m.volume_detaches.is_empty());
        assert_eq!(m.detach_after_out_of_service_max, None);
        assert_eq!(m.pods[0].replacement_volume_wait, None, "never attached");
        // Without volumes, nothing of it is serialized.
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("volume"), "{json}");
    }

    #[test]
    fn already_attached_on_the_new_node_is_no_wait() {
        let mut ts = seed000();
        // RWX: attached to b since before the replacement was scheduled.
        ts.push(t(65_000, va("csi-b0"), attach("b", true)));
        ts.sort_by_key(|t| t.at);
        let m = compute(
            &ts,
            1_000,
            &["a".into()],
            90_000,
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(m.pods[0].replacement_volume_wait, Some(0));
    }
}
