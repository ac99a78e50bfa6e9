//! What clients see: `probe:` entries, and expectations on a Service's
//! endpoints (`service` with `readyEndpoints`) or on a probe's requests
//! (`probe` with `errors`, `errorWindow`).

#![deny(clippy::wildcard_enum_match_arm)]

use std::time::Duration;

use super::Ctx;
use crate::duration::format_duration;
use crate::scenario::checked::{Cmp, Condition, Probe, ProbeCond, ServiceCond, Subject};
use crate::scenario::expr::WindowSpec;
use crate::scenario::model;
use crate::scenario::suggest::closest;

pub(super) const MIN_INTERVAL: Duration = Duration::from_millis(100);
pub(super) const MAX_URLS: usize = 16;
/// All probes together, in requests per second.
pub(super) const MAX_RATE: f64 = 50.0;
const MAX_REQUESTS: u64 = 1_000_000;
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
const DEFAULT_MAX_REQUESTS: u64 = 20_000;
const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(2 * 3600);
const DEFAULT_GAP: Duration = Duration::from_secs(5);

/// `probe:` (one mapping or a list).
pub(super) fn probes(cx: &mut Ctx<'_>, list: &[model::Probe]) -> Vec<Probe> {
    let mut out: Vec<Probe> = Vec::new();
    // Every name, valid probe or not: expectations naming a broken probe
    // are not told it is undefined.
    let mut names: Vec<String> = Vec::new();
    let mut rate = 0.0;
    for (i, m) in list.iter().enumerate() {
        let p = match format!("probe[{i}]") {
            item if cx.src.spans.has(&item) => item,
            _ => "probe".to_owned(),
        };
        let errors_before = cx.diags.len();
        let name = m.name.clone().unwrap_or_else(|| "probe".into());
        if cx.dns_label(&format!("{p}.name"), "probe name", &name) && names.contains(&name) {
            cx.err(
                &format!("{p}.name"),
                format!("a second probe named `{name}`"),
                Some("give each probe its own `name`".into()),
            );
        }
        if !names.contains(&name) {
            names.push(name.clone());
        }
        let urls = m.url.0.clone();
        if urls.is_empty() {
            cx.err(
                &p,
                "a probe names no URL",
                Some(
                    "add `url: http://127.0.0.1:30080/` (a NodePort, an ingress, a load balancer)"
                        .into(),
                ),
            );
        } else if urls.len() > MAX_URLS {
            cx.err(
                &format!("{p}.url"),
                format!("{} URLs; a probe takes at most {MAX_URLS}", urls.len()),
                Some("split them over several probes, or probe fewer".into()),
            );
        }
        for (j, url) in urls.iter().enumerate() {
            let at = match format!("{p}.url[{j}]") {
                item if cx.src.spans.has(&item) => item,
                _ => format!("{p}.url"),
            };
            if let Err(why) = check_url(url) {
                cx.err(&at, why, None);
            }
        }
        let interval = m.interval.map_or(DEFAULT_INTERVAL, |d| d.0);
        if interval < MIN_INTERVAL {
            cx.err(
                &format!("{p}.interval"),
                format!(
                    "interval {} is below the smallest, {}",
                    format_duration(interval),
                    format_duration(MIN_INTERVAL)
                ),
                Some("nodefall keeps its own load on the workload small".into()),
            );
        }
        let timeout = m.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0);
        if timeout.is_zero() || timeout > Duration::from_secs(60) {
            cx.err(
                &format!("{p}.timeout"),
                format!(
                    "timeout {} must be above 0 and at most 60s",
                    format_duration(timeout)
                ),
                None,
            );
        }
        let status = statuses(cx, &p, &m.status.0);
        let max_requests = m.max_requests.unwrap_or(DEFAULT_MAX_REQUESTS);
        if max_requests == 0 || max_requests > MAX_REQUESTS {
            cx.err(
                &format!("{p}.maxRequests"),
                format!("maxRequests must be between 1 and {MAX_REQUESTS}"),
                None,
            );
        }
        let max_duration = m.max_duration.map_or(DEFAULT_MAX_DURATION, |d| d.0);
        if max_duration.is_zero() || max_duration > Duration::from_secs(24 * 3600) {
            cx.err(
                &format!("{p}.maxDuration"),
                "maxDuration must be above 0 and at most 24h",
                None,
            );
        }
        let gap = m.gap.map_or(DEFAULT_GAP, |d| d.0);
        if gap < interval {
            cx.err(
                &format!("{p}.gap"),
                format!(
                    "gap {} is shorter than the interval {}: every error would be a window of its own",
                    format_duration(gap),
                    format_duration(interval)
                ),
                Some("a gap of a few intervals (default 5s) joins the errors of one outage".into()),
            );
        }
        if interval >= MIN_INTERVAL {
            rate += urls.len() as f64 / interval.as_secs_f64();
        }
        if cx.diags.len() == errors_before {
            out.push(Probe {
                name,
                urls,
                interval,
                timeout,
                status,
                max_requests,
                max_duration,
                gap,
            });
        }
    }
    if rate > MAX_RATE {
        cx.err(
            "probe",
            format!(
                "the probes send {rate:.0} requests per second together; at most {MAX_RATE:.0}"
            ),
            Some("raise `interval` or probe fewer URLs".into()),
        );
    }
    cx.probes = names;
    out
}

