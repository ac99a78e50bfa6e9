//! What systemd-logind says on the node, read from the stdout of the two
//! commands the preflight runs there (the io crate's `gns::logind`): the
//! inhibitor locks (`systemd-inhibit --list`) and the longest delay logind
//! grants them (`InhibitDelayMaxUSec`), each as a [`Fact`] with where it
//! came from. The parsers take the commands' stdout as it is; see
//! `tests/fixtures/gns/README.md` for the real outputs they are tested
//! against.

use std::time::Duration;

use super::{Fact, Inhibitor};
use crate::duration::external::parse_systemd;

/// A command's output that is not what the parser knows.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`systemd-inhibit --list` output not understood: {0}")]
    InhibitorsOutput(String),
    #[error("InhibitDelayMaxUSec output not understood: {0}")]
    InhibitDelayOutput(String),
}

/// The inhibitor locks from the stdout of `INHIBITORS_COMMAND` (the io
/// crate's `gns::logind`), or from why running it failed (`Err`: the SSH or
/// command error, in words).
/// `source` says where it ran, e.g. `ssh worker-1: systemd-inhibit --list`.
pub fn inhibitors_from(output: Result<&str, &str>, source: &str) -> Fact<Vec<Inhibitor>> {
    match output {
        Ok(stdout) => Fact::from_result(parse_inhibitors(stdout), source),
        Err(e) => Fact::Failed {
            error: e.to_owned(),
            source: source.to_owned(),
        },
    }
}

/// `InhibitDelayMaxUSec` (in ms) from the stdout of `INHIBIT_DELAY_COMMAND`
/// (the io crate's `gns::logind`), or from why running it failed.
pub fn inhibit_delay_from(output: Result<&str, &str>, source: &str) -> Fact<u64> {
    match output {
        Ok(stdout) => Fact::from_result(
            parse_inhibit_delay(stdout).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            source,
        ),
        Err(e) => Fact::Failed {
            error: e.to_owned(),
            source: source.to_owned(),
        },
    }
}

/// Parses `systemd-inhibit --list`. Three layouts exist: the table of
/// systemd 2xx and later (`WHO UID USER PID COMM WHAT WHY MODE`, ending in
/// `N inhibitors listed.` or, when empty, `No inhibitors.`), and the older
/// list of `Who:`/`What:`/`Why:`/`Mode:` blocks (systemd 219, ending in
/// `N inhibitors listed.`).
pub fn parse_inhibitors(stdout: &str) -> Result<Vec<Inhibitor>, Error> {
    let bad = |m: String| Error::InhibitorsOutput(m);
    let lines: Vec<&str> = stdout.lines().collect();
    let listed = lines.iter().find_map(|l| {
        l.trim()
            .strip_suffix(" inhibitors listed.")
            .and_then(|n| n.parse::<usize>().ok())
    });
    let found = if lines.iter().any(|l| l.trim_start().starts_with("Who:")) {
        legacy(&lines).map_err(bad)?
    } else if let Some(h) = lines.iter().position(|l| is_header(l)) {
        table(&lines[h..]).map_err(bad)?
    } else if listed == Some(0) || lines.iter().any(|l| l.trim() == "No inhibitors.") {
        Vec::new()
    } else {
        let first = lines.iter().find(|l| !l.trim().is_empty()).unwrap_or(&"");
        return Err(bad(format!(
            "neither the `WHO ... MODE` table nor `Who:` entries, and no inhibitor count; it begins `{}`",
            first.trim()
        )));
    };
    if let Some(n) = listed
        && n != found.len()
    {
        return Err(bad(format!(
            "it says {n} inhibitors listed but {} were read",
            found.len()
        )));
    }
    Ok(found)
}

fn is_header(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("WHO ") && t.contains(" WHAT") && t.trim_end().ends_with("MODE")
}

/// The `Who:` blocks of systemd before the table format.
fn legacy(lines: &[&str]) -> Result<Vec<Inhibitor>, String> {
    let mut out = Vec::new();
    let mut cur: Option<Inhibitor> = None;
    for line in lines {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim().to_owned();
        match key {
            "Who" => {
                if let Some(done) = cur.take() {
                    return Err(format!("the entry of `{}` has no `Mode:`", done.who));
                }
                cur = Some(legacy_who(&value));
            }
            "What" | "Why" | "Mode" => {
                let Some(entry) = cur.as_mut() else {
                    return Err(format!("`{key}:` before any `Who:`"));
                };
                match key {
                    "What" => entry.what = value,
                    "Why" => entry.why = value,
                    _ => {
                        entry.mode = value;
                        out.extend(cur.take());
                    }
                }
            }
            _ => {}
        }
    }
    match cur {
        Some(e) => Err(format!("the entry of `{}` has no `Mode:`", e.who)),
        None => Ok(out),
    }
}

/// `kubelet (UID 0/root, PID 918/kubelet)`.
fn legacy_who(value: &str) -> Inhibitor {
    let (who, rest) = match value.rsplit_once(" (UID ") {
        Some((w, r)) => (w, Some(r.trim_end_matches(')'))),
        None => (value, None),
    };
    let mut e = Inhibitor {
        who: who.to_owned(),
        uid: None,
        user: None,
        pid: None,
        comm: None,
        what: String::new(),
        why: String::new(),
        mode: String::new(),
    };
    if let Some((uid_part, pid_part)) = rest.and_then(|r| r.split_once(", PID ")) {
        let (uid, user) = uid_part.split_once('/').unwrap_or((uid_part, ""));
        let (pid, comm) = pid_part.split_once('/').unwrap_or((pid_part, ""));
        e.uid = uid.parse().ok();
        e.user = Some(user.to_owned()).filter(|u| !u.is_empty());
        e.pid = pid.parse().ok();
        e.comm = Some(comm.to_owned()).filter(|c| !c.is_empty());
    }
    e
}

