//! Errors are printed once: a `thiserror` variant whose message also
//! prints its source (`"cannot read {path}: {source}"` with `source` the
//! `#[source]`) shows the cause twice, once in the message and once more as
//! "caused by". Every error type of the crate is read from the source here,
//! so a new one that does it fails this test; and a few real errors are
//! rendered through the binary.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::Path;
use std::process::Command;

/// The index just past the `close` that balances an opener before `i`.
fn balanced(s: &[u8], mut i: usize, open: u8, close: u8) -> usize {
    let mut depth = 1;
    while depth > 0 {
        match s[i] {
            b'"' => {
                i += 1;
                while s[i] != b'"' {
                    if s[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            c if c == open => depth += 1,
            c if c == close => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The field a variant's body names as its source: `source`, or the one
/// marked `#[source]`/`#[from]` (a tuple field by its index).
fn source_field(body: &str, tuple: bool) -> Option<String> {
    if tuple {
        return body
            .split(',')
            .position(|f| f.contains("#[from]") || f.contains("#[source]"))
            .map(|i| i.to_string());
    }
    let mut marked = false;
    for part in body.split([',', '\n']) {
        let part = part.trim();
        if part.starts_with("#[source]") || part.starts_with("#[from]") {
            marked = true;
        }
        let field = part
            .trim_start_matches("#[source]")
            .trim_start_matches("#[from]")
            .trim()
            .trim_start_matches("pub ")
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        if part.contains(':') && !part.starts_with("//") && !part.starts_with("#[") {
            if marked || field == "source" {
                return Some(field);
            }
        } else if part.contains(':') && marked {
            // `#[source] source: T` on one line
            return Some(field);
        }
    }
    None
}

/// `file:line Variant` for every variant whose message prints its source.
fn offenders(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let s = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(pos) = text[at..].find("#[error(") {
        let start = at + pos + "#[error(".len();
        let end = balanced(s, start, b'(', b')');
        at = end;
        let message = &text[start..end - 1];
        // The variant: past `]`, doc comments and attributes.
        let mut rest = text[end..].trim_start_matches(']').trim_start();
        while rest.starts_with("///") || rest.starts_with("#[") {
            let skip = if rest.starts_with("///") {
                rest.find('\n').map_or(rest.len(), |n| n + 1)
            } else {
                balanced(rest.as_bytes(), 2, b'[', b']')
            };
            rest = rest[skip..].trim_start();
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        let (tuple, open, close) = match after.as_bytes().first() {
            Some(b'(') => (true, b'(', b')'),
            Some(b'{') => (false, b'{', b'}'),
            _ => continue,
        };
        let body_end = balanced(after.as_bytes(), 1, open, close);
        let body = &after[1..body_end - 1];
        let Some(src) = source_field(body, tuple) else {
            continue;
        };
        let prints = message.contains(&format!("{{{src}}}"))
            || message.contains(&format!("{{{src}:"))
            || message.contains(&format!(".{src})"))
            || message.contains(&format!(".{src},"))
            || message.contains(&format!(".{src}."))
            || message.trim_end().ends_with(&format!(".{src}"));
        if prints && !message.trim().starts_with("transparent") {
            let line = text[..start].lines().count();
            found.push(format!("{}:{line} {name}: {message}", file.display()));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_error_message_prints_its_own_source() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    let all: Vec<String> = files.iter().flat_map(|f| offenders(f)).collect();
    assert!(
        all.is_empty(),
        "these print their source in the message and again as its cause:\n{}",
        all.join("\n")
    );
}

#[test]
fn the_scan_finds_what_it_looks_for() {
    // The scan itself must be able to fail: a planted offender of each shape.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("e.rs");
    std::fs::write(
        &f,
        "#[derive(Debug, thiserror::Error)]\npub enum Error {\n    \
         #[error(\"cannot read {path}: {source}\")]\n    Read {\n        path: String,\n        \
         #[source]\n        source: std::io::Error,\n    },\n    \
         #[error(\"reading {}: {}\", .path.display(), .cause)]\n    Other {\n        path: String,\n        \
         #[source]\n        cause: std::io::Error,\n    },\n    \
         #[error(\"bad: {0}\")]\n    Wrapped(#[from] std::fmt::Error),\n    \
         #[error(\"fine {path}\")]\n    Fine {\n        path: String,\n        source: std::io::Error,\n    },\n    \
         #[error(transparent)]\n    Through(#[from] std::num::ParseIntError),\n}\n",
    )
    .unwrap();
    let found = offenders(&f);
    let names: Vec<&str> = found
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().trim_end_matches(':'))
        .collect();
    assert_eq!(names, ["Read", "Other", "Wrapped"], "{found:?}");
}

#[test]
fn real_errors_name_their_cause_once() {
    let nodefall = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    for (args, cause) in [
        (
            vec!["plan", missing.to_str().unwrap()],
            "No such file or directory",
        ),
        (
            vec!["report", "render", dir.path().to_str().unwrap()],
            "Is a directory",
        ),
    ] {
        let err = nodefall(&args);
        assert_eq!(err.matches(cause).count(), 1, "{args:?}:\n{err}");
    }
}
