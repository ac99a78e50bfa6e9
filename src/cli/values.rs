//! The values of the command line's numeric flags, parsed in one place:
//! every duration, count and percentage a flag takes goes through one of
//! the clap value parsers here, which refuse what is not a number, NaN,
//! infinity, a negative, and anything outside the flag's range, with a
//! message that gives the range. clap names the flag and exits 2, before
//! anything else runs; no value can reach a `Duration` constructor or a
//! timer that would panic on it. Also the report commands' `--format`.

use std::fmt::Display;
use std::time::Duration;

use crate::duration::{format_duration, parse_duration};
use crate::stats::Limit;
use crate::stats::figures::{self, Unit};

/// The durations a flag accepts, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub min: Duration,
    pub max: Duration,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const HOUR: u64 = 3600;

/// `audit poll --interval`: a list per millisecond is already more than an
/// API server should be asked for; an hour apart is no baseline any more.
pub const POLL_INTERVAL: Span = Span {
    min: ms(1),
    max: secs(HOUR),
};
/// `audit poll --duration`: up to a week.
pub const POLL_DURATION: Span = Span {
    min: ms(1),
    max: secs(7 * 24 * HOUR),
};
/// `report compare --min-delta`, and a `--threshold`'s `+DURATION`.
pub const COMPARE_DELTA: Span = Span {
    min: Duration::ZERO,
    max: secs(24 * HOUR),
};
/// `kind up --wait`: nodes Ready take about 40 s here; an hour is broken.
pub const KIND_WAIT: Span = Span {
    min: secs(1),
    max: secs(HOUR),
};
/// `kind up --shutdown-grace-period` (and its critical pods' part): the
/// kubelet takes whole seconds; logind would hold a shutdown that long.
pub const SHUTDOWN_GRACE: Span = Span {
    min: Duration::ZERO,
    max: secs(HOUR),
};
/// `sim up --node-boot`: a powered-on node's boot, up to an hour.
pub const NODE_BOOT: Span = Span {
    min: Duration::ZERO,
    max: secs(HOUR),
};
/// `scenario --shutdown-timeout`: how long a guest may take to power off.
pub const SHUTDOWN_TIMEOUT: Span = Span {
    min: secs(1),
    max: secs(24 * HOUR),
};

/// The largest percentage a limit may be (100 times slower).
pub const MAX_PERCENT: f64 = 10_000.0;
/// The largest `+COUNT` a threshold may be.
pub const MAX_COUNT: u64 = 1_000_000;

/// A clap value parser for a duration within `span`: a number of seconds
/// (`5`, `0.5`, `1e-3`) or a duration as scenarios write it (`500ms`, `2m`,
/// `1m30s`).
pub fn duration(span: Span) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync {
    move |text| parse_within(text, span)
}

