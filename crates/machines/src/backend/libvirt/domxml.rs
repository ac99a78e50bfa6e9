//! What the backend reads from a domain's XML (its network interfaces) and
//! the device XML it hands back to change one interface's link state.

/// One `<interface>` of a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// Lower-case `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// `network`, `bridge`, `user`, ...
    pub kind: String,
    /// `<target dev=...>` (absent with user-mode networking).
    pub target: Option<String>,
    /// `<source network|bridge|dev=...>`.
    pub source: Option<String>,
    /// `<link state=...>`: `up` unless it says otherwise.
    pub link_up: bool,
    /// The element's own text, to send back changed.
    xml: String,
}

/// The interfaces of a domain description, in order.
pub fn interfaces(xml: &str) -> Result<Vec<Nic>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("domain XML: {e}"))?;
    let devices = doc
        .root_element()
        .children()
        .find(|n| n.has_tag_name("devices"));
    let Some(devices) = devices else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for iface in devices.children().filter(|n| n.has_tag_name("interface")) {
        let child = |tag: &str| iface.children().find(|n| n.has_tag_name(tag));
        let Some(mac) = child("mac").and_then(|m| m.attribute("address")) else {
            continue;
        };
        let source = child("source").and_then(|s| {
            ["network", "bridge", "dev", "name"]
                .iter()
                .find_map(|a| s.attribute(*a))
                .map(str::to_owned)
        });
        out.push(Nic {
            mac: mac.to_ascii_lowercase(),
            kind: iface.attribute("type").unwrap_or("").to_owned(),
            target: child("target")
                .and_then(|t| t.attribute("dev"))
                .map(str::to_owned),
            source,
            link_up: child("link").and_then(|l| l.attribute("state")) != Some("down"),
            xml: xml[iface.range()].to_owned(),
        });
    }
    Ok(out)
}

/// The interface's XML with its link `up` or down, for
/// `virDomainUpdateDeviceFlags` (what `virsh domif-setlink` sends).
pub fn with_link(nic: &Nic, up: bool) -> String {
    let state = if up { "up" } else { "down" };
    let xml = &nic.xml;
    // Replace an existing <link .../> element, else add one.
    if let Some(start) = xml.find("<link ")
        && let Some(len) = xml[start..].find("/>")
    {
        let mut out = xml.clone();
        out.replace_range(start..start + len + 2, &format!("<link state='{state}'/>"));
        return out;
    }
    match xml.rfind("</interface>") {
        Some(end) => {
            let mut out = xml.clone();
            out.insert_str(end, &format!("<link state='{state}'/>"));
            out
        }
        None => xml.clone(),
    }
}

pub use crate::scenario::names::normal_mac;

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = "<domain type='qemu'><name>n1</name><devices>\
        <interface type='user'><mac address='52:54:00:AA:00:01'/><model type='e1000'/><alias name='net0'/></interface>\
        <interface type='network'><mac address='52:54:00:aa:00:02'/><source network='vagrant-libvirt'/>\
        <target dev='vnet3'/><link state='down'/></interface></devices></domain>";

    #[test]
    fn interfaces_are_read_with_mac_kind_target_and_link() {
        let nics = interfaces(XML).expect("parses");
        assert_eq!(nics.len(), 2);
        assert_eq!(nics[0].mac, "52:54:00:aa:00:01");
        assert_eq!(nics[0].kind, "user");
        assert_eq!(nics[0].target, None);
        assert!(nics[0].link_up);
        assert_eq!(nics[1].source.as_deref(), Some("vagrant-libvirt"));
        assert_eq!(nics[1].target.as_deref(), Some("vnet3"));
        assert!(!nics[1].link_up);
        assert!(interfaces("<domain").is_err());
    }

    #[test]
    fn link_state_is_added_or_replaced_in_the_device_xml() {
        let nics = interfaces(XML).expect("parses");
        let down = with_link(&nics[0], false);
        assert!(down.ends_with("<alias name='net0'/><link state='down'/></interface>"));
        assert!(down.starts_with("<interface type='user'>"));
        let up = with_link(&nics[1], true);
        assert!(up.contains("<link state='up'/>") && !up.contains("down"));
        assert_eq!(
            normal_mac("52:54:00:AA:00:01").as_deref(),
            Some("52:54:00:aa:00:01")
        );
        assert_eq!(normal_mac("52:54:00:AA:00"), None);
    }
}
