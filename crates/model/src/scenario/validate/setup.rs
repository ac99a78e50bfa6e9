//! `setup` and `apply`: manifest files (found, parsed) and readiness checks.

use std::path::Path;

use super::{Ctx, DEFAULT_TIMEOUT, workload};
use crate::files::Kind;
use crate::scenario::checked::{ManifestFile, ReadyCheck, Setup, WorkloadKind};
use crate::scenario::load::{Unreadable, not_utf8, read_text, size_text};
use crate::scenario::manifest::{self, MAX_MANIFEST_BYTES, ManifestDoc};
use crate::scenario::model::{self, ApplyItem};

impl Ctx<'_> {
    pub(super) fn manifests(&mut self, path: &str, items: &[ApplyItem]) -> Vec<ManifestFile> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let resolved = self.src.dir.join(&item.file);
            let kind = self.files.kind(&resolved);
            let docs = if kind == Kind::Dir {
                self.err(
                    &p,
                    format!(
                        "manifest `{}` is a directory ({}), not a file",
                        item.file,
                        resolved.display()
                    ),
                    Some(format!(
                        "name each YAML file in it, e.g. `{}/deployment.yaml`",
                        item.file.trim_end_matches('/')
                    )),
                );
                Vec::new()
            } else if kind == Kind::File {
                self.manifest_docs(&p, &resolved)
            } else {
                self.err(
                    &p,
                    format!(
                        "manifest `{}` not found (looked for {})",
                        item.file,
                        resolved.display()
                    ),
                    Some("paths are relative to the scenario file's directory".to_string()),
                );
                Vec::new()
            };
            out.push(ManifestFile {
                file: item.file.clone(),
                path: resolved,
                only: item.only.clone(),
                docs,
            });
        }
        out
    }

    /// Reads and checks a manifest (once per file), as `actions::apply_file`
    /// will read it: every backend's manifests are checked, not only the
    /// current one's, so a scenario is valid or not whatever `--backend` says.
    fn manifest_docs(&mut self, path: &str, file: &Path) -> Vec<ManifestDoc> {
        if let Some(docs) = self.manifests.get(file) {
            return docs.clone();
        }
        let at = self.src.spans.value(path);
        let shown = file.display().to_string();
        let applied_by = match at {
            Some(p) => format!("{}:{}:{} ({path})", self.src.file, p.line, p.col),
            None => format!("{} ({path})", self.src.file),
        };
        let docs = match read_text(self.files, file, MAX_MANIFEST_BYTES) {
            Ok(text) => {
                let (docs, diags) = manifest::parse(&shown, &text, self.namespace);
                for mut d in diags {
                    // say which step applies the file: the same manifest may serve several scenarios
                    let help = d.help.take().map_or(String::new(), |h| format!("{h}; "));
                    d.help = Some(format!("{help}applied by {applied_by}"));
                    self.manifest_diags.push((at, d));
                }
                docs
            }
            Err(Unreadable::Io(e)) => {
                self.err(
                    path,
                    format!("cannot read manifest {shown}: {e}"),
                    Some("a manifest must be a readable UTF-8 YAML file".to_string()),
                );
                Vec::new()
            }
            Err(Unreadable::TooLarge(size)) => {
                self.err(
                    path,
                    format!(
                        "manifest {shown}: {}, over the limit of {} for a manifest",
                        size_text(size),
                        size_text(Some(MAX_MANIFEST_BYTES))
                    ),
                    Some("split it into several files".to_string()),
                );
                Vec::new()
            }
            Err(Unreadable::NotUtf8 { pos, byte, offset }) => {
                let mut d = not_utf8(&shown, pos, byte, offset);
                let help = d.help.take().unwrap_or_default();
                d.help = Some(format!("{help}; applied by {applied_by}"));
                self.manifest_diags.push((at, d));
                Vec::new()
            }
        };
        self.manifests.insert(file.to_path_buf(), docs.clone());
        docs
    }
}

pub(super) fn setup(cx: &mut Ctx<'_>, s: &model::Setup) -> Setup {
    let apply = cx.manifests("setup.apply", &s.apply.0);
    let mut wait_ready = Vec::new();
    for (i, w) in s.wait_ready.0.iter().enumerate() {
        let path = format!("setup.waitReady[{i}]");
        let fields = [
            (WorkloadKind::Deployment, &w.deployment),
            (WorkloadKind::StatefulSet, &w.statefulset),
            (WorkloadKind::DaemonSet, &w.daemonset),
            (WorkloadKind::Pvc, &w.pvc),
            (WorkloadKind::Pdb, &w.pdb),
        ];
        if let Some((kind, name)) = workload(cx, &path, &fields) {
            if w.replicas.is_some() && matches!(kind, WorkloadKind::Pvc | WorkloadKind::Pdb) {
                cx.err(
                    &format!("{path}.replicas"),
                    format!("`replicas` does not apply to a {}", kind.name()),
                    None,
                );
            }
            wait_ready.push(ReadyCheck {
                kind,
                name,
                replicas: w.replicas,
                timeout: w.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0),
            });
        }
    }
    Setup { apply, wait_ready }
}
