//! `setup` and `apply`: manifest files (found, parsed) and readiness checks.

use super::{Ctx, DEFAULT_TIMEOUT, workload};
use crate::scenario::checked::{ManifestFile, ReadyCheck, Setup, WorkloadKind};
use crate::scenario::model::{self, ApplyItem};

impl Ctx<'_> {
    pub(super) fn manifests(&mut self, path: &str, items: &[ApplyItem]) -> Vec<ManifestFile> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let resolved = self.src.dir.join(&item.file);
            if !resolved.is_file() {
                self.err(
                    &p,
                    format!(
                        "manifest `{}` not found (looked for {})",
                        item.file,
                        resolved.display()
                    ),
                    Some("paths are relative to the scenario file's directory".to_string()),
                );
            }
            out.push(ManifestFile {
                file: item.file.clone(),
                path: resolved,
                only: item.only.clone(),
            });
        }
        out
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
