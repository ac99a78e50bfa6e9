//! The `scenario` command's raw flags (clap's [`ScenarioArgs`]) and its
//! scenario file resolved into one configuration before any I/O on a
//! cluster or machine, as ripgrep turns its low-level arguments into
//! high-level ones: the backend is chosen once, every flag is checked
//! against it, and a machine backend's settings and files are read and
//! checked. Whatever is wrong here is bad input (exit 2), and nothing has
//! been touched yet. A series (`--repeat`) resolves once for all its runs.

use super::error::Error;
use std::path::Path;

use super::ScenarioArgs;
use super::flags::InvalidFlag;
use crate::backend::kind;
use crate::runner::journal::{BackendRef, KubeRef};
use crate::runner::session::{On, Resolved, SimTarget};
use crate::scenario::{self, model::BackendKind};
use crate::sim;

/// Loads and checks the scenario, then the flags against it.
pub(super) fn resolve(args: &ScenarioArgs) -> Result<Resolved, Error> {
    let checked = scenario::load(&crate::disk::Disk, &args.file)?;
    let backend = args.backend.unwrap_or(checked.backend);
    super::flags::check(args, backend)?;
    if args.repeat > 1 && args.keep {
        return Err(InvalidFlag(
            "--keep keeps a run's throwaway cluster, and --repeat starts one per run: start one \
             with `nodefall sim up --name NAME` and pass --cluster NAME instead"
                .into(),
        )
        .into());
    }
    let on = match backend {
        BackendKind::Sim => {
            let nodes = usize::from(args.nodes);
            let zones = args.zones.clone().unwrap_or_default();
            super::values::check_zones(&zones, nodes, "nodes").map_err(InvalidFlag)?;
            if args.cluster.is_some() && !zones.0.is_empty() {
                return Err(InvalidFlag(
                    "--zones labels the nodes of the throwaway cluster this run starts, and \
                     --cluster runs on one that is up: give the zones to its `nodefall sim up`"
                        .into(),
                )
                .into());
            }
            On::Sim(SimTarget {
                cluster: args.cluster.clone(),
                nodes,
                shards: args
                    .shards
                    .map_or_else(|| sim::auto_shards(nodes), usize::from),
                zones: zones.0,
                keep: args.keep,
            })
        }
        machines => on_machines(args, &checked, machines)?,
    };
    Ok(Resolved {
        checked,
        backend,
        on,
    })
}

