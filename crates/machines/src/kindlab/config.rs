//! The kind cluster configuration of a contained cluster (pure): the nodes,
//! the NodePorts the kind scenarios' probes reach, the timings of a profile,
//! the containment settings, and this host's quirks, each only when needed.

use std::fmt::Write as _;
use std::time::Duration;

use crate::profile::TimingProfile;
use crate::sim::ZONE_LABEL;

/// What the host needs worked around (`scripts/kind/host-quirks.sh` tells the
/// same); none of it is set on a host that does not need it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    /// The host mounts cgroup v1: the 1.35 kubelet refuses it unless
    /// `failCgroupV1: false`.
    pub cgroup_v1: bool,
    /// A negative `oom_score_adj` is refused (no CAP_SYS_RESOURCE):
    /// containerd needs `restrict_oom_score_adj = true`.
    pub restrict_oom_score_adj: bool,
}

/// The cluster to ask kind for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub workers: u8,
    /// Control-plane NodePorts mapped to 127.0.0.1 on the host (the kind
    /// scenarios' probes: 30080, 30081).
    pub node_ports: Vec<u16>,
    /// Compressed timings, or None for Kubernetes' defaults (nothing set).
    pub timings: Option<TimingProfile>,
    pub quirks: Quirks,
    /// A host directory every node mounts at [`SHARED_MOUNT`]: a volume all
    /// nodes see, as an NFS share would be (seed 000's ReadWriteMany).
    pub shared_dir: Option<std::path::PathBuf>,
    /// The kubelets' graceful node shutdown: `shutdownGracePeriod` and
    /// `shutdownGracePeriodCriticalPods` (None: unset, so it is off).
    pub shutdown_grace: Option<(Duration, Duration)>,
    /// The attach-detach controller's force detach after 6 minutes of a
    /// volume still mounted on an unhealthy node; false sets
    /// `--disable-force-detach-on-timeout` (then only the out-of-service
    /// taint releases it).
    pub force_detach_on_timeout: bool,
    /// Zones the workers are spread over, round-robin: each worker's
    /// kubelet labels its node `topology.kubernetes.io/zone` (none: no
    /// label, as kind leaves it).
    pub zones: Vec<String>,
}

/// Where every node of a `kind up` cluster mounts its shared directory.
pub const SHARED_MOUNT: &str = "/nodefall/shared";

/// The NodePorts of `scenarios/kind/cluster.yaml`.
pub const SCENARIO_NODE_PORTS: [u16; 2] = [30080, 30081];

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

