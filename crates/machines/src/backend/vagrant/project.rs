//! A Vagrant project's own machine data, read the way Vagrant reads it:
//! `<project>/.vagrant/machines/<machine>/<provider>/id` holds the
//! provider's id of a created machine (VirtualBox: the VM's UUID;
//! vagrant-libvirt: the libvirt domain's UUID), written without a newline
//! and removed by `vagrant destroy`. `VAGRANT_DOTFILE_PATH` moves
//! `.vagrant`, as it does for Vagrant. Nothing here runs Vagrant.

use std::path::{Path, PathBuf};

/// The providers nodefall drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Virtualbox,
    Libvirt,
}

impl Provider {
    /// The provider's directory name under `.vagrant/machines/<machine>/`.
    pub fn dir(self) -> &'static str {
        match self {
            Provider::Virtualbox => "virtualbox",
            Provider::Libvirt => "libvirt",
        }
    }

    fn from_dir(s: &str) -> Option<Provider> {
        match s {
            "virtualbox" => Some(Provider::Virtualbox),
            "libvirt" => Some(Provider::Libvirt),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no Vagrant project: neither {} nor a parent holds .vagrant/machines; pass --vagrant-dir DIR (the \
         directory of the Vagrantfile, after `vagrant up`)",
        .looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" nor ")
    )]
    NoProject { looked: Vec<PathBuf> },
    #[error(
        "{}: no machines created yet (no {}); run `vagrant up` there first",
        .root.display(), .data.display()
    )]
    NothingCreated { root: PathBuf, data: PathBuf },
    #[error("reading {}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "node `{node}` has no Vagrant machine: no machine `{machine}` in {}; the project has: {}; \
         map the node with --machine {node}=MACHINE",
        .data.display(),
        if .found.is_empty() { "none".to_owned() } else { .found.join(", ") }
    )]
    NoMachine {
        node: String,
        machine: String,
        data: PathBuf,
        found: Vec<String>,
    },
    #[error(
        "Vagrant machine `{machine}` (node `{node}`) is not created: {} has no `id` file; run \
         `vagrant up {machine}`",
        .dir.display()
    )]
    NotCreated {
        node: String,
        machine: String,
        dir: PathBuf,
    },
    #[error(
        "Vagrant machine `{machine}` (node `{node}`) is a `{provider}` machine; the vagrant \
         backend drives `virtualbox` and `libvirt` machines (the command backend drives any \
         other: docs/command-backend.md)"
    )]
    OtherProvider {
        node: String,
        machine: String,
        provider: String,
    },
    #[error(
        "Vagrant machine `{machine}` (node `{node}`) was created with both providers ({}); \
         `vagrant destroy` the one not in use",
        .ids.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    TwoProviders {
        node: String,
        machine: String,
        ids: Vec<PathBuf>,
    },
    #[error("{}: `{id}` is not a machine id (expected a UUID)", .path.display())]
    BadId { path: PathBuf, id: String },
}

/// A Vagrant project on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The directory of the Vagrantfile (where `vagrant` runs).
    pub root: PathBuf,
    /// Its `.vagrant` (or `VAGRANT_DOTFILE_PATH`).
    pub data: PathBuf,
}

/// A created machine: which provider, its id, where the id was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub machine: String,
    pub provider: Provider,
    /// The VM's (VirtualBox) or domain's (libvirt) UUID, lowercase.
    pub id: String,
    pub id_file: PathBuf,
}

/// The data directory of a project root, as Vagrant computes it.
fn data_dir(root: &Path, dotfile: Option<&str>) -> PathBuf {
    match dotfile.filter(|d| !d.is_empty()) {
        Some(d) => root.join(d),
        None => root.join(".vagrant"),
    }
}

impl Project {
    /// The project at `dir` (`--vagrant-dir`), else the first of `search`
    /// (each with its parents, as Vagrant looks for its Vagrantfile) that
    /// holds `.vagrant/machines`.
    pub fn find(dir: Option<&Path>, search: &[PathBuf]) -> Result<Project, Error> {
        let dotfile = std::env::var("VAGRANT_DOTFILE_PATH").ok();
        Project::find_with(dir, search, dotfile.as_deref())
    }

