//! The kubelets' graceful node shutdown flags of `kind up` and `sim up`,
//! checked against each other in one place.

use std::time::Duration;

use clap::Args;

use crate::duration::format_duration;

#[derive(Debug, Clone, Default, Args)]
pub struct ShutdownGraceArgs {
    /// Turns the kubelets' graceful node shutdown on: their
    /// `shutdownGracePeriod` (whole seconds), the time a `systemctl
    /// poweroff` in a node waits for its pods (through logind's inhibitor
    /// lock). Unset: off, as Kubernetes has it.
    #[arg(long, value_name = "DURATION", value_parser = super::values::duration(super::values::SHUTDOWN_GRACE))]
    pub shutdown_grace_period: Option<Duration>,
    /// The part of `--shutdown-grace-period` kept for critical pods
    /// (`shutdownGracePeriodCriticalPods`; default 0: all of it for the others).
    #[arg(long, value_name = "DURATION", requires = "shutdown_grace_period", value_parser = super::values::duration(super::values::SHUTDOWN_GRACE))]
    pub shutdown_grace_period_critical_pods: Option<Duration>,
}

impl ShutdownGraceArgs {
    /// The two periods as the kubelet gets them (whole seconds), the
    /// critical pods' part shorter than the whole; None: off.
    pub fn checked(&self) -> Result<Option<(Duration, Duration)>, String> {
        let whole = |d: Duration| Duration::from_secs(d.as_secs());
        let Some(all) = self.shutdown_grace_period.map(whole) else {
            return Ok(None);
        };
        let critical = self
            .shutdown_grace_period_critical_pods
            .map(whole)
            .unwrap_or_default();
        if critical >= all {
            return Err(format!(
                "--shutdown-grace-period-critical-pods ({}) must be shorter than \
                 --shutdown-grace-period ({}): the kubelet gives the other pods the difference",
                format_duration(critical),
                format_duration(all)
            ));
        }
        Ok(Some((all, critical)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(all: Option<u64>, critical: Option<u64>) -> ShutdownGraceArgs {
        ShutdownGraceArgs {
            shutdown_grace_period: all.map(Duration::from_secs),
            shutdown_grace_period_critical_pods: critical.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_critical_pods_part_must_leave_time_for_the_others() {
        let secs = Duration::from_secs;
        assert_eq!(args(None, None).checked(), Ok(None));
        assert_eq!(
            args(Some(20), None).checked(),
            Ok(Some((secs(20), Duration::ZERO)))
        );
        assert_eq!(
            args(Some(20), Some(5)).checked(),
            Ok(Some((secs(20), secs(5))))
        );
        // 20.5 s and 20 s are both 20 s in the kubelet's configuration.
        let mut half = args(Some(20), Some(20));
        half.shutdown_grace_period = Some(Duration::from_millis(20_500));
        assert!(half.checked().is_err());
        let e = args(Some(20), Some(20)).checked().unwrap_err();
        assert!(
            e.contains("(20s) must be shorter than --shutdown-grace-period (20s)"),
            "{e}"
        );
    }
}
