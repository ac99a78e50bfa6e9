//! Durations as scenarios write them: `30s`, `5m`, `1m30s`, `1h`, `500ms`
//! (and, in [`external`], as Go and systemd write them).

pub mod external;

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The longest time a scenario may name (a window, a wait, a timeout, a
/// timing override), in ms: 7 days. Longer ones are refused when read, and
/// windows and waits computed from them when planned, so every sum the plan
/// and the runner make of them stays far inside an `i64` of milliseconds.
pub const MAX_MILLIS: i64 = 7 * 24 * 3_600_000;

/// How [`MAX_MILLIS`] is written in messages.
pub const MAX_WRITTEN: &str = "168h (7 days)";

/// Parses `1h2m3s4ms`-style durations. Every number needs a unit; units must
/// appear from largest to smallest, each at most once; at most [`MAX_MILLIS`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration; write it like `30s`, `5m` or `1m30s`".into());
    }
    if s.contains(char::is_whitespace) {
        return Err(format!(
            "`{text}` is not a duration; write it without spaces, like `30s`, `5m` or `1m30s`"
        ));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];
    let mut total: u64 = 0;
    let mut rest = s;
    let mut last_rank: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "`{text}` is not a duration: expected a number at `{rest}` (write `30s`, `5m`, `1m30s`)"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}`: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let Some(rank) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!(
                    "`{text}` has a number without a unit; add one of h, m, s, ms (e.g. `{number}s`)"
                )
            } else {
                format!(
                    "`{text}` has unknown unit `{unit}`; use h, m, s or ms (e.g. `5m`, `1m30s`)"
                )
            });
        };
        if last_rank.is_some_and(|r| r >= rank) {
            return Err(format!(
                "`{text}`: units must go from largest to smallest, each once (e.g. `1m30s`)"
            ));
        }
        last_rank = Some(rank);
        total = number
            .checked_mul(UNITS[rank].1)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("`{text}`: duration too large"))?;
        rest = &rest[unit_len..];
    }
    if total > MAX_MILLIS.unsigned_abs() {
        return Err(format!(
            "`{text}` is longer than the limit of {MAX_WRITTEN}"
        ));
    }
    Ok(Duration::from_millis(total))
}

/// Formats a duration the way scenarios write them (`1m30s`, `8s`, `1.5s`).
pub fn format_duration(d: Duration) -> String {
    format_millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Formats signed milliseconds compactly: `-2s`, `1m30s`, `1.25s`, `0s`.
pub fn format_millis(ms: i64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, milli) = (rem / 1000, rem % 1000);
    let mut out = String::from(sign);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if milli > 0 {
        let frac = format!("{milli:03}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    } else if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// A literal duration field (`timeout: 5m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration like `30s`, `5m` or `1m30s`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "`{v}` has no unit; write `{v}s` (or `{v}m`, `{v}ms`)"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "`{v}` is not a duration; write e.g. `30s`"
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "`{v}` has no unit; write e.g. `{v}s` as `1500ms`"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// `27.412s`, `-0.300s`: seconds with exactly three decimals.
pub fn secs(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let abs = ms.unsigned_abs();
    format!("{sign}{}.{:03}s", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let ms = |s: &str| parse_duration(s).map(|d| d.as_millis());
        assert_eq!(ms("30s"), Ok(30_000));
        assert_eq!(ms("5m"), Ok(300_000));
        assert_eq!(ms("1m30s"), Ok(90_000));
        assert_eq!(ms("1h"), Ok(3_600_000));
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("1s500ms"), Ok(1_500));
        assert_eq!(ms("0"), Ok(0));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        for bad in [
            "",
            "30",
            "5 minutes",
            "m5",
            "30s1m",
            "1m1m",
            "1.5s",
            "-3s",
            "5d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            parse_duration("169h"),
            Err("`169h` is longer than the limit of 168h (7 days)".into())
        );
        assert_eq!(parse_duration("168h"), Ok(Duration::from_secs(168 * 3600)));
        assert!(
            parse_duration("5d")
                .unwrap_err()
                .contains("unknown unit `d`")
        );
    }

    #[test]
    fn formats_round_trip() {
        for s in ["30s", "5m", "1m30s", "1h", "1.25s", "0s", "2h3m4s"] {
            let d = parse_duration(s).or_else(|_| {
                // 1.25s is only a display form
                Ok::<_, String>(Duration::from_millis(1250))
            });
            assert_eq!(format_duration(d.unwrap_or_default()), s);
        }
        assert_eq!(format_millis(-2000), "-2s");
    }
}
