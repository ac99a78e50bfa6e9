//! The plan: a checked scenario resolved against one timing profile and one
//! backend. Pure data, computed without touching a cluster: every window is in
//! milliseconds, every fault left broken has its restore, and each step has the
//! span of time (relative to the first fault, T0) in which it can run.

mod render;
pub mod time;

use std::collections::HashMap;

use serde::Serialize;

use crate::duration::format_millis;
use crate::profile::{ProfileName, TimingProfile, Var};
use crate::scenario::checked::{Action, Anchor, Checked, Expectation, StepKind};
use crate::scenario::expr::{Window, WindowSpec};
use crate::scenario::model::{BackendKind, Cleanup, FaultKind};
use crate::scenario::{Diagnostic, Diagnostics, Error, Result};

pub use render::render_text;

/// A fault that the scenario leaves in place and cleanup must undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restore {
    pub node: String,
    pub fault: FaultKind,
    /// The step that broke the node.
    pub broken_by: usize,
}

/// Earliest and latest start of a step, in ms relative to T0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub earliest: i64,
    pub latest: i64,
}

#[derive(Debug)]
pub struct PlannedStep {
    pub index: usize,
    /// Evaluated window, for expectations.
    pub window: Option<Window>,
    /// How long the step may block (wait durations, timeouts), in ms.
    pub blocks_for: Option<i64>,
    /// When the step can start, relative to T0; `None` before T0.
    pub starts: Option<Span>,
    /// For expectations: when the condition is expected, relative to T0.
    pub expected: Option<Span>,
    /// For expectations: when the window opens and when it closes, relative
    /// to T0 (see [`time`]); `None` when that depends on something before T0.
    pub window_span: Option<(Span, Span)>,
}

#[derive(Debug)]
pub struct Plan {
    pub scenario: Checked,
    pub backend: BackendKind,
    pub profile: TimingProfile,
    pub steps: Vec<PlannedStep>,
    pub restores: Vec<Restore>,
    /// `for` of each `abortIf` guard under the profile, in ms (same order).
    pub guard_holds: Vec<i64>,
}

impl Plan {
    pub fn cleanup(&self) -> Cleanup {
        self.scenario.cleanup
    }

    /// The expectations, with their evaluated windows.
    pub fn expectations(&self) -> impl Iterator<Item = (&PlannedStep, &Expectation, Window)> {
        self.steps.iter().filter_map(move |p| {
            match (&self.scenario.steps[p.index].kind, p.window) {
                (StepKind::Expect(e), Some(w)) => Some((p, e, w)),
                _ => None,
            }
        })
    }
}

/// The tolerations a window about pods takes from those pods at run time,
/// not from the profile (each pod's own `tolerationSeconds`).
pub fn pod_tolerations(exp: &Expectation) -> Vec<Var> {
    if !matches!(exp.subject, crate::scenario::checked::Subject::Pods { .. }) {
        return Vec::new();
    }
    exp.window
        .vars()
        .into_iter()
        .filter(|v| {
            matches!(
                v,
                Var::UnreachableTolerationSeconds | Var::NotReadyTolerationSeconds
            )
        })
        .collect()
}

/// What a window's numbers rest on, beyond the profile's known values:
/// assumed values, and tolerations taken from the pods themselves.
pub fn window_notes(profile: &TimingProfile, exp: &Expectation) -> Vec<String> {
    let mut notes = assumed_notes(profile, exp);
    for v in pod_tolerations(exp) {
        notes.push(format!(
            "{} from the pods' own tolerationSeconds",
            v.alias().unwrap_or(v.name())
        ));
    }
    notes
}

/// The profile values a window rests on that are assumed, not known (a
/// pods' own toleration is neither: the run reads it from the pods).
pub fn assumed_notes(profile: &TimingProfile, exp: &Expectation) -> Vec<String> {
    let own = pod_tolerations(exp);
    let assumed: Vec<String> = profile
        .assumed(exp.window.vars())
        .into_iter()
        .filter(|v| !own.contains(v))
        .map(|v| {
            format!(
                "{} = {}",
                v.alias().unwrap_or(v.name()),
                crate::duration::format_duration(profile.get(v))
            )
        })
        .collect();
    if assumed.is_empty() {
        Vec::new()
    } else {
        vec![format!("assumes {}", assumed.join(", "))]
    }
}

