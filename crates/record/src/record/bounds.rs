//! What reading a run's `result.json` (or a series' `aggregate.json`)
//! accepts before anything is drawn from it: a size it can hold in memory,
//! and numbers a run can have written. Every figure nodefall records (ms
//! since the start, counts, bytes) is far below 2^53; a damaged or hostile
//! file's `i64::MAX` would overflow the report's sums of times and ask the
//! timeline for a chart across 292 million years.

use std::path::Path;

use crate::files::{Files, ReadError};
use crate::scenario::load::size_text;

/// The largest result file read: 256 MiB (a 10,000-pod run's record is
/// tens of MB).
pub const MAX_RESULT_BYTES: u64 = 256 << 20;

/// The largest magnitude of a number in a result file: 2^53 - 1, the last
/// whole number a double holds exactly (285,616 years in ms).
pub const MAX_NUMBER: f64 = 9_007_199_254_740_991.0;

/// The text of a result file, refused (as an I/O error saying why) when it
/// is over [`MAX_RESULT_BYTES`]; reads no more than that from a device or a
/// file that grows.
pub fn read_limited(files: &dyn Files, path: &Path) -> std::io::Result<String> {
    let too_large = |size| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}, over the limit of {} for a result file",
                size_text(size),
                size_text(Some(MAX_RESULT_BYTES))
            ),
        )
    };
    let bytes = files.read(path, MAX_RESULT_BYTES).map_err(|e| match e {
        ReadError::Io(e) => e,
        ReadError::TooLarge(size) => too_large(size),
    })?;
    String::from_utf8(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

enum Frame<'a> {
    Object { key: Option<&'a str>, at_key: bool },
    Array { index: usize },
}

/// The first number in the JSON `text` whose magnitude is over
/// [`MAX_NUMBER`]: where it is (`steps[2].started`) and how it is written.
/// One pass, nothing kept but the path; `text` is expected to be JSON
/// already parsed once (anything else gives some answer, never a panic).
pub fn out_of_range(text: &str) -> Option<(String, String)> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i = start;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Frame::Object { key, at_key: true }) = stack.last_mut() {
                    *key = text.get(start..i.min(bytes.len()));
                }
            }
            b'{' => stack.push(Frame::Object {
                key: None,
                at_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Frame::Object { at_key, .. }) = stack.last_mut() {
                    *at_key = false;
                }
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { at_key, .. }) => *at_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let written = text.get(start..i).unwrap_or_default();
                let big = !matches!(written.parse::<f64>(), Ok(n) if n.abs() <= MAX_NUMBER);
                if big {
                    return Some((path(&stack), written.to_owned()));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn path(stack: &[Frame<'_>]) -> String {
    let mut out = String::new();
    for f in stack {
        match f {
            Frame::Object { key: Some(k), .. } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Frame::Object { key: None, .. } => {}
            Frame::Array { index } => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_number_out_of_range_and_where_it_is() {
        let json = r#"{"a": 1, "s": "x\"y: 99999999999999999999", "steps": [{"started": 5}, {"started": -9223372036854775808, "n": 1}], "finished": 9223372036854775807}"#;
        assert_eq!(
            out_of_range(json),
            Some((
                "steps[1].started".to_owned(),
                "-9223372036854775808".to_owned()
            ))
        );
        assert_eq!(
            out_of_range(r#"{"t": {"x": [1, 2.5e300]}}"#),
            Some(("t.x[1]".to_owned(), "2.5e300".to_owned()))
        );
        assert_eq!(
            out_of_range(r#"{"finished": 9007199254740991, "r": -0.5e3}"#),
            None
        );
        // not JSON: an answer, no panic
        for junk in ["", "\"", "[[[", "}}]", "{\"a\":-", "-e+", "\"\\"] {
            let _ = out_of_range(junk);
        }
    }
}
