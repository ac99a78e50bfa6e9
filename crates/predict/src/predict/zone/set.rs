//! The sets `predict --zone` and `--nodes` forecast: a zone (as the node
//! lifecycle controller keys it), every zone in turn, or the nodes a label
//! selector picks; each with a selector a scenario's target can use.

use std::collections::{BTreeMap, BTreeSet};

use super::Error;
use crate::disruption::{ZONE_LABEL, zone_name, zone_of};
use crate::predict::snapshot::Snapshot;

/// A set of nodes to lose together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// `zone b`, `nodes app=db`.
    pub name: String,
    /// A label selector that picks the set (a scenario's target).
    pub selector: String,
    pub nodes: BTreeSet<String>,
}

impl Set {
    /// Every zone of the cluster, each a set (a cluster without zone labels
    /// is one zone, `(no zone)`).
    pub fn zones(snap: &Snapshot) -> Vec<Set> {
        let mut by_zone: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in &snap.nodes {
            by_zone
                .entry(zone_of(&n.labels))
                .or_default()
                .insert(n.name.clone());
        }
        by_zone
            .into_iter()
            .map(|(zone, nodes)| Set::of_zone(&zone, nodes))
            .collect()
    }

    fn of_zone(zone: &str, nodes: BTreeSet<String>) -> Set {
        let plain = zone.rsplit('/').next().unwrap_or(zone);
        Set {
            name: format!("zone {}", zone_name(zone)),
            selector: if zone.is_empty() {
                format!("!{ZONE_LABEL}")
            } else {
                format!("{ZONE_LABEL}={plain}")
            },
            nodes,
        }
    }

    /// The zone named (as `region/zone` or the zone alone).
    pub fn zone(snap: &Snapshot, name: &str) -> Result<Set, Error> {
        let all = Set::zones(snap);
        let known: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
        all.into_iter()
            .find(|s| {
                s.name == format!("zone {name}")
                    || s.name.rsplit('/').next() == Some(name)
                    || s.selector.ends_with(&format!("={name}"))
            })
            .ok_or_else(|| Error::UnknownZone {
                name: name.to_owned(),
                known,
            })
    }

    /// The nodes `matches` picks by their labels.
    pub fn selected(
        snap: &Snapshot,
        selector: &str,
        matches: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Result<Set, Error> {
        let nodes: BTreeSet<String> = snap
            .nodes
            .iter()
            .filter(|n| matches(&n.labels))
            .map(|n| n.name.clone())
            .collect();
        if nodes.is_empty() {
            return Err(Error::NoNode(selector.to_owned()));
        }
        Ok(Set {
            name: format!("nodes {selector}"),
            selector: selector.to_owned(),
            nodes,
        })
    }
}
