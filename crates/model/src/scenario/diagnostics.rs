//! What is wrong with a scenario-format file (a scenario or a command-backend
//! file), said as `file:line:column: message` with a hint of what is allowed:
//! the diagnostics, the bounded read of such a file, and YAML errors turned
//! into diagnostics. Loading itself (`load.rs`) and the command file
//! (`command/`) both report through these.

use std::fmt;
use std::path::{Path, PathBuf};

use super::spans::{Pos, Spans};
use super::suggest::closest;
use crate::files::{Files, ReadError};

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub pos: Option<Pos>,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(f, "{}:{}:{}: {}", self.file, p.line, p.col, self.message)?,
            None => write!(f, "{}: {}", self.file, self.message)?,
        }
        if let Some(h) = &self.help {
            write!(f, "\n  help: {h}")?;
        }
        Ok(())
    }
}

/// All problems found in one file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read scenario {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: {}, over the limit of {} for a scenario file; a scenario is a few kB of YAML: check the path",
        size_text(*size),
        size_text(Some(*limit))
    )]
    TooLarge {
        path: PathBuf,
        /// `None`: more than `limit` bytes could be read from it (a file
        /// that grows, a device) though its size did not say so.
        size: Option<u64>,
        limit: u64,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// The largest scenario file read, in bytes: 4 MiB (the shipped ones are
/// 1 to 3 kB). Reading YAML takes about a hundred times its size in memory.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// The most steps a scenario may have: far more than a person writes, few
/// enough to check in well under a second.
pub const MAX_STEPS: usize = 50_000;

/// The most YAML nodes (keys, scalars, sequences, mappings) read from a
/// scenario: ten for each of [`MAX_STEPS`] steps.
pub const MAX_NODES: usize = 500_000;

/// `1.5 MiB (1,572,864 bytes)`; `more than ...` when the size is unknown.
pub fn size_text(size: Option<u64>) -> String {
    let Some(n) = size else {
        return "it is larger than its size says".into();
    };
    let mib = n as f64 / f64::from(1u32 << 20);
    let exact = n
        .to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(",");
    if n >= 1 << 20 {
        format!("{mib:.1} MiB ({exact} bytes)")
    } else {
        format!("{exact} bytes")
    }
}

/// Why a file's text could not be had.
#[derive(Debug)]
pub enum Unreadable {
    Io(std::io::Error),
    /// Its size, when known, is over the limit.
    TooLarge(Option<u64>),
    /// Not UTF-8: where the first bad byte is, and the byte.
    NotUtf8 {
        pos: Pos,
        byte: u8,
        offset: usize,
    },
}

/// Reads a text file of at most `limit` bytes, never more (a huge file, a
/// device or a pipe is refused after `limit` bytes).
pub fn read_text(
    files: &dyn Files,
    path: &Path,
    limit: u64,
) -> std::result::Result<String, Unreadable> {
    let bytes = files.read(path, limit).map_err(|e| match e {
        ReadError::Io(e) => Unreadable::Io(e),
        ReadError::TooLarge(size) => Unreadable::TooLarge(size),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let offset = e.utf8_error().valid_up_to();
        // the prefix is valid UTF-8; positions count characters, as editors do
        let before = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = strip_bom(&before[line_start..]).chars().count() + 1;
        Unreadable::NotUtf8 {
            pos: Pos {
                line: before.matches('\n').count() + 1,
                col,
            },
            byte: bytes[offset],
            offset,
        }
    })
}

/// The diagnostic for a file that is not UTF-8 text.
pub fn not_utf8(file: &str, pos: Pos, byte: u8, offset: usize) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        pos: Some(pos),
        message: format!(
            "the file is not UTF-8 text: byte 0x{byte:02x} (offset {offset}) is not part of a character"
        ),
        help: Some("save it as UTF-8 (a binary file is not YAML)".into()),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A scenario file's text, where it lives, and where each of its nodes sits.
#[derive(Debug, Clone)]
pub struct Source {
    /// The path as the user gave it (used in messages).
    pub file: String,
    /// Directory that relative manifest paths are resolved against.
    pub dir: PathBuf,
    pub spans: Spans,
}

impl Source {
    pub fn diag(&self, path: &str, message: impl Into<String>, help: Option<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            pos: self.spans.value(path),
            message: message.into(),
            help,
        }
    }

    /// A diagnostic pointing at the key of a field rather than its value.
    pub fn diag_key(
        &self,
        path: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            pos: self.spans.key(path),
            message: message.into(),
            help,
        }
    }
}

