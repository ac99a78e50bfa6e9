//! The probes' rows: a client's first and last error after a fault fall
//! where kube-proxy's random choice of an endpoint (and its rule sync) put
//! them, so a row off by that is judged by the window the routing allows.

use std::collections::HashMap;

use super::rows::{Row, RowVerdict, SLACK_MS, secs};
use crate::record::RunResult;
use crate::timeline::Ms;

/// How many of a probe's requests after a fault may go to live endpoints
/// before one reaches the failed node's pods, and still be chance: each
/// request's endpoint is drawn at random, so with half of a Service's
/// endpoints on the failed node five live draws in a row come one time in
/// 32. A count of requests, typed `Ms` because it multiplies the probe's
/// interval.
const ROUTING_DRAWS: Ms = 5;
/// kube-proxy's `minSyncPeriod` (1 s by default): how long after an
/// EndpointSlice change its rules may still route to the old endpoints.
const KUBE_PROXY_SYNC_MS: Ms = 1_000;

/// A probe's first error after a fault comes with the first request that
/// kube-proxy (or the sim's stand-in) sends to the failed node's pods, each
/// connection to an endpoint picked at random: a row off by where that
/// first unlucky request fell is within the goal when both sides had it
/// within the first [`ROUTING_DRAWS`] requests.
pub(super) fn judge_random_routing(rows: &mut [(usize, Ms, Row)], kind: &RunResult) {
    // When each step's failed endpoints left the Service (kind, sim).
    let gone: HashMap<usize, (Ms, Ms)> = rows
        .iter()
        .filter(|(_, _, r)| {
            r.what.starts_with("endpoints on ")
                && (r.what.ends_with(": not ready") || r.what.ends_with(": not ready (first)"))
        })
        .filter_map(|(step, _, r)| Some((*step, (r.kind?, r.sim?))))
        .collect();
    for (step, _, r) in rows.iter_mut() {
        if let (Some(name), Some(&(gk, gs))) = (
            r.what
                .strip_prefix("clients ")
                .and_then(|w| w.strip_suffix(": errors end")),
            gone.get(step),
        ) {
            let Some(probe) = kind.probes.iter().find(|p| p.name == name) else {
                continue;
            };
            let (from, to) = (
                -ROUTING_DRAWS * probe.interval,
                KUBE_PROXY_SYNC_MS + probe.timeout + probe.interval,
            );
            let inside = |t: Option<Ms>, gone: Ms| {
                t.is_some_and(|t| (from - SLACK_MS..=to + SLACK_MS).contains(&(t - gone)))
            };
            if r.verdict == RowVerdict::Off && inside(r.kind, gk) && inside(r.sim, gs) {
                r.verdict = RowVerdict::Timer {
                    rule: format!(
                        "a probe's errors end with the last request sent to the failed node's \
                         pods: a random one of those sent before the endpoints left the Service, \
                         or one sent before kube-proxy rewrote its rules (within {} of the \
                         change; the sim's stand-in at once) and failing after its timeout: \
                         {} to {} after the endpoints' not ready",
                        secs(KUBE_PROXY_SYNC_MS),
                        secs(from),
                        secs(to)
                    ),
                };
            }
            continue;
        }
        let Some(name) = r
            .what
            .strip_prefix("clients ")
            .and_then(|w| w.strip_suffix(": errors begin"))
        else {
            continue;
        };
        let Some(probe) = kind.probes.iter().find(|p| p.name == name) else {
            continue;
        };
        let window = ROUTING_DRAWS * probe.interval;
        let inside = |t: Option<Ms>| t.is_some_and(|t| (0..=window + SLACK_MS).contains(&t));
        if r.verdict == RowVerdict::Off && inside(r.kind) && inside(r.sim) {
            r.verdict = RowVerdict::Timer {
                rule: format!(
                    "kube-proxy sends each connection to an endpoint picked at random (the sim's \
                     stand-in too): the first request to reach the failed node's pods is one of \
                     the first {ROUTING_DRAWS} sent after the fault, every {}: within {}",
                    secs(probe.interval),
                    secs(window)
                ),
            };
        }
    }
}
