//! The binary edge: parse arguments, run, print an error once with its causes,
//! and map it to a documented exit code.

use std::error::Error as _;
use std::process::ExitCode;

use clap::Parser as _;
use nodefall::cli::{self, Cli};
use nodefall::exit;

/// mimalloc (docs/observer-precision.md has its figures), counted: what is
/// allocated now goes into the per-phase memory lines
/// (`nodefall_io::memory`). The `system-allocator` feature leaves the C
/// library's, which heap profilers hook (`HEAP_PROFILE=1
/// scripts/bench-scale.sh`).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: cap::Cap<mimalloc::MiMalloc> = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);
#[cfg(feature = "system-allocator")]
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

fn heap_in_use() -> usize {
    ALLOCATOR.allocated()
}

fn main() -> ExitCode {
    nodefall::memory::count_heap_with(heap_in_use);
    let cli = Cli::parse();
    let logging = cli.logging();
    if let Err(e) = nodefall::logging::init(logging) {
        eprintln!("error: {e}");
        return exit::code(exit::INVALID_INPUT);
    }
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            // Printed once, here.
            let mut causes = Vec::new();
            let mut cause = err.source();
            while let Some(c) = cause {
                causes.push(c.to_string());
                cause = c.source();
            }
            if logging.format == nodefall::logging::Format::Json {
                tracing::error!(causes = ?causes, "{err}");
            } else {
                eprintln!("error: {err}");
                for cause in &causes {
                    eprintln!("  caused by: {cause}");
                }
            }
            exit::code(err.exit_code())
        }
    }
}
