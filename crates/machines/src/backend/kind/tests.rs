//! The kind backend's unit tests: faults as the commands they run, against a fake `docker`.

use super::*;
use crate::record::machines::{PodContainer, Power};

use crate::exec::fake::Fake;

/// What `docker ps` and `docker inspect` answer unless a test says
/// otherwise.
const ANSWERS: &[(&str, &str)] = &[
    (
        "docker ps",
        "kind-control-plane\tcontrol-plane\nkind-worker\tworker\nkind-worker2\tworker\n",
    ),
    ("docker inspect", "172.18.0.3\n"),
];

/// Records commands; the first answer whose prefix a command line starts
/// with (those in `first`, then [`ANSWERS`]) is what it prints.
fn fake_with(first: &[(&str, &str)]) -> Fake {
    let f = Fake::default();
    for (prefix, out) in first.iter().chain(ANSWERS) {
        f.answer(prefix, 0, out, "");
    }
    f
}

fn fake() -> Fake {
    fake_with(&[])
}

/// The look script's output as a kind node printed it (kind 1.35,
/// containerd 1.6): a sandbox and a container of one pod.
#[test]
fn a_look_lists_the_pods_containers_not_their_sandboxes() {
    let out = concat!(
        "8bab5bc8 \"io.kubernetes.cri.container-type\":\"sandbox\" ",
        "\"io.kubernetes.cri.sandbox-name\":\"kind-cni-2gtck\" ",
        "\"io.kubernetes.cri.sandbox-namespace\":\"kube-system\" ",
        "\"io.kubernetes.cri.sandbox-uid\":\"9dffdc6a\" \n",
        "716558c5 \"io.kubernetes.cri.container-name\":\"kind-cni\" ",
        "\"io.kubernetes.cri.container-type\":\"container\" ",
        "\"io.kubernetes.cri.sandbox-name\":\"kind-cni-2gtck\" ",
        "\"io.kubernetes.cri.sandbox-namespace\":\"kube-system\" ",
        "\"io.kubernetes.cri.sandbox-uid\":\"9dffdc6a\" \n",
        // a task whose spec was gone: no annotations, not a pod's
        "0badc0de \n",
    );
    assert_eq!(
        parse_look(out),
        vec![PodContainer {
            namespace: "kube-system".into(),
            pod: "kind-cni-2gtck".into(),
            uid: "9dffdc6a".into(),
            container: "kind-cni".into(),
        }]
    );
}

#[test]
fn eyes_read_the_container_s_state_when_the_shell_is_refused() {
    let fake = Fake::default();
    fake.answer(
        "docker exec",
        1,
        "",
        "Error response from daemon: container is paused",
    );
    for (prefix, out) in [("docker inspect", "paused\n")].iter().chain(ANSWERS) {
        fake.answer(prefix, 0, out, "");
    }
    let b = KindBackend::discover("kind", "docker", fake).unwrap();
    let eyes = b.eyes().unwrap();
    let (power, listed) = eyes.look("kind-worker");
    assert_eq!(power, Power::Paused);
    assert!(listed.is_err());
}

