//! The control-plane binaries the simulated cluster runs, in a per-user cache
//! keyed by version. Missing ones are provisioned by the embedded
//! `scripts/provision-binaries.sh` (built with Go where available, else
//! downloaded from the official releases), never rebuilt once cached.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::Error;

/// The provisioning recipe, shared with CI (`scripts/provision-binaries.sh`).
const PROVISION_SCRIPT: &str = include_str!("../../scripts/provision-binaries.sh");

/// Component versions. Defaults match the script; the same environment
/// variables override both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Versions {
    pub kubernetes: String,
    pub etcd: String,
    pub kwok: String,
}

impl Versions {
    pub fn from_env() -> Versions {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Versions {
            kubernetes: var("NODEFALL_K8S_VERSION", "v1.35.4"),
            etcd: var("NODEFALL_ETCD_VERSION", "v3.5.35"),
            kwok: var("NODEFALL_KWOK_VERSION", "v0.8.0"),
        }
    }
}

/// Paths of the binaries of one version set.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub versions: Versions,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub etcd: PathBuf,
    pub kwok: PathBuf,
}

/// The cache root: `$NODEFALL_CACHE`, else `$XDG_CACHE_HOME/nodefall`, else `~/.cache/nodefall`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = env_path("NODEFALL_CACHE") {
        return dir;
    }
    if let Some(dir) = env_path("XDG_CACHE_HOME") {
        return dir.join("nodefall");
    }
    home().join(".cache").join("nodefall")
}

pub(super) fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

pub(super) fn home() -> PathBuf {
    env_path("HOME").unwrap_or_else(|| PathBuf::from("/tmp"))
}

impl Binaries {
    /// Where the binaries of `versions` live under `cache`.
    pub fn at(cache: &Path, versions: Versions) -> Binaries {
        let bin = cache.join("bin");
        let k8s = bin.join(format!("kubernetes-{}", versions.kubernetes));
        Binaries {
            kube_apiserver: k8s.join("kube-apiserver"),
            kube_controller_manager: k8s.join("kube-controller-manager"),
            kube_scheduler: k8s.join("kube-scheduler"),
            etcd: bin.join(format!("etcd-{}", versions.etcd)).join("etcd"),
            kwok: bin.join(format!("kwok-{}", versions.kwok)).join("kwok"),
            versions,
        }
    }

    pub fn all(&self) -> [&Path; 5] {
        [
            &self.kube_apiserver,
            &self.kube_controller_manager,
            &self.kube_scheduler,
            &self.etcd,
            &self.kwok,
        ]
    }

    pub fn missing(&self) -> Vec<&Path> {
        self.all().into_iter().filter(|p| !p.is_file()).collect()
    }

    /// The cached binaries, provisioning whatever is missing first. The
    /// script's progress goes to stderr.
    pub fn ensure() -> Result<Binaries, Error> {
        let cache = cache_root();
        let binaries = Binaries::at(&cache, Versions::from_env());
        if binaries.missing().is_empty() {
            return Ok(binaries);
        }
        eprintln!(
            "nodefall: provisioning the simulated cluster's binaries into {} (once per version)",
            cache.display()
        );
        let status = Command::new("bash")
            .arg("-c")
            .arg(PROVISION_SCRIPT)
            .arg("provision-binaries")
            .env("NODEFALL_CACHE", &cache)
            .env("NODEFALL_K8S_VERSION", &binaries.versions.kubernetes)
            .env("NODEFALL_ETCD_VERSION", &binaries.versions.etcd)
            .env("NODEFALL_KWOK_VERSION", &binaries.versions.kwok)
            .status()
            .map_err(|source| Error::io("running bash for provisioning", source))?;
        let missing: Vec<PathBuf> = binaries
            .missing()
            .into_iter()
            .map(Path::to_path_buf)
            .collect();
        if !status.success() || !missing.is_empty() {
            return Err(Error::Provision { status, missing });
        }
        Ok(binaries)
    }
}
