//! The graceful node shutdown (GNS) preflight: before a `shutdown` fault,
//! will the kubelet's graceful node shutdown run on that node, and with how
//! much time for pods? It reads the kubelet's live configuration through the
//! API server ([`configz`]), what logind says on the node through commands
//! the runner runs there over SSH ([`logind`]), and combines them ([`verdict`]).
//!
//! Each fact records where it came from, or why it is missing, so a report
//! can say what the verdict rests on. Nothing here fails a run: a fact that
//! cannot be read makes the verdict `unknown`, with the reason.

pub mod configz;
pub mod duration;
pub mod logind;
pub mod verdict;

use std::time::Duration;

pub use crate::record::graceful::{
    Fact, Inhibitor, NodeReport, PriorityGrace, ShutdownConfig, ShutdownVerdict,
};
pub use crate::scenario::model::GracefulShutdown;
pub use verdict::evaluate;

use crate::scenario::checked::{Checked, Condition, Expectation, PreflightCond, StepKind};
use crate::scenario::model::FaultKind;
use crate::timeline::Ms;

/// How long [`read_config`] waits for the kubelet by default: longer than
/// the API server's own `--kubelet-timeout` (5 s).
pub const CONFIGZ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "reading the kubelet configuration of node {node} is forbidden ({message}); \
         the user needs `get` on the `nodes/proxy` subresource \
         (RBAC rule: apiGroups [\"\"], resources [\"nodes/proxy\"], verbs [\"get\"])"
    )]
    Forbidden { node: String, message: String },
    #[error("node {node} does not exist")]
    NodeNotFound { node: String },
    #[error(
        "the API server refused to proxy to the kubelet of node {node} (HTTP 400: {message}); \
         it does not proxy to node addresses that are loopback, link-local or unspecified \
         (see the node's status.addresses)"
    )]
    ProxyRefused { node: String, message: String },
    #[error(
        "the kubelet of node {node} did not serve /configz through the API server \
         (HTTP {code}: {message})"
    )]
    NotServed {
        node: String,
        code: u16,
        message: String,
    },
    #[error("the API server could not reach the kubelet of node {node} (HTTP {code}: {message})")]
    KubeletUnreachable {
        node: String,
        code: u16,
        message: String,
    },
    #[error(
        "no answer from the kubelet of node {node} through the API server within {}s",
        .after.as_secs()
    )]
    Timeout { node: String, after: Duration },
    #[error("requesting /configz of node {node}: {message}")]
    Request { node: String, message: String },
    #[error("the /configz answer is not a kubelet configuration: {reason}")]
    BadConfigz { reason: String },
    #[error("`{0}` is not a node name")]
    BadNodeName(String),
    #[error("`systemd-inhibit --list` output not understood: {0}")]
    InhibitorsOutput(String),
    #[error("InhibitDelayMaxUSec output not understood: {0}")]
    InhibitDelayOutput(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Records the facts of a node and computes the verdict from them.
pub fn node_report(
    node: impl Into<String>,
    targets: Vec<String>,
    at: Ms,
    config: Fact<ShutdownConfig>,
    inhibitors: Fact<Vec<Inhibitor>>,
    inhibit_delay_max_ms: Fact<u64>,
) -> NodeReport {
    let verdict = evaluate(&config, &inhibitors, &inhibit_delay_max_ms);
    NodeReport {
        node: node.into(),
        targets,
        at,
        config,
        inhibitors,
        inhibit_delay_max_ms,
        verdict,
    }
}

/// The facts of a node whose kubelet the backend plays itself (sim), as it
/// plays them: the configuration it was given and, when graceful shutdown is
/// on, the kubelet's delay lock with logind holding a shutdown as long as the
/// grace period. `source` says where from.
pub fn played_report(
    node: impl Into<String>,
    target: String,
    at: Ms,
    grace: Duration,
    critical: Duration,
    source: &str,
) -> NodeReport {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let config = ShutdownConfig {
        grace_period_ms: ms(grace),
        critical_pods_ms: ms(critical),
        by_pod_priority: Vec::new(),
        gate_graceful_node_shutdown: None,
        gate_based_on_pod_priority: None,
    };
    let locks = if grace.is_zero() {
        Vec::new()
    } else {
        vec![Inhibitor {
            who: "kubelet".into(),
            uid: None,
            user: None,
            pid: None,
            comm: None,
            what: "shutdown".into(),
            why: "Kubelet needs time to handle node shutdown".into(),
            mode: "delay".into(),
        }]
    };
    node_report(
        node,
        vec![target],
        at,
        Fact::Known {
            value: config,
            source: source.to_owned(),
        },
        Fact::Known {
            value: locks,
            source: source.to_owned(),
        },
        Fact::Known {
            value: ms(grace),
            source: source.to_owned(),
        },
    )
}

/// Reads a node's kubelet configuration through the API server's node
/// proxy, as a fact. Pass a client without automatic retries (the runner's
/// `strict` one) so that a refused connection is reported as such.
pub async fn read_config(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Fact<ShutdownConfig> {
    let source = configz::path(node)
        .map(|p| format!("GET {p}"))
        .unwrap_or_else(|_| "GET /api/v1/nodes/?/proxy/configz".into());
    Fact::from_result(configz::fetch(client, node, timeout).await, source)
}

/// The inhibitor locks from [`logind::INHIBITORS_COMMAND`]'s stdout, or
/// from why running it failed (`Err`: the SSH or command error, in words).
/// `source` says where it ran, e.g. `ssh worker-1: systemd-inhibit --list`.
pub fn inhibitors_from(output: Result<&str, &str>, source: &str) -> Fact<Vec<Inhibitor>> {
    match output {
        Ok(stdout) => Fact::from_result(logind::parse_inhibitors(stdout), source),
        Err(e) => Fact::Failed {
            error: e.to_owned(),
            source: source.to_owned(),
        },
    }
}

/// `InhibitDelayMaxUSec` (in ms) from [`logind::INHIBIT_DELAY_COMMAND`]'s
/// stdout, or from why running it failed.
pub fn inhibit_delay_from(output: Result<&str, &str>, source: &str) -> Fact<u64> {
    match output {
        Ok(stdout) => Fact::from_result(
            logind::parse_inhibit_delay(stdout)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            source,
        ),
        Err(e) => Fact::Failed {
            error: e.to_owned(),
            source: source.to_owned(),
        },
    }
}

/// The `gracefulShutdown:` requirement of an expectation, if it is one.
pub fn requirement(exp: &Expectation) -> Option<GracefulShutdown> {
    exp.conditions.iter().find_map(|c| {
        let Condition::Preflight(preflight) = c else {
            return None;
        };
        match preflight {
            PreflightCond::GracefulShutdown(r) => Some(*r),
        }
    })
}

/// The targets the preflight must look at, in scenario order: every target
/// a `shutdown` fault hits, and every target a `gracefulShutdown`
/// expectation names (validation makes the second a subset of the first).
pub fn targets_to_check(checked: &Checked) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in &checked.steps {
        let target = match &step.kind {
            StepKind::Fault {
                fault: FaultKind::Shutdown,
                node,
            } => Some(node),
            StepKind::Expect(e) if requirement(e).is_some() => match &e.subject {
                crate::scenario::checked::Subject::Node(t) => Some(t),
                crate::scenario::checked::Subject::Pods { .. }
                | crate::scenario::checked::Subject::Pvc { .. }
                | crate::scenario::checked::Subject::Service { .. }
                | crate::scenario::checked::Subject::Probe(_) => None,
            },
            _ => None,
        };
        if let Some(t) = target
            && !out.contains(t)
        {
            out.push(t.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
