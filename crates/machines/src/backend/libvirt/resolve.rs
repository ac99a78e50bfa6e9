//! Node -> domain, at preflight: which domain, is it really this node
//! (systemUUID), which interface drop-nic cuts, where SSH goes. Pure: the
//! libvirt lookups happen before, in the backend.

use k8s_openapi::api::core::v1::Node;

use super::domxml::{self, Nic};
use super::hypervisor::{DomState, DomainInfo, DomainKey};
use super::{Machine, Settings};
use crate::backend::Error;
use crate::backend::ssh::SshTarget;
use crate::scenario::model::{Effect, FaultKind};

/// The domain a node maps to: `--domain NODE=DOMAIN`, else the prefix plus
/// the node's name, else the node's name.
pub fn domain_key(settings: &Settings, node: &str) -> DomainKey {
    match settings.domains.get(node) {
        Some(d) => DomainKey::parse(d),
        None => DomainKey::Name(format!(
            "{}{node}",
            settings.prefix.as_deref().unwrap_or("")
        )),
    }
}

/// The same UUID in the byte order of SMBIOS before 2.6 (the first three
/// fields swapped), which some firmware still reports.
fn smbios_swapped(uuid: &str) -> Option<String> {
    let p: Vec<&str> = uuid.split('-').collect();
    if p.len() != 5 {
        return None;
    }
    let swap = |s: &str| -> String {
        let b: Vec<&str> = (0..s.len())
            .step_by(2)
            .filter_map(|i| s.get(i..i + 2))
            .collect();
        b.iter().rev().copied().collect()
    };
    Some(format!(
        "{}-{}-{}-{}-{}",
        swap(p[0]),
        swap(p[1]),
        swap(p[2]),
        p[3],
        p[4]
    ))
}

/// The machine UUID the Node reports (`status.nodeInfo.systemUUID`), lowercase.
pub fn system_uuid(node: &Node) -> Option<String> {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.system_uuid.trim().to_ascii_lowercase())
        .filter(|u| !u.is_empty())
}

/// Whether a reported systemUUID is the machine's `uuid`, in either SMBIOS
/// byte order.
pub fn same_uuid(reported: &str, uuid: &str) -> bool {
    reported == uuid || smbios_swapped(reported).as_deref() == Some(uuid)
}

/// What a fault needs of a VM besides the VM itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing more: the hypervisor does it to the whole machine.
    Machine,
    /// Its network interface, whose link the fault sets down or up.
    Nic,
    /// SSH into the guest, where the fault stops or starts a service.
    Ssh,
}

/// What `fault` needs of its VM, by what it does to the machine.
pub fn need(fault: FaultKind) -> Need {
    match fault.effect() {
        Effect::Off | Effect::Paused => Need::Machine,
        Effect::CutOff => Need::Nic,
        Effect::KubeletStopped => Need::Ssh,
    }
}

/// Checks the found domain against the Node and picks what the faults need.
pub fn machine(
    settings: &Settings,
    uri: &str,
    node: &Node,
    info: &DomainInfo,
    addresses: &[(String, Vec<String>)],
    faults: &[FaultKind],
) -> Result<Machine, Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    if let Some(reported) = system_uuid(node)
        && !same_uuid(&reported, &info.uuid)
    {
        return Err(Error::WrongMachine {
            node: name,
            machine: format!("domain `{}`", info.name),
            uuid: info.uuid.clone(),
            system_uuid: reported,
            hint: "map the node to its own domain with --domain NODE=DOMAIN",
        });
    }
    // The domain must be running before a fault that breaks it, or the
    // journaled revert would change what the run did not.
    if faults.iter().any(|f| f.breaks_machine()) && info.state != DomState::Running {
        return Err(Error::NotRunning {
            node: name,
            machine: format!("domain `{}`", info.name),
            state: info.state.to_string(),
        });
    }
    let nics = domxml::interfaces(&info.xml).map_err(|e| Error::Libvirt {
        op: "read domain XML".into(),
        node: name.clone(),
        domain: info.name.clone(),
        uri: uri.to_owned(),
        message: e,
    })?;
    let needs_nic = faults.iter().any(|f| need(*f) == Need::Nic);
    let mac = pick_nic(
        settings, node, &name, &info.name, &nics, addresses, needs_nic,
    )?;
    let needs_ssh = faults.iter().any(|f| need(*f) == Need::Ssh);
    let ssh = settings
        .ssh_hosts
        .get(&name)
        .cloned()
        .or_else(|| node_address(node).map(|host| SshTarget::at(host, None)));
    if needs_ssh && ssh.is_none() {
        return Err(Error::NoSsh { node: name });
    }
    Ok(Machine {
        domain: info.name.clone(),
        uuid: info.uuid.clone(),
        mac,
        ssh,
    })
}

