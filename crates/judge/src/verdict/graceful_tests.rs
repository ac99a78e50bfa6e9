//! Every branch of the verdict.

use super::*;

fn config(grace: u64, critical: u64) -> ShutdownConfig {
    ShutdownConfig {
        grace_period_ms: grace * 1000,
        critical_pods_ms: critical * 1000,
        by_pod_priority: Vec::new(),
        gate_graceful_node_shutdown: None,
        gate_based_on_pod_priority: None,
    }
}

fn known<T>(value: T) -> Fact<T> {
    Fact::Known {
        value,
        source: "test".into(),
    }
}

fn failed<T>(error: &str) -> Fact<T> {
    Fact::Failed {
        error: error.into(),
        source: "test".into(),
    }
}

fn kubelet_lock() -> Inhibitor {
    Inhibitor {
        who: "kubelet".into(),
        uid: Some(0),
        user: Some("root".into()),
        pid: Some(4581),
        comm: Some("kubelet".into()),
        what: "shutdown".into(),
        why: "Kubelet needs time to handle node shutdown".into(),
        mode: "delay".into(),
    }
}

fn locks(held: bool) -> Fact<Vec<Inhibitor>> {
    known(if held {
        vec![kubelet_lock()]
    } else {
        Vec::new()
    })
}

fn secs(s: u64) -> Fact<u64> {
    known(s * 1000)
}

fn will_run(pods: u64, critical: u64) -> ShutdownVerdict {
    ShutdownVerdict::WillRun {
        pods_ms: pods * 1000,
        critical_ms: critical * 1000,
        notes: Vec::new(),
    }
}

fn reason(v: &ShutdownVerdict) -> &str {
    match v {
        ShutdownVerdict::WillNotRun { reason } | ShutdownVerdict::Unknown { reason } => reason,
        ShutdownVerdict::WillRun { .. } => "",
    }
}

#[test]
fn configured_locked_and_long_enough_will_run() {
    let v = evaluate(&known(config(30, 10)), &locks(true), &secs(30));
    assert_eq!(v, will_run(20, 10));
    assert_eq!(
        v.summary(),
        "graceful shutdown will run: 20 s for pods, 10 s for critical pods"
    );
    // kubespray's defaults with typhoon's 45 s would be cut; 90 s is enough
    let v = evaluate(&known(config(60, 20)), &locks(true), &secs(90));
    assert_eq!(v, will_run(40, 20));
}

#[test]
fn zero_grace_period_is_disabled_whatever_logind_says() {
    let v = evaluate(&known(config(0, 0)), &locks(true), &secs(30));
    assert_eq!(
        v.summary(),
        "graceful shutdown will NOT run: shutdownGracePeriod is 0s (graceful node shutdown disabled)"
    );
}

#[test]
fn critical_longer_than_total_yields_no_groups() {
    let v = evaluate(&known(config(30, 40)), &locks(false), &secs(5));
    assert!(matches!(v, ShutdownVerdict::WillNotRun { .. }), "{v:?}");
    assert!(
        reason(&v)
            .contains("shutdownGracePeriodCriticalPods 40 s exceeds shutdownGracePeriod 30 s"),
        "{v:?}"
    );
}

#[test]
fn the_feature_gate_off_disables_it() {
    let mut c = config(30, 10);
    c.gate_graceful_node_shutdown = Some(false);
    let v = evaluate(&known(c), &locks(true), &secs(30));
    assert_eq!(reason(&v), "the feature gate GracefulNodeShutdown is off");
}

#[test]
fn no_kubelet_lock_means_it_will_not_run() {
    let v = evaluate(&known(config(30, 10)), &locks(false), &secs(30));
    assert!(
        v.summary().starts_with(
            "graceful shutdown will NOT run: the kubelet holds no logind inhibitor lock"
        ),
        "{}",
        v.summary()
    );
    assert!(reason(&v).contains("configured for 30 s (20 s for pods, 10 s for critical pods)"));
    assert!(reason(&v).contains("Failed to start node shutdown manager"));
}

#[test]
fn a_short_inhibit_delay_truncates_the_drain() {
    let v = evaluate(&known(config(30, 10)), &locks(true), &secs(5));
    assert_eq!(
        reason(&v),
        "logind InhibitDelayMaxSec 5 s is shorter than the requested 30 s: logind shuts down \
         after 5 s, so pods get at most 5 s of 20 s and critical pods 0 s of 10 s"
    );
    // longer than the pods' share: critical pods get the rest
    let v = evaluate(&known(config(60, 20)), &locks(true), &secs(45));
    assert!(
        reason(&v).ends_with("pods get at most 40 s of 40 s and critical pods 5 s of 20 s"),
        "{v:?}"
    );
}

#[test]
fn inhibit_delay_not_read_still_runs_with_a_note() {
    let v = evaluate(
        &known(config(30, 10)),
        &locks(true),
        &Fact::not_collected("no SSH access to the node"),
    );
    let ShutdownVerdict::WillRun {
        pods_ms,
        critical_ms,
        notes,
    } = &v
    else {
        panic!("{v:?}");
    };
    assert_eq!((*pods_ms, *critical_ms), (20_000, 10_000));
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("not checked: no SSH access to the node"),
        "{notes:?}"
    );
}

