//! Every error a command can end with, and the exit code each stands for,
//! decided by one exhaustive match: a new kind of error does not compile
//! until it says whether it is the input's fault (2) or not (3). `main.rs`
//! prints it once with its causes and exits with [`Error::exit_code`].

use crate::exit;

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Scenario(#[from] crate::scenario::Error),
    #[error(transparent)]
    InvalidFlag(#[from] super::InvalidFlag),
    #[error(transparent)]
    Inspect(#[from] crate::discover::inspect::Error),
    #[error(transparent)]
    Identity(#[from] crate::discover::identity::Error),
    #[error(transparent)]
    SimNode(Box<super::SimNodeError>),
    #[error(transparent)]
    Sim(#[from] crate::sim::Error),
    #[error(transparent)]
    Backend(#[from] crate::backend::Error),
    #[error(transparent)]
    Report(#[from] crate::report::Error),
    #[error(transparent)]
    Stats(#[from] crate::stats::Error),
    #[error(transparent)]
    Audit(#[from] crate::audit::Error),
    #[error(transparent)]
    Session(#[from] crate::runner::session::Error),
    /// `predict` was asked about what the cluster does not have.
    #[error(transparent)]
    Predict(Box<crate::predict::Error>),
    #[error(transparent)]
    PredictScenario(Box<crate::predict::scenario::Error>),
    /// `predict --zone` / `--nodes` was asked about what the cluster does
    /// not have, or for a fault it does not predict for a set.
    #[error(transparent)]
    PredictZone(Box<crate::predict::zone::Error>),
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::Error),
    #[error(transparent)]
    Journal(#[from] crate::runner::journal::Error),
    #[error(transparent)]
    Reports(#[from] crate::runner::session::ReportNotWritten),
    #[error(transparent)]
    Interrupted(#[from] super::Interrupted),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A Kubernetes API call's failure, in words (never kube-rs' dump of
    /// the API server's `Status`).
    #[error(transparent)]
    Kube(#[from] crate::actions::ApiError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `kind up` or `kind down` failed; what `up` made was removed first.
    #[error(transparent)]
    KindUp(#[from] crate::kind_up::Error),
    /// What was being done when `source` failed; the code is the source's.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
    /// A failure with no error value behind it (infrastructure).
    #[error("{0}")]
    Message(String),
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Error {
        Error::Kube(e.into())
    }
}

impl From<super::SimNodeError> for Error {
    fn from(e: super::SimNodeError) -> Error {
        Error::SimNode(Box::new(e))
    }
}

impl Error {
    /// 2 when the input (a file, a flag, a pin, a name) is at fault and
    /// nothing was touched; 130 after an interrupt; else 3.
    pub fn exit_code(&self) -> u8 {
        let bad_input = match self {
            // a result or aggregate that cannot be read or compared is the input's
            Error::Scenario(_)
            | Error::InvalidFlag(_)
            | Error::Identity(_)
            | Error::Audit(_)
            | Error::Stats(_)
            | Error::Predict(_)
            | Error::PredictScenario(_)
            | Error::PredictZone(_) => true,
            Error::Inspect(e) => e.is_bad_input(),
            Error::SimNode(e) => e.is_bad_input(),
            Error::Sim(e) => e.is_unknown_cluster(),
            Error::Backend(e) => e.invalid_input(),
            Error::Report(e) => e.is_bad_input(),
            Error::KindUp(e) => return e.exit_code(),
            Error::Session(e) => return e.exit_code(),
            Error::Interrupted(_) => return exit::INTERRUPTED,
            Error::Context { source, .. } => return source.exit_code(),
            Error::Journal(_)
            | Error::Snapshot(_)
            | Error::Reports(_)
            | Error::Io(_)
            | Error::Kube(_)
            | Error::Json(_)
            | Error::Message(_) => false,
        };
        if bad_input {
            exit::INVALID_INPUT
        } else {
            exit::INFRASTRUCTURE
        }
    }

    /// A failure described in words only (exit 3).
    pub fn msg(text: impl Into<String>) -> Error {
        Error::Message(text.into())
    }
}

/// `.context(...)` as anyhow has it, keeping the exit code of what failed.
pub trait Context<T> {
    fn context(self, what: impl Into<String>) -> Result<T, Error>;
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Error>;
}

impl<T, E: Into<Error>> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, Error> {
        self.map_err(|e| Error::Context {
            what: what.into(),
            source: Box::new(e.into()),
        })
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Error> {
        self.map_err(|e| Error::Context {
            what: what().into(),
            source: Box::new(e.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_keeps_the_code_of_what_failed_and_shows_it_as_the_cause() {
        let bad: Result<(), Error> = Err(super::super::InvalidFlag("--nodes 0".into()).into());
        let e = bad.context("resolving the flags").unwrap_err();
        assert_eq!(e.exit_code(), exit::INVALID_INPUT);
        assert_eq!(e.to_string(), "resolving the flags");
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("--nodes 0"));
        let io: Result<(), std::io::Error> = Err(std::io::ErrorKind::NotFound.into());
        assert_eq!(
            io.context("reading x").unwrap_err().exit_code(),
            exit::INFRASTRUCTURE
        );
        assert_eq!(
            Error::from(super::super::Interrupted).exit_code(),
            exit::INTERRUPTED
        );
    }
}
