//! The binary edge: parse arguments, run, print an error once with its causes,
//! and map it to a documented exit code.

use std::process::ExitCode;

use clap::Parser as _;
use nodefall::cli::{self, Cli};
use nodefall::{exit, report, scenario};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
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
            if logging.format == nodefall::logging::Format::Json {
                let causes: Vec<String> = err.chain().skip(1).map(ToString::to_string).collect();
                tracing::error!(causes = ?causes, "{err}");
            } else {
                eprintln!("error: {err}");
                for cause in err.chain().skip(1) {
                    eprintln!("  caused by: {cause}");
                }
            }
            exit::code(classify(&err))
        }
    }
}

fn classify(err: &anyhow::Error) -> u8 {
    if let Some(e) = err.downcast_ref::<nodefall::runner::session::Error>() {
        e.exit_code()
    } else if err.downcast_ref::<cli::Interrupted>().is_some() {
        exit::INTERRUPTED
    } else if err.downcast_ref::<scenario::Error>().is_some()
        || err.downcast_ref::<cli::InvalidFlag>().is_some()
        || err.downcast_ref::<cli::ProfileMismatch>().is_some()
        || err
            .downcast_ref::<nodefall::discover::inspect::Error>()
            .is_some_and(nodefall::discover::inspect::Error::is_bad_input)
        || err
            .downcast_ref::<nodefall::discover::identity::Error>()
            .is_some()
        || err
            .downcast_ref::<cli::SimNodeError>()
            .is_some_and(cli::SimNodeError::is_bad_input)
        || err
            .downcast_ref::<nodefall::backend::Error>()
            .is_some_and(nodefall::backend::Error::invalid_input)
        || err
            .downcast_ref::<report::Error>()
            .is_some_and(report::Error::is_bad_input)
        || err.downcast_ref::<nodefall::audit::Error>().is_some()
        || err
            .downcast_ref::<nodefall::sim::Error>()
            .is_some_and(nodefall::sim::Error::is_unknown_cluster)
        || err
            .downcast_ref::<nodefall::stats::Error>()
            .is_some_and(nodefall::stats::Error::is_bad_input)
    {
        exit::INVALID_INPUT
    } else {
        exit::INFRASTRUCTURE
    }
}
