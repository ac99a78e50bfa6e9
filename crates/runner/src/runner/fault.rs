//! A fault step: on one node, or on every node of a set. Each node's
//! fault is journaled with its revert before it is injected; a set's nodes
//! go together through forks of the backend (kind, libvirt, commands), in
//! one batch the backend makes itself (the sim's shared nodes), or one after
//! another; each node's times and the spread are kept.

use super::journal::{Settled, Undo};
use super::{Error, Run, outcome};
use crate::backend::{self, NodeFaults};
use crate::errors::chain;
use crate::record::{FaultStep, NodeFault, StepKind as RecKind};
use crate::scenario::model::FaultKind;
use crate::timeline::Ms;

/// A node's journal entry for a fault (none: the fault is itself a
/// revert), and the memo it went in with.
type Entry = (Option<u32>, Option<String>);

/// A node's inject: when it began and ended, and how it went.
type Injected = (Ms, Ms, Result<(), backend::Error>);

/// How a set's nodes are hit together.
enum Together<B> {
    /// One fork of the backend each.
    Forks(Vec<B>),
    /// In one batch the backend makes itself.
    Batch,
}

impl Run<'_> {
    /// One fault step on `target`: its node, or every node of its set,
    /// each journaled before it is hit. A set is hit at once where the
    /// backend can fork or batch (at most [`super::Limits::set_parallelism`]
    /// nodes at a time), else one node after another. Once a node's inject
    /// fails no more are begun; those begun finish, and cleanup reverts every
    /// one journaled. Each node's times and the spread are kept.
    pub(super) async fn fault<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        index: usize,
        label: String,
        target: &str,
        fault: FaultKind,
    ) -> Result<(), Error> {
        let nodes = self.nodes_of(target)?;
        let set = self.sets.contains_key(target);
        let forks: Option<Vec<B>> = match set {
            true => nodes.iter().map(|_| backend.fork()).collect(),
            false => None,
        };
        let batch = set && forks.is_none() && backend.batches(&nodes, fault);
        let first = nodes
            .first()
            .map_or_else(String::new, |n| backend.describe(n, fault));
        let how = match (&forks, batch) {
            (Some(_), _) => format!("at once, at most {} at a time", self.parallel),
            (None, true) => format!("in one batch, at most {} at a time", self.parallel),
            (None, false) => "one after another".to_owned(),
        };
        let description = match set {
            false => first,
            true => format!(
                "{fault} on the {} nodes of {target} ({}) {how}, as on the first: {first}",
                nodes.len(),
                nodes.join(", "),
            ),
        };
        let slot = self.begin(Some(index), label, RecKind::Fault, description);
        let started = self.steps[slot].started;
        self.t0.get_or_insert(started);
        self.anchors.insert(index, started);
        let (hit, r) = match forks {
            Some(forks) => {
                let how = Together::Forks(forks);
                self.fault_together(backend, how, index, &nodes, fault)
                    .await
            }
            None if batch => {
                let how = Together::Batch;
                self.fault_together(backend, how, index, &nodes, fault)
                    .await
            }
            None => self.fault_in_turn(backend, index, &nodes, fault).await,
        };
        let r = match r {
            Err(Error::Fault(source)) if set => Err(Error::SetFault {
                target: target.to_owned(),
                node: hit
                    .iter()
                    .find(|h| h.error.is_some())
                    .map_or_else(String::new, |h| h.node.clone()),
                fault,
                source,
            }),
            other => other,
        };
        let step = FaultStep {
            fault,
            node: if set {
                target
            } else {
                nodes.first().map_or(target, String::as_str)
            }
            .to_owned(),
            nodes: if set { hit } else { Vec::new() },
        };
        if let Some(spread) = step.spread() {
            self.note(&format!(
                "{} of {} nodes hit; spread {} from the first inject to the last one done",
                step.nodes.iter().filter(|n| n.error.is_none()).count(),
                nodes.len(),
                crate::duration::format_millis(spread)
            ));
        }
        self.steps[slot].fault = Some(step);
        self.steps[slot].commands.extend(backend.take_commands());
        self.end(slot, outcome(&r));
        r
    }

    /// `fault` on each of `nodes` in turn, stopping at the first failure.
    async fn fault_in_turn<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        index: usize,
        nodes: &[String],
        fault: FaultKind,
    ) -> (Vec<NodeFault>, Result<(), Error>) {
        let mut hit = Vec::new();
        for node in nodes {
            let at = self.now();
            let r = self.fault_on(backend, index, node, fault).await;
            hit.push(NodeFault {
                node: node.clone(),
                at,
                done: self.now(),
                error: r.as_ref().err().map(|e| chain(e)),
            });
            if r.is_err() {
                return (hit, r);
            }
        }
        (hit, Ok(()))
    }

    /// `fault` on all of `nodes` together: every node journaled first, then
    /// the injects through forks of the backend or in its own batch, then
    /// each node's entry brought up to date and its times kept.
    async fn fault_together<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        how: Together<B>,
        index: usize,
        nodes: &[String],
        fault: FaultKind,
    ) -> (Vec<NodeFault>, Result<(), Error>) {
        let entries = match self.will_faults(backend, nodes, fault) {
            Ok(entries) => entries,
            // Nothing is injected: cleanup reverts those journaled.
            Err(e) => return (Vec::new(), Err(e)),
        };
        crate::testpoint::reached(|| format!("fault-{}:journaled", index + 1)).await;
        let outcomes = match how {
            Together::Forks(forks) => self.inject_forks(backend, forks, nodes, fault).await,
            Together::Batch => self.inject_batch(backend, nodes, fault).await,
        };
        crate::testpoint::reached(|| format!("fault-{}:injected", index + 1)).await;
        self.settle_set(nodes, fault, entries, outcomes.into_iter())
    }

    /// The backend's own batch ([`NodeFaults::inject_batch`]); its times
    /// taken onto the run's clock.
    async fn inject_batch<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        nodes: &[String],
        fault: FaultKind,
    ) -> Vec<(Option<Injected>, Option<String>)> {
        let (base, base_at) = (tokio::time::Instant::now(), self.now());
        let done = backend.inject_batch(nodes, fault, self.parallel).await;
        let ms = |at: tokio::time::Instant| {
            base_at + i64::try_from(at.saturating_duration_since(base).as_millis()).unwrap_or(0)
        };
        done.into_iter()
            .zip(nodes)
            .map(|(d, node)| {
                let d = d.map(|(began, ended, r)| (ms(began), ms(ended), r));
                (d, backend.memo(node, fault))
            })
            .collect()
    }

    /// Journals `fault` on each of `nodes`, before any is injected: each
    /// entry, and the memo it went in with.
    fn will_faults<B: NodeFaults>(
        &mut self,
        backend: &B,
        nodes: &[String],
        fault: FaultKind,
    ) -> Result<Vec<Entry>, Error> {
        let mut entries = Vec::with_capacity(nodes.len());
        for node in nodes {
            let before = backend.memo(node, fault);
            entries.push((self.will_fault(node, fault, before.clone())?, before));
        }
        Ok(entries)
    }

    /// After a set's injects: each node's entry brought up to date (its
    /// memo after, a revert settling what it undid) and its times kept, in
    /// `nodes`' order; the first failure is the step's.
    fn settle_set(
        &mut self,
        nodes: &[String],
        fault: FaultKind,
        entries: Vec<Entry>,
        outcomes: impl Iterator<Item = (Option<Injected>, Option<String>)>,
    ) -> (Vec<NodeFault>, Result<(), Error>) {
        let mut hit = Vec::new();
        let mut first_error = None;
        for ((node, (outcome, memo)), (entry, before)) in nodes.iter().zip(outcomes).zip(entries) {
            let Some((at, end, r)) = outcome else {
                continue;
            };
            let r = self.did_fault(entry, node, fault, before.as_ref(), memo, r);
            hit.push(NodeFault {
                node: node.clone(),
                at,
                done: end,
                error: r.as_ref().err().map(|e| chain(e)),
            });
            if let (Err(e), None) = (r, &first_error) {
                first_error = Some(e);
            }
        }
        (hit, first_error.map_or(Ok(()), Err))
    }

    /// One fork of the backend for each of `nodes`, at most `self.parallel`
    /// injecting at a time, each fork's blocking calls on the blocking pool.
    /// Once one fails no more are begun. The forks' memos go to the journal,
    /// their state back to `backend`.
    async fn inject_forks<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        forks: Vec<B>,
        nodes: &[String],
        fault: FaultKind,
    ) -> Vec<(Option<Injected>, Option<String>)> {
        use futures::StreamExt;
        let failed = std::sync::atomic::AtomicBool::new(false);
        let (rec, failed) = (&self.rec, &failed);
        let jobs = forks
            .into_iter()
            .zip(nodes)
            .map(|(mut fork, node)| async move {
                use std::sync::atomic::Ordering;
                if failed.load(Ordering::SeqCst) {
                    return (node, fork, None);
                }
                let at = rec.now();
                let r = fork.inject(node, fault).await;
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                (node, fork, Some((at, rec.now(), r)))
            });
        let mut done: Vec<_> = futures::stream::iter(jobs)
            .buffer_unordered(self.parallel.max(1))
            .collect()
            .await;
        // In the set's order, which is the journal's.
        done.sort_by_key(|(node, ..)| nodes.iter().position(|n| n == *node));
        let mut outcomes = Vec::with_capacity(done.len());
        for (node, mut fork, outcome) in done {
            if let Some(step) = self.steps.last_mut() {
                step.commands.extend(fork.take_commands());
            }
            let memo = fork.memo(node, fault);
            backend.join(node, fork);
            outcomes.push((outcome, memo));
        }
        outcomes
    }

    /// Journals `fault` on `node` with its revert first, then injects it. A
    /// fault that is itself a revert (resume-vm) settles the entry of the
    /// fault it undoes.
    async fn fault_on<B: NodeFaults>(
        &mut self,
        backend: &mut B,
        index: usize,
        node: &str,
        fault: FaultKind,
    ) -> Result<(), Error> {
        // The memo (what reaches the machine again, e.g. a libvirt domain's
        // UUID) goes in with the entry, and again if the fault changed it.
        let before = backend.memo(node, fault);
        let entry = self.will_fault(node, fault, before.clone())?;
        crate::testpoint::reached(|| format!("fault-{}:journaled", index + 1)).await;
        let r = backend.inject(node, fault).await;
        crate::testpoint::reached(|| format!("fault-{}:injected", index + 1)).await;
        let after = backend.memo(node, fault);
        self.did_fault(entry, node, fault, before.as_ref(), after, r)
    }

    /// The journal entry that reverts `fault` on `node`, written before it
    /// is injected (None: the fault is itself a revert).
    fn will_fault(
        &mut self,
        node: &str,
        fault: FaultKind,
        memo: Option<String>,
    ) -> Result<Option<u32>, Error> {
        let Some(revert) = fault.revert() else {
            return Ok(None);
        };
        Ok(Some(self.journal.will(Undo::Fault {
            node: node.to_owned(),
            fault,
            revert,
            memo,
        })?))
    }

    /// After `fault` was injected on `node` with result `r`: the entry's
    /// memo is brought up to date, and a revert settles the faults it undid.
    fn did_fault(
        &mut self,
        entry: Option<u32>,
        node: &str,
        fault: FaultKind,
        before: Option<&String>,
        after: Option<String>,
        r: Result<(), backend::Error>,
    ) -> Result<(), Error> {
        if let (Some(id), Some(memo)) = (entry, after)
            && before != Some(&memo)
            && let Some(revert) = fault.revert()
        {
            self.journal.update(
                id,
                Undo::Fault {
                    node: node.to_owned(),
                    fault,
                    revert,
                    memo: Some(memo),
                },
            )?;
        }
        r.map_err(Box::new)?;
        if entry.is_none() {
            // A revert: the faults it undoes on this node are settled.
            for p in self.journal.find(|u| {
                matches!(u, Undo::Fault { node: n, revert, .. } if n == node && *revert == fault)
            }) {
                self.journal.settle(p.id, Settled::Superseded)?;
            }
        }
        Ok(())
    }
}