/// The table, from its header line on: columns are left-aligned at the
/// header's words, so each cell is the text between two column starts.
fn table(lines: &[&str]) -> Result<Vec<Inhibitor>, String> {
    let header = lines.first().copied().unwrap_or_default();
    let chars: Vec<char> = header.chars().collect();
    let mut columns: Vec<(usize, String)> = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        if !c.is_whitespace() && (i == 0 || chars[i - 1].is_whitespace()) {
            let word: String = chars[i..]
                .iter()
                .take_while(|c| !c.is_whitespace())
                .collect();
            columns.push((i, word));
        }
    }
    for needed in ["WHO", "WHAT", "MODE"] {
        if !columns.iter().any(|(_, w)| w == needed) {
            return Err(format!(
                "the table header has no {needed} column: `{header}`"
            ));
        }
    }
    let mut out = Vec::new();
    for line in &lines[1..] {
        let t = line.trim();
        if t.is_empty() || t.ends_with("inhibitors listed.") {
            break;
        }
        let row = aligned(line, &columns)
            .or_else(|| by_tokens(line, &columns))
            .ok_or_else(|| format!("a table row is not understood: `{t}`"))?;
        out.push(row);
    }
    Ok(out)
}

fn cell<'a>(cells: &'a [(String, String)], name: &str) -> Option<&'a str> {
    cells
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn inhibitor(cells: &[(String, String)]) -> Option<Inhibitor> {
    let num = |name: &str| -> Option<Option<u32>> {
        match cell(cells, name) {
            None => Some(None),
            Some(v) => v.parse().ok().map(Some),
        }
    };
    let mode = cell(cells, "MODE")?.to_owned();
    if mode != "delay" && mode != "block" {
        return None;
    }
    Some(Inhibitor {
        who: cell(cells, "WHO")?.to_owned(),
        uid: num("UID")?,
        user: cell(cells, "USER").map(str::to_owned),
        pid: num("PID")?,
        comm: cell(cells, "COMM").map(str::to_owned),
        what: cell(cells, "WHAT").filter(|w| !w.is_empty())?.to_owned(),
        why: cell(cells, "WHY").unwrap_or_default().to_owned(),
        mode,
    })
}

/// Cuts a row at the header's column starts, if it lines up with them.
fn aligned(line: &str, columns: &[(usize, String)]) -> Option<Inhibitor> {
    let chars: Vec<char> = line.chars().collect();
    let mut cells = Vec::new();
    for (k, (start, name)) in columns.iter().enumerate() {
        let end = columns.get(k + 1).map_or(chars.len(), |(s, _)| *s);
        if *start > 0 && *start < chars.len() && !chars[start - 1].is_whitespace() {
            return None;
        }
        let text: String = chars
            .get(*start..end.min(chars.len()))
            .unwrap_or_default()
            .iter()
            .collect();
        cells.push((name.clone(), text.trim().to_owned()));
    }
    inhibitor(&cells)
}

/// For a row that does not line up (re-typed, or a cell wider than its
/// header): the standard eight columns found by their shape, UID and PID
/// being numbers and MODE the last word. WHO and WHY may hold spaces.
fn by_tokens(line: &str, columns: &[(usize, String)]) -> Option<Inhibitor> {
    let standard = ["WHO", "UID", "USER", "PID", "COMM", "WHAT", "WHY", "MODE"];
    if columns.iter().map(|(_, n)| n.as_str()).ne(standard) {
        return None;
    }
    let t: Vec<&str> = line.split_whitespace().collect();
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let n = t.len();
    let i = (1..n.saturating_sub(5)).find(|&i| numeric(t[i]) && numeric(t[i + 2]))?;
    let cells: Vec<(String, String)> = [
        ("WHO", t[..i].join(" ")),
        ("UID", t[i].to_owned()),
        ("USER", t[i + 1].to_owned()),
        ("PID", t[i + 2].to_owned()),
        ("COMM", t[i + 3].to_owned()),
        ("WHAT", t[i + 4].to_owned()),
        ("WHY", t[i + 5..n - 1].join(" ")),
        ("MODE", t[n - 1].to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    inhibitor(&cells)
}

/// Parses `InhibitDelayMaxUSec` from `busctl get-property` (`t 5000000`,
/// microseconds) or from `loginctl show-session` (`InhibitDelayMaxUSec=5s`,
/// alone with `-p` or among all the manager's properties).
pub fn parse_inhibit_delay(stdout: &str) -> Result<Duration, Error> {
    let bad = |m: String| Error::InhibitDelayOutput(m);
    for line in stdout.lines().map(str::trim) {
        if let Some(us) = line.strip_prefix("t ") {
            return us
                .trim()
                .parse::<u64>()
                .map(Duration::from_micros)
                .map_err(|_| bad(format!("`{line}` is not `t <microseconds>`")));
        }
        if let Some(v) = line.strip_prefix("InhibitDelayMaxUSec=") {
            return parse_systemd(v).map_err(bad);
        }
    }
    let first = stdout.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(bad(format!(
        "neither `t <microseconds>` (busctl) nor `InhibitDelayMaxUSec=` (loginctl); it begins `{}`",
        first.trim()
    )))
}

#[cfg(test)]
#[path = "logind_tests.rs"]
mod tests;
