//! The probes part of "What clients see": per probe its requests, errors,
//! latency and error windows; and the probes' band on the mermaid timeline.

use std::fmt::Write as _;

use super::format::{cell, rel, secs, table};
use crate::record::RunResult;
use crate::record::probe::{ProbeRecord, StopReason, windows};
use crate::timeline::Ms;
use crate::verdict::windows::longest;

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

/// Error windows listed per probe before the rest is left to result.json.
const MAX_WINDOWS: usize = 20;

fn opt_ms(v: Option<Ms>) -> String {
    v.map_or_else(|| MISSING.to_owned(), |ms| format!("{ms} ms"))
}

pub(super) fn section(out: &mut String, r: &RunResult) {
    if r.probes.is_empty() {
        let _ = writeln!(
            out,
            "No HTTP probe ran: the endpoint figures above are the Kubernetes part of what \
             clients see. Add `probe:` to the scenario to measure the client side.\n"
        );
        return;
    }
    if r.backend == "sim" {
        let _ = writeln!(
            out,
            "**On the sim, KWOK's pods have no containers and the cluster no kube-proxy**: a \
             NodePort on 127.0.0.1 is answered by nodefall's stand-in for both (it routes each \
             connection to a ready endpoint as kube-proxy does, and answers as that pod's \
             machine would: `200` from a running pod, a reset from a stopped one, nothing from \
             a machine that is down); any other URL reaches whatever listens there, not the \
             workload (docs/sim-backend.md).\n"
        );
    }
    out.push_str(&headline(r.t0, &r.probes));
    for p in &r.probes {
        probe(out, r, p);
    }
}

/// What the probes say as a whole: probes none of whose requests
/// succeeded, and the longest error window still failing at or after T0
/// (`errorWindow`, measured whole), with when it began if before T0.
fn headline(t0: Option<Ms>, probes: &[ProbeRecord]) -> String {
    let mut out = String::new();
    for p in probes
        .iter()
        .filter(|p| p.requests > 0 && p.errors == p.requests)
    {
        let _ = writeln!(
            out,
            "**Every request of probe `{}` failed** ({} of {}): clients never reached the \
             workload, so its error window is the whole run, not the failure's effect.\n",
            p.name, p.errors, p.requests
        );
    }
    let Some(t0) = t0 else {
        return out;
    };
    let longest = probes
        .iter()
        .filter_map(|p| longest(&p.windows, t0, None))
        .max_by_key(|w| w.duration);
    let _ = match longest {
        None => writeln!(out, "No client error window was open at or after T0.\n"),
        Some(w) if w.start < t0 => writeln!(
            out,
            "The longest client error window lasted **{}** (`errorWindow`, whole) and **began \
             before T0**, at T0-{}: clients were already failing before the first fault.\n",
            secs(w.duration),
            secs(t0 - w.start)
        ),
        Some(w) => writeln!(
            out,
            "The longest client error window after T0 lasted **{}** (`errorWindow`).\n",
            secs(w.duration)
        ),
    };
    out
}

