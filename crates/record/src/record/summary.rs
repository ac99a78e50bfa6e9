//! A distribution's summary (count, min, p50, p95, max, mean), as
//! `result.json` (the audit check's lags) and the aggregates keep it.

use serde::{Deserialize, Serialize};

/// A distribution's summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// `None` for no values. Percentiles interpolate linearly between the
    /// closest ranks (NumPy's default, R's type 7): with 5 runs p95 lies
    /// between the two slowest.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(Summary {
            n,
            min: v[0],
            p50: percentile(&v, 0.50),
            p95: percentile(&v, 0.95),
            max: v[n - 1],
            mean: v.iter().sum::<f64>() / n as f64,
        })
    }

    /// One of its statistics.
    pub fn get(&self, stat: Stat) -> f64 {
        match stat {
            Stat::Min => self.min,
            Stat::P50 => self.p50,
            Stat::P95 => self.p95,
            Stat::Max => self.max,
            Stat::Mean => self.mean,
        }
    }
}

/// Which statistic of an aggregate stands for it in a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    Min,
    P50,
    P95,
    Max,
    Mean,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Min => "min",
            Stat::P50 => "p50",
            Stat::P95 => "p95",
            Stat::Max => "max",
            Stat::Mean => "mean",
        }
    }
}

/// `sorted` must be sorted and not empty.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.n, s.min, s.p50, s.max, s.mean), (5, 1.0, 3.0, 5.0, 3.0));
        assert!((s.p95 - 4.8).abs() < 1e-9, "{}", s.p95);
        let one = Summary::of(&[7.0]).unwrap();
        assert_eq!((one.p50, one.p95), (7.0, 7.0));
        assert_eq!(Summary::of(&[]), None);
        let three = Summary::of(&[10.0, 30.0, 20.0]).unwrap();
        assert_eq!(three.p50, 20.0);
        assert!((three.p95 - 29.0).abs() < 1e-9);
    }
}