/// The address a Node reports, InternalIP first.
pub fn node_address(node: &Node) -> Option<String> {
    ["InternalIP", "ExternalIP", "Hostname"]
        .iter()
        .find_map(|t| address_of(node, t))
}

/// The Node's address of one type (`InternalIP`, ...).
fn address_of(node: &Node, kind: &str) -> Option<String> {
    let addrs = node.status.as_ref()?.addresses.as_ref()?;
    addrs
        .iter()
        .find(|a| a.type_ == kind)
        .map(|a| a.address.clone())
}

/// The interface drop-nic cuts: `--nic NODE=MAC`; else the one libvirt
/// sees holding the Node's InternalIP; else the Nth when the settings say
/// so (vagrant); else the only one.
fn pick_nic(
    settings: &Settings,
    node: &Node,
    name: &str,
    domain: &str,
    nics: &[Nic],
    addresses: &[(String, Vec<String>)],
    required: bool,
) -> Result<Option<String>, Error> {
    let macs = || nics.iter().map(|n| n.mac.clone()).collect::<Vec<_>>();
    if let Some(asked) = settings.nics.get(name) {
        let want = domxml::normal_mac(asked).unwrap_or_else(|| asked.to_ascii_lowercase());
        return match nics.iter().find(|n| n.mac == want) {
            Some(n) => Ok(Some(n.mac.clone())),
            None => Err(Error::NoNicNamed {
                node: name.to_owned(),
                domain: domain.to_owned(),
                mac: asked.clone(),
                found: macs(),
            }),
        };
    }
    if let Some(ip) = address_of(node, "InternalIP")
        && let Some((mac, _)) = addresses.iter().find(|(_, ips)| ips.contains(&ip))
        && nics.iter().any(|n| &n.mac == mac)
    {
        return Ok(Some(mac.clone()));
    }
    if let Some(i) = settings.nic_index {
        return match nics.get(usize::from(i).wrapping_sub(1)) {
            Some(n) => Ok(Some(n.mac.clone())),
            None if !required => Ok(None),
            None => Err(Error::NoAdapter {
                node: name.to_owned(),
                machine: format!("domain `{domain}`"),
                index: i,
                found: nics
                    .iter()
                    .enumerate()
                    .map(|(k, n)| format!("{} {}", k + 1, n.mac))
                    .collect(),
            }),
        };
    }
    match nics {
        [only] => Ok(Some(only.mac.clone())),
        _ if !required => Ok(None),
        _ => Err(Error::NoNicNamed {
            node: name.to_owned(),
            domain: domain.to_owned(),
            mac: String::new(),
            found: macs(),
        }),
    }
}

