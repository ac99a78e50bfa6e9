//! Reports of a run: `result.json` (the full record), `report.md` and `junit.xml`.

pub mod result;

pub use result::RunResult;
