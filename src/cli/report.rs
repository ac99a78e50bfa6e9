//! `nodefall report ...`: work with the reports of past runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::exit;
use crate::report;

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Re-render `report.md` and `junit.xml` from a run's `result.json`.
    Render(RenderArgs),
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The run's `result.json`.
    #[arg(value_name = "RESULT_JSON")]
    pub result: PathBuf,
    /// Write the reports here instead of next to the `result.json`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(cmd: ReportCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ReportCommand::Render(args) => {
            let result = report::read_result(&args.result)?;
            let dir = match &args.out {
                Some(dir) => dir.clone(),
                None => match args.result.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => Path::new(".").to_path_buf(),
                },
            };
            let report = report::write_rendered(&dir, &result)?;
            println!("{}", report.display());
            Ok(exit::code(exit::PASS))
        }
    }
}
