//! Volume and event expectations decided against what a real control plane
//! does with volumes that really attach (the simulated cluster, issue 59): a
//! claim bound to a PersistentVolume of the kind clusters' CSI driver, its
//! VolumeAttachments made by the real attach-detach controller and attached
//! by the driver's own attacher, the volumes the sim's kubelets report in
//! use. A pod force-deleted from a frozen node leaves its volume attached
//! there and its replacement meets a real Multi-Attach error, until the
//! out-of-service taint lets the controller detach it and attach it to the
//! replacement's node. The test writes no VolumeAttachment, attachment status
//! or event itself; the observer, the world folding, the expectation windows
//! and the metrics are the product's own.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use nodefall::actions;
use nodefall::expect::{self, Decision, ResolvedSubject};
use nodefall::observe::{Observer, Recorder};
use nodefall::profile::TimingProfile;
use nodefall::scenario::checked::{Condition, EventCond, VolumeCond};
use nodefall::scenario::expr::Window;
use nodefall::scenario::model::TaintEffect;
use nodefall::scenario::selector::Selector;
use nodefall::sim::{SimCluster, UpOptions};
use nodefall::timeline::Ms;
use nodefall::timeline::metrics;
use serde_json::json;

#[path = "support/skip.rs"]
mod skip;

const NS: &str = "volumes";
const CLAIM: &str = "data-web-0";
const PV: &str = "volumes-pv-web-0";
const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// Not in the observer's built-in list: recorded only because the test
/// passes it, as the runner passes the reasons a scenario names.
const EXTRA_REASON: &str = "SuccessfulAttachVolume";

fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn pod(node: &str) -> Pod {
    obj(json!({
        "metadata": {"name": "web-0", "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "web", "image": "registry.invalid/web:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}]
        }
    }))
}