/// A clap value parser for a whole number from `min` to `max`.
pub fn whole<T>(min: T, max: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: Copy + Display + Into<i128> + TryFrom<i128> + Send + Sync,
{
    move |text| parse_whole(text, min, max)
}

/// [`duration`]'s parsing.
pub fn parse_within(text: &str, span: Span) -> Result<Duration, String> {
    let range = || {
        format!(
            "from {} to {}, in seconds (`5`, `0.5`) or as a duration (`500ms`, `2m`, `1m30s`)",
            show(span.min),
            show(span.max)
        )
    };
    let s = text.trim();
    let d = match s.parse::<f64>() {
        Ok(v) if v.is_nan() => return Err(format!("`{text}` is not a number; give {}", range())),
        Ok(v) if v < 0.0 => return Err(format!("`{text}` is negative; give {}", range())),
        Ok(v) if v > span.max.as_secs_f64() => {
            return Err(format!("`{text}` is too long; give {}", range()));
        }
        // Finite, 0 or more (`-0` too) and at most the maximum: it fits.
        Ok(v) => Duration::try_from_secs_f64(v + 0.0)
            .map_err(|_| format!("`{text}` is not a duration; give {}", range()))?,
        Err(_) => parse_duration(s).map_err(|e| format!("{e}; give {}", range()))?,
    };
    if d < span.min {
        return Err(format!("`{text}` is too short; give {}", range()));
    }
    if d > span.max {
        return Err(format!("`{text}` is too long; give {}", range()));
    }
    Ok(d)
}

/// [`whole`]'s parsing.
pub fn parse_whole<T>(text: &str, min: T, max: T) -> Result<T, String>
where
    T: Copy + Display + Into<i128> + TryFrom<i128>,
{
    let range = format!("a whole number from {min} to {max}");
    let n: i128 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number; give {range}"))?;
    if n < min.into() || n > max.into() {
        return Err(format!("`{text}` is out of range; give {range}"));
    }
    T::try_from(n).map_err(|_| format!("`{text}` is out of range; give {range}"))
}

/// `--zones a,b,c`: the zones a simulated cluster's nodes are spread over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zones(pub Vec<String>);

/// `--zones`: comma-separated label values, each once.
pub fn zones(text: &str) -> Result<Zones, String> {
    let mut zones: Vec<String> = Vec::new();
    for zone in text.split(',').map(str::trim) {
        if zone.is_empty() {
            return Err(format!(
                "`{text}` has an empty zone; give zone names separated by commas (`a,b,c`)"
            ));
        }
        crate::scenario::names::label_value(zone)
            .map_err(|e| format!("zone `{zone}` cannot be a label value: {e}"))?;
        if zones.iter().any(|z| z == zone) {
            return Err(format!("`{text}` names zone `{zone}` twice"));
        }
        zones.push(zone.to_owned());
    }
    Ok(Zones(zones))
}

/// Each zone needs a node: `--zones` with more zones than there are
/// `--nodes` (or `--workers`: `what` says which).
pub fn check_zones(zones: &Zones, count: usize, what: &str) -> Result<(), String> {
    let n = zones.0.len();
    if n > count {
        let one = what.strip_suffix('s').unwrap_or(what);
        return Err(format!(
            "--zones names {n} zones for {count} {what}, and each zone needs a {one}: give \
             --{what} {n} or more, or fewer zones"
        ));
    }
    Ok(())
}

/// A percentage (`20%` or `20`) from 0 to [`MAX_PERCENT`].
pub fn percent(text: &str) -> Result<f64, String> {
    let range = || format!("give a percentage from 0% to {MAX_PERCENT}% (`20%` or `20`)");
    let s = text.trim();
    let s = s.strip_suffix('%').unwrap_or(s).trim();
    let p: f64 = s
        .parse()
        .map_err(|_| format!("`{text}` is not a percentage; {}", range()))?;
    if p.is_nan() {
        return Err(format!("`{text}` is not a number; {}", range()));
    }
    if p < 0.0 {
        return Err(format!("`{text}` is negative; {}", range()));
    }
    if p > MAX_PERCENT {
        return Err(format!("`{text}` is too large; {}", range()));
    }
    Ok(p + 0.0)
}

/// `--threshold NAME=LIMIT`: a figure's own limit, `NAME=PERCENT%`,
/// `NAME=+DURATION` (figures in time) or `NAME=+COUNT` (counts).
pub fn threshold(text: &str) -> Result<(String, Limit), String> {
    let forms = "write NAME=PERCENT% (`nodeNotReady=20%`) or NAME=+AMOUNT \
                 (`workloadReadyAgain=+5s`, `maxUnavailable=+1`)";
    let Some((name, limit)) = text.split_once('=') else {
        return Err(format!("`{text}` is not a threshold; {forms}"));
    };
    let Some(def) = figures::find(name.trim()) else {
        let known: Vec<&str> = figures::DEFS.iter().map(|d| d.name).collect();
        return Err(format!(
            "no figure named `{}`; the figures are: {}",
            name.trim(),
            known.join(", ")
        ));
    };
    let limit = limit.trim();
    let limit = match limit.strip_prefix('+') {
        None => Limit::Percent(percent(limit).map_err(|e| format!("{}: {e}", def.name))?),
        Some(amount) => Limit::Absolute(match def.unit {
            Unit::Ms => {
                let d = parse_within(amount, COMPARE_DELTA)
                    .map_err(|e| format!("{}: {e}", def.name))?;
                d.as_secs_f64() * 1000.0
            }
            Unit::Count => parse_whole(amount, 0, MAX_COUNT)
                .map_err(|e| format!("{} (a count): {e}", def.name))?
                as f64,
        }),
    };
    Ok((def.name.to_owned(), limit))
}

/// `1ms`, `250ms`, `5s`, `1h`.
fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) && !d.is_zero() {
        format!("{}ms", d.as_millis())
    } else {
        format_duration(d)
    }
}