fn probe(out: &mut String, r: &RunResult, p: &ProbeRecord) {
    let stop = match p.stop_reason {
        StopReason::Stopped => "with the steps".to_owned(),
        StopReason::MaxRequests => "**early: its `maxRequests` were sent**".to_owned(),
        StopReason::MaxDuration => "**early: its `maxDuration` passed**".to_owned(),
    };
    let _ = write!(
        out,
        "### Probe `{}`\n\nGET {} every {} ms (timeout {} ms, a new connection each), from {} to {} (stopped {stop})",
        p.name,
        p.urls
            .iter()
            .map(|u| format!("`{u}`"))
            .collect::<Vec<_>>()
            .join(", "),
        p.interval,
        p.timeout,
        rel(r, p.started),
        rel(r, p.stopped),
    );
    let since = match &p.baseline {
        Some(b) => {
            let kinds = windows::kinds_text(&b.kinds);
            let _ = write!(
                out,
                ". **Baseline**, from setup until every URL had answered several requests in a row \
                 (the first step began at {}): {} requests, {} failed{}; latency p50 {}, max {}.",
                rel(r, b.to),
                b.requests,
                b.errors,
                if kinds.is_empty() {
                    String::new()
                } else {
                    format!(" ({kinds})")
                },
                opt_ms(b.latency.p50),
                opt_ms(b.latency.max),
            );
            " From the first step on,"
        }
        None => ":",
    };
    let _ = writeln!(
        out,
        "{since} **{} requests, {} failed**. Latency of the successful ones: p50 {}, p90 {}, p99 {}, max {}.\n",
        p.requests,
        p.errors,
        opt_ms(p.latency.p50),
        opt_ms(p.latency.p90),
        opt_ms(p.latency.p99),
        opt_ms(p.latency.max),
    );
    if p.windows.is_empty() {
        let _ = writeln!(out, "No request failed.\n");
        return;
    }
    let rows = p
        .windows
        .iter()
        .take(MAX_WINDOWS)
        .map(|w| {
            let kinds = windows::kinds_text(&w.kinds);
            [
                rel(r, w.start),
                w.end
                    .map_or_else(|| "not before the probe stopped".to_owned(), |e| rel(r, e)),
                secs(w.duration),
                format!("{}/{}", w.errors, w.total),
                cell(&kinds),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "Errors from",
            "First success after",
            "Duration",
            "Failed/sent",
            "Errors",
        ],
        rows,
    ));
    if p.windows.len() > MAX_WINDOWS {
        let _ = writeln!(
            out,
            "\n{} more error windows in result.json.",
            p.windows.len() - MAX_WINDOWS
        );
    }
    let _ = writeln!(
        out,
        "\nAn error window opens at a failed request and takes in the errors less than {} ms apart; it ends at the first success after its last error.\n",
        p.gap
    );
}

/// The probes' band: error windows as critical bars, the spans between
/// them as done bars with their requests' latency.
pub(super) fn bars(r: &RunResult) -> Vec<(String, &'static str, Ms, Ms)> {
    let mut out = Vec::new();
    for p in &r.probes {
        let mut from = p.started;
        for w in &p.windows {
            if w.start > from {
                out.push((ok_bar(p, from, w.start), "done", from, w.start));
            }
            let end = w.end.unwrap_or(p.stopped);
            out.push((
                format!("{} errors {}/{}", p.name, w.errors, w.total),
                "crit",
                w.start,
                end,
            ));
            from = end;
        }
        if p.stopped > from {
            out.push((ok_bar(p, from, p.stopped), "done", from, p.stopped));
        }
    }
    out
}

fn ok_bar(p: &ProbeRecord, from: Ms, to: Ms) -> String {
    let l = windows::latency(p.samples.iter().filter(|s| s.at >= from && s.at < to));
    match (l.p50, l.max) {
        (Some(p50), Some(max)) => format!("{} ok p50 {p50}ms max {max}ms", p.name),
        _ => format!("{} ok", p.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::probe::{RequestOutcome, Sample};

    /// A probe sending every 500 ms from 0 to 30 s; `fails` says which fail.
    fn probe(fails: impl Fn(Ms) -> bool) -> ProbeRecord {
        let samples = (0..60)
            .map(|i| Sample {
                at: i * 500,
                url: 0,
                latency: 2,
                outcome: if fails(i * 500) {
                    RequestOutcome::Refused
                } else {
                    RequestOutcome::Ok { status: 200 }
                },
            })
            .collect();
        ProbeRecord::example(samples)
    }

    #[test]
    fn a_run_whose_every_request_failed_does_not_read_clean() {
        let text = headline(Some(10_000), &[probe(|_| true)]);
        assert!(
            text.starts_with(
                "**Every request of probe `web` failed** (60 of 60): clients never reached"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "lasted **29.502s** (`errorWindow`, whole) and **began before T0**, at T0-10.000s"
            ),
            "{text}"
        );
        assert!(!text.contains("No client error window"), "{text}");
    }

    #[test]
    fn a_window_after_t0_and_none_at_all() {
        let text = headline(Some(10_000), &[probe(|at| (12_000..15_000).contains(&at))]);
        assert_eq!(
            text,
            "The longest client error window after T0 lasted **3.000s** (`errorWindow`).\n\n"
        );
        // Over before T0: not this run's failure.
        let text = headline(Some(10_000), &[probe(|at| at < 2_000)]);
        assert_eq!(text, "No client error window was open at or after T0.\n\n");
    }
}
