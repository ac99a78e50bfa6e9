//! Time bounds written against the timing profile: `grace + 20s`,
//! `toleration +- 10%`, `"30s .. 2*grace"`.
//!
//! Grammar: `expr := term (('+' | '-') term)*`, `term := atom ('*' atom)*`,
//! `atom := duration | number | variable`. A term must hold exactly one
//! duration or variable; bare numbers only scale.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::duration::{MAX_MILLIS, MAX_WRITTEN, format_millis, parse_duration};
use crate::profile::{TimingProfile, Var};

#[derive(Debug, Clone, PartialEq)]
enum Quantity {
    Literal(i64),
    Variable(Var),
}

#[derive(Debug, Clone, PartialEq)]
struct Term {
    factor: f64,
    quantity: Quantity,
}

/// A parsed bound: the source text and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    text: String,
    terms: Vec<Term>,
}

/// Why an expression could not be read. `suggestion` carries a close
/// variable name when the problem is an unknown one.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprError {
    pub message: String,
    pub suggestion: Option<String>,
}

impl ExprError {
    fn new(message: impl Into<String>) -> Self {
        ExprError {
            message: message.into(),
            suggestion: None,
        }
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(s) = &self.suggestion {
            write!(f, "; did you mean `{s}`?")?;
        }
        Ok(())
    }
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if matches!(c, '+' | '-' | '*') || c.is_whitespace() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

enum Atom {
    Number(f64),
    Quantity(Quantity),
}

fn atom(tok: &str, whole: &str) -> Result<Atom, ExprError> {
    if tok.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        if let Ok(n) = tok.parse::<f64>() {
            return Ok(Atom::Number(n));
        }
        return parse_duration(tok)
            .map(|d| {
                Atom::Quantity(Quantity::Literal(
                    i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
                ))
            })
            .map_err(ExprError::new);
    }
    if let Some(v) = Var::lookup(tok) {
        return Ok(Atom::Quantity(Quantity::Variable(v)));
    }
    if let Some(v) = Var::interval_of_rate(tok) {
        return Err(ExprError {
            message: format!(
                "`{tok}` is a rate (nodes per second), not a time, in `{whole}`: a window \
                 takes `{}`, one over `--{}`",
                v.alias().unwrap_or(v.name()),
                v.rate_flag().unwrap_or_default()
            ),
            suggestion: Some(v.alias().unwrap_or(v.name()).to_owned()),
        });
    }
    let names = Var::all_names();
    Err(ExprError {
        message: format!(
            "unknown timing variable `{tok}` in `{whole}`; known: {}",
            names.join(", ")
        ),
        suggestion: crate::scenario::suggest::closest(tok, names.iter().copied()),
    })
}