/// kind's `Cluster` configuration (v1alpha4) for `spec`, as YAML.
pub fn kind_config(spec: &Spec) -> String {
    let mut y = String::from(
        "# Written by `nodefall kind up` (docs/kind-backend.md).\n\
         kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: control-plane\n",
    );
    let mounts = spec.shared_dir.as_ref().map(|d| {
        format!(
            "    extraMounts:\n      - {{hostPath: {}, containerPath: {SHARED_MOUNT}}}\n",
            serde_json::Value::String(d.display().to_string())
        )
    });
    y.push_str(mounts.as_deref().unwrap_or_default());
    if !spec.node_ports.is_empty() {
        y.push_str("    extraPortMappings:\n");
        for p in &spec.node_ports {
            let _ = writeln!(
                y,
                "      - {{containerPort: {p}, hostPort: {p}, listenAddress: \"127.0.0.1\", protocol: TCP}}"
            );
        }
    }
    for i in 0..usize::from(spec.workers) {
        y.push_str("  - role: worker\n");
        y.push_str(mounts.as_deref().unwrap_or_default());
        if !spec.zones.is_empty() {
            let zone = serde_json::Value::String(spec.zones[i % spec.zones.len()].clone());
            let _ = writeln!(y, "    labels: {{{ZONE_LABEL}: {zone}}}");
        }
    }
    y.push_str("kubeadmConfigPatches:\n");
    // kind v0.33 writes kubeadm v1beta3 for 1.35: extraArgs are maps.
    // The API server reaches kubelets by their InternalIP, never by a name
    // it would look up outside the cluster.
    y.push_str(
        "  - |\n    kind: ClusterConfiguration\n    apiServer:\n      extraArgs:\n        \
         kubelet-preferred-address-types: InternalIP\n",
    );
    let mut controller_manager = String::new();
    if let Some(t) = &spec.timings {
        let _ = write!(
            y,
            "        default-not-ready-toleration-seconds: \"{}\"\n        \
             default-unreachable-toleration-seconds: \"{}\"\n",
            secs(t.not_ready_toleration),
            secs(t.unreachable_toleration),
        );
        let _ = write!(
            controller_manager,
            "        node-monitor-grace-period: {}s\n        \
             node-monitor-period: {}s\n        node-startup-grace-period: {}s\n",
            secs(t.node_monitor_grace_period),
            secs(t.node_monitor_period),
            secs(t.node_startup_grace_period),
        );
        for (name, value) in t.zone_flags() {
            let _ = writeln!(controller_manager, "        {name}: \"{value}\"");
        }
    }
    if !spec.force_detach_on_timeout {
        controller_manager.push_str("        disable-force-detach-on-timeout: \"true\"\n");
    }
    if !controller_manager.is_empty() {
        y.push_str("    controllerManager:\n      extraArgs:\n");
        y.push_str(&controller_manager);
    }
    let mut kubelet = String::new();
    if spec.quirks.cgroup_v1 {
        kubelet.push_str("    failCgroupV1: false\n");
    }
    if let Some(t) = &spec.timings {
        // A kubelet left at its defaults (lease 40 s, renewed every 10 s)
        // flaps Unknown under a grace period of a few seconds: the lease is
        // renewed every lease/4 and the status posted every second.
        let _ = write!(
            kubelet,
            "    nodeLeaseDurationSeconds: {}\n    nodeStatusUpdateFrequency: 1s\n",
            secs(t.node_lease_duration).max(1)
        );
    }
    if let Some((all, critical)) = spec.shutdown_grace {
        // The kubelet takes a logind delay inhibitor lock for this long
        // (and raises logind's InhibitDelayMaxSec to it when lower).
        let _ = write!(
            kubelet,
            "    shutdownGracePeriod: {}s\n    shutdownGracePeriodCriticalPods: {}s\n",
            secs(all),
            secs(critical)
        );
    }
    if !kubelet.is_empty() {
        y.push_str("  - |\n    kind: KubeletConfiguration\n");
        y.push_str(&kubelet);
    }
    if spec.quirks.restrict_oom_score_adj {
        y.push_str(
            "containerdConfigPatches:\n  - |-\n    [plugins.\"io.containerd.grpc.v1.cri\"]\n      \
             restrict_oom_score_adj = true\n",
        );
    }
    y
}

