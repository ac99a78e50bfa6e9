//! What README.md, docs/*.md and scripts/vm-rig/README.md tell a user is
//! true of this tree:
//!
//! - every `nodefall SUBCOMMAND ...` they show (in code blocks and inline
//!   code) exists (`nodefall SUBCOMMAND... --help` exits 0), and every
//!   `--flag` on such a line is in that subcommand's `--help`;
//! - every repository path they name (a link, or `scenarios/...`,
//!   `scripts/...`, `docs/...`, `tests/...`, ... in code or prose) exists,
//!   and a link's `#anchor` is a heading of the file it points to;
//! - every script they name or tell a user to run has its executable bit.
//!
//! Pure: reads files and runs the built binary's `--help`, nothing else.
//! Each failure names the document, the line and what is wrong.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// The documents checked, relative to the repository root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![
        PathBuf::from("README.md"),
        PathBuf::from("scripts/vm-rig/README.md"),
    ];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root).expect("under the root").to_owned())
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    docs
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------
// Reading a Markdown document into pieces: code block lines, inline code
// spans and prose lines (with the code spans blanked out), each with its line.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A line of a fenced code block (continuation lines joined), with the
    /// fence's language.
    Block(String),
    /// An inline code span.
    Inline,
    /// A line of prose, code spans blanked out.
    Prose,
}

#[derive(Debug, Clone)]
struct Piece {
    line: usize,
    kind: Kind,
    text: String,
}

fn fence(line: &str) -> Option<(char, usize, &str)> {
    let t = line.trim_start();
    let c = t.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = t.chars().take_while(|&x| x == c).count();
    (n >= 3).then(|| (c, n, t[n..].trim()))
}

fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut open: Option<(char, usize, String)> = None;
    let mut para: Vec<(usize, &str)> = Vec::new();
    let mut pending: Option<(usize, String)> = None; // a block line ending in `\`
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((c, len, lang)) = &open {
            if let Some((c2, len2, rest)) = fence(line)
                && c2 == *c
                && len2 >= *len
                && rest.is_empty()
            {
                if let Some((at, t)) = pending.take() {
                    out.push(Piece {
                        line: at,
                        kind: Kind::Block(lang.clone()),
                        text: t,
                    });
                }
                open = None;
                continue;
            }
            let (at, mut joined) = pending.take().unwrap_or((n, String::new()));
            joined.push_str(line);
            if let Some(stripped) = joined.strip_suffix('\\') {
                pending = Some((at, format!("{stripped} ")));
            } else {
                out.push(Piece {
                    line: at,
                    kind: Kind::Block(lang.clone()),
                    text: joined,
                });
            }
            continue;
        }
        if let Some((c, len, lang)) = fence(line) {
            paragraph(&para, &mut out);
            para.clear();
            open = Some((c, len, lang.to_owned()));
            continue;
        }
        if line.trim().is_empty() {
            paragraph(&para, &mut out);
            para.clear();
        } else {
            para.push((n, line));
        }
    }
    paragraph(&para, &mut out);
    out
}

/// Inline code spans of one paragraph (they may run over a line break), and
/// its lines with those spans blanked.
fn paragraph(lines: &[(usize, &str)], out: &mut Vec<Piece>) {
    let Some(&(first, _)) = lines.first() else {
        return;
    };
    let text: String = lines.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
    let bytes = text.as_bytes();
    let mut prose = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        // the closing run: exactly as many backticks
        let mut j = i + run;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let r = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        let Some(end) = close else {
            i += run;
            continue;
        };
        let line = first + text[..i].matches('\n').count();
        let span = text[i + run..end].replace('\n', " ");
        out.push(Piece {
            line,
            kind: Kind::Inline,
            text: span.trim().to_owned(),
        });
        for b in &mut prose[i..end + run] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = end + run;
    }
    let prose = String::from_utf8(prose).expect("blanking keeps UTF-8 (ASCII for ASCII)");
    for (k, l) in prose.split('\n').enumerate() {
        out.push(Piece {
            line: first + k,
            kind: Kind::Prose,
            text: l.to_owned(),
        });
    }
}

