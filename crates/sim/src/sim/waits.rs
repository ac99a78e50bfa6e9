//! Waiting for a simulated cluster to be ready: its API server's `/readyz`,
//! its nodes Ready, its controllers running; and what Ready means for a node.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::Error;
use super::agents;
use super::cluster::SimCluster;
use super::process;

impl SimCluster {
    /// Fails early, with the log tail, if a component exited.
    fn check_components(&mut self) -> Result<(), Error> {
        for proc in self.procs.values_mut() {
            if let Some(status) = proc.exit_status() {
                return Err(Error::Exited {
                    component: proc.record.name.clone(),
                    status,
                    log: proc.record.log.clone(),
                    tail: process::log_tail(&proc.record.log, 15),
                });
            }
        }
        Ok(())
    }

    /// Nothing to watch before the API server serves: ask `/readyz` every 100 ms.
    pub(super) async fn wait_apiserver_ready(
        &mut self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        loop {
            self.check_components()?;
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::io_msg(e.to_string()))?;
            if let Ok(body) = client.request_text(request).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.timeout("kube-apiserver /readyz", "kube-apiserver", since, limit));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Watches the Nodes until every one of `names` is [`ready_for_pods`].
    pub(super) async fn wait_nodes_ready(
        &mut self,
        client: &kube::Client,
        names: &[String],
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        let api: Api<Node> = Api::all(client.clone());
        let mut pending: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let mut stream = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while !pending.is_empty() {
            let next = tokio::time::timeout_at(deadline.into(), stream.try_next()).await;
            match next {
                Err(_) => {
                    let what = format!("nodes Ready (still waiting for {})", join(&pending));
                    let agent = names
                        .first()
                        .and_then(|n| self.state.node(n))
                        .map_or_else(|| "kwok/worker-1".to_owned(), agents::agent_log_component);
                    return Err(self.timeout(&what, &agent, since, limit));
                }
                // The watcher retries on its own; a component may have died.
                Ok(Err(_)) => self.check_components()?,
                Ok(Ok(None)) => return Err(Error::io_msg("node watch ended")),
                Ok(Ok(Some(node))) => {
                    if ready_for_pods(&node) {
                        let name = node.metadata.name.unwrap_or_default();
                        pending.remove(name.as_str());
                    }
                }
            }
        }
        Ok(())
    }

    /// The controller manager runs its controllers once it has created the
    /// `default` ServiceAccount; scenarios need it before creating pods.
    pub(super) async fn wait_controllers(
        &mut self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let cond =
            kube::runtime::wait::await_condition(api, "default", |sa: Option<&ServiceAccount>| {
                sa.is_some()
            });
        match tokio::time::timeout_at(deadline.into(), cond).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Error::io_msg(format!(
                "waiting for the default ServiceAccount: {}",
                crate::actions::api_text(&e)
            ))),
            Err(_) => Err(self.timeout(
                "kube-controller-manager to create the default ServiceAccount",
                "kube-controller-manager",
                since,
                limit,
            )),
        }
    }

    /// The error of a wait that ran out of time: a component's exit if one
    /// exited, else a timeout with the tail of `component`'s log.
    fn timeout(&mut self, what: &str, component: &str, since: Instant, limit: Duration) -> Error {
        if let Err(exited) = self.check_components() {
            return exited;
        }
        let log = self.layout.log(component);
        Error::Timeout {
            what: what.to_owned(),
            waited: since.elapsed(),
            limit,
            tail: process::log_tail(&log, 10),
            log,
        }
    }
}

fn join(set: &BTreeSet<&str>) -> String {
    set.iter().copied().collect::<Vec<_>>().join(", ")
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// Ready, and the controller has lifted the not-ready taint (until then the
/// scheduler may avoid the node).
pub fn ready_for_pods(node: &Node) -> bool {
    is_ready(node) && !has_taint(node, "node.kubernetes.io/not-ready")
}

pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}