    fn find_with(
        dir: Option<&Path>,
        search: &[PathBuf],
        dotfile: Option<&str>,
    ) -> Result<Project, Error> {
        if let Some(root) = dir {
            let data = data_dir(root, dotfile);
            if !data.join("machines").is_dir() {
                return Err(Error::NothingCreated {
                    root: root.to_owned(),
                    data: data.join("machines"),
                });
            }
            return Ok(Project {
                root: root.to_owned(),
                data,
            });
        }
        let mut looked = Vec::new();
        for start in search {
            for root in start.ancestors() {
                if looked.iter().any(|l| l == root) {
                    break;
                }
                looked.push(root.to_owned());
                let data = data_dir(root, dotfile);
                if data.join("machines").is_dir() {
                    return Ok(Project {
                        root: root.to_owned(),
                        data,
                    });
                }
            }
        }
        Err(Error::NoProject {
            looked: search.to_vec(),
        })
    }

    fn machines_dir(&self) -> PathBuf {
        self.data.join("machines")
    }

    /// Every machine Vagrant has data for, sorted, with the providers it
    /// was created with (`k8s-2 (virtualbox)`, `k8s-4 (not created)`).
    pub fn inventory(&self) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        for name in list(&self.machines_dir())? {
            let created: Vec<String> = list(&self.machines_dir().join(&name))?
                .into_iter()
                .filter(|p| self.machines_dir().join(&name).join(p).join("id").is_file())
                .collect();
            out.push(if created.is_empty() {
                format!("{name} (not created)")
            } else {
                format!("{name} ({})", created.join(", "))
            });
        }
        Ok(out)
    }

    /// The created machine `machine`, which node `node` maps to.
    pub fn machine(&self, node: &str, machine: &str) -> Result<Created, Error> {
        let dir = self.machines_dir().join(machine);
        if !dir.is_dir() {
            return Err(Error::NoMachine {
                node: node.to_owned(),
                machine: machine.to_owned(),
                data: self.machines_dir(),
                found: self.inventory()?,
            });
        }
        let with_id: Vec<String> = list(&dir)?
            .into_iter()
            .filter(|p| dir.join(p).join("id").is_file())
            .collect();
        let (provider, name) = match with_id.as_slice() {
            [] => {
                return Err(Error::NotCreated {
                    node: node.to_owned(),
                    machine: machine.to_owned(),
                    dir,
                });
            }
            [one] => match Provider::from_dir(one) {
                Some(p) => (p, one),
                None => {
                    return Err(Error::OtherProvider {
                        node: node.to_owned(),
                        machine: machine.to_owned(),
                        provider: one.clone(),
                    });
                }
            },
            several => {
                return Err(Error::TwoProviders {
                    node: node.to_owned(),
                    machine: machine.to_owned(),
                    ids: several.iter().map(|p| dir.join(p).join("id")).collect(),
                });
            }
        };
        let id_file = dir.join(name).join("id");
        let raw = std::fs::read_to_string(&id_file).map_err(|source| Error::Read {
            path: id_file.clone(),
            source,
        })?;
        let id = raw.trim().to_ascii_lowercase();
        if !crate::scenario::names::is_uuid(&id) {
            return Err(Error::BadId {
                path: id_file,
                id: raw.trim().to_owned(),
            });
        }
        Ok(Created {
            machine: machine.to_owned(),
            provider,
            id,
            id_file,
        })
    }
}

