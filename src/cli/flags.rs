//! The run's flags checked against its backend once, before any I/O on a
//! cluster or machine: a flag that only another backend reads is a mistake
//! (a `--cluster` meant for sim on a kind run would be silently ignored), so
//! it is refused by name with exit 2.

use super::ScenarioArgs;
use crate::scenario::model::BackendKind;

/// Which backends read each backend-specific flag the user gave.
fn given(args: &ScenarioArgs) -> Vec<(&'static str, &'static [BackendKind])> {
    use BackendKind::{Command, Kind, Libvirt, Sim, Vagrant};
    let m = &args.machines;
    let mut out: Vec<(&'static str, &'static [BackendKind])> = Vec::new();
    let mut flag = |set: bool, name: &'static str, backends: &'static [BackendKind]| {
        if set {
            out.push((name, backends));
        }
    };
    flag(args.cluster.is_some(), "--cluster", &[Sim]);
    flag(args.keep, "--keep", &[Sim]);
    flag(args.shards.is_some(), "--shards", &[Sim]);
    flag(args.zones.is_some(), "--zones", &[Sim]);
    flag(
        args.container_runtime.is_some(),
        "--container-runtime",
        &[Kind],
    );
    flag(
        args.context.is_some(),
        "--context",
        &[Kind, Libvirt, Command, Vagrant],
    );
    flag(
        m.libvirt_uri.is_some(),
        "--libvirt-uri",
        &[Libvirt, Vagrant],
    );
    flag(!m.domains.is_empty(), "--domain", &[Libvirt, Vagrant]);
    flag(
        m.domain_prefix.is_some(),
        "--domain-prefix",
        &[Libvirt, Vagrant],
    );
    flag(!m.nics.is_empty(), "--nic", &[Libvirt, Vagrant]);
    flag(m.vagrant.vagrant_dir.is_some(), "--vagrant-dir", &[Vagrant]);
    flag(!m.vagrant.machines.is_empty(), "--machine", &[Vagrant]);
    flag(
        m.command.backend_file.is_some(),
        "--backend-file",
        &[Command],
    );
    out
}

/// Refuses the first flag `backend` does not read.
pub(super) fn check(args: &ScenarioArgs, backend: BackendKind) -> Result<(), InvalidFlag> {
    for (name, backends) in given(args) {
        if !backends.contains(&backend) {
            let readers: Vec<String> = backends.iter().map(ToString::to_string).collect();
            let readers = match readers.split_last() {
                Some((last, [])) => format!("{last} backend"),
                Some((last, rest)) => format!("{} or {last} backends", rest.join(", ")),
                None => String::from("no backend"),
            };
            return Err(InvalidFlag(format!(
                "{name} is for the {readers}, and this run uses `{backend}` (from {}); \
                 drop the flag or choose the backend with --backend",
                if args.backend.is_some() {
                    "--backend"
                } else {
                    "the scenario's `backend`, else sim"
                }
            )));
        }
    }
    Ok(())
}

/// A flag's value is wrong (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidFlag(pub String);
