//! Durations as other programs spell them, read from what a cluster says
//! about itself: Go's (`time.Duration`, as the kubelet serialises its
//! configuration and control-plane flags are written: `30s`, `1m0s`,
//! `1.5s`) and systemd's timespans (`loginctl show-session` prints `5s`,
//! `1min 30s`).

use std::time::Duration;

/// Parses a Go duration as `time.ParseDuration` accepts it, without a sign
/// (a negative grace period is refused by the kubelet's own validation).
pub fn parse_go(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() || t.starts_with(['-', '+']) {
        return Err(format!("`{text}` is not a non-negative Go duration"));
    }
    const UNITS: [(&str, u128); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("\u{b5}s", 1_000),
        ("\u{3bc}s", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let (number, tail) = split_number(rest).ok_or_else(|| {
            format!("`{text}` is not a Go duration (expected a number at `{rest}`)")
        })?;
        let unit_len = tail
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(tail.len(), |(i, _)| i);
        let unit = &tail[..unit_len];
        let (_, scale) = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .ok_or_else(|| format!("`{text}` is not a Go duration (unknown unit `{unit}`)"))?;
        total += scaled(number, *scale)
            .ok_or_else(|| format!("`{text}` is not a Go duration (bad number `{number}`)"))?;
        rest = &tail[unit_len..];
    }
    nanos(total).ok_or_else(|| format!("`{text}` is too long"))
}

/// Parses a systemd timespan as `loginctl show-session` prints it
/// (`format_timespan`: `5s`, `1min 30s`, `2h`, `1.500000s`, `infinity`).
/// `infinity` is [`Duration::MAX`].
pub fn parse_systemd(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "infinity" {
        return Ok(Duration::MAX);
    }
    const US: u128 = 1_000;
    const UNITS: [(&str, u128); 30] = [
        ("y", 31_557_600_000_000 * US),
        ("year", 31_557_600_000_000 * US),
        ("years", 31_557_600_000_000 * US),
        ("month", 2_629_800_000_000 * US),
        ("months", 2_629_800_000_000 * US),
        ("M", 2_629_800_000_000 * US),
        ("w", 604_800_000_000 * US),
        ("week", 604_800_000_000 * US),
        ("weeks", 604_800_000_000 * US),
        ("d", 86_400_000_000 * US),
        ("day", 86_400_000_000 * US),
        ("days", 86_400_000_000 * US),
        ("h", 3_600_000_000 * US),
        ("hr", 3_600_000_000 * US),
        ("hour", 3_600_000_000 * US),
        ("hours", 3_600_000_000 * US),
        ("min", 60_000_000 * US),
        ("m", 60_000_000 * US),
        ("minute", 60_000_000 * US),
        ("minutes", 60_000_000 * US),
        ("s", 1_000_000 * US),
        ("sec", 1_000_000 * US),
        ("second", 1_000_000 * US),
        ("seconds", 1_000_000 * US),
        ("ms", 1_000 * US),
        ("msec", 1_000 * US),
        ("us", US),
        ("usec", US),
        ("\u{b5}s", US),
        ("\u{3bc}s", US),
    ];
    if t.is_empty() {
        return Err("empty timespan".into());
    }
    let mut total: u128 = 0;
    // Parts are separated by spaces, but `1min30s` is accepted too.
    let mut rest = t;
    while !rest.is_empty() {
        let (number, tail) = split_number(rest)
            .ok_or_else(|| format!("`{text}` is not a systemd timespan (at `{rest}`)"))?;
        let tail = tail.trim_start();
        let unit_len = tail
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || c.is_whitespace())
            .map_or(tail.len(), |(i, _)| i);
        let unit = &tail[..unit_len];
        // A bare number is seconds, as systemd parses it.
        let scale = if unit.is_empty() {
            1_000_000 * US
        } else {
            UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, s)| *s)
                .ok_or_else(|| {
                    format!("`{text}` is not a systemd timespan (unknown unit `{unit}`)")
                })?
        };
        total += scaled(number, scale)
            .ok_or_else(|| format!("`{text}` is not a systemd timespan (bad number `{number}`)"))?;
        rest = tail[unit_len..].trim_start();
    }
    nanos(total).ok_or_else(|| format!("`{text}` is too long"))
}

/// A leading decimal number and what follows it.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(s.len(), |(i, _)| i);
    let number = &s[..end];
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    Some((number, &s[end..]))
}

/// `number` (decimal text) times `scale` nanoseconds, exactly for the digits
/// a duration can carry.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = int.checked_mul(scale)?;
    let mut div = 1u128;
    let mut frac_value = 0u128;
    for d in frac.chars().take(18) {
        frac_value = frac_value * 10 + u128::from(d.to_digit(10)?);
        div *= 10;
    }
    total = total.checked_add(frac_value.checked_mul(scale)? / div)?;
    Some(total)
}

fn nanos(total: u128) -> Option<Duration> {
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    let sub = u32::try_from(total % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(t: &str) -> Duration {
        parse_go(t).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn go_durations_as_the_kubelet_writes_them() {
        assert_eq!(go("0s"), Duration::ZERO);
        assert_eq!(go("0"), Duration::ZERO);
        assert_eq!(go("30s"), Duration::from_secs(30));
        assert_eq!(go("1m0s"), Duration::from_secs(60));
        assert_eq!(go("2m30s"), Duration::from_secs(150));
        assert_eq!(go("1h0m0s"), Duration::from_secs(3600));
        assert_eq!(go("1.5s"), Duration::from_millis(1500));
        assert_eq!(go("500ms"), Duration::from_millis(500));
        assert_eq!(go("1.5h"), Duration::from_secs(5400));
        assert_eq!(go("10\u{b5}s"), Duration::from_micros(10));
    }

    #[test]
    fn go_durations_refuse_what_go_refuses() {
        for bad in ["", "30", "-1s", "1x", "s", "1..5s", "1m0", "forever"] {
            assert!(parse_go(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn systemd_timespans_as_loginctl_prints_them() {
        let s = |t: &str| parse_systemd(t).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s("5s"), Duration::from_secs(5));
        assert_eq!(s("1min 30s"), Duration::from_secs(90));
        assert_eq!(s("1min30s"), Duration::from_secs(90));
        assert_eq!(s("30min"), Duration::from_secs(1800));
        assert_eq!(s("1.500000s"), Duration::from_millis(1500));
        assert_eq!(s("2h 5min"), Duration::from_secs(7500));
        assert_eq!(s("45"), Duration::from_secs(45));
        assert_eq!(s("infinity"), Duration::MAX);
        assert!(parse_systemd("5 parsecs").is_err());
        assert!(parse_systemd("").is_err());
    }
}