// ---------------------------------------------------------------------------
// Commands: `nodefall SUBCOMMAND... [--flag ...]`.

/// A `nodefall` command line found in a document: its words after
/// `nodefall`, up to the end of the command.
#[derive(Debug)]
struct Cmd {
    line: usize,
    words: Vec<String>,
}

/// Shell words of `s`, quotes kept inside their word (good enough to find
/// subcommands and flags).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                cur.push(c);
            }
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                cur.push(c);
            }
            None if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            None => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Words that end a command: what follows belongs to the shell or another
/// program.
fn ends_command(w: &str) -> bool {
    matches!(w, "|" | "||" | "&&" | ";" | "&" | "2>&1")
        || w.starts_with('>')
        || w.starts_with("2>")
        || w.starts_with('<')
        || w.starts_with('#')
}

/// Whether a piece is a line of a code block of shell commands (where `#`
/// begins a comment).
fn shell(kind: &Kind) -> bool {
    matches!(kind, Kind::Block(lang) if matches!(lang.as_str(), "" | "sh" | "bash" | "shell" | "console"))
}

fn commands(pieces: &[Piece]) -> Vec<Cmd> {
    let mut out = Vec::new();
    for p in pieces.iter().filter(|p| p.kind != Kind::Prose) {
        let t = if shell(&p.kind) {
            p.text.split(" #").next().unwrap_or("")
        } else {
            p.text.as_str()
        };
        // in other blocks (output, YAML) a command is one typed at a prompt
        // or quoted, not a word of a message
        let quoted_only = matches!(p.kind, Kind::Block(_)) && !shell(&p.kind);
        let mut from = 0;
        while let Some(k) = t[from..].find("nodefall") {
            let at = from + k;
            from = at + "nodefall".len();
            let before = t[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || "/._-~$:=".contains(c)) {
                continue;
            }
            let prompt = t[..at].trim_end().ends_with('$') || t[..at].trim().is_empty();
            if quoted_only && !prompt && !before.is_some_and(|c| "`\"'(".contains(c)) {
                continue;
            }
            let rest = &t[from..];
            // `nodefall` then a space and a lowercase word: a command, not
            // `nodefall.dev/...`, `--name nodefall` or a path
            let mut chars = rest.chars();
            if chars.next() != Some(' ') || !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
                continue;
            }
            // where it ends: a closing `)` of `$(nodefall ...)`, the quote it
            // began after, else a shell separator
            let mut end = rest.len();
            match before {
                Some('(') => {
                    let mut depth = 0i32;
                    for (i, c) in rest.char_indices() {
                        match c {
                            '(' => depth += 1,
                            ')' if depth == 0 => {
                                end = i;
                                break;
                            }
                            ')' => depth -= 1,
                            _ => {}
                        }
                    }
                }
                Some(q @ ('"' | '\'')) => {
                    if let Some(i) = rest.find(q) {
                        end = i;
                    }
                }
                _ => {}
            }
            let ws: Vec<String> = words(&rest[..end])
                .into_iter()
                .take_while(|w| !ends_command(w))
                .collect();
            out.push(Cmd {
                line: p.line,
                words: ws,
            });
        }
    }
    out
}

/// `nodefall ARGS... --help`, cached: its exit code and output.
#[derive(Debug, Default)]
struct Helps(HashMap<Vec<String>, (Option<i32>, String)>);

impl Helps {
    fn get(&mut self, chain: &[String]) -> &(Option<i32>, String) {
        self.0.entry(chain.to_vec()).or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
                .args(chain)
                .arg("--help")
                .output()
                .expect("nodefall runs");
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            (out.status.code(), text)
        })
    }

    /// The subcommands a `--help` lists under `Commands:`.
    fn subcommands(&mut self, chain: &[String]) -> Vec<String> {
        let (_, text) = self.get(chain);
        text.lines()
            .skip_while(|l| l.trim_end() != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    }
}

