//! Reading a scenario file: YAML -> [`Scenario`], with every problem reported
//! as `file:line:column: message` and a hint of what is allowed.

use std::fmt;
use std::path::{Path, PathBuf};

use super::model::Scenario;
use super::spans::{Pos, Spans};
use super::suggest::closest;

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
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
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

/// A parsed (not yet validated) scenario.
#[derive(Debug)]
pub struct Loaded {
    pub source: Source,
    pub scenario: Scenario,
}

pub fn load(path: &Path) -> Result<Loaded> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&path.display().to_string(), &dir, &text)
}

/// Drops a UTF-8 byte order mark from the start of a file. Editors on Windows
/// write one; YAML parsers would otherwise read it as part of the first key.
/// Nothing moves: a BOM takes no column in the editor that wrote it.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses scenario text. Never panics, whatever the input.
pub fn load_str(file: &str, dir: &Path, text: &str) -> Result<Loaded> {
    let text = strip_bom(text);
    let source = Source {
        file: file.to_string(),
        dir: dir.to_path_buf(),
        spans: Spans::index(text),
    };
    if text.trim().is_empty() {
        return Err(Error::Invalid(Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            pos: Some(Pos { line: 1, col: 1 }),
            message: "the file is empty".into(),
            help: Some("a scenario needs at least `name`, `namespace` and `steps`; see docs/scenario-format.md".into()),
        }])));
    }
    match serde_yaml_ng::from_str::<Scenario>(text) {
        Ok(scenario) => Ok(Loaded { source, scenario }),
        Err(e) => Err(Error::Invalid(Diagnostics(vec![from_serde(file, &e)]))),
    }
}

/// Turns a YAML (serde_yaml_ng) error into a diagnostic: position, a plainer message,
/// and a "did you mean" for misspelt fields and names.
pub(crate) fn from_serde(file: &str, e: &serde_yaml_ng::Error) -> Diagnostic {
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
    let (message, help) = rewrite(path, msg);
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
pub(crate) fn strip_positions(msg: &str) -> String {
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

fn rewrite(path: &str, msg: &str) -> (String, Option<String>) {
    let last = path.rsplit(['.', '[']).next().unwrap_or_default();
    let what = |kind: &str| -> (String, Option<String>) {
        let bad = first_quoted(msg);
        let mut allowed = expected_names(msg);
        // A guard reads its refused fields only to explain the refusal.
        if path.starts_with("abortIf[") && !path.contains('.') {
            allowed.retain(|n| !super::model::Guard::REFUSED.contains(n));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        match load_str("s.yaml", Path::new("."), text) {
            Ok(_) => String::from("<loaded>"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_top_level_field_suggests_the_right_one() {
        let e = err("name: a\nnamespace: b\nstpes: []\n");
        assert!(e.starts_with("s.yaml:3:1: unknown field `stpes`"), "{e}");
        assert!(e.contains("did you mean `steps`?"), "{e}");
    }

    #[test]
    fn unknown_fault_is_named_as_a_fault() {
        let e = err("name: a\nnamespace: b\nsteps:\n  - fault: pause-mv\n");
        assert!(
            e.starts_with("s.yaml:4:12: steps[0].fault: unknown fault `pause-mv`"),
            "{e}"
        );
        assert!(e.contains("did you mean `pause-vm`?"), "{e}");
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_positions_stay_right() {
        let text = "\u{feff}name: a\nnamespace: b\nstpes: []\n";
        let e = err(text);
        assert!(e.starts_with("s.yaml:3:1: unknown field `stpes`"), "{e}");
        let ok = load_str(
            "s.yaml",
            Path::new("."),
            "\u{feff}name: a\nnamespace: b\nsteps: []\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.scenario.name, "a");
        assert_eq!(
            ok.source.spans.value("namespace"),
            Some(Pos { line: 2, col: 12 })
        );
        assert_eq!(ok.source.spans.value("name"), Some(Pos { line: 1, col: 7 }));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = err("name: a\nsteps: [\n");
        assert!(e.starts_with("s.yaml:3:1:"), "{e}");
    }
}