#[test]
fn inhibitors_not_read_leaves_it_unknown() {
    let v = evaluate(
        &known(config(30, 10)),
        &Fact::not_collected("the backend has no shell on the node"),
        &Fact::not_collected("the backend has no shell on the node"),
    );
    assert!(matches!(v, ShutdownVerdict::Unknown { .. }), "{v:?}");
    assert_eq!(
        reason(&v),
        "configured for 30 s (20 s for pods, 10 s for critical pods), but whether the kubelet \
         holds its logind inhibitor lock is unknown: not checked: the backend has no shell on the node"
    );
    let v = evaluate(
        &known(config(30, 10)),
        &failed("ssh: connection refused"),
        &secs(30),
    );
    assert!(
        reason(&v).ends_with("is unknown: ssh: connection refused"),
        "{v:?}"
    );
}

/// Seed 003's negative on a real kind node (systemd-logind masked, the
/// kubelet restarted): `systemd-inhibit --list` fails saying so, and that is
/// decisive (no process can hold a lock), unlike an SSH failure.
#[test]
fn no_logind_on_the_node_means_it_will_not_run() {
    let masked = "Could not get active inhibitors: Unit systemd-logind.service is masked.";
    let v = evaluate(&known(config(20, 5)), &failed(masked), &failed(masked));
    assert!(matches!(v, ShutdownVerdict::WillNotRun { .. }), "{v:?}");
    assert!(
        reason(&v).starts_with(
            "the kubelet holds no logind inhibitor lock, so logind does not wait for it: \
             systemd-logind is masked on the node (configured for 20 s (15 s for pods, 5 s for \
             critical pods)"
        ),
        "{v:?}"
    );
    for (error, why) in [
        (
            "Failed to connect to bus: No such file or directory",
            "there is no D-Bus system bus",
        ),
        (
            "Unit dbus-org.freedesktop.login1.service not found.",
            "logind is not installed",
        ),
    ] {
        assert_eq!(unavailable(error), Some(why));
        let v = evaluate(&known(config(20, 5)), &failed(error), &secs(5));
        assert!(
            matches!(v, ShutdownVerdict::WillNotRun { .. }),
            "{error}: {v:?}"
        );
    }
    assert_eq!(unavailable("ssh: connection refused"), None);
}

#[test]
fn config_unreadable_but_no_lock_is_still_decisive() {
    let v = evaluate(&failed("forbidden"), &locks(false), &secs(5));
    assert!(matches!(v, ShutdownVerdict::WillNotRun { .. }), "{v:?}");
    assert!(reason(&v).ends_with("(its configuration could not be read: forbidden)"));
}

#[test]
fn config_unreadable_with_the_lock_is_unknown() {
    let v = evaluate(&failed("forbidden"), &locks(true), &secs(30));
    assert!(matches!(v, ShutdownVerdict::Unknown { .. }), "{v:?}");
    assert!(
        reason(&v)
            .contains("graceful shutdown is on, but its grace periods are unknown: forbidden")
    );
}

#[test]
fn nothing_readable_is_unknown_with_both_reasons() {
    let v = evaluate(
        &failed("the API server could not reach the kubelet"),
        &Fact::not_collected("no SSH"),
        &Fact::not_collected("no SSH"),
    );
    assert_eq!(
        v.summary(),
        "graceful shutdown: unknown (kubelet configuration: the API server could not reach the \
         kubelet; inhibitor locks: not checked: no SSH)"
    );
    assert_eq!(v.name(), "unknown");
}

#[test]
fn priority_groups_replace_the_pair() {
    let mut c = config(30, 10);
    c.by_pod_priority = vec![
        PriorityGrace {
            priority: 100_000,
            shutdown_grace_period_seconds: 10,
        },
        PriorityGrace {
            priority: 10_000,
            shutdown_grace_period_seconds: 180,
        },
        PriorityGrace {
            priority: SYSTEM_CRITICAL_PRIORITY,
            shutdown_grace_period_seconds: 60,
        },
    ];
    let v = evaluate(&known(c.clone()), &locks(true), &secs(250));
    assert_eq!(v, will_run(190, 60));
    // the total the kubelet asks logind for is the sum of the groups
    let v = evaluate(&known(c.clone()), &locks(true), &secs(30));
    assert!(
        reason(&v).contains("shorter than the requested 4 min 10 s"),
        "{v:?}"
    );
    // with the priority gate off the pair applies again, with a note
    c.gate_based_on_pod_priority = Some(false);
    let v = evaluate(&known(c), &locks(true), &secs(30));
    let ShutdownVerdict::WillRun { pods_ms, notes, .. } = &v else {
        panic!("{v:?}");
    };
    assert_eq!(*pods_ms, 20_000);
    assert!(notes[0].contains("GracefulNodeShutdownBasedOnPodPriority is off"));
}