/// Whether `help` lists `flag` (`--name`) as a whole flag.
fn lists_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let after = help[i + flag.len()..].chars().next();
        let before = help[..i].chars().next_back();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// The `--flags` among a command's words (`[--fault drain]`,
/// `--threshold=NAME=10%` give `--fault`, `--threshold`).
fn flags(words: &[String]) -> Vec<String> {
    words
        .iter()
        .map(|w| w.trim_start_matches(['[', '(']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
        })
        .filter(|f| f.len() > 2 && f.as_bytes()[2].is_ascii_lowercase())
        .collect()
}

/// Problems with the `nodefall` commands of one document; also how many
/// commands it checked.
fn check_commands(doc: &str, pieces: &[Piece], helps: &mut Helps) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let found = commands(pieces);
    for cmd in &found {
        let shown = format!("nodefall {}", cmd.words.join(" "));
        // the subcommand chains this line names (`freeze|thaw` names two)
        let mut chains: Vec<Vec<String>> = vec![Vec::new()];
        let mut bad = false;
        for w in &cmd.words {
            let parent = chains[0].clone();
            let subs = helps.subcommands(&parent);
            if subs.is_empty() {
                break; // a command that takes arguments, not subcommands
            }
            let alternatives: Vec<&str> = w.split('|').collect();
            if !alternatives
                .iter()
                .all(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            {
                break; // a placeholder (`COMMAND`) or an argument
            }
            let mut next = Vec::new();
            for chain in &chains {
                for a in &alternatives {
                    let mut c = chain.clone();
                    c.push((*a).to_owned());
                    // hidden subcommands are not listed: ask for their help
                    if !subs.iter().any(|s| s == a) && helps.get(&c).0 != Some(0) {
                        problems.push(format!(
                            "{doc}:{}: `{shown}`: `nodefall {}` has no subcommand `{a}` (it has: {})",
                            cmd.line,
                            chain.join(" "),
                            subs.join(", ")
                        ));
                        bad = true;
                    }
                    next.push(c);
                }
            }
            if bad {
                break;
            }
            chains = next;
        }
        if bad {
            continue;
        }
        for chain in &chains {
            let (code, help) = helps.get(chain).clone();
            let named = format!("nodefall {}", chain.join(" "));
            if code != Some(0) {
                problems.push(format!(
                    "{doc}:{}: `{shown}`: `{} --help` exits {code:?}: {}",
                    cmd.line,
                    named.trim_end(),
                    help.lines().next().unwrap_or("")
                ));
                continue;
            }
            for f in flags(&cmd.words) {
                if !lists_flag(&help, &f) {
                    problems.push(format!(
                        "{doc}:{}: `{shown}`: `{}` has no flag {f} (not in its --help)",
                        cmd.line,
                        named.trim_end()
                    ));
                }
            }
        }
    }
    (problems, found.len())
}

// ---------------------------------------------------------------------------
// Paths: links, and repository paths in code and prose.

/// Where a repository path may begin; `reports/` only for its checked-in
/// examples (the rest is what runs write).
const PREFIXES: &[&str] = &[
    "scenarios/",
    "scripts/",
    "docs/",
    "examples/",
    "tests/",
    "crates/",
    "vagrant/",
    "src/",
    ".ci/",
    ".github/",
    "reports/examples/",
];
/// Files at the root, named bare.
const ROOT_FILES: &[&str] = &["README.md", "ARCHITECTURE.md", "Cargo.toml", "deny.toml"];

/// A path named in a document.
#[derive(Debug)]
struct Named {
    line: usize,
    /// As written.
    text: String,
    /// Resolved, relative to the root (`..` resolved).
    path: PathBuf,
    /// A `#fragment`, for links.
    anchor: Option<String>,
    /// Told to be run: first word of a command.
    run: bool,
    /// A link's target (resolved from the document's directory), not a
    /// path in code or prose (resolved from the root).
    link: bool,
}

