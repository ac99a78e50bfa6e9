//! The scenario's HTTP probes: started when setup ends, waited for until
//! each has answered several requests in a row (the baseline, before the
//! first step), stopped when the steps end (on every exit path), and the
//! probe expectations reached meanwhile decided over what they recorded.

use std::sync::Arc;

use super::{Error, Run};
use crate::duration::format_millis;
use crate::expect;
use crate::probe::{self, ProbeSpec};
use crate::record::Verdict;
use crate::scenario::checked::Expectation;
use crate::scenario::expr::Window;
use crate::timeline::Ms;

/// A probe expectation reached during the steps: where its result is, and
/// what it is measured from.
pub(super) struct Deferred {
    result: usize,
    probe: String,
    expectation: Expectation,
    anchor_at: Ms,
}

impl Run<'_> {
    /// Starts every `probe:`, on the run's clock.
    pub(super) fn start_probes(&mut self) -> Result<(), Error> {
        for p in &self.plan.scenario.probes {
            let spec = ProbeSpec::from_checked(p)?;
            let rec = self.rec.clone();
            self.progress.log(&format!(
                "probe {}: GET {} every {}, timeout {}",
                spec.name,
                p.urls.join(", "),
                format_millis(ms(spec.interval)),
                format_millis(ms(spec.timeout))
            ));
            self.probes.push(probe::spawn(
                spec,
                Arc::new(self.clients.clone()),
                Arc::new(move || rec.now()),
            ));
        }
        Ok(())
    }

    /// Waits, before the first step, until every probe's URLs have each
    /// answered [`probe::SETTLE_SUCCESSES`] requests in a row (at most
    /// [`probe::Running::settle_limit`]): errors before then are the
    /// baseline's, not the fault's.
    pub(super) async fn settle_probes(&mut self) -> Result<(), Error> {
        if self.probes.is_empty() {
            return Ok(());
        }
        let began = self.now();
        let most = self.probes.iter().map(probe::Running::settle_limit).max();
        self.progress.log(&format!(
            "probes: waiting for each URL to answer {} requests in a row (at most {}s)",
            probe::SETTLE_SUCCESSES,
            most.unwrap_or(probe::SETTLE_LIMIT).as_secs()
        ));
        for running in &self.probes {
            running
                .settled(probe::SETTLE_SUCCESSES, running.settle_limit())
                .await?;
        }
        let settled = self.now();
        self.probes_settled = Some(settled);
        self.progress.log(&format!(
            "probes: settled after {}; the requests before the first step are the baseline",
            format_millis(settled - began)
        ));
        Ok(())
    }

    /// Records a probe expectation reached now; it is decided when the
    /// probes stop. It takes no time: the next step starts at once.
    pub(super) fn defer_probe(
        &mut self,
        index: usize,
        label: String,
        exp: &Expectation,
        name: String,
    ) {
        let now = self.now();
        let window = self.plan.steps[index]
            .window
            .unwrap_or(Window::Requests { from: 0, to: None });
        let (mut result, anchor_at) = self.new_result(index, &label, exp, window, now);
        let Some(anchor_at) = anchor_at else {
            self.never_anchored(result);
            return;
        };
        result.detail = "decided when the probe stops, at the end of the steps".into();
        self.progress.log(&format!(
            "{label}: {}, {window}: decided when the probe stops",
            result.description
        ));
        // Steps anchored here count from when it was reached.
        self.anchors.insert(index, now);
        self.deferred.push(Deferred {
            result: self.expectations.len(),
            probe: name,
            expectation: exp.clone(),
            anchor_at,
        });
        self.expectations.push(result);
    }

    /// Stops the probes (the steps are over, however they ended) and
    /// decides the probe expectations reached.
    pub(super) async fn stop_probes(&mut self) {
        for running in std::mem::take(&mut self.probes) {
            let record = running.stop(self.probes_settled).await;
            let longest = record.windows.iter().map(|w| w.duration).max();
            let baseline = record.baseline.as_ref().map_or_else(String::new, |b| {
                format!(
                    " (and before the first step, the baseline: {} requests, {} failed)",
                    b.requests, b.errors
                )
            });
            self.progress.log(&format!(
                "probe {}: {} requests, {} failed{baseline}, {}",
                record.name,
                record.requests,
                record.errors,
                match longest {
                    Some(d) => format!(
                        "{} error windows, the longest {}",
                        record.windows.len(),
                        format_millis(d)
                    ),
                    None => "no error window".into(),
                }
            ));
            self.probe_records.push(record);
        }
        for d in std::mem::take(&mut self.deferred) {
            let e = &mut self.expectations[d.result];
            let Window::Requests { from, to } = e.window else {
                continue;
            };
            let Some(record) = self.probe_records.iter().find(|r| r.name == d.probe) else {
                e.detail = format!("probe `{}` never ran", d.probe);
                continue;
            };
            let from_at = d.anchor_at + from;
            let to_at = to.map(|t| d.anchor_at + t);
            (e.window_from, e.window_to) = (Some(from_at), Some(to_at.unwrap_or(record.stopped)));
            let (pass, detail) = expect::probe::decide(
                record,
                &d.expectation.conditions,
                from_at,
                to_at,
                &self.plan.profile,
            );
            e.verdict = if pass { Verdict::Pass } else { Verdict::Fail };
            e.detail = match to_at {
                Some(t) if t > record.stopped => format!(
                    "{detail} (the probe stopped at {}, before the window closed)",
                    format_millis(record.stopped - d.anchor_at)
                ),
                _ => detail,
            };
            let word = if pass { "pass" } else { "FAIL" };
            self.progress.log(&format!(
                "{}: {word}: {}: {}",
                e.label, e.description, e.detail
            ));
        }
    }
}

fn ms(d: std::time::Duration) -> Ms {
    i64::try_from(d.as_millis()).unwrap_or(Ms::MAX)
}
