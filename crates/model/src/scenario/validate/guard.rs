//! `abortIf:` guards: the subject and conditions are an expectation's
//! (checked by [`super::expect::condition`]); a guard adds `for` and `name`
//! and has no window, no anchor and no preflight condition.

use super::{Ctx, expect};
use crate::scenario::checked::Guard;
use crate::scenario::model;

/// Why each refused field has no meaning in a guard, and what to write instead.
fn refusal(field: &str) -> (String, String) {
    match field {
        "gracefulShutdown" => (
            "`gracefulShutdown` cannot be an abort guard: it is decided once, at preflight, before the first fault".into(),
            "write it as an expectation step before the `shutdown` fault".into(),
        ),
        "since" => (
            "`since` has no meaning in an abort guard: guards are armed when the steps begin".into(),
            "remove `since`".into(),
        ),
        window => (
            format!(
                "`{window}` has no meaning in an abort guard: it is watched from the first step to the last and fires once its conditions have held for `for`"
            ),
            format!("remove `{window}`; to let the conditions hold a while before the run stops, write `for: DURATION`"),
        ),
    }
}

pub(super) fn guards(cx: &mut Ctx<'_>, written: &[model::Guard]) -> Vec<Guard> {
    let mut out = Vec::new();
    for (index, g) in written.iter().enumerate() {
        let p = format!("abortIf[{index}]");
        let mut ok = true;
        for (field, _) in g.refused().iter().filter(|(_, set)| *set) {
            let (message, help) = refusal(field);
            cx.err_key(&format!("{p}.{field}"), message, Some(help));
            ok = false;
        }
        if let Some(name) = &g.name
            && name.trim().is_empty()
        {
            cx.err(
                &format!("{p}.name"),
                "an abort guard's `name` is empty",
                Some(
                    "name it, or leave `name` out to have it called by its place in the file"
                        .into(),
                ),
            );
            ok = false;
        }
        let hold = match &g.for_ {
            Some(text) => cx.expr(&format!("{p}.for"), text),
            None => crate::scenario::expr::Expr::parse("0s").ok(),
        };
        // Subject and conditions last: they are reported in file order anyway.
        let checked = expect::condition(cx, &p, &g.as_expect());
        if let (true, Some((subject, conditions)), Some(hold)) = (ok, checked, hold) {
            out.push(Guard {
                index,
                name: g.name.clone(),
                path: p,
                subject,
                conditions,
                hold,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::scenario::checked::{Condition, PodsCond, ServiceCond, StepKind};
    use crate::scenario::load::load_str;
    use crate::scenario::validate::validate;

    const HEAD: &str = "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\n";
    const STEPS: &str =
        "steps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: 1m}\n";

    fn check(text: &str) -> Result<crate::scenario::Checked, String> {
        load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(|l| validate(l, &crate::files::Memory::default()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn guards_take_an_expectations_conditions_and_a_profile_relative_for() {
        let c = check(&format!(
            "{HEAD}abortIf:\n  - {{name: web-down, pods: app=web, on: target, readyBelow: 2, for: grace + 10s}}\n  - {{node: target, exists: false}}\n{STEPS}"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.guards.len(), 2);
        assert_eq!(c.guards[0].label(), "web-down");
        assert_eq!(
            c.guards[0].conditions,
            vec![Condition::Pods(PodsCond::ReadyBelow(2))]
        );
        assert_eq!(c.guards[1].label(), "abortIf[1]");
        assert_eq!(c.guards[1].hold.text(), "0s");
    }

    #[test]
    fn a_guard_may_watch_a_services_endpoints_but_not_a_probe() {
        let c = check(&format!(
            "{HEAD}abortIf:\n  - {{service: web, readyEndpoints: 0, for: 30s}}\n{STEPS}"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.guards[0].conditions,
            vec![Condition::Service(ServiceCond::ReadyEndpoints(0))]
        );
        let err = check(&format!(
            "{HEAD}abortIf:\n  - {{probe: web, errors: 0}}\n{STEPS}"
        ))
        .map(|_| ())
        .unwrap_err();
        assert!(err.contains("unknown field `probe`"), "{err}");
    }

    #[test]
    fn every_refused_field_is_named_and_conditions_are_still_checked() {
        let e = check(&format!(
            "{HEAD}abortIf:\n  - {{pods: app=web, readyBelow: 2, holdsFor: 1m, gracefulShutdown: will-run}}\n  - {{pods: app=web}}\n  - {{pods: app=web, readyBelow: 0}}\n{STEPS}"
        ))
        .unwrap_err();
        assert!(
            e.contains("s.yaml:5:36: `holdsFor` has no meaning in an abort guard"),
            "{e}"
        );
        assert!(
            e.contains("s.yaml:5:50: `gracefulShutdown` cannot be an abort guard"),
            "{e}"
        );
        assert!(
            e.contains("s.yaml:6:6: expectation has no condition"),
            "{e}"
        );
        assert!(
            e.contains("`readyBelow` can never hold")
                || e.contains("`readyBelow: 0` can never hold"),
            "{e}"
        );
    }

    #[test]
    fn ready_below_is_a_pods_condition_of_expectations_too() {
        let c = check(&format!(
            "{HEAD}steps:\n  - fault: pause-vm\n  - expect: {{pods: app=web, readyBelow: 3, within: 1m}}\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let StepKind::Expect(e) = &c.steps[1].kind else {
            panic!("an expectation");
        };
        assert_eq!(e.conditions, vec![Condition::Pods(PodsCond::ReadyBelow(3))]);
        let e = check(&format!(
            "{HEAD}steps:\n  - fault: pause-vm\n  - expect: {{node: target, readyBelow: 3, within: 1m}}\n"
        ))
        .unwrap_err();
        assert!(e.contains("`readyBelow` applies to pods"), "{e}");
    }
}
