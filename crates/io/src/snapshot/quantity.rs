//! Kubernetes resource quantities (`100m`, `1.5`, `128Mi`, `1G`, `1e3`) as
//! integers: CPU in millicores, everything else in units (bytes, pods).
//! What does not parse counts 0: a request the API server accepted parses.

/// The quantity in thousandths (CPU's millicores), rounded up as the
/// scheduler rounds a request.
pub fn milli(q: &str) -> i64 {
    scaled(q, 1000.0)
}

/// The quantity in units (bytes, pods), rounded up.
pub fn units(q: &str) -> i64 {
    scaled(q, 1.0)
}

fn scaled(q: &str, by: f64) -> i64 {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let Ok(n) = number.parse::<f64>() else {
        return 0;
    };
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "Pi" => 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "Ei" => 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0,
        e if e.starts_with(['e', 'E']) => match e[1..].parse::<i32>() {
            Ok(x) => 10f64.powi(x),
            Err(_) => return 0,
        },
        _ => return 0,
    };
    let v = (n * factor * by).ceil();
    #[allow(
        clippy::cast_possible_truncation,
        reason = "clamped to i64's range first; quantities are far below it"
    )]
    if v >= i64::MAX as f64 {
        i64::MAX
    } else if v <= 0.0 {
        0
    } else {
        v as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_as_the_api_writes_them() {
        assert_eq!(milli("100m"), 100);
        assert_eq!(milli("1"), 1000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("1k"), 1_000_000);
        assert_eq!(units("128Mi"), 128 << 20);
        assert_eq!(units("1G"), 1_000_000_000);
        assert_eq!(units("1Ti"), 1 << 40);
        assert_eq!(units("110"), 110);
        assert_eq!(units("1M"), 1_000_000);
        assert_eq!(units("1e3"), 1000);
        assert_eq!(milli("0.1"), 100);
        assert_eq!(milli("1u"), 0, "an unknown suffix counts 0");
        assert_eq!(units("x"), 0);
    }
}
