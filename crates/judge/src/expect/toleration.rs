//! `toleration` in a window about pods means those pods' own
//! `tolerationSeconds` (fixed when each pod was created; charts set their
//! own), not the cluster's default. Pure: from the pods' tolerations to the
//! seconds a window uses, with a sentence saying where they came from.

use std::collections::BTreeMap;

use crate::timeline::Toleration;

/// The seconds to use for `name` (`toleration`) given the selected pods'
/// tolerations, and why. `None`: keep the profile's value (no pod, or every
/// pod tolerates forever).
pub fn effective(name: &str, pods: &[Toleration]) -> (Option<i64>, String) {
    let mut seconds: BTreeMap<i64, usize> = BTreeMap::new();
    let mut forever = 0;
    for t in pods {
        match t {
            Toleration::Seconds(s) => *seconds.entry(*s).or_default() += 1,
            Toleration::None => *seconds.entry(0).or_default() += 1,
            Toleration::Forever => forever += 1,
        }
    }
    let forever_note = match forever {
        0 => String::new(),
        n => format!("; {n} pod(s) tolerate it forever and are never evicted"),
    };
    match (seconds.len(), seconds.last_key_value()) {
        (_, None) if forever > 0 => (
            None,
            format!(
                "{name}: the pods tolerate it forever (no tolerationSeconds); the profile's value is used"
            ),
        ),
        (_, None) => (
            None,
            format!("{name}: no pod matched when the window began; the profile's value is used"),
        ),
        (1, Some((&s, _))) => (
            Some(s),
            format!("{name} = {s}s, the pods' own tolerationSeconds{forever_note}"),
        ),
        (_, Some((&max, _))) => {
            let spread: Vec<String> = seconds.iter().map(|(s, n)| format!("{s}s x{n}")).collect();
            (
                Some(max),
                format!(
                    "{name} = {max}s, the largest of the pods' own tolerationSeconds ({}){forever_note}",
                    spread.join(", ")
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_is_used_as_is() {
        let (s, why) = effective("toleration", &[Toleration::Seconds(40); 3]);
        assert_eq!(s, Some(40));
        assert_eq!(why, "toleration = 40s, the pods' own tolerationSeconds");
    }

    #[test]
    fn different_values_use_the_largest_and_say_so() {
        let (s, why) = effective(
            "toleration",
            &[
                Toleration::Seconds(20),
                Toleration::Seconds(60),
                Toleration::Seconds(20),
                Toleration::Forever,
            ],
        );
        assert_eq!(s, Some(60));
        assert_eq!(
            why,
            "toleration = 60s, the largest of the pods' own tolerationSeconds (20s x2, 60s x1); \
             1 pod(s) tolerate it forever and are never evicted"
        );
        // no toleration at all: evicted at once
        assert_eq!(effective("toleration", &[Toleration::None]).0, Some(0));
    }

    #[test]
    fn forever_or_no_pod_keeps_the_profile() {
        assert_eq!(effective("toleration", &[Toleration::Forever]).0, None);
        let (s, why) = effective("notReadyToleration", &[]);
        assert_eq!(s, None);
        assert!(why.contains("no pod matched"), "{why}");
    }
}
