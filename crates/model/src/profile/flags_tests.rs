//! The flags parser on kubeadm's ConfigMaps and control-plane command lines
//! as real clusters show them.

use std::time::Duration;

use super::*;

/// `kubectl -n kube-system get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'`
/// on a kubeadm 1.29 cluster (v1beta3: `extraArgs` is a map).
const KUBEADM_V1BETA3: &str = r#"apiServer:
  certSANs:
  - 192.168.56.10
  extraArgs:
    authorization-mode: Node,RBAC
  timeoutForControlPlane: 4m0s
apiVersion: kubeadm.k8s.io/v1beta3
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controllerManager: {}
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.29.2
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
scheduler: {}
"#;

/// kind's (v1.31 node image): kubeadm v1beta3, its own extraArgs.
const KIND: &str = r#"apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
  extraArgs:
    runtime-config: ""
apiVersion: kubeadm.k8s.io/v1beta3
clusterName: nodefall
controlPlaneEndpoint: nodefall-control-plane:6443
controllerManager:
  extraArgs:
    enable-hostpath-provisioner: "true"
kind: ClusterConfiguration
kubernetesVersion: v1.31.0
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
scheduler:
  extraArgs: null
"#;

/// Kubespray's template (roles/kubernetes/control-plane/templates/
/// kubeadm-config.v1beta4.yaml.j2) rendered with its defaults:
/// v1beta4 lists of `{name, value}`.
const KUBESPRAY_V1BETA4: &str = r#"apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: cluster.local
kubernetesVersion: v1.32.5
apiServer:
  extraArgs:
  - name: anonymous-auth
    value: "True"
  - name: default-not-ready-toleration-seconds
    value: "300"
  - name: default-unreachable-toleration-seconds
    value: "300"
controllerManager:
  extraArgs:
  - name: node-monitor-grace-period
    value: 40s
  - name: node-monitor-period
    value: 5s
  - name: terminated-pod-gc-threshold
    value: "12500"
"#;

/// The command of kubeadm's kube-controller-manager static pod (and so of
/// its mirror pod), as in /etc/kubernetes/manifests/kube-controller-manager.yaml.
const KUBEADM_KCM_COMMAND: [&str; 8] = [
    "kube-controller-manager",
    "--allocate-node-cidrs=true",
    "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
    "--bind-address=127.0.0.1",
    "--leader-elect=true",
    "--node-monitor-grace-period=40s",
    "--node-monitor-period=5s",
    "--use-service-account-credentials=true",
];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn kubeadm_v1beta3_without_timing_flags_gives_the_version_only() {
    let c = cluster_configuration(KUBEADM_V1BETA3).unwrap();
    assert_eq!(c.version.as_deref(), Some("v1.29.2"));
    assert!(c.controller_manager.is_empty());
    assert_eq!(c.api_server["authorization-mode"], "Node,RBAC");
    let (found, bad) = settings(Component::ControllerManager, &c.controller_manager);
    assert!(found.is_empty() && bad.is_empty());
}

#[test]
fn kind_configuration_reads_with_null_and_quoted_values() {
    let c = cluster_configuration(KIND).unwrap();
    assert_eq!(c.version.as_deref(), Some("v1.31.0"));
    assert_eq!(c.controller_manager["enable-hostpath-provisioner"], "true");
    assert_eq!(c.api_server["runtime-config"], "");
}

#[test]
fn kubespray_v1beta4_lists_give_grace_period_and_tolerations() {
    let c = cluster_configuration(KUBESPRAY_V1BETA4).unwrap();
    let (kcm, bad) = settings(Component::ControllerManager, &c.controller_manager);
    assert!(bad.is_empty());
    assert_eq!(
        kcm,
        vec![
            Setting {
                var: Var::NodeMonitorGracePeriod,
                value: secs(40),
                written: "--node-monitor-grace-period=40s".into()
            },
            Setting {
                var: Var::NodeMonitorPeriod,
                value: secs(5),
                written: "--node-monitor-period=5s".into()
            },
        ]
    );
    let (api, _) = settings(Component::ApiServer, &c.api_server);
    let vars: Vec<(Var, Duration)> = api.iter().map(|s| (s.var, s.value)).collect();
    assert_eq!(
        vars,
        vec![
            (Var::UnreachableTolerationSeconds, secs(300)),
            (Var::NotReadyTolerationSeconds, secs(300)),
        ]
    );
}