/// `a/b/../c` -> `a/c`; `None` when it climbs out of the root.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(s) => out.push(s),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A path segment that stands for something (`RUN`, `FILE.yaml`).
fn placeholder(path: &str) -> bool {
    path.split('/').any(|seg| {
        let stem = seg.split('.').next().unwrap_or("");
        stem.len() >= 2
            && stem.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && stem
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// Repository paths in one piece of text.
fn repo_paths(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if !t.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let before = t[..i].chars().next_back();
        let starts = before.is_none_or(|c| !(path_char(c) || "~$@".contains(c)))
            && (PREFIXES.iter().any(|p| t[i..].starts_with(p))
                || ROOT_FILES.iter().any(|f| t[i..].starts_with(f)));
        if !starts {
            i += 1;
            continue;
        }
        let len = t[i..].find(|c: char| !path_char(c)).unwrap_or(t.len() - i);
        let next = t[i + len..].chars().next();
        let mut p = t[i..i + len].to_owned();
        i += len.max(1);
        // a glob, a placeholder in brackets or a variable: not one path
        if next.is_some_and(|c| "*?{<$[".contains(c)) {
            continue;
        }
        while p.ends_with(['.', ',', ':', ';']) {
            p.pop();
        }
        if p.contains("...") {
            continue;
        }
        out.push(p);
    }
    out
}

/// Wrappers and shells before a command's program.
fn program_of(segment: &str) -> Option<String> {
    let ws = words(segment);
    let mut it = ws.iter().peekable();
    while let Some(w) = it.peek() {
        let is_env = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        });
        if is_env || matches!(w.as_str(), "sudo" | "time" | "exec" | "env" | "nice" | "$") {
            it.next();
        } else if w.as_str() == "timeout" {
            it.next();
            it.next();
        } else {
            break;
        }
    }
    it.next().map(|w| {
        w.trim_matches(|c: char| c.is_whitespace() || "\"'()".contains(c))
            .to_owned()
    })
}

/// The programs a code line runs: the first word of each command in it.
fn programs(line: &str) -> Vec<String> {
    let mut segs = vec![line.to_owned()];
    for sep in ["&&", "||", "|", ";", "$(", "`"] {
        segs = segs
            .iter()
            .flat_map(|s| s.split(sep).map(str::to_owned))
            .collect();
    }
    segs.iter()
        .map(|s| {
            s.split(" #")
                .next()
                .unwrap_or("")
                .trim_start_matches('(')
                .to_owned()
        })
        .filter_map(|s| program_of(&s))
        .collect()
}

fn named_paths(pieces: &[Piece]) -> Vec<Named> {
    let mut out = Vec::new();
    for p in pieces {
        let run_here: BTreeSet<String> = match &p.kind {
            k if shell(k) => programs(&p.text).into_iter().collect(),
            // an inline span that is a command line: a program and its arguments
            Kind::Inline if words(&p.text).len() > 1 => {
                programs(&p.text).into_iter().take(1).collect()
            }
            _ => BTreeSet::new(),
        };
        let text = if p.kind == Kind::Prose {
            without_link_targets(&p.text)
        } else {
            p.text.clone()
        };
        for text in repo_paths(&text) {
            out.push(Named {
                line: p.line,
                run: run_here.contains(&text),
                path: PathBuf::from(&text),
                text,
                anchor: None,
                link: false,
            });
        }
    }
    out
}

/// A prose line with its links' targets blanked (they are checked as links,
/// relative to the document).
fn without_link_targets(t: &str) -> String {
    let mut out = t.to_owned();
    let mut from = 0;
    while let Some(k) = t[from..].find("](") {
        let start = from + k + 2;
        let end = t[start..].find(')').map_or(t.len(), |e| start + e);
        out.replace_range(start..end, &" ".repeat(end - start));
        from = start;
    }
    out
}

