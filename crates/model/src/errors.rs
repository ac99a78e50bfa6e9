//! An error with its causes, as one line: the single formatter every layer
//! uses when an error becomes text (a step's outcome, a journal entry, a
//! fact that failed).

/// `error: cause: cause's cause`, leaving out a cause whose text the line
/// already holds (many errors repeat their source's message).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct E {
        text: &'static str,
        #[source]
        source: Option<Box<E>>,
    }

    fn e(text: &'static str, source: Option<E>) -> E {
        E {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn causes_follow_in_order_and_a_repeated_one_is_left_out() {
        let io = e("connection refused", None);
        let mid = e("cannot reach the API server", Some(io));
        assert_eq!(
            chain(&e("preflight", Some(mid))),
            "preflight: cannot reach the API server: connection refused"
        );
        let repeats = e(
            "request failed: connection refused",
            Some(e("connection refused", None)),
        );
        assert_eq!(chain(&repeats), "request failed: connection refused");
    }
}