#[test]
fn finds_nodes_by_kind_labels_and_maps_faults_to_commands() {
    let f = fake();
    let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    assert_eq!(
        b.nodes.keys().collect::<Vec<_>>(),
        ["kind-control-plane", "kind-worker", "kind-worker2"]
    );
    assert_eq!(b.nodes["kind-worker"].role, "worker");
    assert_eq!(
        f.lines()[0],
        "docker ps -a --filter label=io.x-k8s.kind.cluster=kind --format '{{.Names}}\t{{.Label \"io.x-k8s.kind.role\"}}'"
    );
    let line = |fault| {
        b.commands("kind-worker", fault)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    assert_eq!(line(FaultKind::PauseVm), "docker pause kind-worker");
    assert_eq!(
        line(FaultKind::StopKubelet),
        "docker exec kind-worker systemctl stop kubelet"
    );
    assert_eq!(
        line(FaultKind::DropNic),
        "docker network disconnect kind kind-worker"
    );
    assert!(b.commands("kind-worker9", FaultKind::PauseVm).is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nodes_shell_is_docker_exec() {
    let f = fake();
    let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    let (via, out) = b
        .shell("kind-worker", "systemd-inhibit --list")
        .await
        .expect("kind has a shell on its nodes");
    assert_eq!(via, "docker exec kind-worker");
    assert!(out.is_ok());
    assert_eq!(
        f.lines().last().map(String::as_str),
        Some("docker exec kind-worker sh -c 'systemd-inhibit --list'")
    );
    assert!(b.shell("kind-worker9", "true").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn poweron_gives_the_node_its_old_address_back() {
    let f = fake();
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
    b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
    let ran = f.lines();
    assert_eq!(
        ran[1..],
        [
            "docker inspect --format '{{with index .NetworkSettings.Networks \"kind\"}}{{.IPAddress}}{{end}}' kind-worker",
            "docker kill kind-worker",
            "docker network disconnect --force kind kind-worker",
            "docker network connect --ip 172.18.0.3 kind kind-worker",
            "docker start kind-worker",
        ]
    );
}

fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n
}

#[test]
fn restart_policies_read_as_docker_update_takes_them() {
    assert_eq!(restart_flag("on-failure:1"), "on-failure:1");
    assert_eq!(restart_flag("on-failure:0"), "on-failure");
    assert_eq!(restart_flag("always:0"), "always");
    assert_eq!(restart_flag("unless-stopped:0"), "unless-stopped");
    assert_eq!(restart_flag("no:0"), "no");
    assert_eq!(restart_flag(":0"), "no");
    assert_eq!(Memo::parse("172.18.0.3").ip.as_deref(), Some("172.18.0.3"));
}

/// kind's `on-failure:1` and systemd's exit 130 on poweroff would make
/// Docker start a shut-down node again: the policy is off from before
/// the poweroff until the power-on puts back the one the journal holds.
#[tokio::test(flavor = "multi_thread")]
async fn shutdown_turns_the_restart_policy_off_and_poweron_puts_it_back() {
    let f = fake_with(&[(
        "docker inspect --format '{{.HostConfig.RestartPolicy",
        "on-failure:1\n",
    )]);
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    let said = b
        .resolve(
            &node("kind-worker"),
            &[FaultKind::Shutdown, FaultKind::Poweron],
        )
        .await
        .unwrap();
    assert!(
        said.starts_with(
            "node kind-worker = container kind-worker, address 172.18.0.3, restart policy on-failure:1; network kind"
        ),
        "{said}"
    );
    // What the journal gets before the shutdown: enough to undo it.
    let memo = b.memo("kind-worker", FaultKind::Shutdown).unwrap();
    assert_eq!(memo, r#"{"ip":"172.18.0.3","restart":"on-failure:1"}"#);
    f.clear();
    b.inject("kind-worker", FaultKind::Shutdown).await.unwrap();
    b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
    let ran = f.lines();
    let ran: Vec<_> = ran
        .iter()
        .filter(|l| !l.starts_with("docker inspect"))
        .collect();
    assert_eq!(
        ran,
        [
            "docker update --restart=no kind-worker",
            "docker exec kind-worker systemctl poweroff",
            "docker wait kind-worker",
            "docker network disconnect --force kind kind-worker",
            "docker network connect --ip 172.18.0.3 kind kind-worker",
            "docker start kind-worker",
            "docker update --restart=on-failure:1 kind-worker",
        ]
    );
    // A poweroff's power-on leaves the policy alone.
    f.clear();
    b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
    b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
    assert!(
        !f.lines().iter().any(|l| l.contains("update")),
        "{:?}",
        f.lines()
    );

    // `nodefall recover` after a kill between the policy's change and
    // the poweroff: the node still runs, the policy is put back.
    let (f, mut b) = in_state("running\n");
    b.remember("kind-worker", &memo);
    let found = b.restore("kind-worker", FaultKind::Poweron).await.unwrap();
    assert_eq!(
        found,
        "found container running; put back its restart policy"
    );
    assert_eq!(
        f.lines().last().map(String::as_str),
        Some("docker update --restart=on-failure:1 kind-worker")
    );
}

/// A backend whose node containers report `status` to `docker inspect`.
fn in_state(status: &'static str) -> (Fake, KindBackend<Fake>) {
    let f = fake_with(&[("docker inspect --format '{{.State.Status}}'", status)]);
    let b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    (f, b)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revert_brings_the_container_back_from_whatever_state_it_is_in() {
    // A resume cut short: the container is not paused but stopped.
    let (f, mut b) = in_state("exited\n");
    b.remember("kind-worker", "172.18.0.3");
    let found = b.restore("kind-worker", FaultKind::ResumeVm).await.unwrap();
    assert_eq!(found, "found container exited; started it");
    assert!(
        f.lines().iter().any(|l| l == "docker start kind-worker"),
        "{:?}",
        f.lines()
    );
    // Powered on by the interrupted revert already: nothing to undo.
    let (f, mut b) = in_state("running\n");
    let found = b.restore("kind-worker", FaultKind::Poweron).await.unwrap();
    assert_eq!(found, "found container running; nothing to do");
    assert_eq!(f.lines().len(), 2, "ps and inspect only");
    // A stop-kubelet whose node was also paused: unpaused, then the kubelet.
    let (f, mut b) = in_state("paused\n");
    let found = b
        .restore("kind-worker", FaultKind::StartKubelet)
        .await
        .unwrap();
    assert_eq!(
        found,
        "found container paused; unpaused it, started the kubelet"
    );
    let ran = f.lines();
    assert_eq!(
        ran[2..],
        [
            "docker unpause kind-worker",
            "docker exec kind-worker systemctl start kubelet"
        ]
    );
}

/// A stock kind network: Docker refuses `--ip`, and the node's address
/// after the reconnect is another one.
fn stock_network() -> Fake {
    let f = Fake::default();
    f.answer(
        "docker network connect --ip",
        1,
        "",
        "Error response from daemon: user specified IP address is supported only when \
         connecting to networks with user configured subnets\n",
    );
    let looks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    f.answer_with("docker inspect --format '{{with index", move |_| {
        let n = looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ip = if n == 0 {
            "172.18.0.3\n"
        } else {
            "172.18.0.9\n"
        };
        Ok(crate::exec::fake::exited(0, ip, ""))
    });
    for (prefix, out) in ANSWERS {
        f.answer(prefix, 0, out, "");
    }
    f
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_stock_kind_network_a_reconnected_node_is_moved_to_its_new_address() {
    let f = stock_network();
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    b.inject("kind-worker", FaultKind::DropNic).await.unwrap();
    b.inject("kind-worker", FaultKind::RestoreNic)
        .await
        .unwrap();
    let ran = f.lines();
    assert_eq!(
        ran[2..5],
        [
            "docker network disconnect kind kind-worker",
            "docker network connect --ip 172.18.0.3 kind kind-worker",
            "docker network connect kind kind-worker",
        ]
    );
    let last = ran.last().unwrap();
    assert!(
        last.starts_with("docker exec kind-worker sh -c ")
            && last.ends_with(" nodefall-readdress 172.18.0.3 172.18.0.9"),
        "{ran:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_stock_kind_network_a_powered_on_node_starts_on_the_address_docker_gives() {
    let f = stock_network();
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    b.inject("kind-worker", FaultKind::Poweroff).await.unwrap();
    b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
    // kind's entrypoint moves a started node to its new address itself.
    assert_eq!(
        f.lines()[2..],
        [
            "docker kill kind-worker",
            "docker network disconnect --force kind kind-worker",
            "docker network connect --ip 172.18.0.3 kind kind-worker",
            "docker network connect kind kind-worker",
            "docker start kind-worker",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_preflight_says_what_a_revert_will_do_on_the_network() {
    let f = stock_network();
    f.answer(
        "docker network inspect",
        0,
        "172.18.0.0/16|172.18.0.1 fc00:f853:ccd:e793::/64| ",
        "",
    );
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    let said = b
        .resolve(&node("kind-worker"), &[FaultKind::Poweroff])
        .await
        .unwrap();
    assert!(
        said.contains(
            "address 172.18.0.3; network kind's IPv4 subnet 172.18.0.0/16 was chosen by Docker"
        ),
        "{said}"
    );
}

/// A fault on a set goes through a fork per node: what the fork learnt
/// (the policy a shutdown turned off) comes back with `join`, so the
/// power-on the original makes puts it back.
#[tokio::test(flavor = "multi_thread")]
async fn a_fork_s_shutdown_is_put_back_by_the_original_after_the_join() {
    let f = fake_with(&[(
        "docker inspect --format '{{.HostConfig.RestartPolicy",
        "on-failure:1\n",
    )]);
    let mut b = KindBackend::discover("kind", "docker", f.clone()).unwrap();
    let mut fork = b.fork().expect("kind forks");
    fork.inject("kind-worker", FaultKind::Shutdown)
        .await
        .unwrap();
    b.join("kind-worker", fork);
    f.clear();
    b.inject("kind-worker", FaultKind::Poweron).await.unwrap();
    assert_eq!(
        f.lines().last().map(String::as_str),
        Some("docker update --restart=on-failure:1 kind-worker"),
        "{:?}",
        f.lines()
    );
}
