//! "Did you mean" for misspelt names.

/// Edit distance counting an adjacent transposition as one edit
/// (optimal string alignment), by characters.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a typo
/// (case-insensitive; at most a third of the word's length, at least 1 edit).
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let lower = word.to_lowercase();
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (distance(&lower, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_but_not_strangers() {
        let names = ["steps", "setup", "target", "targets", "namespace"];
        assert_eq!(closest("stpes", names), Some("steps".into()));
        assert_eq!(closest("namespcae", names), Some("namespace".into()));
        assert_eq!(closest("Target", names), Some("target".into()));
        assert_eq!(closest("banana", names), None);
        assert_eq!(distance("pause-mv", "pause-vm"), 1);
        assert_eq!(distance("graec", "grace"), 1);
    }
}