/// The `--format` of `report compare` and `report summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Markdown,
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_seconds_or_written_durations_within_the_span() {
        let p = |s| parse_within(s, POLL_INTERVAL);
        assert_eq!(p("5"), Ok(secs(5)));
        assert_eq!(p("0.5"), Ok(ms(500)));
        assert_eq!(p("1e-3"), Ok(ms(1)));
        assert_eq!(p("250ms"), Ok(ms(250)));
        assert_eq!(p("1m30s"), Ok(secs(90)));
        for bad in [
            "nan", "NaN", "inf", "-inf", "1e400", "1e20", "1e300", "1e-10", "1e-400", "0", "-0",
            "-1", "", "  ", "5x", "2h", "0.0009", " five", "٥",
        ] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains("from 1ms to 1h"), "{bad}: {e}");
        }
        assert_eq!(parse_within("-0", COMPARE_DELTA), Ok(Duration::ZERO));
        assert_eq!(parse_within("0s", COMPARE_DELTA), Ok(Duration::ZERO));
        assert!(parse_within("99999999999999999999h", COMPARE_DELTA).is_err());
    }

    #[test]
    fn whole_numbers_give_their_range() {
        assert_eq!(parse_whole::<u32>("5", 1, 1000), Ok(5));
        assert_eq!(parse_whole::<u32>("+5", 1, 1000), Ok(5));
        for bad in [
            "0",
            "1001",
            "-1",
            "1e3",
            "1.0",
            "",
            "99999999999999999999999999999999999999999",
        ] {
            let e = parse_whole::<u32>(bad, 1, 1000).expect_err(bad);
            assert!(e.contains("a whole number from 1 to 1000"), "{bad}: {e}");
        }
    }

    #[test]
    fn percentages_are_bounded() {
        assert_eq!(percent("20%"), Ok(20.0));
        assert_eq!(percent("20"), Ok(20.0));
        assert_eq!(percent("-0"), Ok(0.0));
        for bad in ["-1", "1e400%", "nan%", "inf", "10001%", "%", "20%%", "x"] {
            let e = percent(bad).expect_err(bad);
            assert!(e.contains("from 0% to 10000%"), "{bad}: {e}");
        }
    }

    #[test]
    fn thresholds_parse_per_unit() {
        assert_eq!(
            threshold("nodeNotReady=20%"),
            Ok(("nodeNotReady".into(), Limit::Percent(20.0)))
        );
        assert_eq!(
            threshold("workloadReadyAgain=+5s"),
            Ok(("workloadReadyAgain".into(), Limit::Absolute(5000.0)))
        );
        assert_eq!(
            threshold("maxUnavailable=+1"),
            Ok(("maxUnavailable".into(), Limit::Absolute(1.0)))
        );
        let e = threshold("nodeNotReady=+1e400").unwrap_err();
        assert!(e.contains("too long"), "{e}");
        let e = threshold("maxUnavailable=+1e3").unwrap_err();
        assert!(e.contains("from 0 to 1000000"), "{e}");
        let e = threshold("nodeNotReadyy=5%").unwrap_err();
        assert!(e.contains("nodeNotReady, "), "{e}");
        assert!(threshold("nodeNotReady").is_err());
    }
}
