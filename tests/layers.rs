//! The house's one rule, checked: the workspace's top-level modules (each
//! crate's `pub mod`s) form the layers ARCHITECTURE.md names (its `layers` block, lowest first), and no
//! module imports one in a higher layer, nor is any part of an import
//! circle between modules; inside each crate, no two files import each
//! other, directly or in a ring (`layers/files.rs`). A new top-level module
//! must be placed in a layer before this passes. Reads the sources only (no
//! build of them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "layers/files.rs"]
mod files;

/// The layers, lowest first: each a name and its top-level modules.
fn layers(architecture: &str) -> Vec<(String, Vec<String>)> {
    let block = architecture
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has a ```layers block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, modules) = l
                .split_once(':')
                .unwrap_or_else(|| panic!("`{l}`: a layer line is `name: module module ...`"));
            let modules = modules.split_whitespace().map(str::to_owned).collect();
            (name.trim().to_owned(), modules)
        })
        .collect()
}

/// `pub mod x;` / `mod x;` lines of lib.rs.
fn top_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

/// The top-level modules a file's code names: `crate::x`, `crate::{x, y::z}`,
/// and `super::` chains that climb out of its own top-level module. Line
/// comments are left out (doc links are not imports).
fn references(path: &[String], text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(without_comment)
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && {
            let before = code.as_bytes()[i - 1];
            before.is_ascii_alphanumeric() || before == b'_' || before == b'$'
        } {
            continue; // `nodefall_crate::`, `$crate::`
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // top-level names of the group: at brace depth 0
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        out.insert(ident(&group[j..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    // `super::super::x` from deep enough to reach the crate root
    for (i, _) in code.match_indices("super::") {
        if i > 0 && code.as_bytes()[i - 1] == b':' {
            continue; // counted from the first `super`
        }
        let mut rest = &code[i..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            up += 1;
            rest = r;
        }
        // a file's own module is `path`; `super` from inside its `mod tests`
        // is the file's module itself, which never leaves the top module
        if up >= path.len() {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// A line up to its `//` comment, if any (a `//` inside a string, as in
/// `"http://"`, is not one).
fn without_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Every `.rs` file under `dir`, relative to it.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.strip_prefix(dir).expect("under src").to_owned());
            }
        }
    }
    out.sort();
    out
}

/// Edges between top-level modules, each with the files that make it.
type Graph = BTreeMap<(String, String), BTreeSet<String>>;

