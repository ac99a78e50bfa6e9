//! An example automatic remediator, of the kind many teams write: once a
//! Node has been NotReady (Ready False or Unknown) for `--after`, it taints
//! it out of service (`node.kubernetes.io/out-of-service=nodeshutdown:
//! NoExecute`), so pod GC force-deletes its pods and their volumes are
//! released; once the Node is Ready again it takes its taint off. Its
//! changes carry the field manager `example-remediator`, which nodefall's
//! judge of the remediation names (docs/remediation.md).
//!
//! It does what such controllers do, dangers included: it never checks the
//! machine is really off, so after a partition it releases pods whose
//! containers still run. With `--ready-for`, it forgets a node's NotReady
//! only once the node has been Ready that long (a guard against flapping
//! many write): a node that flaps is then tainted the moment it goes
//! NotReady again, for a failure it had recovered from. Judging that is
//! nodefall's job, not its.
//!
//! ```text
//! cargo run --example remediator -- [--after 30s] [--ready-for 0s] [--node NAME]...
//! ```
//! (the cluster of `KUBECONFIG`; `--node` limits it to those nodes). It
//! stops on SIGINT or SIGTERM.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: its log is its output"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};

const MANAGER: &str = "example-remediator";
const KEY: &str = "node.kubernetes.io/out-of-service";

struct Args {
    after: Duration,
    ready_for: Duration,
    nodes: Vec<String>,
}

/// `30s`: whole seconds.
fn seconds(flag: &str, v: Option<String>) -> Result<Duration, String> {
    let v = v.ok_or(format!("{flag} needs a duration (30s)"))?;
    v.strip_suffix('s')
        .and_then(|n| n.parse::<u64>().ok())
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{flag} {v}: whole seconds, like 30s"))
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        after: Duration::from_secs(30),
        ready_for: Duration::ZERO,
        nodes: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--after" => out.after = seconds("--after", it.next())?,
            "--ready-for" => out.ready_for = seconds("--ready-for", it.next())?,
            "--node" => out.nodes.push(it.next().ok_or("--node needs a name")?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(out)
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == KEY))
}

/// Adds or removes the taint (a merge patch of the whole list, guarded by
/// the resourceVersion read: a conflict is retried on the next tick).
async fn set_taint(api: &Api<Node>, n: &Node, on: bool) -> Result<(), kube::Error> {
    let mut taints: Vec<Taint> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints.retain(|t| t.key != KEY);
    if on {
        taints.push(Taint {
            key: KEY.into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
            time_added: None,
        });
    }
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": n.metadata.resource_version},
        "spec": {"taints": taints},
    });
    let pp = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    let name = n.metadata.name.as_deref().unwrap_or_default();
    api.patch(name, &pp, &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let client = kube::Client::try_default().await?;
    let api: Api<Node> = Api::all(client);
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    // When each node was first seen NotReady (by this process's clock), and
    // since when it has been Ready again.
    let mut down_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut up_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut stream = std::pin::pin!(
        watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    println!(
        "example-remediator: out-of-service after {}s NotReady (forgotten once Ready for {}s)",
        args.after.as_secs(),
        args.ready_for.as_secs()
    );
    loop {
        tokio::select! {
            n = stream.next() => match n {
                Some(Ok(n)) => {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    if args.nodes.is_empty() || args.nodes.contains(&name) {
                        if ready(&n) {
                            up_since.entry(name.clone()).or_insert_with(Instant::now);
                        } else {
                            up_since.remove(&name);
                            down_since.entry(name.clone()).or_insert_with(Instant::now);
                        }
                        nodes.insert(name, n);
                    }
                }
                Some(Err(e)) => eprintln!("example-remediator: watch: {e}"),
                None => return Ok(()),
            },
            _ = tick.tick() => {
                // NotReady forgotten once Ready for `--ready-for`
                for (name, up) in &up_since {
                    if up.elapsed() >= args.ready_for {
                        down_since.remove(name);
                    }
                }
                for (name, n) in &nodes {
                    let overdue = down_since.get(name).is_some_and(|t| t.elapsed() >= args.after);
                    let act = match (overdue, ready(n), tainted(n)) {
                        (true, false, false) => Some(true),
                        (_, true, true) => Some(false),
                        _ => None,
                    };
                    if let Some(on) = act {
                        match set_taint(&api, n, on).await {
                            Ok(()) => println!(
                                "example-remediator: {name}: out-of-service taint {}",
                                if on { "added" } else { "removed" }
                            ),
                            Err(e) => eprintln!("example-remediator: {name}: {e}"),
                        }
                    }
                }
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
        }
    }
}