impl Expr {
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let toks = tokens(text);
        if toks.is_empty() {
            return Err(ExprError::new(
                "empty time bound; write e.g. `30s` or `grace + 20s`",
            ));
        }
        let mut terms = Vec::new();
        let mut sign = 1.0;
        let mut i = 0;
        let mut expect_term = true;
        while i < toks.len() {
            let tok = toks[i].as_str();
            if expect_term {
                if tok == "-" && terms.is_empty() {
                    sign = -sign;
                    i += 1;
                    continue;
                }
                if matches!(tok, "+" | "-" | "*") {
                    return Err(ExprError::new(format!(
                        "`{text}`: expected a duration or variable before `{tok}`"
                    )));
                }
                // term: atom ('*' atom)*
                let mut factor = sign;
                let mut quantity: Option<Quantity> = None;
                loop {
                    match atom(&toks[i], text)? {
                        Atom::Number(n) => factor *= n,
                        Atom::Quantity(q) => {
                            if quantity.is_some() {
                                return Err(ExprError::new(format!(
                                    "`{text}`: cannot multiply two durations"
                                )));
                            }
                            quantity = Some(q);
                        }
                    }
                    if toks.get(i + 1).map(String::as_str) == Some("*") {
                        i += 2;
                        if i >= toks.len() {
                            return Err(ExprError::new(format!(
                                "`{text}`: `*` needs a right-hand side"
                            )));
                        }
                    } else {
                        break;
                    }
                }
                let Some(quantity) = quantity else {
                    return Err(ExprError::new(format!(
                        "`{text}`: a bare number has no unit; write e.g. `{}s` or `2*grace`",
                        toks[i]
                    )));
                };
                terms.push(Term { factor, quantity });
                expect_term = false;
                i += 1;
            } else {
                sign = match tok {
                    "+" => 1.0,
                    "-" => -1.0,
                    _ => {
                        return Err(ExprError::new(format!(
                            "`{text}`: expected `+` or `-` before `{tok}`"
                        )));
                    }
                };
                expect_term = true;
                i += 1;
            }
        }
        if expect_term {
            return Err(ExprError::new(format!("`{text}` ends with an operator")));
        }
        Ok(Expr {
            text: text.trim().to_string(),
            terms,
        })
    }

    /// Milliseconds under a profile.
    pub fn eval(&self, profile: &TimingProfile) -> i64 {
        let total: f64 = self
            .terms
            .iter()
            .map(|t| {
                let base = match t.quantity {
                    Quantity::Literal(ms) => ms as f64,
                    Quantity::Variable(v) => profile.get(v).as_millis() as f64,
                };
                t.factor * base
            })
            .sum();
        total.round() as i64
    }

    /// The variables the expression depends on.
    pub fn vars(&self) -> impl Iterator<Item = Var> + '_ {
        self.terms.iter().filter_map(|t| match t.quantity {
            Quantity::Variable(v) => Some(v),
            Quantity::Literal(_) => None,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when the expression is a plain literal (no profile variable).
    pub fn is_literal(&self) -> bool {
        self.vars().next().is_none()
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A tolerance for `after: X +- T`: a duration expression or a percentage of X.
#[derive(Debug, Clone, PartialEq)]
pub enum Tolerance {
    Absolute(Expr),
    Percent(f64),
}

/// A time window of an expectation, relative to its anchor step.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowSpec {
    /// `within: B` (from 0) or `within: "A .. B"`: the condition first holds inside [A, B].
    Within { from: Option<Expr>, to: Expr },
    /// `after: "X +- T"`: first holds inside [X - T, X + T].
    After { center: Expr, tolerance: Tolerance },
    /// `notBefore: X`: does not hold at any time before X.
    NotBefore(Expr),
    /// `holdsFor: D`: holds when the step starts and keeps holding for D.
    HoldsFor(Expr),
    /// `never: D`: does not hold at any time during the D after the step starts.
    Never(Expr),
    /// No window: decided once from facts read at preflight, before the
    /// first fault (`gracefulShutdown`).
    Preflight,
    /// No window: decided once at the end of the run, from the machines'
    /// record (`duplicateWindow`, `fencedBefore`).
    EndOfRun,
    /// A probe's requests sent from `from` (default: the anchor) to `to`
    /// (default: the end of the steps); decided when the probe stops.
    Requests {
        from: Option<Expr>,
        to: Option<Expr>,
    },
}

/// A window with its bounds evaluated under one profile, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Window {
    /// First true at some `t` with `from <= t <= to`.
    Between { from: i64, to: i64 },
    /// False during [0, at).
    NotBefore { at: i64 },
    /// True throughout [0, duration].
    HoldsFor { duration: i64 },
    /// False throughout [0, duration].
    Never { duration: i64 },
    /// Decided from the preflight, before the first fault; not watched.
    Preflight,
    /// Decided at the end of the run; not watched.
    EndOfRun,
    /// A probe's requests sent during [from, to] (`to` absent: until the
    /// probe stopped at the end of the steps); decided then.
    Requests { from: i64, to: Option<i64> },
}

impl Window {
    /// How long after its anchor a runner must keep watching to decide it.
    pub fn horizon(&self) -> i64 {
        match *self {
            Window::Between { to, .. } => to,
            Window::NotBefore { at } => at,
            Window::HoldsFor { duration } | Window::Never { duration } => duration,
            Window::Preflight | Window::EndOfRun => 0,
            Window::Requests { from, to } => to.unwrap_or(from),
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Window::Between { from: 0, to } => write!(f, "within {}", format_millis(to)),
            Window::Between { from, to } => {
                write!(
                    f,
                    "between {} and {}",
                    format_millis(from),
                    format_millis(to)
                )
            }
            Window::NotBefore { at } => write!(f, "not before {}", format_millis(at)),
            Window::HoldsFor { duration } => write!(f, "holds for {}", format_millis(duration)),
            Window::Never { duration } => write!(f, "never during {}", format_millis(duration)),
            Window::Preflight => f.write_str("at preflight"),
            Window::EndOfRun => f.write_str("at the end of the run"),
            Window::Requests { from: 0, to: None } => {
                f.write_str("requests to the end of the steps")
            }
            Window::Requests { from, to: None } => {
                write!(
                    f,
                    "requests from {} to the end of the steps",
                    format_millis(from)
                )
            }
            Window::Requests { from, to: Some(to) } => write!(
                f,
                "requests from {} to {}",
                format_millis(from),
                format_millis(to)
            ),
        }
    }
}

/// `e` under `profile`, when it is no longer than [`MAX_MILLIS`] either way
/// (so sums of windows, anchors and waits cannot overflow); else why not.
pub fn limited(e: &Expr, profile: &TimingProfile) -> Result<i64, String> {
    let v = e.eval(profile);
    if v.unsigned_abs() > MAX_MILLIS.unsigned_abs() {
        return Err(format!(
            "`{e}` is {} under the `{}` profile, longer than the limit of {MAX_WRITTEN}",
            format_millis(v),
            profile.name
        ));
    }
    Ok(v)
}
impl WindowSpec {
    pub fn parse_within(text: &str) -> Result<WindowSpec, ExprError> {
        match text.split_once("..") {
            Some((a, b)) => Ok(WindowSpec::Within {
                from: Some(Expr::parse(a)?),
                to: Expr::parse(b)?,
            }),
            None => Ok(WindowSpec::Within {
                from: None,
                to: Expr::parse(text)?,
            }),
        }
    }

    pub fn parse_after(text: &str) -> Result<WindowSpec, ExprError> {
        let Some((center, tol)) = text.split_once("+-").or_else(|| text.split_once('±')) else {
            return Err(ExprError::new(format!(
                "`{text}` needs a tolerance: write `X +- T` (e.g. `toleration +- 15s` or `300s +- 10%`), or use `notBefore: X`"
            )));
        };
        let center = Expr::parse(center)?;
        let tol = tol.trim();
        let tolerance = match tol.strip_suffix('%') {
            Some(p) => Tolerance::Percent(
                p.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| *p >= 0.0)
                    .ok_or_else(|| {
                        ExprError::new(format!("`{tol}` is not a percentage; write e.g. `10%`"))
                    })?,
            ),
            None => Tolerance::Absolute(Expr::parse(tol)?),
        };
        Ok(WindowSpec::After { center, tolerance })
    }

    /// Evaluates the bounds under a profile and checks they make sense.
    pub fn resolve(&self, profile: &TimingProfile) -> Result<Window, String> {
        let p = profile;
        let positive = |e: &Expr, what: &str| {
            let v = limited(e, p)?;
            if v <= 0 {
                Err(format!(
                    "{what} `{e}` is {} under the `{}` profile; it must be positive",
                    format_millis(v),
                    p.name
                ))
            } else {
                Ok(v)
            }
        };
        match self {
            WindowSpec::Within { from, to } => {
                let hi = positive(to, "upper bound")?;
                let lo = match from {
                    Some(f) => limited(f, p)?,
                    None => 0,
                };
                if lo < 0 {
                    return Err(format!(
                        "lower bound `{}` is {} under the `{}` profile; it cannot be negative",
                        from.as_ref().map(Expr::text).unwrap_or_default(),
                        format_millis(lo),
                        p.name
                    ));
                }
                if lo > hi {
                    return Err(format!(
                        "window starts at {} but ends at {} under the `{}` profile; the lower bound must come first",
                        format_millis(lo),
                        format_millis(hi),
                        p.name
                    ));
                }
                Ok(Window::Between { from: lo, to: hi })
            }
            WindowSpec::After { center, tolerance } => {
                let c = positive(center, "centre")?;
                let t = match tolerance {
                    Tolerance::Absolute(e) => limited(e, p)?,
                    Tolerance::Percent(pct) => (c as f64 * pct / 100.0).round() as i64,
                };
                if t < 0 {
                    return Err(format!("tolerance is negative ({})", format_millis(t)));
                }
                if t > c {
                    return Err(format!(
                        "tolerance {} is larger than the centre {} under the `{}` profile, so the window would start before the anchor; use `within` instead",
                        format_millis(t),
                        format_millis(c),
                        p.name
                    ));
                }
                Ok(Window::Between {
                    from: c - t,
                    to: c + t,
                })
            }
            WindowSpec::NotBefore(e) => Ok(Window::NotBefore {
                at: positive(e, "`notBefore`")?,
            }),
            WindowSpec::HoldsFor(e) => Ok(Window::HoldsFor {
                duration: positive(e, "`holdsFor`")?,
            }),
            WindowSpec::Never(e) => Ok(Window::Never {
                duration: positive(e, "`never`")?,
            }),
            WindowSpec::Preflight => Ok(Window::Preflight),
            WindowSpec::EndOfRun => Ok(Window::EndOfRun),
            WindowSpec::Requests { from, to } => {
                let from = match from {
                    Some(e) => limited(e, p)?,
                    None => 0,
                };
                if from < 0 {
                    return Err(format!(
                        "the window's start is {} under the `{}` profile; it must not be negative",
                        format_millis(from),
                        p.name
                    ));
                }
                let to = to.as_ref().map(|e| positive(e, "`within`")).transpose()?;
                if let Some(to) = to.filter(|to| *to < from) {
                    return Err(format!(
                        "the window ends at {} before it starts at {} under the `{}` profile",
                        format_millis(to),
                        format_millis(from),
                        p.name
                    ));
                }
                Ok(Window::Requests { from, to })
            }
        }
    }

    /// The profile variables its bounds name.
    pub fn vars(&self) -> Vec<Var> {
        let exprs: Vec<&Expr> = match self {
            WindowSpec::Within { from, to } => from.iter().chain(std::iter::once(to)).collect(),
            WindowSpec::After { center, tolerance } => match tolerance {
                Tolerance::Absolute(t) => vec![center, t],
                Tolerance::Percent(_) => vec![center],
            },
            WindowSpec::NotBefore(e) | WindowSpec::HoldsFor(e) | WindowSpec::Never(e) => vec![e],
            WindowSpec::Preflight | WindowSpec::EndOfRun => Vec::new(),
            WindowSpec::Requests { from, to } => from.iter().chain(to.iter()).collect(),
        };
        let mut vars: Vec<Var> = exprs.into_iter().flat_map(Expr::vars).collect();
        vars.sort();
        vars.dedup();
        vars
    }

    /// The source form, as the scenario wrote it.
    pub fn source(&self) -> String {
        match self {
            WindowSpec::Within { from: None, to } => format!("within {to}"),
            WindowSpec::Within { from: Some(f), to } => format!("within {f} .. {to}"),
            WindowSpec::After {
                center,
                tolerance: Tolerance::Absolute(t),
            } => {
                format!("after {center} +- {t}")
            }
            WindowSpec::After {
                center,
                tolerance: Tolerance::Percent(p),
            } => {
                format!("after {center} +- {p}%")
            }
            WindowSpec::NotBefore(e) => format!("not before {e}"),
            WindowSpec::HoldsFor(e) => format!("holds for {e}"),
            WindowSpec::Never(e) => format!("never during {e}"),
            WindowSpec::Preflight => "at preflight (before the first fault)".into(),
            WindowSpec::EndOfRun => "at the end of the run".into(),
            WindowSpec::Requests {
                from: None,
                to: None,
            } => "requests to the end of the steps".into(),
            WindowSpec::Requests {
                from: Some(f),
                to: None,
            } => {
                format!("requests from {f} to the end of the steps")
            }
            WindowSpec::Requests { from, to: Some(t) } => format!(
                "requests from {} to {t}",
                from.as_ref()
                    .map_or("the anchor".to_owned(), ToString::to_string)
            ),
        }
    }
}

