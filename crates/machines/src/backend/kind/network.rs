//! A kind node's address on its Docker network, before and after a fault
//! that takes it off (poweroff, shutdown, drop-nic).
//!
//! Docker gives a container a chosen address back (`docker network connect
//! --ip`) only on a network whose IPv4 subnet was configured by its user.
//! `nodefall kind up` makes such a network; `kind create cluster` does not:
//! it gives its `kind` network an IPv6 subnet of its own and lets Docker pick
//! the IPv4 one (sigs.k8s.io/kind v0.33.0,
//! `pkg/cluster/internal/providers/docker/network.go`), and Docker refuses
//! `--ip` there ("user specified IP address is supported only when connecting
//! to networks with user configured subnets").
//!
//! Where the old address cannot be had, the node comes back on the one
//! Docker gives it, and what kind itself does when a node restarts on a new
//! address is done (its entrypoint, `images/base/files/usr/local/bin/
//! entrypoint`, on every boot): the old address is replaced by the new one in
//! the static pods' manifests and in the kubelet's flags (`--node-ip`), and
//! remembered in `/kind/old-ipv4`. A node started again (poweron) gets that
//! from kind's entrypoint itself; a running node reconnected (restore-nic)
//! gets it from [`readdress`], which also restarts its kubelet so the Node
//! reports its new InternalIP (the pod network and the API server follow
//! the Node's address).

use crate::exec::Cmd;

/// How a Docker network hands out IPv4 addresses, from `docker network
/// inspect --format` [`INSPECT_FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// An IPv4 subnet given when the network was made (`--subnet`, no
    /// gateway given): `--ip` works, a node keeps its address.
    OwnSubnet(String),
    /// The IPv4 subnet Docker chose (it fills in the gateway), as on the
    /// network `kind create cluster` makes: `--ip` is refused.
    DockerChosen(String),
    /// No IPv4 subnet, or the network could not be read.
    Unknown(String),
}

/// Each IPAM configuration as `SUBNET|GATEWAY`, space-separated.
pub const INSPECT_FORMAT: &str = "{{range .IPAM.Config}}{{.Subnet}}|{{.Gateway}} {{end}}";

impl Shape {
    /// Reads [`INSPECT_FORMAT`]'s output. Docker lists a configured subnet
    /// with the gateway its user gave (none, when none was given) and a
    /// subnet it chose with the gateway it chose: a gateway with no
    /// `--subnet`-made twin is read as Docker's choice. (A network made
    /// with both `--subnet` and `--gateway` reads the same; the revert
    /// tries `--ip` first anyway and only then falls back.)
    pub fn parse(inspected: &str) -> Shape {
        let v4 = inspected
            .split_whitespace()
            .filter_map(|c| c.split_once('|'))
            .find(|(subnet, _)| subnet.contains('.') && !subnet.contains(':'));
        match v4 {
            Some((subnet, "")) => Shape::OwnSubnet(subnet.to_owned()),
            Some((subnet, _)) => Shape::DockerChosen(subnet.to_owned()),
            None => Shape::Unknown(format!(
                "no IPv4 subnet in `docker network inspect`: {}",
                inspected.trim()
            )),
        }
    }

    /// What a revert will do on this network, for the preflight.
    pub fn revert_plan(&self, network: &str) -> String {
        match self {
            Shape::OwnSubnet(s) => format!(
                "network {network} has its own IPv4 subnet {s}: a node taken off it comes back \
                 on its old address (`network connect --ip`)"
            ),
            Shape::DockerChosen(s) => format!(
                "network {network}'s IPv4 subnet {s} was chosen by Docker (as `kind create \
                 cluster` makes it): Docker will refuse the old address, so a node taken off it \
                 comes back on the address Docker gives it, and nodefall then does what kind \
                 does after a restart (the old address replaced by the new one in the node's \
                 kubelet flags and static pod manifests, its kubelet restarted)"
            ),
            Shape::Unknown(why) => format!(
                "network {network}: {why}; a node taken off it is given its old address back if \
                 Docker allows it, else a new one as kind does after a restart"
            ),
        }
    }
}

