//! Fuzz-style robustness: random and mutated YAML must never make the loader,
//! validator or planner panic. Deterministic (seeded) so a failure reproduces.

use std::panic;
use std::path::Path;

use nodefall::profile::TimingProfile;
use nodefall::{plan, scenario};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    ":",
    "-",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "  ",
    "'",
    "\"",
    "..",
    "+-",
    "%",
    "*",
    "grace",
    "toleration",
    "0s",
    "-5s",
    "1h",
    "99999999999999999999s",
    "NaN",
    "~",
    "null",
    "&a",
    "*a",
    "!tag",
    "true",
    "Unknown",
    "?",
    "#",
    "\t",
    "é",
    "∞",
    "fault: pause-vm",
    "expect: {}",
    "action: {}",
    "within: ",
    "since: ",
    "node: ",
    "pods: ",
    "---",
];

fn mutate(rng: &mut Rng, base: &str) -> String {
    let mut s: Vec<char> = base.chars().collect();
    for _ in 0..=rng.below(6) {
        let at = rng.below(s.len() + 1);
        match rng.below(4) {
            0 if !s.is_empty() => {
                let end = (at + rng.below(20)).min(s.len());
                s.drain(at.min(end)..end);
            }
            1 => {
                let tok: Vec<char> = TOKENS[rng.below(TOKENS.len())].chars().collect();
                s.splice(at..at, tok);
            }
            2 if !s.is_empty() => {
                let from = rng.below(s.len());
                let end = (from + rng.below(40)).min(s.len());
                let chunk: Vec<char> = s[from..end].to_vec();
                s.splice(at..at, chunk);
            }
            _ => s.insert(at, char::from(b' ' + (rng.below(95) as u8))),
        }
    }
    s.into_iter().collect()
}

/// Loads, validates and plans `text`; when refused, the errors that carry
/// no position (every error about a scenario's text must say where).
fn exercise(text: &str) -> Option<Vec<String>> {
    let dir = Path::new("scenarios");
    let unpositioned = |e: &scenario::load::Error| match e {
        scenario::load::Error::Invalid(d) => {
            d.0.iter()
                .filter(|d| d.pos.is_none())
                .map(ToString::to_string)
                .collect()
        }
        other => vec![other.to_string()],
    };
    let loaded = match scenario::load::load_str("fuzz.yaml", dir, text) {
        Ok(l) => l,
        Err(e) => return Some(unpositioned(&e)),
    };
    let checked = match scenario::validate::validate(loaded, &nodefall::disk::Disk) {
        Ok(c) => c,
        Err(e) => return Some(unpositioned(&e)),
    };
    let _ = plan::check_all_profiles(&checked);
    if let Ok(p) = plan::resolve(checked, &TimingProfile::fast(), None) {
        let _ = plan::render_text(&p);
    }
    None
}

#[test]
fn mutated_scenarios_never_panic_and_every_error_says_where() {
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["scenarios", "tests/fixtures/bad"] {
        for entry in std::fs::read_dir(dir).expect("fixture dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                paths.push(path);
            }
        }
    }
    // read_dir's order is the file system's: sorted, a seed replays the same
    // cases everywhere.
    paths.sort();
    let seeds: Vec<String> = paths
        .iter()
        // one fixture is deliberately not UTF-8
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).expect("readable")).into_owned())
        .collect();
    let mut rng = Rng(0x005E_ED0F_F00D);
    let mut errors = 0usize;
    let mut unpositioned = Vec::new();
    for round in 0..3000 {
        let base = &seeds[round % seeds.len()];
        let text = if round % 10 == 0 {
            // plain random printable noise
            (0..rng.below(200))
                .map(|_| char::from(b' ' + (rng.below(95) as u8)))
                .collect()
        } else {
            mutate(&mut rng, base)
        };
        let result = panic::catch_unwind(|| exercise(&text));
        let Ok(found) = result else {
            panic!("panic on input (round {round}):\n{text}");
        };
        errors += usize::from(found.is_some());
        for e in found.unwrap_or_default() {
            unpositioned.push(format!("round {round}: {e}\n--- input:\n{text}\n---"));
        }
    }
    // The mutations do reach the checks (not all rejected or all accepted
    // without a look)...
    assert!(errors > 0, "no mutated file was refused");
    // ...and every refusal says where in the file.
    assert!(
        unpositioned.is_empty(),
        "{} errors without a position, e.g.:\n{}",
        unpositioned.len(),
        unpositioned
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
