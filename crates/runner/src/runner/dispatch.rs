//! Actions as steps: each change to the cluster is journaled with the state
//! it replaces before it is made (a taint's old value, a node's cordon, a
//! workload's replicas, an object that did not exist), so cleanup and
//! `nodefall recover` put back exactly that.

use std::time::Duration;

use super::expectation::describe_conditions;
use super::journal::{Settled, TaintWas, Undo};
use super::{Error, Run, journal_failed};
use crate::actions;
use crate::expect;
use crate::record::EvictionRecord;
use crate::scenario::checked::{Action, WorkloadKind};
use crate::scenario::model::TaintEffect;

impl Run<'_> {
    pub(super) fn describe_action(&self, action: &Action) -> String {
        let mut text = action.to_string();
        for (t, n) in &self.targets {
            text = text.replace(&format!(" {t}"), &format!(" {t} ({n})"));
        }
        text
    }

    pub(super) async fn action(
        &mut self,
        index: usize,
        label: &str,
        action: &Action,
        ns: &str,
    ) -> Result<(), Error> {
        let client = self.client.clone();
        let wrap = |source| Error::Action {
            step: label.to_owned(),
            source: Box::new(source),
        };
        match action {
            Action::Apply(files) => {
                for f in files.iter().filter(|f| f.applies_to(self.plan.backend)) {
                    for o in self.manifest_objects(&f.path) {
                        self.apply_one(&o).await.map_err(wrap)?;
                    }
                }
            }
            Action::Taint {
                node,
                key,
                value,
                effect,
            } => {
                let n = self.node(node)?;
                self.journal_taint(&n, key, *effect, false)
                    .await
                    .map_err(wrap)?;
                actions::taint(&client, &n, key, value.as_deref(), *effect)
                    .await
                    .map_err(wrap)?;
            }
            Action::Untaint { node, key, effect } => {
                let n = self.node(node)?;
                let effects = match effect {
                    Some(e) => vec![*e],
                    None => vec![
                        TaintEffect::NoSchedule,
                        TaintEffect::PreferNoSchedule,
                        TaintEffect::NoExecute,
                    ],
                };
                for e in &effects {
                    self.journal_taint(&n, key, *e, true).await.map_err(wrap)?;
                }
                actions::untaint(&client, &n, key, *effect)
                    .await
                    .map_err(wrap)?;
                // A taint the run added and has now removed is as it was.
                self.settle_where(|u| {
                    matches!(u, Undo::Taint { node: tn, key: k, effect: e, was: None }
                        if *tn == n && k == key && effects.contains(e))
                })
                .map_err(wrap)?;
            }
            Action::Cordon { node } => {
                let n = self.node(node)?;
                self.journal_cordon(&n).await.map_err(wrap)?;
                actions::set_unschedulable(&client, &n, true)
                    .await
                    .map_err(wrap)?;
                self.settle_where(
                    |u| matches!(u, Undo::Unschedulable { node: c, was: true } if *c == n),
                )
                .map_err(wrap)?;
            }
            Action::Uncordon { node } => {
                let n = self.node(node)?;
                self.journal_cordon(&n).await.map_err(wrap)?;
                actions::set_unschedulable(&client, &n, false)
                    .await
                    .map_err(wrap)?;
                self.settle_where(
                    |u| matches!(u, Undo::Unschedulable { node: c, was: false } if *c == n),
                )
                .map_err(wrap)?;
            }
            Action::DeleteNode { node } => {
                let n = self.node(node)?;
                actions::delete_node(&client, &n).await.map_err(wrap)?;
                self.note(&format!(
                    "deleted node {n}: not undone by cleanup; it comes back when its kubelet registers again"
                ));
            }
            Action::ForceDeletePods { selector, node } => {
                let n = node.as_ref().map(|t| self.node(t)).transpose()?;
                let deleted =
                    actions::force_delete_pods(&client, ns, selector.as_ref(), n.as_deref())
                        .await
                        .map_err(wrap)?;
                self.note(&format!(
                    "force-deleted {}",
                    if deleted.is_empty() {
                        "no pods".into()
                    } else {
                        deleted.join(", ")
                    }
                ));
            }
            Action::Scale {
                kind,
                name,
                replicas,
            } => {
                self.journal_replicas(ns, *kind, name).await.map_err(wrap)?;
                actions::scale(&client, ns, *kind, name, *replicas)
                    .await
                    .map_err(wrap)?;
            }
            Action::WaitFor { .. } => {
                let ms = self.plan.steps[index].blocks_for.unwrap_or(0);
                self.progress.waiting(
                    label,
                    &format!("{label}: waiting {}", crate::duration::format_millis(ms)),
                );
                tokio::time::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
            }
            Action::WaitUntil {
                subject,
                conditions,
                ..
            } => {
                let after = self.plan.steps[index].blocks_for.unwrap_or(0);
                let subject = self.subject(subject)?;
                let deadline = self.now() + after;
                let mut rx = self.rec.subscribe();
                loop {
                    if self
                        .rec
                        .with_world(|w| expect::holds(w, &subject, conditions))
                    {
                        break;
                    }
                    let left = deadline - self.now();
                    if left <= 0 {
                        return Err(Error::WaitTimeout {
                            step: label.to_owned(),
                            after,
                        });
                    }
                    self.progress.waiting(
                        label,
                        &format!(
                            "{label}: waiting until {} ({}s left)",
                            describe_conditions(conditions),
                            left / 1000
                        ),
                    );
                    super::wait::change_or_deadline(&mut rx, self.now(), deadline).await;
                }
            }
            Action::DeleteNamespace { name } => {
                actions::delete_namespace(&client, name, Duration::from_secs(120))
                    .await
                    .map_err(wrap)?;
            }
            Action::Drain(d) => {
                let nodes: Vec<String> = d
                    .nodes
                    .iter()
                    .map(|t| self.node(t))
                    .collect::<Result<_, _>>()?;
                for n in &nodes {
                    self.journal_cordon(n).await.map_err(wrap)?;
                }
                let events = std::sync::Mutex::new(Vec::new());
                let rec = self.rec.clone();
                let progress = self.progress;
                let note = |event: actions::DrainEvent| {
                    progress.log(&format!("  {event}"));
                    events
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((rec.now(), event));
                };
                progress.waiting(label, &format!("{label}: draining {}", nodes.join(", ")));
                let r = actions::drain(&self.strict, &nodes, d, &note).await;
                let events = events
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(step) = self.steps.last_mut() {
                    for (at, event) in events {
                        step.notes.push((at, event.to_string()));
                        let (pod, refused) = match event {
                            actions::DrainEvent::Refused { pod, .. } => (pod, true),
                            actions::DrainEvent::Evicted { pod, .. } => (pod, false),
                        };
                        step.evictions.push(EvictionRecord { at, pod, refused });
                    }
                }
                let summary = r.map_err(wrap)?;
                self.note(&format!(
                    "drained {}: {} pods evicted, {} refusals (429), {} skipped",
                    nodes.join(", "),
                    summary.evicted.len(),
                    summary.refusals,
                    summary.skipped.len()
                ));
            }
        }
        Ok(())
    }

    /// Settles the pending entries `pred` picks: a later step put back
    /// what they would undo.
    fn settle_where(&mut self, pred: impl Fn(&Undo) -> bool) -> Result<(), actions::Error> {
        for p in self.journal.find(pred) {
            self.journal
                .settle(p.id, Settled::Superseded)
                .map_err(journal_failed)?;
        }
        Ok(())
    }

    /// Journals a taint's state before the run first touches it (with
    /// `only_present`, only if it is there: removing an absent taint
    /// changes nothing).
    async fn journal_taint(
        &mut self,
        node: &str,
        key: &str,
        effect: TaintEffect,
        only_present: bool,
    ) -> Result<(), actions::Error> {
        let seen = self.journal.find(|u| {
            matches!(u, Undo::Taint { node: n, key: k, effect: e, .. } if n == node && k == key && *e == effect)
        });
        if !seen.is_empty() {
            return Ok(());
        }
        let Some((was, _)) =
            actions::node_marks(&self.client, node, key, &effect.to_string()).await?
        else {
            return Err(actions::Error::NoNode(node.to_owned()));
        };
        if only_present && was.is_none() {
            return Ok(());
        }
        self.journal
            .will(Undo::Taint {
                node: node.to_owned(),
                key: key.to_owned(),
                effect,
                was: was.map(|value| TaintWas { value }),
            })
            .map_err(journal_failed)?;
        Ok(())
    }

    /// Journals whether a node was cordoned before the run first touches it.
    async fn journal_cordon(&mut self, node: &str) -> Result<(), actions::Error> {
        if !self
            .journal
            .find(|u| matches!(u, Undo::Unschedulable { node: n, .. } if n == node))
            .is_empty()
        {
            return Ok(());
        }
        let Some((_, was)) = actions::node_marks(&self.client, node, "", "").await? else {
            return Err(actions::Error::NoNode(node.to_owned()));
        };
        self.journal
            .will(Undo::Unschedulable {
                node: node.to_owned(),
                was,
            })
            .map_err(journal_failed)?;
        Ok(())
    }

    /// Journals the replicas of a workload the run did not create.
    async fn journal_replicas(
        &mut self,
        ns: &str,
        kind: WorkloadKind,
        name: &str,
    ) -> Result<(), actions::Error> {
        let api_kind = match kind {
            WorkloadKind::StatefulSet => "StatefulSet",
            _ => "Deployment",
        };
        let created =
            self.applied
                .contains(&(api_kind.to_owned(), Some(ns.to_owned()), name.to_owned()));
        let seen = !self
            .journal
            .find(|u| matches!(u, Undo::Replicas { name: n, namespace: s, .. } if n == name && s == ns))
            .is_empty();
        if created || seen {
            return Ok(());
        }
        if let Some(was) = actions::replicas(&self.client, ns, kind, name).await? {
            self.journal
                .will(Undo::Replicas {
                    kind,
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    was,
                })
                .map_err(journal_failed)?;
        }
        Ok(())
    }
}