/// The entries of a directory that are directories, sorted.
fn list(dir: &Path) -> Result<Vec<String>, Error> {
    let read = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(read)? {
        let e = e.map_err(read)?;
        if e.path().is_dir() {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VBOX: &str = "0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57";
    const DOMAIN: &str = "7d3c9a51-1f2e-4b6d-8c0a-9e5f4b2d1a63";

    /// A project with k8s-1 (virtualbox), k8s-2 (libvirt), k8s-3 (not
    /// created), k8s-4 (vmware_desktop), k8s-5 (both).
    fn project() -> (tempfile::TempDir, Project) {
        let t = tempfile::tempdir().expect("tempdir");
        let m = t.path().join(".vagrant/machines");
        let id = |machine: &str, provider: &str, id: &str| {
            let d = m.join(machine).join(provider);
            std::fs::create_dir_all(&d).expect("dir");
            if !id.is_empty() {
                std::fs::write(d.join("id"), id).expect("id");
            }
        };
        id("k8s-1", "virtualbox", VBOX);
        id("k8s-2", "libvirt", &DOMAIN.to_uppercase());
        id("k8s-3", "virtualbox", "");
        id("k8s-4", "vmware_desktop", "564d1a2b");
        id("k8s-5", "virtualbox", VBOX);
        id("k8s-5", "libvirt", DOMAIN);
        let p = Project::find_with(Some(t.path()), &[], None).expect("a project");
        (t, p)
    }

    #[test]
    fn both_providers_are_read_from_their_id_files() {
        let (_t, p) = project();
        let vb = p.machine("k8s-1", "k8s-1").expect("virtualbox");
        assert_eq!((vb.provider, vb.id.as_str()), (Provider::Virtualbox, VBOX));
        assert!(
            vb.id_file
                .ends_with(".vagrant/machines/k8s-1/virtualbox/id")
        );
        let lv = p.machine("node-b", "k8s-2").expect("libvirt");
        assert_eq!((lv.provider, lv.id.as_str()), (Provider::Libvirt, DOMAIN));
    }

    #[test]
    fn missing_uncreated_and_foreign_machines_are_named() {
        let (_t, p) = project();
        let e = p
            .machine("worker-9", "worker-9")
            .expect_err("no such machine");
        let m = e.to_string();
        assert!(
            m.contains("k8s-1 (virtualbox), k8s-2 (libvirt), k8s-3 (not created)"),
            "{m}"
        );
        assert!(m.contains("--machine worker-9=MACHINE"), "{m}");
        let e = p.machine("k8s-3", "k8s-3").expect_err("not created");
        assert!(matches!(e, Error::NotCreated { .. }), "{e}");
        assert!(e.to_string().contains("vagrant up k8s-3"), "{e}");
        let e = p.machine("k8s-4", "k8s-4").expect_err("vmware");
        assert!(e.to_string().contains("`vmware_desktop` machine"), "{e}");
        let e = p.machine("k8s-5", "k8s-5").expect_err("both");
        assert!(matches!(e, Error::TwoProviders { .. }), "{e}");
    }

    #[test]
    fn an_id_that_is_not_a_uuid_is_refused() {
        let (t, p) = project();
        std::fs::write(
            t.path().join(".vagrant/machines/k8s-1/virtualbox/id"),
            "kubespray_k8s-1",
        )
        .expect("write");
        let e = p.machine("k8s-1", "k8s-1").expect_err("a name");
        assert!(matches!(e, Error::BadId { .. }), "{e}");
    }

    #[test]
    fn the_project_is_searched_upwards_and_the_dotfile_path_is_honoured() {
        let (t, _) = project();
        let deep = t.path().join("scenarios/sub");
        std::fs::create_dir_all(&deep).expect("dir");
        let p = Project::find_with(None, std::slice::from_ref(&deep), None).expect("found above");
        assert_eq!(p.root, t.path());
        let e = Project::find_with(None, std::slice::from_ref(&deep), Some("elsewhere"))
            .expect_err("moved");
        assert!(matches!(e, Error::NoProject { .. }), "{e}");
        std::fs::rename(t.path().join(".vagrant"), t.path().join("elsewhere")).expect("mv");
        let p = Project::find_with(None, &[deep], Some("elsewhere")).expect("moved");
        assert_eq!(p.data, t.path().join("elsewhere"));
        let e = Project::find_with(Some(&t.path().join("scenarios")), &[], None)
            .expect_err("nothing there");
        assert!(
            e.to_string().contains("run `vagrant up` there first"),
            "{e}"
        );
    }
}
