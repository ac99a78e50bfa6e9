//! Volume and event expectations decided against objects in a real API
//! server (the simulated cluster): a claim bound to a PersistentVolume, the
//! VolumeAttachments a CSI attacher would write (status through the status
//! subresource), the out-of-service taint, and the `FailedAttachVolume`
//! Multi-Attach event the attach-detach controller would send. The sim has
//! no CSI driver, so the test writes those objects itself, at the moments a
//! real cluster would; the observer, the world folding, the expectation
//! windows and the metrics are the product's own.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
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

fn attachment(name: &str, node: &str) -> VolumeAttachment {
    obj(json!({
        "metadata": {"name": name},
        "spec": {
            "attacher": "nfs.csi.k8s.io",
            "nodeName": node,
            "source": {"persistentVolumeName": PV}
        }
    }))
}

async fn set_attached(client: &kube::Client, name: &str, attached: bool) {
    Api::<VolumeAttachment>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"attached": attached}})),
        )
        .await
        .unwrap();
}

fn event(name: &str, reason: &str, message: &str) -> Event {
    let now = jiff::Timestamp::now().to_string();
    obj(json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "web-0", "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "attachdetach-controller"}
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
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    let mut nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
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

    // A claim bound to a PersistentVolume (pre-bound both ways, as a
    // provisioner leaves them), a pod using it on `a`, its volume attached there.
    let pv: PersistentVolume = obj(json!({
        "metadata": {"name": PV},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/volumes-pv"},
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
            "storageClassName": "",
            "volumeName": PV,
            "resources": {"requests": {"storage": "1Gi"}}
        }
    }));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    claims.create(&PostParams::default(), &pvc).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod(&a)).await.unwrap();
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    vas.create(&PostParams::default(), &attachment("csi-web-0-a", &a))
        .await
        .unwrap();
    set_attached(&client, "csi-web-0-a", true).await;
    until(&rec, "the claim's volume attached on a", |w| {
        w.claim_attached(CLAIM, Some(&a)) && w.pod_labels.contains_key("web-0")
    })
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

    // The remedy: the out-of-service taint. The test plays the
    // attach-detach controller: the volume is detached 1.5 s later.
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
    // The old pod: NoExecute without a toleration, so evicted; force it
    // away in case the node's agent is slow.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _ = pods
        .delete("web-0", &DeleteParams::default().grace_period(0))
        .await;
    set_attached(&client, "csi-web-0-a", false).await;
    vas.delete("csi-web-0-a", &DeleteParams::default())
        .await
        .unwrap();

    // `{pvc: data-web-0, detachedFrom: a, within: 20s}` passes ...
    let d = judge(&rec, &claim_on(&a), &detached, within(20_000), taint_at).await;
    let Decision::Pass {
        observed: Some(after),
        ..
    } = d
    else {
        panic!("detach within 20s: {d:?}");
    };
    assert!(
        (1_000..20_000).contains(&after),
        "detached after {after} ms"
    );
    // ... and one with a window shorter than the detach took fails.
    let d = judge(&rec, &claim_on(&a), &detached, within(300), taint_at).await;
    assert!(
        matches!(d, Decision::Fail { observed: Some(o), .. } if o >= 1_000),
        "a detach after 1.5 s is not within 300 ms: {d:?}"
    );
    // Not attached on `b` yet: `attachedTo: b` within 500 ms fails.
    let d = judge(&rec, &claim_on(&b), &attached, within(500), taint_at).await;
    assert!(matches!(d, Decision::Fail { observed: None, .. }), "{d:?}");

    // The replacement on `b`: a Multi-Attach event first, then attached.
    until(&rec, "the old pod gone", |w| w.pods.is_empty()).await;
    let replaced_at = rec.now();
    pods.create(&PostParams::default(), &pod(&b)).await.unwrap();
    let multi = "Multi-Attach error for volume \"volumes-pv-web-0\" Volume is already exclusively attached to one node and can't be attached to another";
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    events
        .create(
            &PostParams::default(),
            &event("web-0.multi", "FailedAttachVolume", multi),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    vas.create(&PostParams::default(), &attachment("csi-web-0-b", &b))
        .await
        .unwrap();
    set_attached(&client, "csi-web-0-b", true).await;
    events
        .create(
            &PostParams::default(),
            &event(
                "web-0.attached",
                EXTRA_REASON,
                "AttachVolume.Attach succeeded",
            ),
        )
        .await
        .unwrap();
    let d = judge(&rec, &claim_on(&b), &attached, within(20_000), replaced_at).await;
    assert!(pass(&d), "attachedTo b: {d:?}");

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
    // From after the event, `never: 1s` passes; a message that was never
    // sent is not seen within 1 s; pods of another app saw no event.
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

    // A repeat of the same event (count bumped) is recorded again, and the
    // scenario's own reason was recorded.
    events
        .patch(
            "web-0.multi",
            &PatchParams::default(),
            &Patch::Merge(json!({"count": 2})),
        )
        .await
        .unwrap();
    until(&rec, "the repeated event and the extra reason", |w| {
        w.events.iter().any(|e| e.count == Some(2))
            && w.events.iter().any(|e| e.reason == EXTRA_REASON)
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
            .is_some_and(|ms| (1_000..20_000).contains(&ms)),
        "{detach:?}"
    );
    let p = &m.pods[0];
    assert_eq!(p.replacement_node.as_deref(), Some(b.as_str()), "{p:?}");
    assert!(
        p.replacement_volume_wait
            .is_some_and(|ms| (400..20_000).contains(&ms)),
        "{p:?}"
    );
    drop(observer);
    drop(cluster);
}