/// One line for the run's log: what the node resolved to.
pub fn describe(node: &str, m: &Machine, info: &DomainInfo) -> String {
    let mut s = format!(
        "node {node} = domain {} (UUID {}, {})",
        m.domain, m.uuid, info.state
    );
    if let Some(mac) = &m.mac {
        s.push_str(&format!(", node NIC {mac}"));
    }
    if let Some(t) = &m.ssh {
        s.push_str(&format!(", SSH {t}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus, NodeSystemInfo};

    use super::*;

    const XML1: &str = "<domain><devices><interface type='user'>\
        <mac address='52:54:00:00:00:01'/></interface></devices></domain>";
    const XML2: &str = "<domain><devices>\
        <interface type='network'><mac address='52:54:00:00:00:01'/></interface>\
        <interface type='network'><mac address='52:54:00:00:00:02'/></interface>\
        </devices></domain>";
    const UUID: &str = "0b3c5d7e-1111-2222-3333-444455556666";
    const URI: &str = "qemu:///system";

    fn node(uuid: &str, ip: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("k8s-2".into());
        n.status = Some(NodeStatus {
            node_info: Some(NodeSystemInfo {
                system_uuid: uuid.into(),
                ..NodeSystemInfo::default()
            }),
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..NodeStatus::default()
        });
        n
    }

    fn info(xml: &str, state: DomState) -> DomainInfo {
        DomainInfo {
            name: "kubesprayk8s-2".into(),
            uuid: UUID.into(),
            state,
            xml: xml.into(),
        }
    }

    #[test]
    fn domain_names_come_from_the_map_the_prefix_or_the_node() {
        let mut s = Settings::new();
        assert_eq!(domain_key(&s, "k8s-2"), DomainKey::Name("k8s-2".into()));
        s.prefix = Some("kubespray".into());
        assert_eq!(
            domain_key(&s, "k8s-2"),
            DomainKey::Name("kubesprayk8s-2".into())
        );
        s.domains.insert("k8s-2".into(), UUID.to_uppercase());
        assert_eq!(domain_key(&s, "k8s-2"), DomainKey::Uuid(UUID.into()));
    }

    #[test]
    fn a_name_match_with_another_system_uuid_is_refused() {
        let s = Settings::new();
        let ok = machine(
            &s,
            URI,
            &node(&UUID.to_uppercase(), "10.0.2.15"),
            &info(XML1, DomState::Running),
            &[],
            &[FaultKind::PauseVm],
        );
        assert_eq!(ok.expect("same UUID").uuid, UUID);
        let swapped = smbios_swapped(UUID).expect("swaps");
        assert_eq!(swapped, "7e5d3c0b-1111-2222-3333-444455556666");
        assert!(
            machine(
                &s,
                URI,
                &node(&swapped, "x"),
                &info(XML1, DomState::Running),
                &[],
                &[]
            )
            .is_ok()
        );
        let other = machine(
            &s,
            URI,
            &node("aaaaaaaa-1111-2222-3333-444455556666", "x"),
            &info(XML1, DomState::Running),
            &[],
            &[],
        );
        let e = other.expect_err("another machine");
        assert!(matches!(e, Error::WrongMachine { .. }), "{e}");
        assert!(e.invalid_input());
        // No systemUUID reported: the name is all there is.
        assert!(
            machine(
                &s,
                URI,
                &node("", "x"),
                &info(XML1, DomState::Running),
                &[],
                &[]
            )
            .is_ok()
        );
    }

    #[test]
    fn breaking_faults_need_a_running_domain() {
        let s = Settings::new();
        let e = machine(
            &s,
            URI,
            &node(UUID, "x"),
            &info(XML1, DomState::Paused),
            &[],
            &[FaultKind::PauseVm],
        )
        .expect_err("paused before the run");
        assert!(matches!(e, Error::NotRunning { .. }), "{e}");
        assert!(
            machine(
                &s,
                URI,
                &node(UUID, "x"),
                &info(XML1, DomState::Paused),
                &[],
                &[FaultKind::StopKubelet]
            )
            .is_ok()
        );
    }

    #[test]
    fn the_node_nic_is_the_flagged_one_the_internal_ip_one_or_the_only_one() {
        let mut s = Settings::new();
        let n = node(UUID, "192.168.121.7");
        let only = machine(
            &s,
            URI,
            &n,
            &info(XML1, DomState::Running),
            &[],
            &[FaultKind::DropNic],
        )
        .expect("one NIC");
        assert_eq!(only.mac.as_deref(), Some("52:54:00:00:00:01"));
        let two = info(XML2, DomState::Running);
        let e = machine(&s, URI, &n, &two, &[], &[FaultKind::DropNic])
            .expect_err("two NICs, no way to tell");
        assert!(e.to_string().contains("52:54:00:00:00:02"), "{e}");
        // Not needed: no error, no NIC.
        assert_eq!(
            machine(&s, URI, &n, &two, &[], &[FaultKind::PauseVm])
                .expect("ok")
                .mac,
            None
        );
        let leases = vec![(
            "52:54:00:00:00:02".to_owned(),
            vec!["192.168.121.7".to_owned()],
        )];
        let by_ip = machine(&s, URI, &n, &two, &leases, &[FaultKind::DropNic]).expect("by address");
        assert_eq!(by_ip.mac.as_deref(), Some("52:54:00:00:00:02"));
        s.nics
            .insert("k8s-2".into(), "52:54:00:00:00:01".to_uppercase());
        let flagged = machine(&s, URI, &n, &two, &leases, &[FaultKind::DropNic]).expect("flag");
        assert_eq!(flagged.mac.as_deref(), Some("52:54:00:00:00:01"));
        s.nics.insert("k8s-2".into(), "52:54:00:00:00:09".into());
        assert!(machine(&s, URI, &n, &two, &leases, &[FaultKind::DropNic]).is_err());
    }

    #[test]
    fn an_adapter_index_picks_the_nth_interface_when_the_address_cannot_tell() {
        let mut s = Settings::new();
        s.nic_index = Some(2);
        let n = node(UUID, "192.168.56.12");
        let two = info(XML2, DomState::Running);
        let m = machine(&s, URI, &n, &two, &[], &[FaultKind::DropNic]).expect("the second");
        assert_eq!(m.mac.as_deref(), Some("52:54:00:00:00:02"));
        // The address libvirt sees wins over the index.
        let leases = vec![(
            "52:54:00:00:00:01".to_owned(),
            vec!["192.168.56.12".to_owned()],
        )];
        let m = machine(&s, URI, &n, &two, &leases, &[FaultKind::DropNic]).expect("by address");
        assert_eq!(m.mac.as_deref(), Some("52:54:00:00:00:01"));
        s.nic_index = Some(3);
        let e = machine(&s, URI, &n, &two, &[], &[FaultKind::DropNic]).expect_err("no third");
        assert!(matches!(e, Error::NoAdapter { index: 3, .. }), "{e}");
        assert!(e.to_string().contains("2 52:54:00:00:00:02"), "{e}");
        // Not needed: no error.
        assert!(machine(&s, URI, &n, &two, &[], &[FaultKind::PauseVm]).is_ok());
    }

    #[test]
    fn ssh_goes_to_the_flagged_host_or_the_nodes_address() {
        let mut s = Settings::new();
        let n = node(UUID, "10.0.2.15");
        let m = machine(
            &s,
            URI,
            &n,
            &info(XML1, DomState::Running),
            &[],
            &[FaultKind::StopKubelet],
        )
        .expect("ok");
        assert_eq!(m.ssh.map(|t| t.to_string()).as_deref(), Some("10.0.2.15"));
        s.ssh_hosts.insert(
            "k8s-2".into(),
            SshTarget::parse("127.0.0.1:2222").expect("t"),
        );
        let m = machine(
            &s,
            URI,
            &n,
            &info(XML1, DomState::Running),
            &[],
            &[FaultKind::StopKubelet],
        )
        .expect("ok");
        assert_eq!(
            m.ssh.map(|t| t.to_string()).as_deref(),
            Some("127.0.0.1:2222")
        );
        let mut bare = n.clone();
        bare.status.as_mut().expect("status").addresses = None;
        s.ssh_hosts.clear();
        let e = machine(
            &s,
            URI,
            &bare,
            &info(XML1, DomState::Running),
            &[],
            &[FaultKind::StopKubelet],
        )
        .expect_err("nowhere to SSH");
        assert!(matches!(e, Error::NoSsh { .. }));
    }
}