fn window_key(w: &WindowSpec) -> &'static str {
    match w {
        WindowSpec::Within { .. } => "within",
        WindowSpec::After { .. } => "after",
        WindowSpec::NotBefore(_) => "notBefore",
        WindowSpec::HoldsFor(_) => "holdsFor",
        WindowSpec::Never(_) => "never",
        WindowSpec::Preflight => "gracefulShutdown",
        WindowSpec::EndOfRun => "duplicateWindow",
        WindowSpec::Requests {
            from: Some(_),
            to: None,
        } => "after",
        WindowSpec::Requests { to: Some(_), .. } => "within",
        WindowSpec::Requests { .. } => "probe",
    }
}

/// The profile a scenario runs under: `base` with the scenario's `timing:` overrides.
pub fn effective_profile(checked: &Checked, base: &TimingProfile) -> TimingProfile {
    let mut p = base.clone();
    if p.origins.is_empty() && !checked.timing.is_empty() {
        p = p.set_by(&format!("the `{}` profile", base.name));
    }
    for (var, value) in &checked.timing {
        p.set(*var, *value);
        p.origins.insert(*var, crate::profile::Origin::Scenario);
    }
    if !checked.timing.is_empty() {
        p.name = format!("{}+scenario", base.name);
    }
    p
}

/// A `within`/`after` window that closes before its step can start: it could
/// only ever be judged from history that ended before the step was reached.
fn unreachable(
    checked: &Checked,
    step: &crate::scenario::checked::Step,
    (closes, starts): (i64, i64),
    profile: &str,
) -> Diagnostic {
    let after = time::previous_ends(&checked.steps, step.index, false)
        .map(|a| format!(" (after {a})"))
        .unwrap_or_default();
    let prev = step.index.saturating_sub(1) + 1;
    let key = match &step.kind {
        StepKind::Expect(e) => window_key(&e.window),
        _ => "within",
    };
    checked.source.diag(
        &format!("{}.expect.{key}", step.path),
        format!(
            "#{} closes at T0+{} but cannot start before T0+{}{after} under the `{profile}` profile: the window can never be reached",
            step.index + 1,
            format_millis(closes),
            format_millis(starts)
        ),
        Some(format!(
            "anchor it on a later step with `since: <id>` (give #{prev} an `id`) or widen it"
        )),
    )
}

/// Resolves a checked scenario against a profile. `backend` overrides the scenario's own.
pub fn resolve(
    checked: Checked,
    base: &TimingProfile,
    backend: Option<BackendKind>,
) -> Result<Plan> {
    let profile = effective_profile(&checked, base);
    let (steps, restores) = resolve_steps(&checked, &profile)?;
    let guard_holds = resolve_guards(&checked, &profile)?;
    let backend = backend.unwrap_or(checked.backend);
    Ok(Plan {
        scenario: checked,
        backend,
        profile,
        steps,
        restores,
        guard_holds,
    })
}

/// Checks that every window makes sense under each built-in profile, so a
/// scenario that validates runs both on a default cluster and on `fast`.
pub fn check_all_profiles(checked: &Checked) -> Result<()> {
    for name in [ProfileName::Default, ProfileName::Fast] {
        let profile = effective_profile(checked, &TimingProfile::named(name));
        resolve_steps(checked, &profile)?;
        resolve_guards(checked, &profile)?;
    }
    Ok(())
}

/// Each guard's `for` in ms under `profile`; a negative one is an error
/// (`0s` fires the moment the conditions hold).
pub fn resolve_guards(checked: &Checked, profile: &TimingProfile) -> Result<Vec<i64>> {
    let mut diags = Vec::new();
    let holds = checked
        .guards
        .iter()
        .map(|g| {
            let ms = match crate::scenario::expr::limited(&g.hold, profile) {
                Ok(ms) => ms,
                Err(msg) => {
                    diags.push(checked.source.diag(&format!("{}.for", g.path), msg, None));
                    return 0;
                }
            };
            if ms < 0 {
                diags.push(checked.source.diag(
                    &format!("{}.for", g.path),
                    format!(
                        "`for: {}` is negative ({}) under the `{}` profile",
                        g.hold,
                        format_millis(ms),
                        profile.name
                    ),
                    Some("a guard's `for` is how long its conditions must hold: 0s or more".into()),
                ));
            }
            ms
        })
        .collect();
    if diags.is_empty() {
        Ok(holds)
    } else {
        Err(Error::Invalid(Diagnostics(diags)))
    }
}

