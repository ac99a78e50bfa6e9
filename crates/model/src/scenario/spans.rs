//! Where each node of a YAML document sits, by path (`steps[2].expect.within`),
//! so semantic errors found after deserialization can still name a line and column.

use std::collections::{HashMap, HashSet};

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Spans {
    keys: HashMap<String, Pos>,
    values: HashMap<String, Pos>,
    /// Keys given a second time in their mapping, in file order. YAML
    /// forbids them; serde would keep one of the values silently (maps) or
    /// point at the mapping (structs).
    duplicates: Vec<Duplicate>,
}

/// A key repeated in its mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// The mapping's path (empty at the top level).
    pub parent: String,
    pub key: String,
    /// Where the repeat is.
    pub at: Pos,
}

enum Frame {
    Map {
        path: String,
        key: Option<String>,
        pending: Option<String>,
        /// The keys so far, to find repeats.
        seen: HashSet<String>,
    },
    Seq {
        path: String,
        index: usize,
    },
}

#[derive(Default)]
struct Builder {
    spans: Spans,
    /// Finished documents of a multi-document stream.
    docs: Vec<Spans>,
    stack: Vec<Frame>,
    /// Containers whose position is taken from their first child.
    open: Vec<String>,
    /// Nodes seen (scalars, aliases, mappings, sequences) and items of the
    /// top-level `steps`, against `limits`.
    nodes: usize,
    steps: usize,
    limits: Limits,
    over: Option<Overflow>,
    /// A limit passed at a mapping or sequence, whose position is taken
    /// from its first scalar (yaml-rust2 marks a block mapping at its `:`).
    pending: Option<fn(Pos) -> Overflow>,
}

/// How much of a document [`Spans::index_limited`] reads before it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Scalars, aliases, mappings and sequences.
    pub nodes: usize,
    /// Items of the top-level `steps` sequence.
    pub steps: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            nodes: usize::MAX,
            steps: usize::MAX,
        }
    }
}

/// Where a document went past a [`Limits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overflow {
    /// The first node past the limit.
    Nodes { at: Pos },
    /// The first step past the limit.
    Steps { at: Pos },
    /// The positions' parser stopped here: YAML the deserializer may still
    /// accept (the two read some corners differently), with no position
    /// for anything past it.
    Syntax { at: Pos, message: String },
}

fn pos(m: Marker) -> Pos {
    // yaml-rust2: 1-based lines, 0-based columns.
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

impl Builder {
    /// Path of the node that starts now; `None` if it is a mapping key.
    fn next_path(&mut self, at: Pos, scalar_key: Option<&str>) -> Option<String> {
        let depth = self.stack.len();
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, index }) => {
                let p = format!("{path}[{index}]");
                *index += 1;
                if path == "steps" && depth == 2 {
                    self.steps = *index;
                    if self.steps > self.limits.steps && self.pending.is_none() {
                        self.pending = Some(|at| Overflow::Steps { at });
                    }
                }
                Some(p)
            }
            Some(Frame::Map {
                path,
                key,
                pending,
                seen,
            }) => {
                if pending.is_none() {
                    // this node is a key
                    let name = scalar_key.unwrap_or("?").to_string();
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    if scalar_key.is_some() && !seen.insert(name.clone()) {
                        self.spans.duplicates.push(Duplicate {
                            parent: path.clone(),
                            key: name.clone(),
                            at,
                        });
                    }
                    self.spans.keys.entry(p.clone()).or_insert(at);
                    *pending = Some(p);
                    *key = Some(name);
                    None
                } else {
                    pending.take()
                }
            }
        }
    }

    fn place(&mut self, path: &str, at: Pos) {
        // the first child fixes the position of containers still waiting for one
        for open in self.open.drain(..) {
            self.spans.values.entry(open).or_insert(at);
        }
        self.spans.values.entry(path.to_string()).or_insert(at);
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let at = pos(mark);
        // events that give a pending overflow its position
        let settles = !matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..));
        if matches!(
            ev,
            Event::Scalar(..)
                | Event::Alias(_)
                | Event::MappingStart(..)
                | Event::SequenceStart(..)
        ) {
            self.nodes += 1;
            if self.nodes > self.limits.nodes && self.pending.is_none() {
                self.pending = Some(|at| Overflow::Nodes { at });
            }
        }
        match ev {
            Event::Scalar(text, ..) => {
                let is_key = matches!(self.stack.last(), Some(Frame::Map { pending: None, .. }));
                if is_key {
                    for open in self.open.drain(..) {
                        self.spans.values.entry(open).or_insert(at);
                    }
                    self.next_path(at, Some(&text));
                } else if let Some(p) = self.next_path(at, None) {
                    self.place(&p, at);
                }
            }
            Event::Alias(_) => {
                if let Some(p) = self.next_path(at, None) {
                    self.place(&p, at);
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let p = self.next_path(at, None).unwrap_or_default();
                self.open.push(p.clone());
                self.stack.push(if matches!(ev, Event::MappingStart(..)) {
                    Frame::Map {
                        path: p,
                        key: None,
                        pending: None,
                        seen: HashSet::new(),
                    }
                } else {
                    Frame::Seq { path: p, index: 0 }
                });
            }
            Event::DocumentEnd => {
                // paths restart at the root in each document of a stream
                self.open.clear();
                self.stack.clear();
                self.docs.push(std::mem::take(&mut self.spans));
            }
            Event::MappingEnd | Event::SequenceEnd => {
                // empty containers: fall back to the start marker
                for open in self.open.drain(..) {
                    self.spans.values.entry(open).or_insert(at);
                }
                self.stack.pop();
            }
            _ => {}
        }
        if settles && let Some(over) = self.pending.take() {
            self.over = Some(over(at));
        }
    }
}