/// `[text](target)` links in prose lines (code spans are blanked there).
fn links(pieces: &[Piece]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for p in pieces.iter().filter(|p| p.kind == Kind::Prose) {
        let mut from = 0;
        while let Some(k) = p.text[from..].find("](") {
            let start = from + k + 2;
            let rest = &p.text[start..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push((p.line, target.trim_matches(['<', '>']).to_owned()));
            from = start;
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to
/// `-`; the link text of `[text](url)` only.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        text.push_str(&rest[..i]);
        rest = &rest[i + 2..];
        rest = &rest[rest.find(')').map_or(rest.len(), |j| j + 1)..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a Markdown file's headings give (duplicates numbered).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut fenced: Option<char> = None;
    for line in text.lines() {
        if let Some((c, _, _)) = fence(line) {
            fenced = match fenced {
                Some(f) if f == c => None,
                None => Some(c),
                keep => keep,
            };
            continue;
        }
        if fenced.is_some() {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(&line[hashes..]);
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// Problems with the paths of one document (`doc` relative to `root`); also
/// how many it checked.
fn check_paths(root: &Path, doc: &Path, pieces: &[Piece], text: &str) -> (Vec<String>, usize) {
    let name = doc.display();
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut targets: Vec<Named> = Vec::new();
    for (line, target) in links(pieces) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a.to_owned())),
            None => (target.as_str(), None),
        };
        let resolved = if file.is_empty() {
            Some(doc.to_owned())
        } else {
            normalize(&dir.join(file))
        };
        let Some(path) = resolved else {
            if !file.contains("shared/") {
                problems.push(format!(
                    "{name}:{line}: link `{target}` points outside the repository"
                ));
            }
            continue;
        };
        targets.push(Named {
            line,
            text: target.clone(),
            path,
            anchor,
            run: false,
            link: true,
        });
    }
    for n in named_paths(pieces) {
        if n.text.starts_with("reports/") && !n.text.starts_with("reports/examples/") {
            continue;
        }
        targets.push(n);
    }
    for t in &targets {
        checked += 1;
        let full = root.join(&t.path);
        if !full.exists() {
            if placeholder(&t.text) {
                continue;
            }
            problems.push(if t.link {
                format!(
                    "{name}:{}: link `{}` points to {}, which does not exist",
                    t.line,
                    t.text,
                    t.path.display()
                )
            } else {
                format!(
                    "{name}:{}: `{}` does not exist (a path in code or prose is read from the repository root)",
                    t.line, t.text
                )
            });
            continue;
        }
        if let Some(a) = t.anchor.as_deref().filter(|a| !a.is_empty()) {
            let body = if t.path == doc {
                text.to_owned()
            } else if t.path.extension().is_some_and(|e| e == "md") && full.is_file() {
                std::fs::read_to_string(&full).unwrap_or_default()
            } else {
                continue; // anchors of other files (line numbers, ...) are not checked
            };
            if !anchors(&body).contains(a) {
                problems.push(format!(
                    "{name}:{}: link `{}`: {} has no heading whose anchor is #{a}",
                    t.line,
                    t.text,
                    t.path.display()
                ));
            }
        }
    }
    (problems, checked)
}

// ---------------------------------------------------------------------------
// Scripts: what a user is told to run must be runnable.

/// Whether a file named in a document is a script a user runs: one told to
/// be run, a `.sh` or `.py`, one in a `bin/`, or one without an extension
/// that starts with `#!`.
fn is_script(root: &Path, n: &Named) -> bool {
    let p = &n.path;
    let ext = p.extension().and_then(|e| e.to_str());
    let shebang = || std::fs::read(root.join(p)).is_ok_and(|b| b.starts_with(b"#!"));
    n.run
        || matches!(ext, Some("sh" | "py"))
        || p.parent()
            .is_some_and(|d| d.file_name().is_some_and(|f| f == "bin"))
        || (ext.is_none() && shebang())
}

/// Problems with the scripts of one document; also how many it checked.
fn check_scripts(root: &Path, doc: &Path, pieces: &[Piece]) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for n in named_paths(pieces).iter().filter(|n| is_script(root, n)) {
        let full = root.join(&n.path);
        let Ok(meta) = std::fs::metadata(&full) else {
            continue; // a missing path is check_paths' to report
        };
        if !meta.is_file() {
            continue;
        }
        checked += 1;
        let mode = meta.permissions().mode();
        if mode & 0o111 == 0 {
            let why = if n.run { "is run" } else { "is a script" };
            problems.push(format!(
                "{}:{}: `{}` {why} but has no executable bit (mode {:o}): chmod +x {p} && git update-index --chmod=+x {p}",
                doc.display(),
                n.line,
                n.text,
                mode & 0o7777,
                p = n.path.display()
            ));
        }
    }
    (problems, checked)
}

// ---------------------------------------------------------------------------

fn each_document<F>(mut check: F) -> (Vec<String>, usize)
where
    F: FnMut(&Path, &str, &[Piece]) -> (Vec<String>, usize),
{
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents(root()) {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a document is readable");
        let (p, n) = check(&doc, &text, &pieces(&text));
        problems.extend(p);
        checked += n;
    }
    (problems, checked)
}

fn report(what: &str, (problems, checked): (Vec<String>, usize)) {
    assert!(
        checked > 0,
        "no {what} found in the documents: the reader is broken"
    );
    assert!(
        problems.is_empty(),
        "{} of {checked} {what} in README.md and docs/ are wrong:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_nodefall_command_the_docs_show_exists_with_its_flags() {
    let mut helps = Helps::default();
    report(
        "`nodefall` commands",
        each_document(|doc, _, pieces| {
            check_commands(&doc.display().to_string(), pieces, &mut helps)
        }),
    );
}

#[test]
fn every_path_the_docs_name_exists() {
    report(
        "repository paths and links",
        each_document(|doc, text, pieces| check_paths(root(), doc, pieces, text)),
    );
}

#[test]
fn every_script_the_docs_name_is_executable() {
    report(
        "scripts",
        each_document(|doc, _, pieces| check_scripts(root(), doc, pieces)),
    );
}

/// Each check fails on what it is there for: a scratch repository whose
/// document names a missing subcommand, a flag no command has, a missing
/// path, a link to a missing heading and a script without its run bit.
#[test]
fn each_check_fails_on_what_it_is_for() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(
        root.join("docs/real.md"),
        "# Real\n\n## A `code` heading: here\n",
    )
    .unwrap();
    std::fs::write(root.join("scripts/run-me.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        root.join("scripts/run-me.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(root.join("scripts/ok.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        root.join("scripts/ok.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let doc = "\
# Scratch

[fine](real.md#a-code-heading-here), [gone](gone.md), [no heading](real.md#nope).
Run `scripts/ok.sh --now`, then `nodefall plan FILE --context CTX`.

```sh
scripts/run-me.sh --please
nodefall sim upp --name x
nodefall scenario scenarios/x.yaml --no-such-flag   # --not-this-one
KUBECONFIG=$(nodefall sim kubeconfig) kubectl get nodes --all-namespaces
```
";
    let pieces = pieces(doc);
    let name = Path::new("docs/scratch.md");

    let (problems, n) = check_commands("docs/scratch.md", &pieces, &mut Helps::default());
    assert_eq!(n, 4, "{problems:?}");
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("docs/scratch.md:8: ")
            && problems[0].contains("no subcommand `upp`")
    );
    assert!(
        problems[1].starts_with("docs/scratch.md:9: ")
            && problems[1].contains("`nodefall scenario` has no flag --no-such-flag")
    );

    let (problems, _) = check_paths(root, name, &pieces, doc);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with(
        "docs/scratch.md:3: link `gone.md` points to docs/gone.md, which does not exist"
    ));
    assert!(
        problems[1]
            .starts_with("docs/scratch.md:3: link `real.md#nope`: docs/real.md has no heading")
    );
    assert!(problems[2].starts_with("docs/scratch.md:9: `scenarios/x.yaml` does not exist"));

    let (problems, n) = check_scripts(root, name, &pieces);
    assert_eq!(n, 2, "{problems:?}");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with(
        "docs/scratch.md:7: `scripts/run-me.sh` is run but has no executable bit (mode 644)"
    ));
}
