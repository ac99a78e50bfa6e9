//! The libvirt backend as the rest of the crate holds it: over the `virt`
//! crate's connection when built with the `libvirt` feature, over a
//! never-built stand-in without it (so `recover` and vagrant's libvirt
//! provider say how to rebuild rather than fail to compile).

use super::LibvirtBackend;
use crate::backend::Error;
use crate::exec::System;

#[cfg(feature = "libvirt")]
pub type Libvirt = LibvirtBackend<super::virt::Virt, System>;
/// Without the `libvirt` feature there is no real hypervisor to hold.
#[cfg(not(feature = "libvirt"))]
pub type Libvirt = LibvirtBackend<Unbuilt, System>;

/// Stands in for libvirt in a build without it; never constructed.
#[cfg(not(feature = "libvirt"))]
#[derive(Debug)]
pub enum Unbuilt {}

#[cfg(not(feature = "libvirt"))]
impl super::hypervisor::Hypervisor for Unbuilt {
    fn uri(&self) -> &str {
        match *self {}
    }
    fn lookup(
        &self,
        _: &super::hypervisor::DomainKey,
    ) -> Result<super::hypervisor::DomainInfo, super::hypervisor::HvError> {
        match *self {}
    }
    fn names(&self) -> Result<Vec<String>, super::hypervisor::HvError> {
        match *self {}
    }
    fn act(&self, _: &str, _: &super::hypervisor::Op) -> Result<(), super::hypervisor::HvError> {
        match *self {}
    }
    fn addresses(&self, _: &str) -> Result<Vec<(String, Vec<String>)>, super::hypervisor::HvError> {
        match *self {}
    }
}

/// A libvirt backend on `uri` (blocking: connects).
#[cfg(feature = "libvirt")]
pub fn connect_libvirt(uri: &str, settings: super::Settings) -> Result<Libvirt, Error> {
    let hv = super::virt::Virt::open(uri).map_err(|e| Error::Libvirt {
        op: "connect".into(),
        node: "-".into(),
        domain: "-".into(),
        uri: uri.to_owned(),
        message: format!("{e}; is libvirtd running and may this user use {uri}?"),
    })?;
    Ok(LibvirtBackend::new(hv, System, settings))
}

#[cfg(not(feature = "libvirt"))]
pub fn connect_libvirt(_: &str, _: super::Settings) -> Result<Libvirt, Error> {
    Err(Error::NotBuilt {
        what: "this nodefall was built without the `libvirt` feature; rebuild it with \
               `cargo build --features libvirt` (needs libvirt's headers: Debian/Ubuntu \
               libvirt-dev, Fedora libvirt-devel)",
    })
}
