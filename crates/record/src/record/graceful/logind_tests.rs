//! The logind parsers against outputs recorded on real systems
//! (`tests/fixtures/gns/README.md` says where each comes from).

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../../../tests/fixtures/gns/", $name))
    };
}

fn inhibitors(text: &str) -> Vec<Inhibitor> {
    parse_inhibitors(text).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}

fn kubelet_held(text: &str) -> bool {
    inhibitors(text)
        .iter()
        .any(Inhibitor::is_kubelet_shutdown_delay)
}

#[test]
fn table_with_the_kubelet_lock_fedora_coreos_typhoon() {
    let list = inhibitors(fixture!("inhibit-table-kubelet-typhoon.txt"));
    assert_eq!(
        list,
        vec![Inhibitor {
            who: "kubelet".into(),
            uid: Some(0),
            user: Some("root".into()),
            pid: Some(4581),
            comm: Some("kubelet".into()),
            what: "shutdown".into(),
            why: "Kubelet needs time to handle node shutdown".into(),
            mode: "delay".into(),
        }]
    );
    assert!(list[0].is_kubelet_shutdown_delay());
}

#[test]
fn table_with_count_line_bottlerocket() {
    let list = inhibitors(fixture!("inhibit-table-kubelet-bottlerocket.txt"));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, Some(4935));
    assert!(kubelet_held(fixture!(
        "inhibit-table-kubelet-bottlerocket.txt"
    )));
}

#[test]
fn legacy_blocks_with_the_kubelet_lock() {
    // Right-aligned labels (systemd 219, RHEL 7) and re-indented ones (the
    // Kubernetes blog): both read the same.
    for text in [
        fixture!("inhibit-legacy-kubelet-rhel7-seed003.txt"),
        fixture!("inhibit-legacy-kubelet-k8s-blog.txt"),
    ] {
        let list = inhibitors(text);
        assert_eq!(list.len(), 1, "{text}");
        let k = &list[0];
        assert_eq!(
            (k.who.as_str(), k.uid, k.user.as_deref(), k.comm.as_deref()),
            ("kubelet", Some(0), Some("root"), Some("kubelet"))
        );
        assert_eq!((k.what.as_str(), k.mode.as_str()), ("shutdown", "delay"));
        assert_eq!(k.why, "Kubelet needs time to handle node shutdown");
        assert!(k.is_kubelet_shutdown_delay());
    }
    assert_eq!(
        inhibitors(fixture!("inhibit-legacy-kubelet-rhel7-seed003.txt"))[0].pid,
        Some(918)
    );
}

#[test]
fn no_inhibitors_at_all() {
    // systemd 219 (CentOS 7.4, kubernetes#101553) and the table format's
    // empty case.
    assert!(inhibitors(fixture!("inhibit-legacy-none-centos74.txt")).is_empty());
    assert!(inhibitors(fixture!("inhibit-table-none-constructed.txt")).is_empty());
    assert!(!kubelet_held(fixture!("inhibit-legacy-none-centos74.txt")));
}

#[test]
fn desktop_table_without_the_kubelet_fedora_39() {
    let text = fixture!("inhibit-table-desktop-fedora39.txt");
    let list = inhibitors(text);
    assert_eq!(list.len(), 6);
    assert!(!kubelet_held(text));
    // cells with spaces and punctuation stay whole
    assert_eq!(
        list[3].why,
        "SSH: 2 active clients [(3567, 'john'), (4007, 'jane')]"
    );
    assert_eq!(list[4].what, "handle-lid-switch");
    assert_eq!(list[4].uid, Some(42));
    assert_eq!(list[4].mode, "block");
}

#[test]
fn rows_that_do_not_line_up_are_read_by_their_shape() {
    // Re-typed with single spaces, WHO with spaces (Ubuntu's
    // unattended-upgrades lock); constructed, not recorded.
    let text = "WHO UID USER PID COMM WHAT WHY MODE\n\
                Unattended Upgrades Shutdown 0 root 2192 unattended-upgr shutdown Stop ongoing upgrades before shutdown delay\n\
                kubelet 0 root 811 kubelet shutdown Kubelet needs time to handle node shutdown delay\n\
                \n2 inhibitors listed.\n";
    let list = inhibitors(text);
    assert_eq!(list[0].who, "Unattended Upgrades Shutdown");
    assert_eq!(list[0].why, "Stop ongoing upgrades before shutdown");
    assert!(!list[0].is_kubelet_shutdown_delay());
    assert!(list[1].is_kubelet_shutdown_delay());
}

