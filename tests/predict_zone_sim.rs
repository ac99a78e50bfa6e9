//! `nodefall predict --zone` on a sim of three zones of three nodes running
//! the seed workloads (seeds 000, 001, 002 and 004) and a Deployment spread
//! over the zones with a hard constraint. It ranks the zones, reading only
//! (the audit log of the API server proves it); the fit says the spread
//! Deployment's replacement stays Pending wherever a zone is lost (the
//! dark zone counts 0 of its pods, the others 1: one more is past the
//! skew). The prediction for the costliest zone, written as a scenario and
//! paused on the same cluster, passes; written again and run after a node
//! of another zone was moved into that zone, it fails: 3 of 4 nodes down is
//! a partial disruption of a small zone, whose taints stop.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::actions;
use nodefall::profile::TimingProfile;
use nodefall::sim::{SimCluster, UpOptions};
use serde_json::{Value, json};

#[path = "support/predict.rs"]
mod support;
use support::{AUDIT_ALL, only_read, predict, reader_kubeconfig, reader_objects, scenario_on};

const NAME: &str = "zones";
const NS: &str = "seed-002";
const READER: &str = "system:serviceaccount:seed-002:reader";
const LIMIT: Duration = Duration::from_secs(180);
const ZONE: &str = "topology.kubernetes.io/zone";

/// The seed manifests, each in its seed's namespace, and how many pods each
/// namespace runs once they are Ready.
const SEEDS: [(&str, &[&str], usize); 4] = [
    (
        "kep2268",
        &["statefulset-nfs.yaml", "sim-nfs-volumes.yaml"],
        8,
    ),
    ("seed-001", &["statefulset-redis.yaml"], 3),
    ("seed-002", &["nginx-deployment.yaml"], 6 + 3),
    ("seed-004", &["myapp-pdb.yaml"], 3),
];

fn zonal() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "zonal"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "zonal"}},
                    "template": {"metadata": {"labels": {"app": "zonal"}},
                                 "spec": {"terminationGracePeriodSeconds": 0,
                                          "topologySpreadConstraints": [{
                                              "maxSkew": 1, "topologyKey": ZONE,
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "zonal"}}}],
                                          "containers": [{"name": "app",
                                                          "image": "registry.invalid/app:1"}]}}}})
}

