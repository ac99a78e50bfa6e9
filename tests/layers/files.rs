//! The file-level half of the house's rule: inside a crate, no two source
//! files import each other, directly or in a ring. A file *imports* another
//! when its code names an item through a path that reaches that file's
//! module: `crate::a::b::X` (the deepest module of the path that is a
//! file), `super::x`, `self::x` or a bare `x::` of one of its own child
//! modules (`pub use model::FaultKind` in a `mod.rs`). Declaring a child
//! (`mod x;`) is not an import, and neither is naming what an enclosing
//! module declares (`super::Error` from a part of the module, its `mod.rs`
//! or `lib.rs` being the module's front): that is the module tree, as a
//! function names its own module's items. Unit tests (`#[cfg(test)] mod tests { .. }`
//! and the `*tests.rs` files they load) are left out: a test may use what
//! it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file's module path: `runner/session/mod.rs` is `runner::session`,
/// `exec.rs` is `exec`, `lib.rs` and `main.rs` are the root (empty).
pub fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// Whether a file holds only unit tests (`tests.rs`, `remediation_tests.rs`).
pub fn is_test_file(rel: &Path) -> bool {
    rel.file_stem()
        .is_some_and(|s| s == "tests" || s.to_string_lossy().ends_with("_tests"))
}

/// The code of a file without comments and without its inline
/// `#[cfg(test)] mod x { .. }` blocks.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().map(super::without_comment).peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.contains('{'))
        {
            // skip to the block's closing brace
            let mut depth = 0i32;
            for l in lines.by_ref() {
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                if depth <= 0 && l.contains('}') {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths a piece of code names, each as written after its
/// root (`crate`, `super`, `self` or a bare first segment), expanding
/// `{a, b::c}` groups. Returns (root, segments) pairs.
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let starts = is_ident(c)
            && (i == 0
                || !is_ident(bytes[i - 1] as char) && bytes[i - 1] != b':' && bytes[i - 1] != b'$');
        if !starts {
            i += 1;
            continue;
        }
        let end = code[i..]
            .find(|c: char| !is_ident(c))
            .map_or(code.len(), |n| i + n);
        let first = &code[i..end];
        if !code[end..].starts_with("::") {
            i = end;
            continue;
        }
        let mut prefix = Vec::new();
        let mut root = first.to_owned();
        let mut j = end;
        // `super::super::x`: the root is every `super`
        while code[j..].starts_with("::super") {
            root.push_str("::super");
            j += "::super".len();
        }
        expand(code, j, &mut prefix, &root, &mut out);
        i = j.max(end);
    }
    out
}

/// Reads `::seg::seg` or `::{..}` from `at`, pushing every full path found.
fn expand(
    code: &str,
    mut at: usize,
    prefix: &mut Vec<String>,
    root: &str,
    out: &mut Vec<(String, Vec<String>)>,
) {
    let depth = prefix.len();
    while let Some(rest) = code[at..].strip_prefix("::") {
        at += 2;
        if rest.starts_with('{') {
            // a group: each member at depth 0 continues the prefix
            let group = &code[at + 1..];
            let mut level = 0;
            let mut start = 0;
            let mut members = Vec::new();
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => level += 1,
                    '}' if level == 0 => {
                        members.push((start, k));
                        break;
                    }
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        members.push((start, k));
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            // each member continues what was read before the group
            let before = prefix.len();
            for (s, e) in members {
                let member = group[s..e].trim_start();
                let offset = at + 1 + s + (group[s..e].len() - member.len());
                let name_end = member.find(|c: char| !is_ident(c)).unwrap_or(member.len());
                if name_end == 0 {
                    continue;
                }
                prefix.push(member[..name_end].to_owned());
                expand(code, offset + name_end, prefix, root, out);
                prefix.truncate(before);
            }
            prefix.truncate(depth);
            return;
        }
        let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        prefix.push(rest[..len].to_owned());
        at += len;
    }
    if !prefix.is_empty() {
        out.push((root.to_owned(), prefix.clone()));
    }
    prefix.truncate(depth);
}

/// Edges between the files of one crate: (from, to) -> nothing; each file
/// named by its path relative to `src/`.
pub type FileGraph = BTreeMap<String, BTreeSet<String>>;

/// The file graph of one crate's sources (`(path under src/, text)`).
pub fn file_graph(files: &[(PathBuf, String)]) -> FileGraph {
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .filter(|(rel, _)| !is_test_file(rel) && !rel.ends_with("main.rs"))
        .map(|(rel, _)| (module_of(rel), rel.display().to_string()))
        .collect();
    // the deepest module of `base ++ segs` that is a file
    let resolve = |base: &[String], segs: &[String]| -> Option<&String> {
        (0..=segs.len()).rev().find_map(|n| {
            let mut m = base.to_vec();
            m.extend_from_slice(&segs[..n]);
            by_module.get(&m)
        })
    };
    let mut g = FileGraph::new();
    for (rel, text) in files {
        if is_test_file(rel) {
            continue;
        }
        let me = module_of(rel);
        let name = rel.display().to_string();
        let entry = g.entry(name.clone()).or_default();
        for (root, segs) in paths(&code(text)) {
            let target = if root == "crate" {
                resolve(&[], &segs)
            } else if root == "self" {
                resolve(&me, &segs)
            } else if root.starts_with("super") {
                let up = root.matches("super").count();
                (up <= me.len())
                    .then(|| resolve(&me[..me.len() - up], &segs))
                    .flatten()
            } else {
                // a bare path from one of this file's own child modules
                let mut child = me.clone();
                child.push(root.clone());
                by_module
                    .contains_key(&child)
                    .then(|| resolve(&child, &segs).or_else(|| by_module.get(&child)))
                    .flatten()
            };
            let enclosing = |t: &String| {
                let m = module_of(Path::new(t));
                m.len() < me.len() && me.starts_with(&m)
            };
            if let Some(t) = target.filter(|t| **t != name && !enclosing(t)) {
                entry.insert(t.clone());
            }
        }
    }
    g
}

/// The rings of a file graph (strongly connected components of more than
/// one file), each as its files in order.
pub fn rings(g: &FileGraph) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iteratively: graphs have a few hundred files.
    let names: Vec<&String> = g
        .keys()
        .chain(g.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let next: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            g.get(*n)
                .map_or(Vec::new(), |ts| ts.iter().map(|t| index_of[t]).collect())
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut counter, mut out) = (Vec::new(), 0, Vec::new());
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = next[v].get(*k) {
                *k += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut ring = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    ring.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if ring.len() > 1 {
                    ring.sort();
                    out.push(ring);
                }
            }
        }
    }
    out.sort();
    out
}
