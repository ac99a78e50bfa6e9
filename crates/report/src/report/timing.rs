//! The report's timing section: each value the windows were evaluated
//! with, and where it came from (set, discovered, scenario, assumed).

use std::fmt::Write as _;

use super::format::{cell, table};
use crate::record::RunResult;

/// Written only when the profile says where its values came from (a
/// result of an older nodefall, or a built-in profile as is, does not).
pub fn section(out: &mut String, r: &RunResult) {
    let p = &r.profile;
    if p.origins.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Timing\n");
    let assumed = p.origins.values().filter(|o| o.word() == "assumed").count();
    let _ = writeln!(
        out,
        "The windows were evaluated with these values (profile `{}`){}.\n",
        cell(&p.name),
        match assumed {
            0 => String::new(),
            n => format!("; {n} of them are assumed, and a window that depends on one says so"),
        }
    );
    let rows = p
        .rows()
        .into_iter()
        .map(|[name, value, word, detail]| [format!("`{name}`"), value, word, cell(&detail)])
        .collect();
    out.push_str(&table(["value", "", "origin", "where"], rows));
    out.push('\n');
}
