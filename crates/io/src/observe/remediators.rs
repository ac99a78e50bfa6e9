//! Remediators' own objects, watched where their APIs are installed: the
//! medik8s remediations Node Health Check creates (named after the failed
//! node) and cluster-api Machines (a MachineHealthCheck remediates by
//! deleting the Machine of the node). Each is an act of remediation on the
//! timeline, with the field manager that created it.

use kube::ResourceExt as _;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::fold::{Diff, Differ};
use crate::timeline::{Change, ObjectRef};

/// A known remediation API: group, version, kind, plural, and whether the
/// object names its node by its own name (medik8s) or in `status.nodeRef`
/// (cluster-api).
#[derive(Debug)]
pub struct Known {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub named_after_node: bool,
}

pub const KNOWN: [Known; 4] = [
    Known {
        group: "self-node-remediation.medik8s.io",
        version: "v1alpha1",
        kind: "SelfNodeRemediation",
        plural: "selfnoderemediations",
        named_after_node: true,
    },
    Known {
        group: "fence-agents-remediation.medik8s.io",
        version: "v1alpha1",
        kind: "FenceAgentsRemediation",
        plural: "fenceagentsremediations",
        named_after_node: true,
    },
    Known {
        group: "machine-deletion-remediation.medik8s.io",
        version: "v1alpha1",
        kind: "MachineDeletionRemediation",
        plural: "machinedeletionremediations",
        named_after_node: true,
    },
    Known {
        group: "cluster.x-k8s.io",
        version: "v1beta1",
        kind: "Machine",
        plural: "machines",
        named_after_node: false,
    },
];

impl Known {
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// One known API's objects.
#[derive(Debug)]
pub struct RemediationDiff {
    pub kind: &'static str,
    pub named_after_node: bool,
}

impl RemediationDiff {
    pub fn new(k: &Known) -> RemediationDiff {
        RemediationDiff {
            kind: k.kind,
            named_after_node: k.named_after_node,
        }
    }

    fn node(&self, o: &DynamicObject) -> String {
        if self.named_after_node {
            return o.name_any();
        }
        o.data
            .pointer("/status/nodeRef/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

impl Differ<DynamicObject> for RemediationDiff {
    /// Its node, and whether it is being deleted.
    type Snap = (String, bool);

    fn key(&self, o: &DynamicObject) -> String {
        o.uid().unwrap_or_else(|| o.name_any())
    }

    fn object(&self, o: &DynamicObject) -> ObjectRef {
        ObjectRef::Remediation {
            resource: self.kind.to_owned(),
            name: format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()),
            node: self.node(o),
        }
    }

    fn snap(&self, o: &DynamicObject) -> Self::Snap {
        (self.node(o), o.metadata.deletion_timestamp.is_some())
    }

    fn diff(&self, prev: Option<&Self::Snap>, o: &DynamicObject, initial: bool) -> Diff {
        let (_, deleting) = self.snap(o);
        let mut out = Vec::new();
        if prev.is_none() && !initial {
            out.push((
                o.metadata.creation_timestamp.as_ref().map(|t| t.0),
                Change::RemediationCreated,
            ));
        }
        if deleting && !prev.is_some_and(|p| p.1) {
            out.push((
                o.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                Change::RemediationDeleting,
            ));
        }
        out
    }

    /// The creator: the field manager of its first managedFields entry
    /// (written when it was created).
    fn by(&self, o: &DynamicObject, change: &Change) -> Option<String> {
        if *change != Change::RemediationCreated {
            return None;
        }
        o.metadata
            .managed_fields
            .as_ref()?
            .iter()
            .min_by_key(|e| e.time.as_ref().map(|t| t.0))?
            .manager
            .clone()
    }

    fn deleted(&self) -> Option<Change> {
        Some(Change::RemediationDeleted)
    }
}
