//! Kubernetes label selectors (`app=nginx,tier!=db,env in (a,b),!legacy`):
//! parsed once, matched against labels, printed back in canonical form.

use std::collections::BTreeMap;
use std::fmt;

use crate::scenario::names;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    reqs: Vec<Req>,
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let bad = |part: &str, why: &str| {
            Err(format!(
                "`{text}` is not a label selector ({why} in `{}`); write e.g. `app=nginx` or `app in (a,b),tier!=db`",
                part.trim()
            ))
        };
        let mut reqs = Vec::new();
        if text.trim().is_empty() {
            return bad(text, "empty");
        }
        for part in split_top(text) {
            let p = part.trim();
            let req = if let Some((k, v)) = p.split_once("!=") {
                Req::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some(open) = p.find('(') {
                let Some(inner) = p[open + 1..].strip_suffix(')') else {
                    return bad(part, "unclosed `(`");
                };
                let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
                let head: Vec<&str> = p[..open].split_whitespace().collect();
                match head.as_slice() {
                    [k, "in"] => Req::In((*k).into(), values),
                    [k, "notin"] => Req::NotIn((*k).into(), values),
                    _ => return bad(part, "expected `KEY in (...)` or `KEY notin (...)`"),
                }
            } else if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(k.trim().into())
            } else {
                Req::Exists(p.into())
            };
            let (key, values): (&str, Vec<&str>) = match &req {
                Req::Eq(k, v) | Req::NotEq(k, v) => (k, vec![v.as_str()]),
                Req::In(k, vs) | Req::NotIn(k, vs) => (k, vs.iter().map(String::as_str).collect()),
                Req::Exists(k) | Req::NotExists(k) => (k, vec![]),
            };
            // the API server applies these same rules to selectors it is sent
            let rule = |what: &str, e: names::NameError| {
                Err(format!(
                    "`{text}` is not a label selector: {what} in `{}` is not valid: {e}; write e.g. `app=nginx` or `app.kubernetes.io/name in (a,b)`",
                    part.trim()
                ))
            };
            if let Err(e) = names::qualified_name(key) {
                return rule(&format!("label key `{key}`"), e);
            }
            for v in &values {
                if let Err(e) = names::label_value(v) {
                    return rule(&format!("label value `{v}`"), e);
                }
            }
            if matches!(req, Req::In(_, ref vs) | Req::NotIn(_, ref vs) if vs.iter().any(String::is_empty))
            {
                return bad(part, "empty value in set");
            }
            reqs.push(req);
        }
        Ok(Selector { reqs })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::NotEq(k, v) => labels.get(k) != Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Req::Eq(k, v) => write!(f, "{k}={v}")?,
                Req::NotEq(k, v) => write!(f, "{k}!={v}")?,
                Req::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Req::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Req::Exists(k) => write!(f, "{k}")?,
                Req::NotExists(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

impl serde::Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_every_form() {
        let s = Selector::parse("app=nginx, tier!=db, env in (a, b), !legacy, team")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.to_string(),
            "app=nginx,tier!=db,env in (a,b),!legacy,team"
        );
        assert!(s.matches(&labels(&[("app", "nginx"), ("env", "a"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "nginx"), ("env", "c"), ("team", "x")])));
        assert!(!s.matches(&labels(&[
            ("app", "nginx"),
            ("env", "a"),
            ("team", "x"),
            ("legacy", "")
        ])));
        let k = Selector::parse("node-role.kubernetes.io/control-plane")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(k.matches(&labels(&[("node-role.kubernetes.io/control-plane", "")])));
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in [
            "",
            "app=a=b",
            "=x",
            "app in (a",
            "app within (a)",
            "a b=c",
            "app=ng inx",
            "app in (a,)",
            "app=-web",
            "Example.com/app=web",
            "a/b/c=d",
            "app in (web, db_)",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn names_the_kubernetes_rule_a_key_or_value_breaks() {
        let e = Selector::parse("app=web,-tier=db").expect_err("bad key");
        assert!(
            e.contains("label key `-tier` in `-tier=db` is not valid: it must consist of alphanumeric characters"),
            "{e}"
        );
        let e = Selector::parse(&format!("app={}", "v".repeat(64))).expect_err("long value");
        assert!(
            e.contains("is 64 characters long; at most 63 are allowed"),
            "{e}"
        );
        assert!(Selector::parse(&format!("{}/app=web", "a".repeat(253))).is_ok());
    }
}
