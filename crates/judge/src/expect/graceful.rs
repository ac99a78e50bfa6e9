//! A `gracefulShutdown:` expectation, decided at preflight against the
//! verdict `crate::gns` reached for its node.

use crate::record::Verdict;
use crate::record::graceful::ShutdownVerdict;
use crate::scenario::model::GracefulShutdown;

/// Decides a `gracefulShutdown:` expectation against a node's verdict:
/// pass or fail, and what was found, in words.
pub fn decide(required: GracefulShutdown, verdict: &ShutdownVerdict) -> (Verdict, String) {
    let summary = verdict.summary();
    match (required, verdict) {
        (GracefulShutdown::WillRun, ShutdownVerdict::WillRun { .. })
        | (GracefulShutdown::WillNotRun, ShutdownVerdict::WillNotRun { .. }) => {
            (Verdict::Pass, summary)
        }
        (_, ShutdownVerdict::Unknown { reason }) => (
            Verdict::Fail,
            format!(
                "required `{}`, but it could not be established: {reason}",
                required.name()
            ),
        ),
        (_, _) => (
            Verdict::Fail,
            format!("required `{}`, but {summary}", required.name()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decide_passes_only_on_the_required_verdict() {
        let run = ShutdownVerdict::WillRun {
            pods_ms: 20_000,
            critical_ms: 10_000,
            notes: Vec::new(),
        };
        let not = ShutdownVerdict::WillNotRun {
            reason: "the kubelet holds no logind inhibitor lock".into(),
        };
        let unknown = ShutdownVerdict::Unknown {
            reason: "no SSH".into(),
        };
        use GracefulShutdown::{WillNotRun, WillRun};
        assert_eq!(
            decide(WillRun, &run),
            (
                Verdict::Pass,
                "graceful shutdown will run: 20 s for pods, 10 s for critical pods".into()
            )
        );
        assert_eq!(
            decide(WillRun, &not),
            (
                Verdict::Fail,
                "required `will-run`, but graceful shutdown will NOT run: the kubelet holds no logind inhibitor lock"
                    .into()
            )
        );
        assert_eq!(
            decide(WillRun, &unknown),
            (
                Verdict::Fail,
                "required `will-run`, but it could not be established: no SSH".into()
            )
        );
        assert_eq!(decide(WillNotRun, &not).0, Verdict::Pass);
        assert_eq!(
            decide(WillNotRun, &run).1,
            "required `will-not-run`, but graceful shutdown will run: 20 s for pods, 10 s for critical pods"
        );
        assert_eq!(decide(WillNotRun, &unknown).0, Verdict::Fail);
    }
}