/// Decides `window` for `conditions` on the recorded timeline as the runner
/// does, waiting (bounded) until it can be decided.
async fn judge(
    rec: &Recorder,
    subject: &ResolvedSubject,
    conditions: &[Condition],
    window: Window,
    anchor: Ms,
) -> Decision {
    let start = anchor;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let series = expect::truth_series(&rec.transitions(), subject, conditions, anchor);
        let d = expect::decide(&series, window, anchor, start, rec.now());
        if d != Decision::Pending {
            return d;
        }
        assert!(Instant::now() < until, "undecided after 60s: {series:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pass(d: &Decision) -> bool {
    matches!(d, Decision::Pass { .. })
}

async fn until(rec: &Recorder, what: &str, pred: impl Fn(&nodefall::timeline::World) -> bool) {
    let mut rx = rec.subscribe();
    let r = tokio::time::timeout(Duration::from_secs(60), async {
        while !pred(&rec.world()) {
            rx.changed().await.unwrap();
        }
    })
    .await;
    assert!(r.is_ok(), "never saw within 60s: {what}: {:?}", rec.world());
}

#[test]
fn volume_and_event_expectations_against_the_real_api() {
    tokio::runtime::Runtime::new().unwrap().block_on(flow());
}

async fn flow() {
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("volumes", TimingProfile::fast());
    opts.root = root.path().to_owned();
    let mut quiet = |_: &str| {};
    let mut cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    if !skip::unless_csi_attacher(
        &cluster,
        "volume_and_event_expectations_against_the_real_api",
    ) {
        return;
    }
    let client = cluster.client().await.unwrap();
    let mut nodes: Vec<String> = cluster
        .state()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    nodes.sort();
    let (a, b) = (nodes[0].clone(), nodes[1].clone());

    actions::ensure_namespace(&client, NS).await.unwrap();
    let started = jiff::Timestamp::now();
    let rec = Recorder::new(Instant::now());
    let config = cluster.config().await.unwrap();
    let mut observer = Observer::start_with_reasons(&config, NS, &rec, &[EXTRA_REASON.to_owned()])
        .await
        .unwrap();
    observer.synced().await;

    // A claim bound to a PersistentVolume of the kind driver (pre-bound both
    // ways, as a provisioner leaves them), a pod using it on `a`: the
    // controller and the attacher attach it there.
    let pv: PersistentVolume = obj(json!({
        "metadata": {"name": PV},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "nodefall-csi",
            "csi": {"driver": "csi.nodefall.dev", "volumeHandle": PV},
            "claimRef": {"namespace": NS, "name": CLAIM}
        }
    }));
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
    let pvc: PersistentVolumeClaim = obj(json!({
        "metadata": {"name": CLAIM},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "nodefall-csi",
            "volumeName": PV,
            "resources": {"requests": {"storage": "1Gi"}}
        }
    }));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    claims.create(&PostParams::default(), &pvc).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod(&a)).await.unwrap();
    until(
        &rec,
        "the claim's volume attached on a, its pod Running",
        |w| {
            w.claim_attached(CLAIM, Some(&a))
                && w.pods
                    .values()
                    .any(|p| p.name == "web-0" && p.phase == "Running")
        },
    )
    .await;

    let claim_on = |node: &str| ResolvedSubject::Pvc {
        claim: CLAIM.into(),
        node: Some(node.to_owned()),
    };
    let attached = [Condition::Volume(VolumeCond::Attached(true))];
    let detached = [Condition::Volume(VolumeCond::Attached(false))];
    let within = |ms| Window::Between { from: 0, to: ms };
    // T0 strictly after the attachment was seen, as a fault's start would
    // be: the metrics take the world just before T0.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t0 = rec.now();
    assert!(pass(
        &judge(&rec, &claim_on(&a), &attached, within(1_000), t0).await
    ));

    // `a` freezes (its kubelet reports nothing more: the volume stays in
    // use there), its pod is force-deleted and made again on `b`.
    let unique = format!("kubernetes.io/csi/csi.nodefall.dev^{PV}");
    let in_use = |node: &str| {
        let client = client.clone();
        let node = node.to_owned();
        async move {
            Api::<Node>::all(client)
                .get(&node)
                .await
                .unwrap()
                .status
                .and_then(|s| s.volumes_in_use)
                .unwrap_or_default()
        }
    };
    assert_eq!(
        in_use(&a).await,
        std::slice::from_ref(&unique),
        "{a} reports its volume"
    );
    cluster.pause_node(&a).await.unwrap();
    pods.delete("web-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    until(&rec, "the old pod gone", |w| w.pods.is_empty()).await;
    let replaced_at = rec.now();
    pods.create(&PostParams::default(), &pod(&b)).await.unwrap();

    // The controller refuses to attach it to `b` (a Multi-Attach error:
    // once per pod, as on kind) and does not detach it from `a`, which still
    // reports it in use.
    until(&rec, "the Multi-Attach error", |w| {
        w.events
            .iter()
            .any(|e| e.reason == "FailedAttachVolume" && e.message.contains("Multi-Attach"))
    })
    .await;
    let d = judge(&rec, &claim_on(&a), &detached, within(1_000), replaced_at).await;
    assert!(
        matches!(d, Decision::Fail { observed: None, .. }),
        "detached from the frozen node without the taint: {d:?}"
    );
    assert_eq!(
        in_use(&a).await,
        std::slice::from_ref(&unique),
        "{a} is frozen: its list stays"
    );
    let d = judge(&rec, &claim_on(&b), &attached, within(500), replaced_at).await;
    assert!(matches!(d, Decision::Fail { observed: None, .. }), "{d:?}");
    assert_ne!(
        pods.get("web-0")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Running"),
        "the replacement started without its volume"
    );

    // The remedy: the out-of-service taint. The controller detaches the
    // volume from `a` at once and attaches it to `b`.
    actions::taint(
        &client,
        &a,
        OUT_OF_SERVICE,
        Some("nodeshutdown"),
        TaintEffect::NoExecute,
    )
    .await
    .unwrap();
    let taint_at = rec.now();
    // `{pvc: data-web-0, detachedFrom: a, within: 20s}` passes ...
    let d = judge(&rec, &claim_on(&a), &detached, within(20_000), taint_at).await;
    let Decision::Pass {
        observed: Some(after),
        ..
    } = d
    else {
        panic!("detach within 20s: {d:?}");
    };
    assert!((0..20_000).contains(&after), "detached after {after} ms");
    // ... `attachedTo: b` too, and the replacement runs.
    let d = judge(&rec, &claim_on(&b), &attached, within(20_000), taint_at).await;
    assert!(pass(&d), "attachedTo b: {d:?}");
    until(&rec, "the replacement Running on b", |w| {
        w.pods.values().any(|p| {
            p.name == "web-0" && p.node.as_deref() == Some(b.as_str()) && p.phase == "Running"
        })
    })
    .await;

    let web = || ResolvedSubject::Pods {
        selector: Selector::parse("app=web").unwrap(),
        on: None,
        not_on: None,
    };
    let failed_attach = |message: Option<&str>| {
        [Condition::Event(EventCond {
            reason: "FailedAttachVolume".into(),
            message: message.map(Into::into),
        })]
    };
    // `{event: FailedAttachVolume, pods: app=web, message: Multi-Attach, within: 20s}`
    let d = judge(
        &rec,
        &web(),
        &failed_attach(Some("Multi-Attach")),
        within(20_000),
        replaced_at,
    )
    .await;
    assert!(pass(&d), "{d:?}");
    // `never: 20s` from the same anchor fails: the event was seen.
    let never = Window::Never { duration: 20_000 };
    let d = judge(&rec, &web(), &failed_attach(None), never, replaced_at).await;
    assert!(matches!(d, Decision::Fail { .. }), "{d:?}");
    // Once attached, `never: 1s` passes; a message that was never sent is
    // not seen within 1 s; pods of another app saw no event.
    let later = rec.now();
    let short_never = Window::Never { duration: 1_000 };
    let d = judge(&rec, &web(), &failed_attach(None), short_never, later).await;
    assert!(pass(&d), "{d:?}");
    let d = judge(
        &rec,
        &web(),
        &failed_attach(Some("timed out waiting")),
        within(1_000),
        replaced_at,
    )
    .await;
    assert!(matches!(d, Decision::Fail { observed: None, .. }), "{d:?}");
    let db = ResolvedSubject::Pods {
        selector: Selector::parse("app=db").unwrap(),
        on: None,
        not_on: None,
    };
    let d = judge(&rec, &db, &failed_attach(None), short_never, replaced_at).await;
    assert!(pass(&d), "{d:?}");
    // The controller's own success event, recorded for the reason the
    // scenario names.
    until(&rec, "the extra reason", |w| {
        w.events.iter().any(|e| e.reason == EXTRA_REASON)
    })
    .await;

    // The metrics of it: the detach after the taint, the replacement's wait.
    let m = metrics::compute(
        &rec.transitions(),
        t0,
        std::slice::from_ref(&a),
        rec.now(),
        started,
    );
    assert_eq!(m.volume_detaches.len(), 1, "{:?}", m.volume_detaches);
    let detach = &m.volume_detaches[0];
    assert_eq!(
        (detach.claim.as_deref(), detach.node.as_str()),
        (Some(CLAIM), a.as_str())
    );
    assert!(
        detach
            .detach_after
            .is_some_and(|ms| (0..20_000).contains(&ms)),
        "{detach:?}"
    );
    let p = &m.pods[0];
    assert_eq!(p.replacement_node.as_deref(), Some(b.as_str()), "{p:?}");
    assert!(
        p.replacement_volume_wait
            .is_some_and(|ms| (400..60_000).contains(&ms)),
        "{p:?}"
    );
    drop(observer);
    drop(cluster);
}