/// The Corefile without its `forward` block: CoreDNS answers the cluster's
/// names and nothing else (no query leaves the cluster). None when there is
/// no `forward` to remove.
pub fn corefile_without_forward(corefile: &str) -> Option<String> {
    let mut out = String::new();
    let mut depth_in_forward: Option<i32> = None;
    let mut removed = false;
    for line in corefile.lines() {
        if let Some(depth) = depth_in_forward.as_mut() {
            *depth += braces(line);
            if *depth <= 0 {
                depth_in_forward = None;
            }
            continue;
        }
        let t = line.trim_start();
        if t == "forward" || t.starts_with("forward ") || t.starts_with("forward\t") {
            removed = true;
            let d = braces(line);
            if d > 0 {
                depth_in_forward = Some(d);
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    removed.then_some(out)
}

fn braces(line: &str) -> i32 {
    let open = line.matches('{').count();
    let close = line.matches('}').count();
    i32::try_from(open).unwrap_or(0) - i32::try_from(close).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(timings: Option<TimingProfile>, quirks: Quirks) -> Spec {
        Spec {
            workers: 2,
            node_ports: SCENARIO_NODE_PORTS.to_vec(),
            timings,
            quirks,
            shared_dir: None,
            shutdown_grace: None,
            force_detach_on_timeout: true,
            zones: Vec::new(),
        }
    }

    /// `kind up --zones`: the workers' kubelets label their nodes with their
    /// zone, round-robin; the control plane has none.
    #[test]
    fn workers_are_spread_over_zones() {
        let mut s = spec(None, Quirks::default());
        s.workers = 3;
        s.zones = vec!["a".into(), "b".into()];
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&kind_config(&s)).unwrap();
        let zones: Vec<Option<&str>> = parsed["nodes"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|n| n["labels"][ZONE_LABEL].as_str())
            .collect();
        assert_eq!(zones, [None, Some("a"), Some("b"), Some("a")]);
        s.zones.clear();
        assert!(!kind_config(&s).contains("labels"));
    }

    /// Seeds 000 and 003: a directory every node mounts, and the kubelets'
    /// graceful node shutdown.
    #[test]
    fn a_shared_directory_on_every_node_and_graceful_shutdown() {
        let mut s = spec(None, Quirks::default());
        s.shared_dir = Some("/var/state/nodefall/kind/x y/shared".into());
        s.shutdown_grace = Some((Duration::from_secs(30), Duration::from_secs(10)));
        let y = kind_config(&s);
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&y).unwrap();
        let nodes = parsed["nodes"].as_sequence().unwrap();
        assert_eq!(nodes.len(), 3);
        for n in nodes {
            assert_eq!(
                n["extraMounts"][0]["hostPath"].as_str(),
                Some("/var/state/nodefall/kind/x y/shared"),
                "{y}"
            );
            assert_eq!(
                n["extraMounts"][0]["containerPath"].as_str(),
                Some(SHARED_MOUNT)
            );
        }
        // The control plane keeps its port mappings beside the mount.
        assert_eq!(
            nodes[0]["extraPortMappings"].as_sequence().unwrap().len(),
            2
        );
        let patches = parsed["kubeadmConfigPatches"].as_sequence().unwrap();
        let kubelet: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(patches[1].as_str().unwrap()).unwrap();
        assert_eq!(kubelet["shutdownGracePeriod"].as_str(), Some("30s"));
        assert_eq!(
            kubelet["shutdownGracePeriodCriticalPods"].as_str(),
            Some("10s")
        );
    }

    #[test]
    fn defaults_on_a_normal_host_set_only_the_address_type_and_the_ports() {
        let y = kind_config(&spec(None, Quirks::default()));
        assert!(y.contains("kubelet-preferred-address-types: InternalIP"));
        assert!(y.contains("hostPort: 30080, listenAddress: \"127.0.0.1\""));
        assert_eq!(y.matches("role: worker").count(), 2);
        for absent in [
            "failCgroupV1",
            "restrict_oom_score_adj",
            "node-monitor-grace-period",
            "nodeLeaseDurationSeconds",
            "KubeletConfiguration",
            "containerdConfigPatches",
        ] {
            assert!(!y.contains(absent), "{absent} in\n{y}");
        }
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&y).unwrap();
        assert_eq!(parsed["nodes"].as_sequence().unwrap().len(), 3);
    }

    #[test]
    fn compressed_timings_and_quirks_reach_every_component() {
        let y = kind_config(&spec(
            Some(TimingProfile::fast()),
            Quirks {
                cgroup_v1: true,
                restrict_oom_score_adj: true,
            },
        ));
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&y).unwrap();
        let patches = parsed["kubeadmConfigPatches"].as_sequence().unwrap();
        let cluster: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(patches[0].as_str().unwrap()).unwrap();
        let kcm = &cluster["controllerManager"]["extraArgs"];
        assert_eq!(kcm["node-monitor-grace-period"].as_str(), Some("8s"));
        assert_eq!(kcm["node-monitor-period"].as_str(), Some("1s"));
        assert_eq!(kcm["node-startup-grace-period"].as_str(), Some("10s"));
        assert_eq!(kcm["node-eviction-rate"].as_str(), Some("0.1"));
        assert_eq!(kcm["secondary-node-eviction-rate"].as_str(), Some("0.05"));
        assert_eq!(kcm["large-cluster-size-threshold"].as_str(), Some("4"));
        assert_eq!(kcm["unhealthy-zone-threshold"].as_str(), Some("0.55"));
        let api = &cluster["apiServer"]["extraArgs"];
        assert_eq!(
            api["default-unreachable-toleration-seconds"].as_str(),
            Some("20")
        );
        assert_eq!(
            api["default-not-ready-toleration-seconds"].as_str(),
            Some("20")
        );
        let kubelet: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(patches[1].as_str().unwrap()).unwrap();
        assert_eq!(kubelet["nodeLeaseDurationSeconds"].as_u64(), Some(4));
        assert_eq!(kubelet["nodeStatusUpdateFrequency"].as_str(), Some("1s"));
        assert_eq!(kubelet["failCgroupV1"].as_bool(), Some(false));
        let containerd = parsed["containerdConfigPatches"][0].as_str().unwrap();
        assert!(containerd.contains("restrict_oom_score_adj = true"));
    }

    /// `kind up --disable-force-detach-on-timeout`, with Kubernetes'
    /// timings and with compressed ones: the flag beside the others.
    #[test]
    fn force_detach_off_reaches_the_controller_manager() {
        for timings in [None, Some(TimingProfile::fast())] {
            let mut s = spec(timings.clone(), Quirks::default());
            s.force_detach_on_timeout = false;
            let y = kind_config(&s);
            let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&y).unwrap();
            let patches = parsed["kubeadmConfigPatches"].as_sequence().unwrap();
            let cluster: serde_yaml_ng::Value =
                serde_yaml_ng::from_str(patches[0].as_str().unwrap()).unwrap();
            let kcm = &cluster["controllerManager"]["extraArgs"];
            assert_eq!(
                kcm["disable-force-detach-on-timeout"].as_str(),
                Some("true"),
                "{y}"
            );
            assert_eq!(
                kcm["node-monitor-grace-period"].as_str(),
                timings.as_ref().map(|_| "8s"),
                "{y}"
            );
            assert_eq!(
                cluster["apiServer"]["extraArgs"]["kubelet-preferred-address-types"].as_str(),
                Some("InternalIP")
            );
        }
        let on = kind_config(&spec(Some(TimingProfile::fast()), Quirks::default()));
        assert!(!on.contains("disable-force-detach-on-timeout"), "{on}");
    }

    #[test]
    fn the_forward_block_goes_and_the_rest_stays() {
        let kubeadm = ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    \
            kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       \
            fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    \
            forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30 {\n       \
            disable success cluster.local\n    }\n    loop\n    reload\n    loadbalance\n}\n";
        let out = corefile_without_forward(kubeadm).unwrap();
        assert!(!out.contains("forward"), "{out}");
        assert!(!out.contains("max_concurrent"), "{out}");
        for kept in [
            "kubernetes cluster.local",
            "cache 30 {",
            "disable success",
            "reload",
            "loop",
        ] {
            assert!(out.contains(kept), "{kept} lost:\n{out}");
        }
        assert_eq!(braces(&out.replace('\n', " ")), 0);
        // A one-line forward goes too; a Corefile without one is left alone.
        let one =
            corefile_without_forward(".:53 {\n    forward . 8.8.8.8\n    cache 30\n}\n").unwrap();
        assert_eq!(one, ".:53 {\n    cache 30\n}\n");
        assert_eq!(corefile_without_forward(&out), None);
    }
}
