//! One backend value for every kind of machine a run can break, so the CLI
//! (`nodefall scenario`, `nodefall recover`) has one code path: built from
//! the run's [`BackendRef`], which the journal keeps for `recover`.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use super::command::CommandBackend;
use super::kind::KindBackend;
use super::libvirt::{self, Libvirt, connect_libvirt};
use super::sim::SimBackend;
use super::vagrant::{VagrantBackend, project::Project};
use super::{Error, NodeFaults};
use crate::exec::System;
use crate::scenario::model::FaultKind;

/// Which machines the run's faults went to, enough to reach them again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum BackendRef {
    Sim {
        root: PathBuf,
        cluster: String,
        /// Started for this run and removed after it.
        throwaway: bool,
    },
    Kind {
        cluster: String,
        runtime: String,
    },
    /// libvirt domains; each fault's memo holds the domain's UUID.
    Libvirt {
        uri: String,
        settings: Box<crate::backend::libvirt::Settings>,
    },
    /// A backend file's commands; each fault's memo holds its revert,
    /// substituted, which is what `recover` runs.
    Command {
        /// The file (or `SCENARIO (command:)`) the commands came from.
        source: String,
        spec: Box<crate::scenario::command::CommandFile>,
    },
    /// A Vagrant project's machines; each fault's memo holds the machine
    /// (provider, UUID, SSH path).
    Vagrant {
        /// The project's directory and its `.vagrant`.
        root: PathBuf,
        data: PathBuf,
        settings: Box<crate::backend::vagrant::Settings>,
    },
}

impl BackendRef {
    pub fn kind(&self) -> &'static str {
        match self {
            BackendRef::Sim { .. } => "sim",
            BackendRef::Kind { .. } => "kind",
            BackendRef::Libvirt { .. } => "libvirt",
            BackendRef::Command { .. } => "command",
            BackendRef::Vagrant { .. } => "vagrant",
        }
    }
}

#[derive(Debug)]
pub enum AnyBackend {
    Sim(Box<SimBackend>),
    Kind(KindBackend<System>),
    Libvirt(Box<Libvirt>),
    Command(Box<CommandBackend>),
    Vagrant(Box<VagrantBackend>),
}

impl AnyBackend {
    /// Opens the backend a run (or a killed run's journal) names. A sim
    /// cluster is opened by the caller, who owns its lifecycle.
    pub fn open(r: &BackendRef) -> Result<AnyBackend, Error> {
        match r {
            BackendRef::Sim { .. } => Err(Error::NotBuilt {
                what: "a sim backend is opened with its cluster",
            }),
            BackendRef::Kind { cluster, runtime } => Ok(AnyBackend::Kind(KindBackend::discover(
                cluster, runtime, System,
            )?)),
            BackendRef::Libvirt { uri, settings } => open_libvirt(uri, settings),
            BackendRef::Command { source, spec } => Ok(AnyBackend::Command(Box::new(
                CommandBackend::new((**spec).clone(), source.clone()),
            ))),
            BackendRef::Vagrant {
                root,
                data,
                settings,
            } => Ok(AnyBackend::Vagrant(Box::new(VagrantBackend::new(
                Project {
                    root: root.clone(),
                    data: data.clone(),
                },
                (**settings).clone(),
            )))),
        }
    }
}

fn open_libvirt(uri: &str, settings: &libvirt::Settings) -> Result<AnyBackend, Error> {
    Ok(AnyBackend::Libvirt(Box::new(connect_libvirt(
        uri,
        settings.clone(),
    )?)))
}

macro_rules! each {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Sim($b) => $e,
            AnyBackend::Kind($b) => $e,
            AnyBackend::Libvirt($b) => $e,
            AnyBackend::Command($b) => $e,
            AnyBackend::Vagrant($b) => $e,
        }
    };
}

impl NodeFaults for AnyBackend {
    fn name(&self) -> &'static str {
        each!(self, b => b.name())
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        each!(self, b => b.describe(node, fault))
    }

    async fn resolve(&mut self, node: &Node, faults: &[FaultKind]) -> Result<String, Error> {
        each!(self, b => b.resolve(node, faults).await)
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        each!(self, b => b.inject(node, fault).await)
    }

    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        each!(self, b => b.restore(node, revert).await)
    }

    async fn shell(&self, node: &str, command: &str) -> Option<(String, Result<String, String>)> {
        each!(self, b => b.shell(node, command).await)
    }

    fn played_shutdown_grace(
        &self,
        node: &str,
    ) -> Option<(std::time::Duration, std::time::Duration, String)> {
        each!(self, b => b.played_shutdown_grace(node))
    }

    fn memo(&self, node: &str, fault: FaultKind) -> Option<String> {
        each!(self, b => b.memo(node, fault))
    }

    fn eyes(&self) -> Option<std::sync::Arc<dyn super::Eyes>> {
        each!(self, b => b.eyes())
    }

    fn take_commands(&mut self) -> Vec<crate::record::CommandRecord> {
        each!(self, b => b.take_commands())
    }

    fn remember(&mut self, node: &str, memo: &str) {
        each!(self, b => b.remember(node, memo));
    }

    fn batches(&self, nodes: &[String], fault: FaultKind) -> bool {
        each!(self, b => b.batches(nodes, fault))
    }

    async fn inject_batch(
        &mut self,
        nodes: &[String],
        fault: FaultKind,
        parallel: usize,
    ) -> Vec<Option<super::Batched>> {
        each!(self, b => b.inject_batch(nodes, fault, parallel).await)
    }

    fn fork(&self) -> Option<AnyBackend> {
        Some(match self {
            AnyBackend::Sim(b) => AnyBackend::Sim(Box::new(b.fork()?)),
            AnyBackend::Kind(b) => AnyBackend::Kind(b.fork()?),
            AnyBackend::Libvirt(b) => AnyBackend::Libvirt(Box::new(b.fork()?)),
            AnyBackend::Command(b) => AnyBackend::Command(Box::new(b.fork()?)),
            AnyBackend::Vagrant(b) => AnyBackend::Vagrant(Box::new(b.fork()?)),
        })
    }

    fn join(&mut self, node: &str, fork: AnyBackend) {
        match (self, fork) {
            (AnyBackend::Sim(b), AnyBackend::Sim(f)) => b.join(node, *f),
            (AnyBackend::Kind(b), AnyBackend::Kind(f)) => b.join(node, f),
            (AnyBackend::Libvirt(b), AnyBackend::Libvirt(f)) => b.join(node, *f),
            (AnyBackend::Command(b), AnyBackend::Command(f)) => b.join(node, *f),
            (AnyBackend::Vagrant(b), AnyBackend::Vagrant(f)) => b.join(node, *f),
            // A fork is always of its own backend's kind.
            _ => {}
        }
    }
}
