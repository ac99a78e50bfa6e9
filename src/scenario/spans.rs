//! Where each node of a YAML document sits, by path (`steps[2].expect.within`),
//! so semantic errors found after deserialization can still name a line and column.

use std::collections::HashMap;

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
}

enum Frame {
    Map {
        path: String,
        key: Option<String>,
        pending: Option<String>,
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
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, index }) => {
                let p = format!("{path}[{index}]");
                *index += 1;
                Some(p)
            }
            Some(Frame::Map { path, key, pending }) => {
                if pending.is_none() {
                    // this node is a key
                    let name = scalar_key.unwrap_or("?").to_string();
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
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
    }
}

impl Spans {
    /// Indexes a document. A document that does not parse has no spans
    /// (its syntax error is reported by the deserializer with a position).
    pub fn index(text: &str) -> Spans {
        let mut b = Builder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut b, false).is_err() {
            return Spans::default();
        }
        b.docs.into_iter().next().unwrap_or(b.spans)
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
    fn broken_yaml_gives_no_spans() {
        assert_eq!(Spans::index("a: [").value("a"), None);
    }
}