/// A wait's duration or timeout in ms under `profile`; 0 (after saying why)
/// when it is not positive or too long to add up.
fn positive_ms(
    checked: &Checked,
    path: &str,
    e: &crate::scenario::expr::Expr,
    profile: &TimingProfile,
    what: &str,
    diags: &mut Vec<Diagnostic>,
) -> i64 {
    match crate::scenario::expr::limited(e, profile) {
        Ok(ms) if ms > 0 => ms,
        Ok(_) => {
            diags.push(checked.source.diag(
                path,
                format!(
                    "{what} `{e}` is not positive under the `{}` profile",
                    profile.name
                ),
                None,
            ));
            0
        }
        Err(msg) => {
            diags.push(checked.source.diag(path, msg, None));
            0
        }
    }
}

/// Evaluates every window and duration under `profile` (already including the
/// scenario's overrides) and lays the steps out on the T0 timeline.
pub fn resolve_steps(
    checked: &Checked,
    profile: &TimingProfile,
) -> Result<(Vec<PlannedStep>, Vec<Restore>)> {
    let mut diags: Vec<Diagnostic> = Vec::new();
    let mut steps = Vec::new();
    let mut broken: HashMap<String, (FaultKind, usize)> = HashMap::new();
    let mut t0: Option<usize> = None;
    // start span of each step index, once known
    let mut starts: HashMap<usize, Option<Span>> = HashMap::new();
    let mut cursor: Option<Span> = None;

    // T0: the first fault, or the first action of a scenario without one (a
    // drain). Found once: looking for it at every step made validation
    // quadratic in the steps of a scenario without faults.
    let first_fault = checked
        .steps
        .iter()
        .position(|s| matches!(s.kind, StepKind::Fault { .. }));
    for step in &checked.steps {
        let is_t0 = match first_fault {
            Some(f) => checked.steps[f].index == step.index,
            None => matches!(step.kind, StepKind::Action(_)),
        };
        if t0.is_none() && is_t0 {
            t0 = Some(step.index);
            cursor = Some(Span {
                earliest: 0,
                latest: 0,
            });
        }
        if let StepKind::Fault { fault, node } = &step.kind {
            if fault.breaks() {
                broken.insert(node.clone(), (*fault, step.index));
            } else {
                broken.remove(node);
            }
        }
        starts.insert(step.index, cursor);
        let mut planned = PlannedStep {
            index: step.index,
            window: None,
            blocks_for: None,
            starts: cursor,
            expected: None,
            window_span: None,
        };
        match &step.kind {
            StepKind::Expect(exp) => match exp.window.resolve(profile) {
                Ok(w) => {
                    planned.window = Some(w);
                    let anchor = match exp.anchor {
                        Anchor::Start => None,
                        Anchor::Step(i) => starts.get(&i).copied().flatten(),
                    };
                    let span = time::planned_span(w, exp.explicit_anchor, anchor, cursor);
                    // `expected`: when the condition is expected to first hold
                    if let (Window::Between { .. }, Some((open, close))) = (w, span) {
                        planned.expected = Some(Span {
                            earliest: open.earliest,
                            latest: close.latest,
                        });
                    }
                    if let (Window::Between { .. }, Some((_, close)), Some(c)) = (w, span, cursor)
                        && close.latest < c.earliest
                    {
                        diags.push(unreachable(
                            checked,
                            step,
                            (close.latest, c.earliest),
                            &profile.name,
                        ));
                    }
                    planned.window_span = span;
                    planned.blocks_for = Some(w.horizon());
                    cursor = time::next_start(w, exp.explicit_anchor, anchor, cursor);
                    // later steps anchored here count from when the condition first held
                    if planned.expected.is_some() {
                        starts.insert(step.index, planned.expected);
                    }
                }
                Err(msg) => diags.push(checked.source.diag(
                    &format!("{}.expect.{}", step.path, window_key(&exp.window)),
                    msg,
                    Some(format!("bounds are evaluated with the `{}` timing profile; see `nodefall plan --profile`", profile.name)),
                )),
            },
            StepKind::Action(Action::WaitFor { duration }) => {
                let ms = positive_ms(
                    checked,
                    &format!("{}.action.wait.duration", step.path),
                    duration,
                    profile,
                    "wait duration",
                    &mut diags,
                );
                planned.blocks_for = Some(ms);
                cursor = cursor.map(|c| Span { earliest: c.earliest + ms, latest: c.latest + ms });
                // a wait anchors later steps at its end
                starts.insert(step.index, cursor);
            }
            StepKind::Action(Action::WaitUntil { timeout, .. }) => {
                let ms = positive_ms(
                    checked,
                    &format!("{}.action.wait.timeout", step.path),
                    timeout,
                    profile,
                    "wait timeout",
                    &mut diags,
                );
                planned.blocks_for = Some(ms);
                cursor = cursor.map(|c| Span { earliest: c.earliest, latest: c.latest + ms });
                starts.insert(step.index, cursor);
            }
            StepKind::Action(Action::Drain(d)) => {
                let ms = i64::try_from(d.timeout.as_millis()).unwrap_or(i64::MAX);
                planned.blocks_for = Some(ms);
                cursor = cursor.map(|c| Span { earliest: c.earliest, latest: c.latest + ms });
            }
            _ => {}
        }
        steps.push(planned);
    }
    if !diags.is_empty() {
        diags.sort_by_key(|d| d.pos);
        return Err(Error::Invalid(Diagnostics(diags)));
    }
    let mut restores: Vec<Restore> = broken
        .into_iter()
        .filter_map(|(node, (fault, at))| {
            fault.revert().map(|r| Restore {
                node,
                fault: r,
                broken_by: at,
            })
        })
        .collect();
    restores.sort_by_key(|r| r.broken_by);
    Ok((steps, restores))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load::load_str;
    use crate::scenario::validate::validate;

    fn plan(text: &str, profile: &TimingProfile) -> std::result::Result<Plan, String> {
        load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(|l| validate(l, &crate::files::Memory::default()))
            .and_then(|c| resolve(c, profile, None))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn guards_hold_for_their_profile_relative_time_and_render() {
        let c = load_str(
            "s.yaml",
            std::path::Path::new("."),
            "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\nabortIf:\n  - {name: web-down, pods: app=web, on: target, readyBelow: 2, for: grace + 10s}\n  - {node: target, exists: false}\nsteps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: 1m}\n",
        )
        .and_then(|l| validate(l, &crate::files::Memory::default()))
        .unwrap_or_else(|e| panic!("{e}"));
        let plan = resolve(c, &TimingProfile::fast(), None).unwrap_or_else(|e| panic!("{e}"));
        // fast: grace 8 s
        assert_eq!(plan.guard_holds, vec![18_000, 0]);
        let text = render_text(&plan);
        assert!(
            text.contains("web-down: pods app=web on target: < 2 ready for grace + 10s = 18s"),
            "{text}"
        );
        assert!(
            text.contains("abortIf[1]: node target: deleted for 0s"),
            "{text}"
        );
    }

    const SEED_000: &str = "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\nsteps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: grace .. grace + 20s}\n  - expect: {pods: app=web, on: target, terminating: true, after: grace + toleration +- 10%}\n  - expect: {pods: app=web, on: target, terminating: true, holdsFor: 60s}\n  - action: {taint: {node: target, key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}}\n  - expect: {pods: app=web, ready: 8, notOn: target, within: podGcPeriod + 40s}\n";

    #[test]
    fn windows_say_what_they_assume_and_pods_use_their_own_toleration() {
        // a discovered profile where only the grace period was read
        let mut profile = TimingProfile::upstream_default().set_by("test");
        for v in [Var::UnreachableTolerationSeconds, Var::PodGcPeriod] {
            profile
                .origins
                .insert(v, crate::profile::Origin::Assumed { why: "x".into() });
        }
        let p = plan(SEED_000, &profile).unwrap_or_else(|e| panic!("{e}"));
        let notes: Vec<Vec<String>> = p
            .expectations()
            .map(|(_, e, _)| window_notes(&p.profile, e))
            .collect();
        assert_eq!(
            notes,
            vec![
                vec![],
                vec!["toleration from the pods' own tolerationSeconds".to_owned()],
                vec![],
                vec!["assumes podGc = 20s".to_owned()],
            ]
        );
    }

    fn windows(p: &Plan) -> Vec<Window> {
        p.expectations().map(|(_, _, w)| w).collect()
    }

    #[test]
    fn default_profile_windows() {
        let p =
            plan(SEED_000, &TimingProfile::upstream_default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            windows(&p),
            vec![
                Window::Between {
                    from: 50_000,
                    to: 70_000
                },
                Window::Between {
                    from: 315_000,
                    to: 385_000
                },
                Window::HoldsFor { duration: 60_000 },
                Window::Between {
                    from: 0,
                    to: 60_000
                },
            ]
        );
        // the pause is never reverted by the steps: cleanup must resume it
        assert_eq!(
            p.restores,
            vec![Restore {
                node: "target".into(),
                fault: FaultKind::ResumeVm,
                broken_by: 0
            }]
        );
    }

    #[test]
    fn compressed_profile_windows_and_timeline() {
        let p = plan(SEED_000, &TimingProfile::fast()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            windows(&p)[0],
            Window::Between {
                from: 8_000,
                to: 28_000
            }
        );
        assert_eq!(
            windows(&p)[1],
            Window::Between {
                from: 25_200,
                to: 30_800
            }
        );
        // the taint action (step 5) starts after the hold: 25.2s + 60s at the earliest
        assert_eq!(
            p.steps[4].starts,
            Some(Span {
                earliest: 85_200,
                latest: 90_800
            })
        );
        // and replacements are expected within podGc + 40s of it
        assert_eq!(
            p.steps[5].expected,
            Some(Span {
                earliest: 85_200,
                latest: 150_800
            })
        );
    }

    #[test]
    fn a_window_valid_on_one_profile_can_be_contradictory_on_another() {
        let text = SEED_000.replace("grace .. grace + 20s", "45s .. grace + 20s");
        assert!(plan(&text, &TimingProfile::upstream_default()).is_ok());
        let e = plan(&text, &TimingProfile::fast()).unwrap_err();
        assert!(
            e.starts_with(
                "s.yaml:6:52: window starts at 45s but ends at 28s under the `fast` profile"
            ),
            "{e}"
        );
    }

    #[test]
    fn expectations_after_a_wait_count_from_its_end() {
        let text = "name: t\nnamespace: ns\ntarget: {name: n1}\nsteps:\n  - fault: pause-vm\n  - action: {wait: {duration: 30s}}\n  - expect: {node: target, ready: Unknown, within: 10s}\n";
        let p = plan(text, &TimingProfile::fast()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.steps[2].expected,
            Some(Span {
                earliest: 30_000,
                latest: 40_000
            })
        );
    }

    #[test]
    fn scenario_overrides_replace_profile_values() {
        let text = SEED_000.replace("steps:", "timing: {nodeMonitorGracePeriod: 40s}\nsteps:");
        let p = plan(&text, &TimingProfile::upstream_default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            windows(&p)[0],
            Window::Between {
                from: 40_000,
                to: 60_000
            }
        );
        assert_eq!(p.profile.name, "default+scenario");
    }

    #[test]
    fn an_implicit_hold_is_planned_from_its_step_start_not_its_anchor() {
        let p = plan(SEED_000, &TimingProfile::fast()).unwrap_or_else(|e| panic!("{e}"));
        // #4 holds for 60s from when #3 is decided (T0+25.2s .. T0+30.8s), not from the pause
        let (open, close) = p.steps[3].window_span.unwrap_or_else(|| panic!("no span"));
        assert_eq!(
            open,
            Span {
                earliest: 25_200,
                latest: 30_800
            }
        );
        assert_eq!(
            close,
            Span {
                earliest: 85_200,
                latest: 90_800
            }
        );
        let text = render_text(&p);
        assert!(
            text.contains("when this step starts (after #3 is decided)"),
            "{text}"
        );
        assert!(!text.contains("its start"), "{text}");
    }

    #[test]
    fn a_window_closing_before_its_step_can_start_is_an_error() {
        let text = "name: t\nnamespace: ns\ntarget: {name: n1}\nsteps:\n  - fault: pause-vm\n  - expect: {pods: app=web, on: target, terminating: true, after: grace + toleration +- 20s}\n  - expect: {pods: app=web, notOn: target, ready: 4, within: 2m}\n";
        let e = plan(text, &TimingProfile::upstream_default()).unwrap_err();
        assert!(
            e.starts_with("s.yaml:7:62: #3 closes at T0+2m but cannot start before T0+5m30s (after #2 is decided)"),
            "{e}"
        );
        assert!(e.contains("since: <id>"), "{e}");
        // anchored on the eviction, the same window is reachable
        let fixed = text
            .replace(
                "  - expect: {pods: app=web, on:",
                "  - id: evicted\n    expect: {pods: app=web, on:",
            )
            .replace("within: 2m}", "within: 2m, since: evicted}");
        let p = plan(&fixed, &TimingProfile::upstream_default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.steps[2].expected,
            Some(Span {
                earliest: 330_000,
                latest: 490_000
            })
        );
        // and under `fast` the original closes after the earliest start: no error
        assert!(plan(text, &TimingProfile::fast()).is_ok());
    }
}