#[test]
fn mirror_pod_command_lines_in_every_spelling() {
    let flags = command_line(&KUBEADM_KCM_COMMAND);
    assert_eq!(flags["node-monitor-grace-period"], "40s");
    let (found, _) = settings(Component::ControllerManager, &flags);
    assert_eq!(found[0].value, secs(40));
    // `--flag value`, single dashes and bare switches, as Go's flag package takes them
    let flags = command_line(&[
        "kube-apiserver",
        "--default-unreachable-toleration-seconds",
        "60",
        "-v=2",
        "--allow-privileged",
        "--default-not-ready-toleration-seconds=30",
    ]);
    assert_eq!(flags["default-unreachable-toleration-seconds"], "60");
    assert_eq!(flags["allow-privileged"], "true");
    assert_eq!(flags["v"], "2");
    let (found, _) = settings(Component::ApiServer, &flags);
    assert_eq!(found.len(), 2);
    assert_eq!(found[1].value, secs(30));
    // the last one wins
    let flags = command_line(&["--node-monitor-period=5s", "--node-monitor-period=2s"]);
    assert_eq!(flags["node-monitor-period"], "2s");
}

#[test]
fn a_value_that_is_not_a_duration_is_reported_not_used() {
    let flags = command_line(&[
        "--node-monitor-grace-period=forty",
        "--node-monitor-period=1m0s",
    ]);
    let (found, bad) = settings(Component::ControllerManager, &flags);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].value, secs(60));
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].written, "--node-monitor-grace-period=forty");
}

#[test]
fn a_zero_in_kubeadms_kubelet_config_is_the_kubelets_default_not_a_setting() {
    // As kubeadm 1.35 writes kube-system/kubelet-config for kind: every
    // field, 0 where it set none (seen on a real kind cluster).
    let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                nodeLeaseDurationSeconds: 0\nnodeStatusUpdateFrequency: 0s\n";
    let cfg = kubelet_configuration(text).unwrap();
    let (found, bad) = settings(Component::Kubelet, &cfg);
    assert!(found.is_empty(), "{found:?}");
    let written: Vec<&str> = bad.iter().map(|b| b.written.as_str()).collect();
    assert_eq!(
        written,
        [
            "nodeLeaseDurationSeconds: 0",
            "nodeStatusUpdateFrequency: 0s"
        ]
    );
    assert!(
        bad[1].why.contains("the kubelet uses its default"),
        "{}",
        bad[1].why
    );
}

#[test]
fn kubelet_configuration_gives_lease_and_status_frequency() {
    let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                nodeLeaseDurationSeconds: 40\nnodeStatusUpdateFrequency: 10s\n\
                shutdownGracePeriod: 0s\n";
    let cfg = kubelet_configuration(text).unwrap();
    let (found, _) = settings(Component::Kubelet, &cfg);
    let vars: Vec<(Var, Duration)> = found.iter().map(|s| (s.var, s.value)).collect();
    assert_eq!(
        vars,
        vec![
            (Var::NodeLeaseDuration, secs(40)),
            (Var::NodeStatusUpdateFrequency, secs(10))
        ]
    );
}

#[test]
fn broken_documents_are_errors() {
    assert!(cluster_configuration("[1, 2]").is_err());
    assert!(cluster_configuration("a: [").is_err());
    assert!(cluster_configuration("controllerManager:\n  extraArgs:\n  - value: x\n").is_err());
    assert!(cluster_configuration("controllerManager:\n  extraArgs: 3\n").is_err());
}

#[test]
fn versions() {
    assert_eq!(minor_version("v1.31.4"), Some((1, 31)));
    assert_eq!(minor_version("v1.32.0-rc.1"), Some((1, 32)));
    assert_eq!(minor_version("v1.29.3+k3s1"), Some((1, 29)));
    assert_eq!(minor_version("1.30"), Some((1, 30)));
    assert_eq!(minor_version("garbage"), None);
}
