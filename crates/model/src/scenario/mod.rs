//! Scenario files: the YAML format (`model`), loading with positioned errors
//! (`load`, `spans`), and semantic validation into a [`Checked`] scenario
//! (`validate`, with Kubernetes' name rules in `names` and the manifests a
//! scenario applies, read and checked, in `manifest`).

pub mod checked;
pub mod command;
pub mod describe;
pub mod diagnostics;
pub mod expr;
pub mod fault;
pub mod load;
pub mod manifest;
pub mod model;
pub mod names;
pub mod resolve;
pub mod selector;
pub mod spans;
pub mod suggest;
pub mod validate;

use std::path::Path;

use crate::files::Files;

pub use checked::Checked;
pub use load::{Diagnostic, Diagnostics, Error, Result};

/// Reads and validates a scenario file (and the manifests and command file
/// it names) through `files`.
pub fn load(files: &dyn Files, path: &Path) -> Result<Checked> {
    let checked = validate::validate(load::load(files, path)?, files)?;
    tracing::debug!(
        "{}: scenario `{}`, {} steps, backend {}",
        path.display(),
        checked.name,
        checked.steps.len(),
        checked.backend
    );
    Ok(checked)
}
