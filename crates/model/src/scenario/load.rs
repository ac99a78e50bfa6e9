//! Reading a scenario file: YAML -> [`Scenario`], with every problem reported
//! as `file:line:column: message` and a hint of what is allowed.
//! Diagnostics and the bounded read live in `diagnostics.rs`.

use std::path::Path;

pub use super::diagnostics::{
    Diagnostic, Diagnostics, Error, MAX_FILE_BYTES, MAX_NODES, MAX_STEPS, Result, Source,
    Unreadable, from_serde, from_serde_hiding, not_utf8, read_file, read_text, size_text,
    strip_bom, strip_positions,
};
use super::model::{Guard, Scenario};
use super::spans::{Limits, Overflow, Pos, Spans};
use crate::files::Files;

/// A parsed (not yet validated) scenario.
#[derive(Debug)]
pub struct Loaded {
    pub source: Source,
    pub scenario: Scenario,
}

pub fn load(files: &dyn Files, path: &Path) -> Result<Loaded> {
    let text = read_file(files, path)?;
    load_text(path, text)
}

fn load_text(path: &Path, text: String) -> Result<Loaded> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&path.display().to_string(), &dir, &text)
}

/// Parses scenario text. Never panics, whatever the input.
pub fn load_str(file: &str, dir: &Path, text: &str) -> Result<Loaded> {
    let text = strip_bom(text);
    let limits = Limits {
        nodes: MAX_NODES,
        steps: MAX_STEPS,
    };
    // before anything else reads it: no more than the limits is read
    let mut unindexed = None;
    let spans = match Spans::index_limited(text, limits) {
        Ok(spans) => Ok(spans),
        Err(Overflow::Syntax { at, message }) => {
            unindexed = Some((at, message));
            Ok(Spans::default())
        }
        Err(over) => Err(over),
    };
    let spans = spans.map_err(|over| {
        let (at, message) = match over {
            Overflow::Syntax { at, message } => (at, message),
            Overflow::Steps { at } => (
                at,
                format!(
                    "the scenario has more than {MAX_STEPS} steps (step #{} starts here), over the limit",
                    MAX_STEPS + 1
                ),
            ),
            Overflow::Nodes { at } => (
                at,
                format!(
                    "the file has more than {MAX_NODES} YAML values (keys, scalars, lists, mappings): the one past the limit is here"
                ),
            ),
        };
        Error::Invalid(Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            pos: Some(at),
            message,
            help: Some("a scenario this large is not one a person wrote; split it into several".into()),
        }]))
    })?;
    let source = Source {
        file: file.to_string(),
        dir: dir.to_path_buf(),
        spans,
    };
    if text.trim().is_empty() {
        return Err(Error::Invalid(Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            pos: Some(Pos { line: 1, col: 1 }),
            message: "the file is empty".into(),
            help: Some("a scenario needs at least `name`, `namespace` and `steps`; see docs/scenario-format.md".into()),
        }])));
    }
    if !source.spans.duplicates().is_empty() {
        return Err(Error::Invalid(Diagnostics(duplicates(&source))));
    }
    let scenario = match serde_yaml_ng::from_str::<Scenario>(text) {
        Ok(scenario) => scenario,
        Err(e) => {
            // A guard reads its refused fields only to explain the refusal.
            let refused = |path: &str, name: &str| {
                path.starts_with("abortIf[")
                    && !path.contains('.')
                    && Guard::REFUSED.contains(&name)
            };
            let mut d = from_serde_hiding(file, &e, &refused);
            if d.pos.is_none()
                && let Some((at, _)) = &unindexed
            {
                d.pos = Some(*at);
            }
            if d.pos.is_none()
                && let Some(at) = Spans::second_document(text)
            {
                d.pos = Some(at);
                d.message = "a scenario is one YAML document, but a second one starts here".into();
                d.help = Some(
                    "remove this `---` line and what follows, or put each scenario in its own file"
                        .into(),
                );
            }
            return Err(Error::Invalid(Diagnostics(vec![d])));
        }
    };
    // Read by the deserializer, but not by the parser that knows where each
    // value sits: later errors could not say where. Refused here, where it
    // can.
    if let Some((at, why)) = unindexed {
        return Err(Error::Invalid(Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            pos: Some(at),
            message: format!("YAML parsers read this differently ({why})"),
            help: Some(
                "quote the value, or write it on one line (a plain value continued on the next \
                 line inside `{...}` or `[...]` is one such case)"
                    .into(),
            ),
        }])));
    }
    Ok(Loaded { source, scenario })
}

/// Every key given twice in its mapping, at the repeat.
fn duplicates(source: &Source) -> Vec<Diagnostic> {
    source
        .spans
        .duplicates()
        .iter()
        .map(|d| {
            let path = match d.parent.as_str() {
                "" => d.key.clone(),
                parent => format!("{parent}.{}", d.key),
            };
            let parent = match d.parent.as_str() {
                "" => String::new(),
                parent => format!("{parent}: "),
            };
            let first = source
                .spans
                .key(&path)
                .map(|p| format!(", already given at line {}", p.line))
                .unwrap_or_default();
            Diagnostic {
                file: source.file.clone(),
                pos: Some(d.at),
                message: format!("{parent}duplicate key `{}`{first}", d.key),
                help: Some("a mapping holds each key once; remove one of them".into()),
            }
        })
        .collect()
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