/// Watches every pod until each namespace of [`SEEDS`] has its count Ready
/// (none Terminating, none Pending).
async fn settled(client: &kube::Client) {
    let mut stream = std::pin::pin!(
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()).default_backoff()
    );
    let mut state: BTreeMap<(String, String), bool> = BTreeMap::new();
    let done = |state: &BTreeMap<(String, String), bool>| {
        SEEDS.iter().all(|(ns, _, n)| {
            let mine: Vec<bool> = state
                .iter()
                .filter(|((pns, _), _)| pns == ns)
                .map(|(_, ok)| *ok)
                .collect();
            mine.len() == *n && mine.iter().all(|ok| *ok)
        })
    };
    let r = tokio::time::timeout(LIMIT, async {
        while !done(&state) {
            let Some(Ok(event)) = stream.next().await else {
                continue;
            };
            let key = |pod: &Pod| {
                (
                    pod.metadata.namespace.clone().unwrap(),
                    pod.metadata.name.clone().unwrap(),
                )
            };
            match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                    let ready = pod.metadata.deletion_timestamp.is_none()
                        && pod.status.as_ref().is_some_and(|s| {
                            s.conditions
                                .iter()
                                .flatten()
                                .any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    state.insert(key(&pod), ready);
                }
                watcher::Event::Delete(pod) => {
                    state.remove(&key(&pod));
                }
                watcher::Event::Init => state.clear(),
                watcher::Event::InitDone => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "pods not settled within {LIMIT:?}: {state:?}");
}

#[test]
fn predict_zone_ranks_the_zones_and_its_scenario_holds_until_the_zone_grows() {
    tokio::runtime::Runtime::new().unwrap().block_on(flow());
}

async fn flow() {
    let root = tempfile::tempdir().unwrap();
    let policy = root.path().join("audit-all.yaml");
    std::fs::write(&policy, AUDIT_ALL).unwrap();
    let mut opts = UpOptions::new(NAME, TimingProfile::fast());
    opts.root = root.path().join("sim");
    opts.nodes = 9;
    opts.zones = vec!["a".into(), "b".into(), "c".into()];
    opts.extra_apiserver_args = vec![format!("--audit-policy-file={}", policy.display())];
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    for (ns, files, _) in SEEDS {
        actions::ensure_namespace(&client, ns).await.unwrap();
        for f in files {
            actions::apply_file(&client, &manifests.join(f), ns)
                .await
                .unwrap();
        }
    }
    let mine = root.path().join("zonal.yaml");
    let mut docs = vec![zonal()];
    docs.extend(reader_objects(NS, "reader"));
    let docs: Vec<String> = docs
        .iter()
        .map(|o| serde_yaml_ng::to_string(o).unwrap())
        .collect();
    std::fs::write(&mine, docs.join("---\n")).unwrap();
    actions::apply_file(&client, &mine, NS).await.unwrap();
    settled(&client).await;
    let kubeconfig = root.path().join("reader.kubeconfig");
    reader_kubeconfig(&client, &cluster, NS, "reader", &kubeconfig).await;

    // every zone, ranked; the spread Deployment's replacement stays Pending
    // in each
    let out = tempfile::tempdir().unwrap();
    let p = predict(&kubeconfig, out.path(), &["--zone"]);
    let sets = p["forecast"]["sets"].as_array().unwrap();
    assert_eq!(sets.len(), 3, "{p:#}");
    let cost = |s: &Value| -> Vec<u64> {
        [
            "servicesDark",
            "workloadsAtZero",
            "majoritiesLost",
            "notRunning",
            "budgetsBelow",
            "disrupted",
        ]
        .iter()
        .map(|k| s["cost"][k].as_u64().unwrap())
        .collect()
    };
    for (i, s) in sets.iter().enumerate() {
        assert_eq!(s["rank"], i + 1, "{s:#}");
        if i > 0 {
            assert!(cost(&sets[i - 1]) >= cost(s), "ranked by cost: {p:#}");
        }
        let zonal = s["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["workload"] == "Deployment seed-002/zonal")
            .unwrap_or_else(|| panic!("no zonal pod in {}: {s:#}", s["set"]));
        assert_eq!(
            (zonal["pending"].as_u64(), zonal["replaced"].as_u64()),
            (Some(1), Some(0)),
            "{zonal:#}"
        );
    }
    only_read(
        &cluster,
        READER,
        &[
            "nodes",
            "pods",
            "endpointslices",
            "poddisruptionbudgets",
            "persistentvolumes",
        ],
    );

    // the costliest zone's prediction, written and run: it holds
    let zone = sets[0]["set"]
        .as_str()
        .unwrap()
        .trim_start_matches("zone ")
        .to_owned();
    let state = root.path().join("sim");
    let written = |file: &str| {
        let file = root.path().join(file);
        let out = tempfile::tempdir().unwrap();
        predict(
            &kubeconfig,
            out.path(),
            &[
                "--zone",
                &zone,
                "--fault",
                "pause",
                "--namespace",
                NS,
                "--write-scenario",
                file.to_str().unwrap(),
            ],
        );
        let text = std::fs::read_to_string(&file).unwrap();
        (file, text)
    };
    let (file, text) = written("zone.yaml");
    for line in [
        "name: Deployment/zonal runs 2 of 3 off the set (0 replaced)",
        "expect: {pods: \"app=zonal\", notOn: lost, ready: 2, count: 3, holdsFor: 10s}",
        "name: every node tainted at the zone's pace (FullDisruption",
    ] {
        assert!(text.contains(line), "{line}\nin\n{text}");
    }
    let (code, said) = scenario_on(&state, NAME, &file);
    assert_eq!(code, Some(0), "the zone's prediction failed:\n{said}");

    // written again, then a node of another zone joins it: the written set
    // is 3 of the zone's 4 nodes, a partial disruption of a small zone, and
    // its taints never come
    settled(&client).await;
    let (file, _) = written("zone-again.yaml");
    let nodes: Api<Node> = Api::all(client.clone());
    let other = nodes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get(ZONE).is_some_and(|z| *z != zone))
        })
        .unwrap();
    let patch = json!({"metadata": {"labels": {ZONE: zone}}});
    nodes
        .patch(
            other.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let (code, said) = scenario_on(&state, NAME, &file);
    assert_eq!(code, Some(1), "a stale prediction must fail:\n{said}");
    assert!(
        said.lines()
            .any(|l| l.contains("(tainted): FAIL") && l.contains("not seen within")),
        "the taints are what failed:\n{said}"
    );
    assert!(
        said.contains("PartialDisruption, NoExecute taints stopped (a small zone)"),
        "the plan says why:\n{said}"
    );
    drop(cluster);
}