#[test]
fn only_the_kubelets_delay_lock_on_shutdown_counts() {
    let lock = |who: &str, what: &str, mode: &str| Inhibitor {
        who: who.into(),
        uid: None,
        user: None,
        pid: None,
        comm: None,
        what: what.into(),
        why: String::new(),
        mode: mode.into(),
    };
    assert!(lock("kubelet", "sleep:shutdown", "delay").is_kubelet_shutdown_delay());
    assert!(!lock("kubelet", "sleep", "delay").is_kubelet_shutdown_delay());
    assert!(!lock("kubelet", "shutdown", "block").is_kubelet_shutdown_delay());
    assert!(!lock("kubelet-proxy", "shutdown", "delay").is_kubelet_shutdown_delay());
}

#[test]
fn unreadable_outputs_say_why() {
    for (text, why) in [
        (
            "Failed to connect to bus: No such file or directory\n",
            "it begins `Failed to connect",
        ),
        ("", "it begins ``"),
        (
            "WHO     UID USER PID  COMM    WHAT     WHY MODE\nkubelet 0 root x kubelet shutdown Why delay\n",
            "row is not understood",
        ),
        (
            "    Who: kubelet (UID 0/root, PID 1/kubelet)\n    What: shutdown\n",
            "has no `Mode:`",
        ),
    ] {
        let e = parse_inhibitors(text).expect_err(text).to_string();
        assert!(e.contains(why), "{text:?}: {e}");
    }
    // The count line is checked against what was read.
    let short = "WHO     UID USER PID  COMM    WHAT     WHY                                        MODE\n\
                 kubelet 0   root 4935 kubelet shutdown Kubelet needs time to handle node shutdown delay\n\
                 \n2 inhibitors listed.\n";
    let e = parse_inhibitors(short).expect_err("count").to_string();
    assert!(e.contains("2 inhibitors listed but 1 were read"), "{e}");
}

#[test]
fn inhibit_delay_from_busctl_and_loginctl() {
    let d = |t: &str| parse_inhibit_delay(t).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        d(fixture!("busctl-inhibit-delay-arch.txt")),
        Duration::from_secs(5)
    );
    assert_eq!(
        d(fixture!("loginctl-show-session-rhel8.txt")),
        Duration::from_secs(5)
    );
    assert_eq!(
        d(fixture!("loginctl-show-session-arch-sorted.txt")),
        Duration::from_secs(5)
    );
    // `-p` alone, and kubespray's and typhoon's raised values (constructed)
    assert_eq!(d("InhibitDelayMaxUSec=1min 30s\n"), Duration::from_secs(90));
    assert_eq!(d("t 45000000\n"), Duration::from_secs(45));
    for (bad, why) in [
        ("t five", "not `t <microseconds>`"),
        ("InhibitDelayMaxUSec=soon", "not a systemd timespan"),
        ("Failed to get property", "it begins `Failed"),
    ] {
        let e = parse_inhibit_delay(bad).expect_err(bad).to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn facts_from_command_outputs() {
    let ok = inhibitors_from(
        Ok("0 inhibitors listed.\n"),
        "ssh w1: systemd-inhibit --list",
    );
    assert_eq!(
        ok,
        Fact::Known {
            value: Vec::new(),
            source: "ssh w1: systemd-inhibit --list".into()
        }
    );
    let bad = inhibitors_from(Ok("Failed to connect to bus"), "ssh w1");
    assert!(matches!(&bad, Fact::Failed { error, .. } if error.contains("not understood")));
    let failed = inhibit_delay_from(
        Err("ssh: connect to host w1 port 22: Connection refused"),
        "ssh w1",
    );
    assert!(matches!(&failed, Fact::Failed { error, .. } if error.starts_with("ssh: connect")));
    assert_eq!(
        inhibit_delay_from(Ok("t 5000000\n"), "ssh w1").value(),
        Some(&5_000)
    );
    assert_eq!(
        inhibit_delay_from(Ok("InhibitDelayMaxUSec=infinity\n"), "ssh w1").value(),
        Some(&u64::MAX)
    );
}
