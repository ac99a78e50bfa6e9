//! The observer survives a kube-apiserver restart: changes made while its
//! watches were broken are recovered by the relist, none is lost.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nodefall::observe::{Observer, Recorder};
use nodefall::profile::TimingProfile;
use nodefall::sim::{SimCluster, UpOptions};
use nodefall::timeline::{Change, ObjectRef, World};

/// A Node no agent manages: only this test creates and deletes it.
fn ghost() -> Node {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "ghost", "labels": {"kubernetes.io/hostname": "ghost"}}
    }))
    .unwrap()
}

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "probe"}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap()
}

/// Waits, watching the recorder, until `pred` holds for its world.
async fn until(rec: &Recorder, what: &str, pred: impl Fn(&World) -> bool) {
    until_rec(rec, what, |r| pred(&r.world())).await;
}

/// Waits, watching the recorder, until `pred` holds for it.
async fn until_rec(rec: &Recorder, what: &str, pred: impl Fn(&Recorder) -> bool) {
    let mut rx = rec.subscribe();
    let r = tokio::time::timeout(Duration::from_secs(60), async {
        while !pred(rec) {
            rx.changed().await.unwrap();
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "recorder never saw within 60s: {what}; its world: {:?}",
        rec.world()
    );
}

#[test]
fn watchers_recover_from_an_apiserver_restart_without_losing_transitions() {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let root = tempfile::tempdir().unwrap();
        let mut opts = UpOptions::new("restart", TimingProfile::fast());
        opts.root = root.path().to_owned();
        opts.nodes = 2;
        let mut quiet = |_: &str| {};
        let mut cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
        let client = cluster.client().await.unwrap();

        let rec = Recorder::new(Instant::now());
        let mut observer = Observer::start(&cluster.config().await.unwrap(), "default", &rec)
            .await
            .unwrap();
        observer.synced().await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("before", "worker-1"))
            .await
            .unwrap();
        until(&rec, "pod `before` Ready", |w| {
            w.pods.values().any(|p| p.name == "before" && p.ready)
        })
        .await;
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .create(&PostParams::default(), &ghost())
            .await
            .unwrap();
        until(&rec, "node `ghost` registered", |w| {
            w.nodes.get("ghost").is_some_and(|n| n.exists)
        })
        .await;
        let errors_before = rec.watch_errors();

        cluster.restart_component("kube-apiserver").await.unwrap();
        // Right away, while the watchers are still backing off: delete one
        // pod, create another, cordon a node, delete a node and register
        // one under the same name (a new UID).
        let client = cluster.client().await.unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.delete("before", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        pods.create(&PostParams::default(), &pod("after", "worker-2"))
            .await
            .unwrap();
        let nodes: Api<Node> = Api::all(client.clone());
        let cordon = serde_json::json!({"spec": {"unschedulable": true}});
        nodes
            .patch("worker-2", &PatchParams::default(), &Patch::Merge(&cordon))
            .await
            .unwrap();
        nodes
            .delete("ghost", &DeleteParams::default())
            .await
            .unwrap();
        nodes
            .create(&PostParams::default(), &ghost())
            .await
            .unwrap();

        until(
            &rec,
            "`before` gone, `after` Ready, worker-2 cordoned",
            |w| {
                !w.pods.values().any(|p| p.name == "before")
                    && w.pods.values().any(|p| p.name == "after" && p.ready)
                    && w.nodes.get("worker-2").is_some_and(|n| n.unschedulable)
            },
        )
        .await;
        until_rec(&rec, "`ghost` deleted and registered again", |r| {
            r.transitions()
                .iter()
                .filter(|t| {
                    t.object
                        == ObjectRef::Node {
                            name: "ghost".into(),
                        }
                })
                .filter(|t| t.change == Change::NodeAdded)
                .count()
                == 2
        })
        .await;
        assert!(
            rec.watch_errors() > errors_before,
            "the restart must have broken the watches"
        );

        // Every change is in the transitions, once, in order.
        let ts = rec.transitions();
        let of = |name: &str, change: &Change| {
            ts.iter()
                .filter(|t| {
                    matches!(&t.object, ObjectRef::Pod { name: n, .. } if n == name)
                        && t.change == *change
                })
                .count()
        };
        assert_eq!(of("before", &Change::PodDeleted), 1);
        assert_eq!(of("after", &Change::PodReady { ready: true }), 1);
        assert!(ts.windows(2).all(|w| w[0].at <= w[1].at));
        // The re-registered node: its predecessor's deletion, then its own
        // creation, each once.
        let ghost: Vec<&Change> = ts
            .iter()
            .filter(|t| {
                t.object
                    == ObjectRef::Node {
                        name: "ghost".into(),
                    }
            })
            .map(|t| &t.change)
            .filter(|c| matches!(c, Change::NodeAdded | Change::NodeDeleted))
            .collect();
        assert_eq!(
            ghost,
            [&Change::NodeAdded, &Change::NodeDeleted, &Change::NodeAdded],
            "{ts:#?}"
        );

        // The recorded world equals the API's ground truth.
        let live: Vec<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        let mut seen: Vec<String> = rec.world().pods.values().map(|p| p.name.clone()).collect();
        seen.sort();
        assert_eq!(seen, live);
        drop(observer);
        cluster.down().unwrap();
    });
}