/// Makes sure a run can write its reports under `out` before anything
/// starts: creates the directory (as the end of the run would) and writes
/// and removes a file in it. A path that is a file, lies under one, cannot
/// be created or is read-only is bad input, named with why: refused before
/// any cluster starts, not after a whole run whose results would be lost.
/// (A series' directory and each run's lie under `out`.)
pub(super) fn prepare_out(out: &Path) -> Result<(), InvalidFlag> {
    let bad = |why: String| InvalidFlag(format!("--out {}: {why}", out.display()));
    if out.exists() && !out.is_dir() {
        return Err(bad(
            "is not a directory (the reports go into a directory)".into()
        ));
    }
    std::fs::create_dir_all(out)
        .map_err(|e| bad(format!("cannot create the report directory: {e}")))?;
    let probe = out.join(format!(".nodefall-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| bad(format!("cannot write in the report directory: {e}")))?;
    std::fs::remove_file(&probe).map_err(|e| {
        bad(format!(
            "cannot remove a file from the report directory: {e}"
        ))
    })?;
    Ok(())
}

/// A machine backend's settings, from its flags and the scenario's
/// `libvirt:` section; the command backend's file is read and checked.
fn on_machines(
    args: &ScenarioArgs,
    checked: &scenario::Checked,
    backend: BackendKind,
) -> Result<On, Error> {
    let machines = &checked.libvirt;
    let invalid = |e: String| Error::from(InvalidFlag(e));
    let plain = |context: &Option<String>| KubeRef {
        kubeconfig: None,
        context: context.clone(),
    };
    let (backend, kube) = match backend {
        BackendKind::Kind => (
            BackendRef::Kind {
                cluster: args.kind_cluster.clone(),
                runtime: kind::pick_runtime(args.container_runtime.as_deref()),
            },
            kind_kube(
                &args.kind_cluster,
                args.context.as_deref(),
                std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()),
                &crate::kindlab::state_root(),
            ),
        ),
        BackendKind::Libvirt => (
            BackendRef::Libvirt {
                uri: args.machines.uri(machines),
                settings: Box::new(args.machines.libvirt_settings(machines).map_err(invalid)?),
            },
            plain(&args.context),
        ),
        BackendKind::Command => {
            let faults: Vec<_> = super::planned_faults(checked);
            let c = args.machines.command.load(checked, &faults)?;
            for w in &c.warnings {
                tracing::warn!("{w}");
            }
            (
                BackendRef::Command {
                    source: c.source,
                    spec: Box::new(c.spec),
                },
                plain(&args.context),
            )
        }
        BackendKind::Vagrant => {
            let project = args
                .machines
                .vagrant
                .project(&args.file)
                .map_err(crate::backend::Error::from)?;
            let settings = args.machines.vagrant_settings(machines).map_err(invalid)?;
            (
                BackendRef::Vagrant {
                    root: project.root,
                    data: project.data,
                    settings: Box::new(settings),
                },
                plain(&args.context),
            )
        }
        BackendKind::Sim => {
            return Err(Error::msg(
                "the sim backend runs on a simulated cluster, not on machines",
            ));
        }
    };
    Ok(On::Machines { backend, kube })
}

/// Where a kind cluster's client comes from: the kubeconfig `nodefall kind
/// up` wrote for a cluster it made (under `state`), unless `--context` or
/// KUBECONFIG names another; the context `kind-NAME` unless `--context`.
fn kind_kube(cluster: &str, context: Option<&str>, kubeconfig_env: bool, state: &Path) -> KubeRef {
    let made = crate::kindlab::kubeconfig_file(state, cluster);
    KubeRef {
        kubeconfig: (context.is_none() && !kubeconfig_env && made.is_file()).then_some(made),
        context: Some(context.map_or_else(|| format!("kind-{cluster}"), str::to_owned)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn scenario_args(argv: &[&str]) -> ScenarioArgs {
        let cli = Cli::try_parse_from(argv).expect("the flags parse");
        match cli.command {
            Command::Scenario(a) => a,
            _ => panic!("not the scenario command"),
        }
    }

    fn repo(path: &str) -> String {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(path)
            .display()
            .to_string()
    }

    #[test]
    fn a_sim_run_resolves_its_cluster_size_and_shards() {
        let file = repo("scenarios/statefulset-nfs.yaml");
        let r = resolve(&scenario_args(&["nodefall", "scenario", &file])).unwrap();
        assert_eq!(r.backend, BackendKind::Sim);
        assert!(matches!(
            r.on,
            On::Sim(SimTarget {
                cluster: None,
                keep: false,
                ..
            })
        ));
        let big = resolve(&scenario_args(&[
            "nodefall", "scenario", &file, "--nodes", "1000",
        ]))
        .unwrap();
        assert_eq!(
            big.on,
            On::Sim(SimTarget {
                cluster: None,
                nodes: 1000,
                shards: sim::auto_shards(1000),
                zones: Vec::new(),
                keep: false
            })
        );
        let zoned = resolve(&scenario_args(&[
            "nodefall", "scenario", &file, "--nodes", "4", "--zones", "a, b",
        ]))
        .unwrap();
        assert!(matches!(&zoned.on, On::Sim(t) if t.zones == ["a", "b"]));
        for (zones, says) in [
            ("a,b,c,d,e", "names 5 zones for 4 nodes"),
            ("a,,b", "has an empty zone"),
            ("a,b,a", "names zone `a` twice"),
            ("a b", "cannot be a label value"),
        ] {
            let args = [
                "nodefall", "scenario", &file, "--nodes", "4", "--zones", zones,
            ];
            let e = match Cli::try_parse_from(args).map(|c| c.command) {
                Err(e) => e.to_string(),
                Ok(Command::Scenario(a)) => resolve(&a).unwrap_err().to_string(),
                Ok(_) => panic!("not the scenario command"),
            };
            assert!(e.contains(says), "{zones}: {e}");
        }
    }

    #[test]
    fn a_kind_run_resolves_the_journal_s_backend_and_the_context() {
        let file = repo("scenarios/kind-pause-worker.yaml");
        let r = resolve(&scenario_args(&[
            "nodefall",
            "scenario",
            &file,
            "--kind-cluster",
            "lab",
            "--container-runtime",
            "podman",
        ]))
        .unwrap();
        assert_eq!(r.backend, BackendKind::Kind);
        assert_eq!(
            r.on,
            On::Machines {
                backend: BackendRef::Kind {
                    cluster: "lab".into(),
                    runtime: "podman".into()
                },
                kube: KubeRef {
                    kubeconfig: None,
                    context: Some("kind-lab".into())
                },
            }
        );
    }

    #[test]
    fn a_kind_cluster_nodefall_made_is_reached_through_its_own_kubeconfig() {
        let state = std::env::temp_dir().join(format!("nodefall-kube-{}", std::process::id()));
        let file = crate::kindlab::kubeconfig_file(&state, "ho");
        // Not made by nodefall: the default loading rules, context kind-ho.
        assert_eq!(
            kind_kube("ho", None, false, &state),
            KubeRef {
                kubeconfig: None,
                context: Some("kind-ho".into())
            }
        );
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "apiVersion: v1\nkind: Config\n").unwrap();
        assert_eq!(
            kind_kube("ho", None, false, &state),
            KubeRef {
                kubeconfig: Some(file.clone()),
                context: Some("kind-ho".into())
            }
        );
        // An explicit --context or KUBECONFIG wins.
        assert_eq!(
            kind_kube("ho", Some("mine"), false, &state).kubeconfig,
            None
        );
        assert_eq!(
            kind_kube("ho", Some("mine"), false, &state)
                .context
                .as_deref(),
            Some("mine")
        );
        assert_eq!(kind_kube("ho", None, true, &state).kubeconfig, None);
        std::fs::remove_dir_all(&state).unwrap();
    }

    #[test]
    fn flags_and_combinations_the_run_would_ignore_are_refused() {
        let file = repo("scenarios/statefulset-nfs.yaml");
        let err = |argv: &[&str]| {
            let e = resolve(&scenario_args(argv)).unwrap_err();
            assert!(matches!(e, Error::InvalidFlag(_)), "{e:#}");
            e.to_string()
        };
        let keep = err(&["nodefall", "scenario", &file, "--keep", "--repeat", "3"]);
        assert!(keep.contains("--cluster NAME"), "{keep}");
        let domain = err(&["nodefall", "scenario", &file, "--domain", "w1=vm1"]);
        assert!(
            domain.starts_with("--domain is for the libvirt or vagrant backends"),
            "{domain}"
        );
    }

    #[test]
    fn the_report_directory_is_created_or_refused_with_why() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let fresh = tmp.path().join("a").join("b");
        prepare_out(&fresh).expect("created");
        assert!(fresh.is_dir());
        assert_eq!(std::fs::read_dir(&fresh).expect("listed").count(), 0);
        prepare_out(&fresh).expect("an existing directory is fine");
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").expect("written");
        let e = prepare_out(&file).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--out {}: is not a directory (the reports go into a directory)",
                file.display()
            )
        );
        let e = prepare_out(&file.join("sub")).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "--out {}: cannot create the report directory: ",
                file.join("sub").display()
            )),
            "{e}"
        );
    }
}