/// A bound expression field (`duration: grace + 5s`), parsed when loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprField(pub Result<Expr, ExprError>, pub String);

impl<'de> Deserialize<'de> for ExprField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = super::model::scalar_string(d)?;
        Ok(ExprField(Expr::parse(&text), text))
    }
}

impl Serialize for ExprField {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str, p: &TimingProfile) -> i64 {
        Expr::parse(text).map(|e| e.eval(p)).unwrap_or(i64::MIN)
    }

    #[test]
    fn expressions_scale_with_the_profile() {
        let d = TimingProfile::upstream_default();
        let f = TimingProfile::fast();
        assert_eq!(ms("grace", &d), 50_000);
        assert_eq!(ms("grace", &f), 8_000);
        assert_eq!(ms("grace + 20s", &d), 70_000);
        assert_eq!(ms("grace+toleration-5s", &d), 345_000);
        assert_eq!(ms("2*grace", &f), 16_000);
        assert_eq!(ms("grace * 1.5", &d), 75_000);
        assert_eq!(ms("1m30s", &f), 90_000);
        assert_eq!(ms("-5s + grace", &f), 3_000);
    }

    #[test]
    fn malformed_expressions_are_rejected_with_reasons() {
        let err = |t: &str| Expr::parse(t).unwrap_err().to_string();
        assert!(err("graec + 5s").contains("did you mean `grace`"));
        assert!(err("30").contains("bare number"));
        assert!(err("grace +").contains("ends with an operator"));
        assert!(err("grace * toleration").contains("multiply two durations"));
        assert!(err("").contains("empty"));
        assert!(err("grace 5s").contains("expected `+` or `-`"));
        let rate = err("grace + nodeEvictionRate");
        assert!(
            rate.contains("is a rate") && rate.contains("`evictionInterval`"),
            "{rate}"
        );
    }

    #[test]
    fn the_eviction_intervals_are_variables() {
        let d = TimingProfile::upstream_default();
        let f = TimingProfile::fast();
        assert_eq!(ms("grace + evictionInterval", &d), 60_000);
        assert_eq!(ms("2*secondaryEvictionInterval", &f), 40_000);
        assert_eq!(ms("secondaryNodeEvictionInterval", &d), 100_000);
    }

    #[test]
    fn windows_resolve_per_profile() {
        let d = TimingProfile::upstream_default();
        let f = TimingProfile::fast();
        let w = WindowSpec::parse_within("grace .. grace+20s").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            w.resolve(&d),
            Ok(Window::Between {
                from: 50_000,
                to: 70_000
            })
        );
        assert_eq!(
            w.resolve(&f),
            Ok(Window::Between {
                from: 8_000,
                to: 28_000
            })
        );
        let a =
            WindowSpec::parse_after("grace + toleration +- 10%").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.resolve(&d),
            Ok(Window::Between {
                from: 315_000,
                to: 385_000
            })
        );
        assert_eq!(
            a.resolve(&f),
            Ok(Window::Between {
                from: 25_200,
                to: 30_800
            })
        );
        let a = WindowSpec::parse_after("toleration +- 15s").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.resolve(&f),
            Ok(Window::Between {
                from: 5_000,
                to: 35_000
            })
        );
    }

    #[test]
    fn contradictions_depend_on_the_profile() {
        let d = TimingProfile::upstream_default();
        let f = TimingProfile::fast();
        // fine on default (50s .. 60s), inverted on fast (8s .. 60s is fine; 60s .. 8s+40s not)
        let w = WindowSpec::parse_within("60s .. grace + 40s").unwrap_or_else(|e| panic!("{e}"));
        assert!(w.resolve(&d).is_ok());
        assert!(
            w.resolve(&f)
                .unwrap_err()
                .contains("lower bound must come first")
        );
        let a = WindowSpec::parse_after("toleration +- 30s").unwrap_or_else(|e| panic!("{e}"));
        assert!(a.resolve(&d).is_ok());
        assert!(
            a.resolve(&f)
                .unwrap_err()
                .contains("larger than the centre")
        );
        assert!(WindowSpec::parse_after("300s").is_err());
    }
}