impl Spans {
    /// Indexes a document. A document that does not parse has no spans
    /// (its syntax error is reported by the deserializer with a position).
    pub fn index(text: &str) -> Spans {
        Spans::index_limited(text, Limits::default()).unwrap_or_default()
    }

    /// Like [`Spans::index`], stopping as soon as the document goes past
    /// `limits`: no more of a huge document is read than the limit.
    pub fn index_limited(text: &str, limits: Limits) -> Result<Spans, Overflow> {
        let mut b = Builder {
            limits,
            ..Builder::default()
        };
        let mut parser = Parser::new_from_str(text);
        loop {
            match parser.next_token() {
                // broken YAML, or YAML only the deserializer reads: the
                // caller decides (the deserializer may report it)
                Err(e) => {
                    return Err(Overflow::Syntax {
                        at: pos(*e.marker()),
                        message: e.info().to_owned(),
                    });
                }
                Ok((ev, mark)) => {
                    let end = matches!(ev, Event::DocumentEnd | Event::StreamEnd);
                    b.on_event(ev, mark);
                    if let Some(over) = b.over {
                        return Err(over);
                    }
                    if end {
                        break;
                    }
                }
            }
        }
        Ok(b.docs.into_iter().next().unwrap_or(b.spans))
    }

    /// Indexes each document of a multi-document stream (`---`-separated),
    /// in order; empty documents have empty spans. A stream that does not
    /// parse gives the documents before the broken one.
    pub fn index_documents(text: &str) -> Vec<Spans> {
        let mut b = Builder::default();
        let mut parser = Parser::new_from_str(text);
        // on a syntax error keep what was indexed; the caller reports the error
        let _ = parser.load(&mut b, true);
        b.docs
    }

