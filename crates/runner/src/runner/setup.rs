//! Setup: the scenario namespace (journaled when the run creates it), the
//! watchers, the manifests applied object by object (each one the run
//! creates journaled for deletion first), and readiness.

use std::time::Duration;

/// How long setup waits for the recorder to have the pods on their nodes
/// as the API server has them.
const CATCH_UP: Duration = Duration::from_secs(10);

use super::journal::{Settled, Undo};
use super::{Error, Run, journal_failed};
use crate::actions;

impl Run<'_> {
    pub(super) async fn setup(&mut self, ns: &str) -> Result<(), Error> {
        let setup_err = |e| Error::Setup(Box::new(e));
        if actions::namespace_uid(&self.client, ns)
            .await
            .map_err(setup_err)?
            .is_none()
        {
            let id = self.journal.will(Undo::Namespace {
                name: ns.to_owned(),
                uid: None,
            })?;
            let created = actions::ensure_namespace(&self.client, ns)
                .await
                .map_err(setup_err)?;
            if created {
                let uid = actions::namespace_uid(&self.client, ns)
                    .await
                    .map_err(setup_err)?;
                self.journal.update(
                    id,
                    Undo::Namespace {
                        name: ns.to_owned(),
                        uid,
                    },
                )?;
            } else {
                // Someone else created it in between: not ours to delete.
                self.journal.settle(id, Settled::Superseded)?;
            }
        }
        let reasons = event_reasons(&self.plan.scenario);
        let mut observer = self.view.observe(ns, &self.rec, &reasons).await?;
        tokio::time::timeout(Duration::from_secs(60), observer.synced())
            .await
            .map_err(|_| {
                setup_err(actions::Error::Timeout {
                    what: "the watchers' first list".into(),
                    after: Duration::from_secs(60),
                })
            })?;
        self.observer = Some(observer);
        self.observed_from = Some(self.rec.now());
        let setup = &self.plan.scenario.setup;
        for file in setup
            .apply
            .iter()
            .filter(|f| f.applies_to(self.plan.backend))
        {
            let mut names = Vec::new();
            for o in self.manifest_objects(&file.path) {
                self.apply_one(&o).await.map_err(setup_err)?;
                names.push(format!("{}/{}", o.kind, o.name));
            }
            self.progress
                .log(&format!("  applied {}: {}", file.file, names.join(", ")));
        }
        for check in &setup.wait_ready {
            let msg = format!(
                "setup: waiting for {} {} to be ready",
                check.kind.name(),
                check.name
            );
            self.progress.waiting(&msg, &msg);
            actions::wait_ready(&self.client, ns, check)
                .await
                .map_err(setup_err)?;
        }
        self.catch_up(ns).await;
        Ok(())
    }

    /// Waits, at most [`CATCH_UP`], until the recorder has each of the
    /// namespace's pods, on the node the API server has it bound to (a
    /// binding never changes, so a later state cannot look like a lag;
    /// readiness can flip either way meanwhile, so it is not compared). The
    /// world just before T0 is what the run's figures count from,
    /// and right after setup the watch can lag the API: in CI a pod not yet
    /// on its node in the recorder at T0 was on no failed node, so its
    /// replacement was nobody's and `duplicateWindow` had nothing to judge.
    /// A lag past the bound is noted, never an error.
    async fn catch_up(&mut self, ns: &str) {
        use k8s_openapi::api::core::v1::Pod;
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), ns);
        let Ok(pods) = actions::list_paged(&api, |p: Pod| {
            let node = p.spec.and_then(|s| s.node_name);
            p.metadata
                .deletion_timestamp
                .is_none()
                .then_some((p.metadata.uid?, node))
        })
        .await
        else {
            return;
        };
        let rec = self.rec.clone();
        let seen = move || {
            rec.with_world(|w| {
                pods.iter().all(|(uid, node)| {
                    w.pods
                        .get(uid)
                        .is_some_and(|v| node.is_none() || v.node == *node)
                })
            })
        };
        let mut changes = self.rec.subscribe();
        let caught_up = async {
            while !seen() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        if tokio::time::timeout(CATCH_UP, caught_up).await.is_err() {
            self.note(&format!(
                "the watch had not caught up with the API server's pods after {}s",
                CATCH_UP.as_secs()
            ));
        }
    }

    /// Applies one object; one the run has not created yet is journaled for
    /// deletion first.
    pub(super) async fn apply_one(
        &mut self,
        o: &actions::ManifestObject,
    ) -> Result<(), actions::Error> {
        let key = (o.kind.clone(), o.namespace.clone(), o.name.clone());
        let undo = |uid: Option<String>| Undo::Object {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            uid,
        };
        if self.applied.contains(&key) {
            actions::apply_object(&self.client, o).await?;
            return Ok(());
        }
        let id = self.journal.will(undo(None)).map_err(journal_failed)?;
        self.applied.insert(key);
        let uid = actions::apply_object(&self.client, o).await?;
        self.journal
            .update(id, undo(Some(uid)))
            .map_err(journal_failed)?;
        Ok(())
    }
}

/// The event reasons the scenario's expectations and guards name: the
/// observer records those besides its built-in list, so any reason can be
/// expected.
fn event_reasons(scenario: &crate::scenario::Checked) -> Vec<String> {
    use crate::scenario::checked::{Condition, EventCond, StepKind};
    let expectations = scenario.steps.iter().filter_map(|s| match &s.kind {
        StepKind::Expect(e) => Some(e.conditions.as_slice()),
        _ => None,
    });
    let guards = scenario.guards.iter().map(|g| g.conditions.as_slice());
    let mut out: Vec<String> = Vec::new();
    for c in expectations.chain(guards).flatten() {
        if let Condition::Event(EventCond { reason, .. }) = c
            && !out.contains(reason)
        {
            out.push(reason.clone());
        }
    }
    out
}