/// An http URL with a host (https is not supported: a NodePort or an
/// ingress's plain port is what such a probe targets).
pub fn check_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "`{url}`: https is not supported yet; probe the Service's NodePort (or an ingress) over http"
            ));
        }
        _ => return Err(format!("`{url}` must start with http://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{url}` names no host"));
    }
    Ok(())
}

/// `status:` codes (`200`), classes (`2xx`) or ranges (`200-299`);
/// default 200-399.
fn statuses(cx: &mut Ctx<'_>, p: &str, given: &[serde_yaml_ng::Value]) -> Vec<(u16, u16)> {
    if given.is_empty() {
        return vec![(200, 399)];
    }
    let mut out = Vec::new();
    for v in given {
        #[allow(
            clippy::wildcard_enum_match_arm,
            reason = "YAML's own value: anything else is shown as parsed"
        )]
        let text = match v {
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            serde_yaml_ng::Value::String(s) => s.trim().to_owned(),
            other => format!("{other:?}"),
        };
        match status_range(&text) {
            Some(r) => out.push(r),
            None => cx.err(
                &format!("{p}.status"),
                format!("`{text}` is not an HTTP status"),
                Some("write a code (`200`), a class (`2xx`) or a range (`200-299`)".into()),
            ),
        }
    }
    out
}

fn status_range(text: &str) -> Option<(u16, u16)> {
    let code = |s: &str| {
        s.trim()
            .parse::<u16>()
            .ok()
            .filter(|c| (100..=599).contains(c))
    };
    if let Some(class) = text.strip_suffix("xx").or_else(|| text.strip_suffix("XX")) {
        let d = class.parse::<u16>().ok().filter(|d| (1..=5).contains(d))?;
        return Some((d * 100, d * 100 + 99));
    }
    if let Some((a, b)) = text.split_once('-') {
        let (a, b) = (code(a)?, code(b)?);
        return (a <= b).then_some((a, b));
    }
    code(text).map(|c| (c, c))
}

/// Subject and conditions of an expectation that uses a client field;
/// `None` when it uses none. The inner `None`: refused, with the errors
/// recorded.
pub(super) fn condition(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
) -> Option<Option<(Subject, Vec<Condition>)>> {
    if e.service.is_some() {
        return Some(service(cx, p, e));
    }
    if e.probe.is_some() {
        return Some(probe(cx, p, e));
    }
    let mut refused = false;
    for (field, set, subject) in [
        (
            "readyEndpoints",
            e.ready_endpoints.is_some(),
            "service: NAME",
        ),
        ("errors", e.errors.is_some(), "probe: NAME"),
        ("errorWindow", e.error_window.is_some(), "probe: NAME"),
    ] {
        if set {
            cx.err_key(
                &format!("{p}.{field}"),
                format!("`{field}` needs `{subject}` as the expectation's subject"),
                None,
            );
            refused = true;
        }
    }
    refused.then_some(None)
}