    /// Where a stream's second document starts (its `---`), if it has one.
    /// Reads no further than that.
    pub fn second_document(text: &str) -> Option<Pos> {
        let mut parser = Parser::new_from_str(text);
        let mut starts = 0;
        loop {
            match parser.next_token() {
                Ok((Event::DocumentStart, mark)) => {
                    starts += 1;
                    if starts == 2 {
                        return Some(pos(mark));
                    }
                }
                Ok((Event::StreamEnd, _)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Position of the value at `path`, else of its key, else of the nearest ancestor.
    pub fn value(&self, path: &str) -> Option<Pos> {
        let mut p = path;
        loop {
            if let Some(at) = self.values.get(p).or_else(|| self.keys.get(p)) {
                return Some(*at);
            }
            p = parent(p)?;
        }
    }

    /// Keys repeated within their mapping: the path and where the repeat is.
    pub fn duplicates(&self) -> &[Duplicate] {
        &self.duplicates
    }

    /// Whether the file has a node at exactly `path`.
    pub fn has(&self, path: &str) -> bool {
        self.values.contains_key(path) || self.keys.contains_key(path)
    }

    /// Position of the key at `path` (for errors about a field itself), else like [`Spans::value`].
    pub fn key(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied().or_else(|| self.value(path))
    }
}

fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: x\nsteps:\n  - fault: pause-vm\n  - expect:\n      node: target\n      within: 30s\n  - action: {taint: {node: a, key: k}}\n";

    #[test]
    fn finds_values_keys_and_ancestors() {
        let s = Spans::index(DOC);
        assert_eq!(s.value("name"), Some(Pos { line: 1, col: 7 }));
        assert_eq!(s.value("steps[0].fault"), Some(Pos { line: 3, col: 12 }));
        assert_eq!(
            s.key("steps[1].expect.within"),
            Some(Pos { line: 6, col: 7 })
        );
        assert_eq!(
            s.value("steps[1].expect.within"),
            Some(Pos { line: 6, col: 15 })
        );
        assert_eq!(
            s.value("steps[2].action.taint.key"),
            Some(Pos { line: 7, col: 36 })
        );
        assert_eq!(s.value("steps[1].expect"), Some(Pos { line: 5, col: 7 }));
        // a path below a scalar falls back to the scalar
        assert_eq!(
            s.value("steps[0].fault.nothing"),
            Some(Pos { line: 3, col: 12 })
        );
    }

    #[test]
    fn each_document_of_a_stream_has_its_own_spans() {
        let docs = Spans::index_documents("a: 1\n---\n# c\nb:\n  c: 2\n---\n---\nd: 3\n");
        assert_eq!(docs.len(), 4);
        assert_eq!(docs[0].value("a"), Some(Pos { line: 1, col: 4 }));
        assert_eq!(docs[1].value(""), Some(Pos { line: 4, col: 1 }));
        assert_eq!(docs[1].value("b.c"), Some(Pos { line: 5, col: 6 }));
        assert_eq!(docs[1].value("a"), Some(Pos { line: 4, col: 1 }));
        assert_eq!(docs[3].key("d"), Some(Pos { line: 8, col: 1 }));
    }

    #[test]
    fn a_repeated_key_is_found_where_it_is_repeated() {
        let s = Spans::index("a: 1\nb:\n  c: 2\n  c: 3\na: 4\nd: {e: 1, e: 2}\n");
        let found: Vec<(&str, &str, Pos)> = s
            .duplicates()
            .iter()
            .map(|d| (d.parent.as_str(), d.key.as_str(), d.at))
            .collect();
        assert_eq!(
            found,
            [
                ("b", "c", Pos { line: 4, col: 3 }),
                ("", "a", Pos { line: 5, col: 1 }),
                ("d", "e", Pos { line: 6, col: 11 }),
            ]
        );
        // the first one is where the key is
        assert_eq!(s.key("a"), Some(Pos { line: 1, col: 1 }));
        // items of a sequence are separate mappings
        assert!(Spans::index("- a: 1\n- a: 2\n").duplicates().is_empty());
    }

    #[test]
    fn the_second_document_starts_at_its_marker() {
        assert_eq!(
            Spans::second_document("a: 1\nb: 2\n---\nc: 3\n"),
            Some(Pos { line: 3, col: 1 })
        );
        assert_eq!(
            Spans::second_document("---\na: 1\n...\n# x\n--- \n"),
            Some(Pos { line: 5, col: 1 })
        );
        assert_eq!(Spans::second_document("a: 1\n"), None);
        assert_eq!(Spans::second_document("---\na: 1\n"), None);
    }

    #[test]
    fn indexing_stops_past_its_limits() {
        let doc = "name: x\nsteps:\n  - {fault: a}\n  - {fault: b}\n  - {fault: c}\nz: [1]\n";
        let steps = |n| Limits {
            steps: n,
            ..Limits::default()
        };
        assert!(Spans::index_limited(doc, steps(3)).is_ok());
        assert_eq!(
            Spans::index_limited(doc, steps(2)).err(),
            Some(Overflow::Steps {
                at: Pos { line: 5, col: 6 }
            })
        );
        // a nested `steps` is not the scenario's
        assert!(Spans::index_limited("a:\n  steps: [1, 2, 3]\n", steps(2)).is_ok());
        let nodes = Limits {
            nodes: 4,
            ..Limits::default()
        };
        assert_eq!(
            Spans::index_limited(doc, nodes).err(),
            // the fifth node is the steps' sequence: placed at its first scalar
            Some(Overflow::Nodes {
                at: Pos { line: 3, col: 6 }
            })
        );
    }

    #[test]
    fn broken_yaml_gives_no_spans() {
        assert_eq!(Spans::index("a: [").value("a"), None);
    }
}
