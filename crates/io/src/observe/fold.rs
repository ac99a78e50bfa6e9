//! Folds one kind's watcher events into transitions, without losing or
//! inventing any: the pure core of the observer, fed by `observe::track`.
//!
//! A relist (`Init`, `InitApply`..., `InitDone`) is buffered into a fresh
//! snapshot and compared with the known state only once it is complete, as
//! kube-rs advises: a list that fails halfway and starts over (a new `Init`)
//! must not report the objects it had not reached yet as deleted. Objects are
//! keyed by UID, so a Node deleted and re-registered under the same name
//! during a watch gap shows as the old one's deletion and the new one's
//! creation, in that order.

use std::collections::{BTreeMap, HashMap, HashSet};

use jiff::Timestamp;
use kube::runtime::watcher::Event;

use crate::timeline::{Change, ObjectRef};

/// What a differ finds in one object: each change with the server's own
/// time for it where the object has one.
pub type Diff = Vec<(Option<Timestamp>, Change)>;

/// One change of an object as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub server_time: Option<Timestamp>,
    pub change: Change,
    /// Who made it, where the object says (a field manager).
    pub by: Option<String>,
}

/// Changes of one object, in order.
pub type Changes = Vec<Seen>;

/// How one kind's objects are identified, compared and turned into changes.
pub trait Differ<K>: Send + 'static {
    type Snap: Clone + PartialEq + Send;
    /// Identity across watch gaps (the UID).
    fn key(&self, obj: &K) -> String;
    /// The object as the timeline names it.
    fn object(&self, obj: &K) -> ObjectRef;
    /// The fields whose changes matter.
    fn snap(&self, obj: &K) -> Self::Snap;
    /// Changes from `prev` (None: first sight) to `obj`. `initial`: seen in
    /// the first list of the run (already there before the run started).
    fn diff(&self, prev: Option<&Self::Snap>, obj: &K, initial: bool) -> Diff;
    /// Who made `change` of `obj`, where the object records it (None: not
    /// known, the default).
    fn by(&self, _obj: &K, _change: &Change) -> Option<String> {
        None
    }
    /// The change recorded when the object disappears (None: not recorded).
    fn deleted(&self) -> Option<Change>;
}

/// One listed object of a relist in progress, compared already.
#[derive(Debug)]
struct Listed<S> {
    key: String,
    object: ObjectRef,
    snap: S,
    /// None: the same as the known state.
    changes: Option<Changes>,
}

/// The known state of one kind's objects and the relist being collected.
#[derive(Debug)]
pub struct Fold<K, D: Differ<K>> {
    differ: D,
    /// By key (UID): how the timeline names the object, and its last state.
    known: HashMap<String, (ObjectRef, D::Snap)>,
    /// Which key currently holds each timeline name: a new key under a name
    /// still held means the holder was deleted unseen.
    holder: BTreeMap<ObjectRef, String>,
    /// The objects of the relist in progress, in list order, each already
    /// compared with the known state (which a relist cannot change before
    /// its end): memory per object is its snapshot, not the object.
    relist: Option<Vec<Listed<D::Snap>>>,
    listed_once: bool,
}

impl<K, D: Differ<K>> Fold<K, D> {
    pub fn new(differ: D) -> Self {
        Fold {
            differ,
            known: HashMap::new(),
            holder: BTreeMap::new(),
            relist: None,
            listed_once: false,
        }
    }

    /// Whether a complete list has been folded in (the watcher is synced).
    pub fn listed_once(&self) -> bool {
        self.listed_once
    }

    /// Feeds one watcher event; returns the transitions it implies, in the
    /// order they must be recorded. Nothing comes out of a relist until its
    /// `InitDone`.
    pub fn handle(&mut self, event: Event<K>) -> Vec<(ObjectRef, Changes)> {
        let mut out = Vec::new();
        match event {
            // A (re)started list: whatever an earlier, unfinished one
            // collected is stale.
            Event::Init => self.relist = Some(Vec::new()),
            Event::InitApply(obj) => {
                let listed = self.prepare(&obj, !self.listed_once);
                match self.relist.as_mut() {
                    Some(buffer) => buffer.push(listed),
                    // kube's watcher always sends Init first; should it not,
                    // the object is at least not lost.
                    None => self.commit(listed, &mut out),
                }
            }
            Event::Apply(obj) => self.apply(&obj, false, &mut out),
            Event::Delete(obj) => {
                let key = self.differ.key(&obj);
                self.forget(&key, &mut out);
            }
            Event::InitDone => {
                if let Some(listed) = self.relist.take() {
                    self.reconcile(listed, &mut out);
                }
                self.listed_once = true;
            }
        }
        out
    }

    /// Compares a complete list with the known state: objects missing from
    /// it were deleted meanwhile (recorded first, so a name re-used by a new
    /// object is free again), then every listed object's changes.
    fn reconcile(&mut self, listed: Vec<Listed<D::Snap>>, out: &mut Vec<(ObjectRef, Changes)>) {
        let present: HashSet<&str> = listed.iter().map(|l| l.key.as_str()).collect();
        let mut gone: Vec<(ObjectRef, String)> = self
            .known
            .iter()
            .filter(|(key, _)| !present.contains(key.as_str()))
            .map(|(key, (object, _))| (object.clone(), key.clone()))
            .collect();
        // HashMap order is random; the record should not be.
        gone.sort();
        for (_, key) in gone {
            self.forget(&key, out);
        }
        for l in listed {
            self.commit(l, out);
        }
    }

    fn apply(&mut self, obj: &K, initial: bool, out: &mut Vec<(ObjectRef, Changes)>) {
        let listed = self.prepare(obj, initial);
        self.commit(listed, out);
    }

    /// Compares `obj` with the known state of its key.
    fn prepare(&self, obj: &K, initial: bool) -> Listed<D::Snap> {
        let key = self.differ.key(obj);
        let object = self.differ.object(obj);
        let snap = self.differ.snap(obj);
        let prev = self.known.get(&key).map(|(_, s)| s);
        let changes = (prev != Some(&snap)).then(|| {
            self.differ
                .diff(prev, obj, initial)
                .into_iter()
                .map(|(server_time, change)| Seen {
                    by: self.differ.by(obj, &change),
                    server_time,
                    change,
                })
                .collect()
        });
        Listed {
            key,
            object,
            snap,
            changes,
        }
    }

    /// Makes a compared object the known state, recording its changes.
    fn commit(&mut self, l: Listed<D::Snap>, out: &mut Vec<(ObjectRef, Changes)>) {
        if let Some(old) = self.holder.get(&l.object).filter(|k| **k != l.key).cloned() {
            // Same name, new UID, and no Delete seen for the old one: it was
            // deleted in between.
            self.forget(&old, out);
        }
        let Some(changes) = l.changes else { return };
        if !changes.is_empty() {
            out.push((l.object.clone(), changes));
        }
        self.holder.insert(l.object.clone(), l.key.clone());
        self.known.insert(l.key, (l.object, l.snap));
    }

    /// Drops a known object, recording its deletion.
    fn forget(&mut self, key: &str, out: &mut Vec<(ObjectRef, Changes)>) {
        let Some((object, _)) = self.known.remove(key) else {
            return;
        };
        if self.holder.get(&object).is_some_and(|k| k == key) {
            self.holder.remove(&object);
        }
        if let Some(change) = self.differ.deleted() {
            out.push((
                object,
                vec![Seen {
                    server_time: None,
                    change,
                    by: None,
                }],
            ));
        }
    }
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;