#[test]
fn priority_groups_of_zero_give_pods_no_time() {
    let mut c = config(0, 0);
    c.by_pod_priority = vec![PriorityGrace {
        priority: 0,
        shutdown_grace_period_seconds: 0,
    }];
    let v = evaluate(&known(c), &locks(true), &secs(30));
    assert!(reason(&v).contains("every shutdownGracePeriodByPodPriority group has 0 s"));
}

#[test]
fn the_pair_is_truncated_to_whole_seconds_like_the_kubelet() {
    // migrateConfig: (30.9 s - 10.5 s) / 1 s = 20, (30.9 s - 20.4 s) / 1 s = 10
    let mut c = config(0, 0);
    c.grace_period_ms = 30_900;
    c.critical_pods_ms = 10_500;
    let p = plan(&c).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.pods_ms(), p.critical_ms()), (20_000, 10_000));
}

#[test]
fn verdicts_round_trip_through_json() {
    for v in [
        will_run(20, 10),
        ShutdownVerdict::WillNotRun { reason: "x".into() },
        ShutdownVerdict::Unknown { reason: "y".into() },
    ] {
        let json = serde_json::to_string(&v).unwrap_or_else(|e| panic!("{e}"));
        let back: ShutdownVerdict = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, v, "{json}");
    }
    let json = serde_json::to_string(&will_run(20, 10)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        json,
        r#"{"verdict":"will-run","podsMs":20000,"criticalMs":10000}"#
    );
}

#[test]
fn human_form() {
    assert_eq!(human(Duration::from_secs(30)), "30 s");
    assert_eq!(human(Duration::from_secs(90)), "1 min 30 s");
    assert_eq!(human(Duration::from_secs(3600)), "1 h");
    assert_eq!(human(Duration::ZERO), "0 s");
    assert_eq!(human(Duration::from_millis(1500)), "1.5 s");
    assert_eq!(human(Duration::MAX), "infinity");
}

mod preflight {
    use super::*;
    use crate::plan::{self, Span};
    use crate::profile::TimingProfile;
    use crate::scenario::expr::{Window, WindowSpec};
    use crate::scenario::load::load_str;
    use crate::scenario::validate::validate;

    fn check(text: &str) -> Checked {
        load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(|l| validate(l, &crate::files::Memory::default()))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    const TWO: &str =
        "name: t\nnamespace: ns\ntargets:\n  first: {name: w1}\n  second: {name: w2}\nsteps:\n";

    #[test]
    fn a_played_kubelet_runs_graceful_shutdown_only_with_a_grace_period() {
        let secs = Duration::from_secs;
        let on = played_report("w1", "t".into(), 0, secs(20), secs(5), "sim");
        assert_eq!(
            on.verdict,
            ShutdownVerdict::WillRun {
                pods_ms: 15_000,
                critical_ms: 5_000,
                notes: Vec::new()
            }
        );
        let off = played_report("w1", "t".into(), 0, Duration::ZERO, Duration::ZERO, "sim");
        assert!(
            matches!(off.verdict, ShutdownVerdict::WillNotRun { .. }),
            "{:?}",
            off.verdict
        );
    }

    #[test]
    fn a_requirement_reads_as_a_preflight_expectation() {
        let c = check(&format!(
            "{TWO}  - fault: pause-vm\n    node: second\n  - expect: {{node: first, gracefulShutdown: will-not-run}}\n  - fault: shutdown\n    node: first\n  - expect: {{node: first, ready: Unknown, within: 2m}}\n"
        ));
        let StepKind::Expect(e) = &c.steps[1].kind else {
            panic!("{:?}", c.steps[1]);
        };
        assert_eq!(requirement(e), Some(GracefulShutdown::WillNotRun));
        assert_eq!(e.window, WindowSpec::Preflight);
        assert_eq!(
            c.steps[1].to_string(),
            "expect node first: graceful shutdown will not run"
        );
        let StepKind::Expect(later) = &c.steps[3].kind else {
            panic!();
        };
        assert_eq!(requirement(later), None);
        // the preflight looks at the targets that are shut down
        assert_eq!(targets_to_check(&c), vec!["first".to_owned()]);
        // on the plan it takes no time and does not move later steps
        let p = plan::resolve(
            c,
            &TimingProfile::fast(),
            Some(crate::scenario::model::BackendKind::Vagrant),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.steps[1].window, Some(Window::Preflight));
        assert_eq!(p.steps[1].window_span, None);
        let at = |i: usize| p.steps[i].starts;
        let zero = Some(Span {
            earliest: 0,
            latest: 0,
        });
        assert_eq!((at(1), at(2)), (zero, zero));
    }

    #[test]
    fn shutdown_targets_are_checked_without_a_requirement() {
        let c = check(&format!(
            "{TWO}  - fault: shutdown\n    node: second\n  - fault: poweron\n    node: second\n  - fault: shutdown\n    node: first\n  - fault: shutdown\n    node: second\n"
        ));
        assert_eq!(
            targets_to_check(&c),
            vec!["second".to_owned(), "first".to_owned()]
        );
    }
}