/// The fields of other subjects, refused beside `service` or `probe`.
fn others(e: &model::Expect) -> [(&'static str, bool); 20] {
    [
        ("node", e.node.is_some()),
        ("pods", e.pods.is_some()),
        ("pvc", e.pvc.is_some()),
        ("ready", e.ready.is_some()),
        ("taint", e.taint.is_some()),
        ("noTaint", e.no_taint.is_some()),
        ("unschedulable", e.unschedulable.is_some()),
        ("exists", e.exists.is_some()),
        ("terminating", e.terminating.is_some()),
        ("count", e.count.is_some()),
        ("readyAtLeast", e.ready_at_least.is_some()),
        ("readyBelow", e.ready_below.is_some()),
        ("phase", e.phase.is_some()),
        ("reason", e.reason.is_some()),
        ("gracefulShutdown", e.graceful_shutdown.is_some()),
        ("attachedTo", e.attached_to.is_some()),
        ("detachedFrom", e.detached_from.is_some()),
        ("attached", e.attached.is_some()),
        ("event", e.event.is_some()),
        ("message", e.message.is_some()),
    ]
}

fn refuse(cx: &mut Ctx<'_>, p: &str, about: &str, fields: &[(&'static str, bool)], help: &str) {
    for (field, _) in fields.iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!("`{field}` does not apply to {about}"),
            Some(help.to_owned()),
        );
    }
}

fn service(cx: &mut Ctx<'_>, p: &str, e: &model::Expect) -> Option<(Subject, Vec<Condition>)> {
    let errors_before = cx.diags.len();
    let name = e.service.clone().unwrap_or_default();
    if let Err(why) = crate::scenario::names::dns1123_label(&name) {
        cx.err(
            &format!("{p}.service"),
            format!("`{name}` is not a valid Service name: {why}"),
            None,
        );
    }
    refuse(
        cx,
        p,
        "a Service's endpoints",
        &others(e),
        "use `readyEndpoints` (with `on`/`notOn` for a target's node)",
    );
    refuse(
        cx,
        p,
        "a Service's endpoints",
        &[
            ("probe", e.probe.is_some()),
            ("errors", e.errors.is_some()),
            ("errorWindow", e.error_window.is_some()),
        ],
        "probe expectations name `probe: NAME`",
    );
    let on = match &e.on {
        Some(t) => Some(cx.target_ref(&format!("{p}.on"), t)?),
        None => None,
    };
    let not_on = match &e.not_on {
        Some(t) => Some(cx.target_ref(&format!("{p}.notOn"), t)?),
        None => None,
    };
    let Some(n) = e.ready_endpoints else {
        if cx.diags.len() == errors_before {
            cx.err(
                p,
                "expectation has no condition",
                Some("add `readyEndpoints: N`".into()),
            );
        }
        return None;
    };
    (cx.diags.len() == errors_before).then(|| {
        (
            Subject::Service { name, on, not_on },
            vec![Condition::Service(ServiceCond::ReadyEndpoints(n))],
        )
    })
}

fn probe(cx: &mut Ctx<'_>, p: &str, e: &model::Expect) -> Option<(Subject, Vec<Condition>)> {
    let errors_before = cx.diags.len();
    let name = e.probe.clone().unwrap_or_default();
    if !cx.probes.contains(&name) {
        let help = if cx.probes.is_empty() {
            "define one with `probe: {name: NAME, url: http://...}` at the top of the scenario"
                .to_owned()
        } else {
            let mut h = String::new();
            if let Some(s) = closest(&name, cx.probes.iter().map(String::as_str)) {
                h.push_str(&format!("did you mean `{s}`? "));
            }
            h.push_str(&format!("defined probes: {}", cx.probes.join(", ")));
            h
        };
        cx.err(
            &format!("{p}.probe"),
            format!("undefined probe `{name}`"),
            help,
        );
    }
    let mut fields = others(e).to_vec();
    fields.extend([
        ("on", e.on.is_some()),
        ("notOn", e.not_on.is_some()),
        ("readyEndpoints", e.ready_endpoints.is_some()),
    ]);
    refuse(
        cx,
        p,
        "a probe's requests",
        &fields,
        "use `errors: N` or `errorWindow: \"<= DURATION\"`",
    );
    let mut conds = Vec::new();
    conds.extend(e.errors.map(ProbeCond::Errors));
    if let Some(text) = &e.error_window {
        let path = format!("{p}.errorWindow");
        match comparison(text) {
            Ok((cmp, rest)) => {
                if let Some(limit) = cx.expr(&path, rest) {
                    conds.push(ProbeCond::ErrorWindow { cmp, limit });
                }
            }
            Err(why) => cx.err(&path, why, None),
        }
    }
    if conds.is_empty() && cx.diags.len() == errors_before {
        cx.err(
            p,
            "expectation has no condition",
            Some(
                "add `errors: N` (at most N failed requests) or `errorWindow: \"<= grace + 10s\"`"
                    .into(),
            ),
        );
        return None;
    }
    (cx.diags.len() == errors_before).then(|| {
        (
            Subject::Probe(name),
            conds.into_iter().map(Condition::Probe).collect(),
        )
    })
}