/// The script [`readdress`] runs in the node: `$1` the old address, `$2`
/// the new one. kind's entrypoint's own replacement, with the dots escaped
/// and the address bounded (kind's `sed "s#${old}#${new}#"` would also
/// rewrite 172.18.0.30 when 172.18.0.3 moves).
pub const READDRESS_SCRIPT: &str = r#"set -e
old="$1"; new="$2"
pat="$(printf '%s' "$old" | sed 's/\./\\./g')"
for f in /etc/kubernetes/manifests/*.yaml /var/lib/kubelet/kubeadm-flags.env; do
  [ -f "$f" ] && sed -i "s#\b$pat\b#$new#g" "$f"
done
printf '%s' "$new" > /kind/old-ipv4
systemctl restart kubelet"#;

/// The command that moves a running node from `old` to `new` inside it.
pub fn readdress(runtime: &str, container: &str, old: &str, new: &str) -> Cmd {
    Cmd::new(
        runtime,
        &[
            "exec",
            container,
            "sh",
            "-c",
            READDRESS_SCRIPT,
            "nodefall-readdress",
            old,
            new,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_docker_chose_has_its_gateway_filled_in() {
        // As Debian's dockerd 20.10 lists them (measured here): a network
        // made as kind makes it, one with --subnet, one with neither.
        assert_eq!(
            Shape::parse("172.18.0.0/16|172.18.0.1 fc00:f853:ccd:e793::/64| "),
            Shape::DockerChosen("172.18.0.0/16".into())
        );
        assert_eq!(
            Shape::parse("172.30.99.0/24| "),
            Shape::OwnSubnet("172.30.99.0/24".into())
        );
        assert_eq!(
            Shape::parse("172.19.0.0/16|172.19.0.1 "),
            Shape::DockerChosen("172.19.0.0/16".into())
        );
        assert!(matches!(
            Shape::parse("fc00::/64| "),
            Shape::Unknown(why) if why.contains("no IPv4 subnet")
        ));
    }

    #[test]
    fn the_preflight_says_what_the_revert_will_do() {
        let said = Shape::DockerChosen("172.18.0.0/16".into()).revert_plan("kind");
        assert!(said.contains("chosen by Docker"), "{said}");
        assert!(said.contains("kubelet restarted"), "{said}");
        let said = Shape::OwnSubnet("172.19.0.0/16".into()).revert_plan("nfk");
        assert!(said.contains("its old address"), "{said}");
    }

    /// The script on a node's files, in a scratch directory standing in
    /// for the node's root.
    #[test]
    fn the_readdress_script_rewrites_only_the_old_address() {
        let dir = std::env::temp_dir().join(format!("nodefall-readdress-{}", std::process::id()));
        let flags = dir.join("kubeadm-flags.env");
        let manifest = dir.join("etcd.yaml");
        let old_ip = dir.join("old-ipv4");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            &flags,
            "KUBELET_KUBEADM_ARGS=\"--node-ip=172.18.0.3 --pod-infra-container-image=x\"\n",
        )
        .unwrap();
        std::fs::write(
            &manifest,
            "- --advertise-client-urls=https://172.18.0.3:2379\n- --other=172.18.0.30\n",
        )
        .unwrap();
        let script = READDRESS_SCRIPT
            .replace(
                "/etc/kubernetes/manifests/*.yaml /var/lib/kubelet/kubeadm-flags.env",
                &format!("{} {}", manifest.display(), flags.display()),
            )
            .replace("/kind/old-ipv4", &old_ip.display().to_string())
            .replace("systemctl restart kubelet", "true");
        let out = std::process::Command::new("sh")
            .args(["-c", &script, "sh", "172.18.0.3", "172.18.0.7"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(&flags).unwrap(),
            "KUBELET_KUBEADM_ARGS=\"--node-ip=172.18.0.7 --pod-infra-container-image=x\"\n"
        );
        assert_eq!(
            std::fs::read_to_string(&manifest).unwrap(),
            "- --advertise-client-urls=https://172.18.0.7:2379\n- --other=172.18.0.30\n"
        );
        assert_eq!(std::fs::read_to_string(&old_ip).unwrap(), "172.18.0.7");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