/// A scenario-format file (a scenario or a command-backend file) read in
/// full, bounded by [`MAX_FILE_BYTES`]: too large, not UTF-8 or unreadable
/// is an error naming the file.
pub fn read_file(files: &dyn Files, path: &Path) -> Result<String> {
    read_text(files, path, MAX_FILE_BYTES).map_err(|e| match e {
        Unreadable::Io(source) => Error::Read {
            path: path.to_path_buf(),
            source,
        },
        Unreadable::TooLarge(size) => Error::TooLarge {
            path: path.to_path_buf(),
            size,
            limit: MAX_FILE_BYTES,
        },
        Unreadable::NotUtf8 { pos, byte, offset } => Error::Invalid(Diagnostics(vec![not_utf8(
            &path.display().to_string(),
            pos,
            byte,
            offset,
        )])),
    })
}

/// Drops a UTF-8 byte order mark from the start of a file. Editors on Windows
/// write one; YAML parsers would otherwise read it as part of the first key.
/// Nothing moves: a BOM takes no column in the editor that wrote it.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Turns a YAML (serde_yaml_ng) error into a diagnostic: position, a plainer message,
/// and a "did you mean" for misspelt fields and names.
pub fn from_serde(file: &str, e: &serde_yaml_ng::Error) -> Diagnostic {
    from_serde_hiding(file, e, &|_, _| false)
}

/// [`from_serde`], leaving out of the allowed names those `hidden(path,
/// name)` says a file reads only to refuse (a guard's refused fields).
pub fn from_serde_hiding(
    file: &str,
    e: &serde_yaml_ng::Error,
    hidden: &dyn Fn(&str, &str) -> bool,
) -> Diagnostic {
    let pos = e.location().map(|l| Pos {
        line: l.line(),
        col: l.column(),
    });
    // serde_yaml_ng writes " at line L column C" into messages; we print the position up front.
    let full = strip_positions(&e.to_string());
    let text = full.as_str();
    let (path, msg) = match text.split_once(": ") {
        Some((p, m)) if !p.contains(' ') && !p.contains('`') => (p, m),
        _ => ("", text),
    };
    let (message, help) = rewrite(path, msg, hidden);
    let message = if path.is_empty() {
        message
    } else {
        format!("{path}: {message}")
    };
    Diagnostic {
        file: file.to_string(),
        pos,
        message,
        help,
    }
}

/// Drops serde_yaml_ng's " at line L column C" from a message (the position is printed up front).
pub fn strip_positions(msg: &str) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find(" at line ") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + " at line ".len()..];
        let skip = tail
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_digit() || c == ' ' || "column".contains(c)))
            .map_or(tail.len(), |(j, _)| j);
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

/// Names in backquotes after `expected`, e.g. "expected one of `a`, `b`".
fn expected_names(msg: &str) -> Vec<&str> {
    let Some(i) = msg.find("expected") else {
        return Vec::new();
    };
    msg[i..].split('`').skip(1).step_by(2).collect()
}

fn first_quoted(msg: &str) -> &str {
    msg.split('`').nth(1).unwrap_or_default()
}

fn rewrite(path: &str, msg: &str, hidden: &dyn Fn(&str, &str) -> bool) -> (String, Option<String>) {
    let last = path.rsplit(['.', '[']).next().unwrap_or_default();
    let what = |kind: &str| -> (String, Option<String>) {
        let bad = first_quoted(msg);
        let mut allowed = expected_names(msg);
        allowed.retain(|n| !hidden(path, n));
        let mut help = String::new();
        if let Some(s) = closest(bad, allowed.iter().copied()) {
            help.push_str(&format!("did you mean `{s}`? "));
        }
        if allowed.is_empty() {
            help.push_str("this mapping takes no fields here");
        } else {
            help.push_str(&format!("allowed: {}", allowed.join(", ")));
        }
        (format!("unknown {kind} `{bad}`"), Some(help))
    };
    if msg.starts_with("unknown field") {
        return what(if last == "action" { "action" } else { "field" });
    }
    if msg.starts_with("unknown variant") {
        let kind = match last {
            "fault" => "fault",
            "backend" | "only" => "backend",
            "effect" => "taint effect",
            "phase" => "pod phase",
            "cleanup" => "cleanup policy",
            "gracefulShutdown" => "graceful-shutdown requirement",
            _ => "value",
        };
        return what(kind);
    }
    if let Some(field) = msg.strip_prefix("missing field ") {
        return (
            format!("missing field {field}"),
            Some("see docs/scenario-format.md for the fields this mapping needs".into()),
        );
    }
    if msg.contains("expected struct Scenario") {
        return (
            "the file is not a scenario: expected a mapping at the top level".into(),
            Some("a scenario starts with `name:`, `namespace:` and `steps:`; see docs/scenario-format.md".into()),
        );
    }
    if msg.contains("while parsing") || msg.contains("while scanning") {
        return (
            format!("YAML syntax error: {msg}"),
            Some(
                "check brackets, quotes and indentation around this line and the ones above".into(),
            ),
        );
    }
    (msg.to_string(), None)
}