/// `<= grace + 10s` -> (Le, "grace + 10s").
fn comparison(text: &str) -> Result<(Cmp, &str), String> {
    let t = text.trim();
    let (cmp, rest) = if let Some(r) = t.strip_prefix("<=") {
        (Cmp::Le, r)
    } else if let Some(r) = t.strip_prefix(">=") {
        (Cmp::Ge, r)
    } else if let Some(r) = t.strip_prefix('<') {
        (Cmp::Lt, r)
    } else if let Some(r) = t.strip_prefix('>') {
        (Cmp::Gt, r)
    } else {
        return Err(format!(
            "`{t}` needs a comparison: write e.g. `\"<= grace + 10s\"` (one of <, <=, >, >=)"
        ));
    };
    Ok((cmp, rest.trim()))
}

/// The window of a probe expectation: `after: X` (requests from anchor + X
/// to the end of the steps), `within: X` or `within: A .. B`, or none (from
/// the anchor to the end of the steps).
pub(super) fn probe_window(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    wanted: bool,
) -> Option<WindowSpec> {
    if !wanted {
        cx.err_key(
            &format!("{p}.probe"),
            "a probe cannot be waited for: its requests are judged when it stops, at the end of the steps",
            Some("write it as an expectation step".into()),
        );
        return None;
    }
    for (field, set) in [
        ("notBefore", e.not_before.is_some()),
        ("holdsFor", e.holds_for.is_some()),
        ("never", e.never.is_some()),
    ] {
        if set {
            cx.err_key(
                &format!("{p}.{field}"),
                format!("`{field}` does not apply to a probe's requests"),
                Some("use `after: X` (requests from X on), `within: X` or `within: A .. B`".into()),
            );
            return None;
        }
    }
    match (&e.after, &e.within) {
        (Some(_), Some(_)) => {
            cx.err(
                p,
                "expectation has `after` and `within` at once",
                Some("`within: A .. B` gives both ends".into()),
            );
            None
        }
        (Some(a), None) => {
            let from = cx.expr(&format!("{p}.after"), a)?;
            Some(WindowSpec::Requests {
                from: Some(from),
                to: None,
            })
        }
        (None, Some(w)) => {
            let path = format!("{p}.within");
            let (from, to) = match w.split_once("..") {
                Some((a, b)) => (Some(cx.expr(&path, a)?), cx.expr(&path, b)?),
                None => (None, cx.expr(&path, w)?),
            };
            Some(WindowSpec::Requests { from, to: Some(to) })
        }
        (None, None) => Some(WindowSpec::Requests {
            from: None,
            to: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_take_codes_classes_and_ranges() {
        assert_eq!(status_range("200"), Some((200, 200)));
        assert_eq!(status_range("2xx"), Some((200, 299)));
        assert_eq!(status_range("200-399"), Some((200, 399)));
        assert_eq!(status_range("399-200"), None);
        assert_eq!(status_range("700"), None);
        assert_eq!(status_range("ok"), None);
    }

    #[test]
    fn urls_are_http_with_a_host() {
        assert!(check_url("http://127.0.0.1:30080/").is_ok());
        assert!(
            check_url("https://x/")
                .unwrap_err()
                .contains("https is not supported")
        );
        assert!(check_url("ftp://x/").is_err());
        assert!(check_url("/path").is_err());
    }

    #[test]
    fn comparisons() {
        assert_eq!(comparison("<= grace + 10s"), Ok((Cmp::Le, "grace + 10s")));
        assert_eq!(comparison(">5s"), Ok((Cmp::Gt, "5s")));
        assert!(comparison("grace").is_err());
    }
}
