//! A `gracefulShutdown:` expectation, decided at preflight against the
//! verdict `crate::gns` reached for its node.

use crate::record::Verdict as Outcome;
use crate::record::graceful::Verdict;
use crate::scenario::model::GracefulShutdown;

/// Decides a `gracefulShutdown:` expectation against a node's verdict:
/// pass or fail, and what was found, in words.
pub fn decide(required: GracefulShutdown, verdict: &Verdict) -> (Outcome, String) {
    let summary = verdict.summary();
    match (required, verdict) {
        (GracefulShutdown::WillRun, Verdict::WillRun { .. })
        | (GracefulShutdown::WillNotRun, Verdict::WillNotRun { .. }) => (Outcome::Pass, summary),
        (_, Verdict::Unknown { reason }) => (
            Outcome::Fail,
            format!(
                "required `{}`, but it could not be established: {reason}",
                required.name()
            ),
        ),
        (_, _) => (
            Outcome::Fail,
            format!("required `{}`, but {summary}", required.name()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decide_passes_only_on_the_required_verdict() {
        let run = Verdict::WillRun {
            pods_ms: 20_000,
            critical_ms: 10_000,
            notes: Vec::new(),
        };
        let not = Verdict::WillNotRun {
            reason: "the kubelet holds no logind inhibitor lock".into(),
        };
        let unknown = Verdict::Unknown {
            reason: "no SSH".into(),
        };
        use GracefulShutdown::{WillNotRun, WillRun};
        assert_eq!(
            decide(WillRun, &run),
            (
                Outcome::Pass,
                "graceful shutdown will run: 20 s for pods, 10 s for critical pods".into()
            )
        );
        assert_eq!(
            decide(WillRun, &not),
            (
                Outcome::Fail,
                "required `will-run`, but graceful shutdown will NOT run: the kubelet holds no logind inhibitor lock"
                    .into()
            )
        );
        assert_eq!(
            decide(WillRun, &unknown),
            (
                Outcome::Fail,
                "required `will-run`, but it could not be established: no SSH".into()
            )
        );
        assert_eq!(decide(WillNotRun, &not).0, Outcome::Pass);
        assert_eq!(
            decide(WillNotRun, &run).1,
            "required `will-not-run`, but graceful shutdown will run: 20 s for pods, 10 s for critical pods"
        );
        assert_eq!(decide(WillNotRun, &unknown).0, Outcome::Fail);
    }
}