fn graph(files: &[(PathBuf, String)], modules: &BTreeSet<String>) -> Graph {
    let mut g = Graph::new();
    for (rel, text) in files {
        let path = files::module_of(rel);
        let Some(from) = path.first().filter(|m| modules.contains(*m)) else {
            continue; // lib.rs, main.rs
        };
        for to in references(&path, text) {
            if &to != from && modules.contains(&to) {
                g.entry((from.clone(), to))
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
    }
    g
}

/// What breaks the rule, in words (empty: nothing).
fn violations(
    layers: &[(String, Vec<String>)],
    modules: &BTreeSet<String>,
    g: &Graph,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut level = BTreeMap::new();
    for (i, (name, ms)) in layers.iter().enumerate() {
        for m in ms {
            if let Some((other, _)) = level.insert(m.clone(), (name.clone(), i)) {
                out.push(format!(
                    "module `{m}` is in two layers: `{other}` and `{name}`"
                ));
            }
            if !modules.contains(m) {
                out.push(format!(
                    "layer `{name}` names `{m}`, which src/lib.rs does not declare"
                ));
            }
        }
    }
    for m in modules {
        if !level.contains_key(m) {
            out.push(format!(
                "module `{m}` is in no layer: add it to ARCHITECTURE.md's `layers` block"
            ));
        }
    }
    for ((from, to), files) in g {
        if let (Some((lf, i)), Some((lt, j))) = (level.get(from), level.get(to))
            && j > i
        {
            out.push(format!(
                "upward: `{from}` (layer `{lf}`) uses `{to}` (layer `{lt}`), in {}",
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for circle in circles(g) {
        out.push(format!("circle: {}", circle.join(" -> ")));
    }
    out
}

/// The import circles between modules (strongly connected components of
/// more than one module), each as its modules in order.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in g.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    // Reachability by repeated search: the graph has a few dozen nodes.
    let reach = |a: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![a];
        while let Some(x) = todo.pop() {
            for &y in &next[x] {
                if seen.insert(y) {
                    todo.push(y);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&a| (a, reach(a))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &a in next.keys() {
        if done.contains(a) || !reaches[a].contains(a) {
            continue;
        }
        let members: Vec<&str> = next
            .keys()
            .copied()
            .filter(|&b| reaches[a].contains(b) && reaches[b].contains(a))
            .collect();
        done.extend(members.iter().copied());
        if members.len() > 1 {
            out.push(members.into_iter().map(str::to_owned).collect());
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn no_module_imports_a_higher_layer_and_none_are_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layers = layers(&read(&root.join("ARCHITECTURE.md")));
    // every crate of the workspace: the binary's (src/) and crates/*/src;
    // the compiler already refuses an import between crates against their
    // order, this also checks the layers inside each crate
    let srcs = crate_sources(root);
    let mut modules = BTreeSet::new();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for src in &srcs {
        modules.extend(top_modules(&read(&src.join("lib.rs"))));
        for rel in sources(src) {
            let text = read(&src.join(&rel));
            files.push((rel, text));
        }
    }
    let g = graph(&files, &modules);
    assert!(g.len() > 40, "the graph looks empty: {g:?}");
    let v = violations(&layers, &modules, &g);
    assert!(
        v.is_empty(),
        "the layers of ARCHITECTURE.md are broken:\n  {}",
        v.join("\n  ")
    );
}

#[test]
fn a_planted_upward_use_a_circle_and_an_unplaced_module_are_each_caught() {
    let layers = layers("x\n```layers\nbase: timeline\nrun: runner\ncli: cli\n```\n");
    let modules: BTreeSet<String> = ["timeline", "runner", "cli", "extra"]
        .map(str::to_owned)
        .into();
    let file = |p: &str, t: &str| (PathBuf::from(p), t.to_owned());
    let clean = [
        file(
            "runner/mod.rs",
            "use crate::timeline::Ms;\n// crate::cli in a comment\n",
        ),
        file("cli/mod.rs", "use crate::{runner::session, timeline};\n"),
        file("timeline/mod.rs", "let s = \"http://x\"; // crate::cli\n"),
    ];
    let v = violations(&layers, &modules, &graph(&clean, &modules));
    assert_eq!(
        v,
        vec!["module `extra` is in no layer: add it to ARCHITECTURE.md's `layers` block"]
    );
    let modules: BTreeSet<String> = ["timeline", "runner", "cli"].map(str::to_owned).into();
    assert!(violations(&layers, &modules, &graph(&clean, &modules)).is_empty());

    let mut planted = clean.to_vec();
    planted.push(file("timeline/fold.rs", "use crate::runner::Outcome;\n"));
    let v = violations(&layers, &modules, &graph(&planted, &modules));
    assert_eq!(
        v,
        vec![
            "upward: `timeline` (layer `base`) uses `runner` (layer `run`), in timeline/fold.rs",
            "circle: runner -> timeline",
        ],
        "{v:#?}"
    );

    // climbing out with `super::super::` counts as naming the module
    let mut climbed = clean.to_vec();
    climbed.push(file(
        "runner/session/mod.rs",
        "use super::super::cli::Args;\n",
    ));
    let v = violations(&layers, &modules, &graph(&climbed, &modules));
    assert_eq!(v.len(), 2, "{v:#?}");
    assert!(
        v[0].starts_with("upward: `runner` (layer `run`) uses `cli`"),
        "{v:#?}"
    );
}

/// Every crate's `src/`: the binary's and `crates/*/src`.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut srcs = vec![root.join("src")];
    for e in std::fs::read_dir(root.join("crates")).expect("crates/") {
        srcs.push(e.expect("directory entry").path().join("src"));
    }
    srcs.sort();
    srcs
}

#[test]
fn no_two_files_of_a_crate_import_each_other_directly_or_in_a_ring() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut edges = 0;
    for src in crate_sources(root) {
        let files: Vec<(PathBuf, String)> = sources(&src)
            .into_iter()
            .map(|rel| {
                let text = read(&src.join(&rel));
                (rel, text)
            })
            .collect();
        let g = files::file_graph(&files);
        edges += g.values().map(BTreeSet::len).sum::<usize>();
        let krate = src.strip_prefix(root).unwrap_or(&src);
        for ring in files::rings(&g) {
            found.push(format!("{}: {}", krate.display(), ring.join(" <-> ")));
        }
    }
    assert!(edges > 300, "the file graph looks empty: {edges} edges");
    assert!(
        found.is_empty(),
        "files that import each other (move what they share into a file both import):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn a_planted_ring_of_files_is_caught() {
    let file = |p: &str, t: &str| (PathBuf::from(p), t.to_owned());
    let clean = vec![
        file("lib.rs", "pub mod report;\npub mod timeline;\n"),
        file(
            "timeline/mod.rs",
            "mod metrics;\npub use metrics::Metrics;\n",
        ),
        file("timeline/metrics.rs", "pub struct Metrics;\n"),
        file(
            "report/mod.rs",
            "mod format;\nmod markdown;\nmod pods;\npub use markdown::render;\n",
        ),
        file(
            "report/format.rs",
            "use crate::timeline::{Fold, metrics::Metrics};\npub fn table() {}\n",
        ),
        file(
            "report/markdown.rs",
            "use super::{format::table, pods};\npub fn render() { pods::section(); }\n",
        ),
        file(
            "report/pods.rs",
            "use super::format::table;\n// super::markdown::render in a comment\n\
             pub fn section() {}\n#[cfg(test)]\nmod tests {\n    use super::super::markdown::render;\n}\n",
        ),
        file("report/tests.rs", "use super::markdown::render;\n"),
        // a part naming its module's front (`super::Error`) is the tree
        file(
            "timeline/fold.rs",
            "use super::Metrics;\nfn f() -> crate::Error {}\n",
        ),
    ];
    let g = files::file_graph(&clean);
    assert!(files::rings(&g).is_empty(), "{g:#?}");
    assert_eq!(
        g["report/markdown.rs"],
        ["report/format.rs", "report/pods.rs"]
            .map(str::to_owned)
            .into(),
        "a group's members are each an edge"
    );
    assert_eq!(g["report/mod.rs"], ["report/markdown.rs".to_owned()].into());
    // `Fold` is no module: the path stops at the file that names it; a
    // group's later member continues the path before the group
    assert_eq!(
        g["report/format.rs"],
        ["timeline/metrics.rs", "timeline/mod.rs"]
            .map(str::to_owned)
            .into()
    );
    assert!(g["timeline/fold.rs"].is_empty(), "{g:#?}");

    // a section that uses the orchestrator's helper: a ring of two
    let mut planted = clean.clone();
    planted[6] = file(
        "report/pods.rs",
        "pub fn section() { super::markdown::render(); }\n",
    );
    assert_eq!(
        files::rings(&files::file_graph(&planted)),
        vec![vec![
            "report/markdown.rs".to_owned(),
            "report/pods.rs".to_owned()
        ]]
    );
    // a longer ring through `crate::` paths
    let mut planted = clean;
    planted[2] = file("timeline/metrics.rs", "use crate::report::render;\n");
    assert_eq!(
        files::rings(&files::file_graph(&planted)),
        vec![
            [
                "report/format.rs",
                "report/markdown.rs",
                "report/mod.rs",
                "report/pods.rs",
                "timeline/metrics.rs",
                "timeline/mod.rs"
            ]
            .map(str::to_owned)
            .to_vec()
        ]
    );
}
