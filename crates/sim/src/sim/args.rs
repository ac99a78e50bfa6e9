//! The command lines of a simulated cluster's control plane (etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler): pure functions
//! of the cluster's layout, ports, credentials and timing profile.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::pki::Pki;
use super::state::Layout;
use crate::profile::TimingProfile;

/// Whole seconds, at least 1 (the API server's `*-toleration-seconds` flags).
fn secs(d: Duration) -> String {
    d.as_secs().max(1).to_string()
}

/// A Go duration in milliseconds (`8000ms`): exact for sub-second values.
fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The words of a command line, owned.
fn strings<const N: usize>(args: [&str; N]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// etcd on loopback: client and peer URLs on the given ports, its data in
/// the layout.
pub(super) fn etcd_args(layout: &Layout, client: u16, peer: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client}");
    let peer = format!("http://127.0.0.1:{peer}");
    let data = layout.etcd_data().display().to_string();
    let initial = format!("nodefall={peer}");
    strings([
        "--name",
        "nodefall",
        "--data-dir",
        &data,
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &initial,
        // A throwaway cluster: durability is not worth the fsync latency.
        "--unsafe-no-fsync",
        "--log-level",
        "warn",
    ])
}

/// kube-apiserver on `127.0.0.1:port`, its store the etcd at `etcd_client`,
/// its pods' default tolerations from the profile.
pub(super) fn apiserver_args(
    pki: &Pki,
    etcd_client: u16,
    port: u16,
    profile: &TimingProfile,
) -> Vec<String> {
    let etcd = format!("http://127.0.0.1:{etcd_client}");
    let port = port.to_string();
    let unreachable = secs(profile.unreachable_toleration);
    let not_ready = secs(profile.not_ready_toleration);
    let p = |p: &PathBuf| p.display().to_string();
    let (cert, key, tokens) = (
        p(&pki.serving_cert),
        p(&pki.serving_key),
        p(&pki.token_file),
    );
    let (sa_key, sa_pub) = (p(&pki.service_account_key), p(&pki.service_account_pub));
    strings([
        "--etcd-servers",
        &etcd,
        "--bind-address",
        "127.0.0.1",
        "--advertise-address",
        "127.0.0.1",
        "--secure-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--token-auth-file",
        &tokens,
        "--authorization-mode",
        "RBAC",
        "--service-account-issuer",
        "https://kubernetes.default.svc",
        "--service-account-key-file",
        &sa_pub,
        "--service-account-signing-key-file",
        &sa_key,
        "--service-cluster-ip-range",
        "10.96.0.0/16",
        "--default-unreachable-toleration-seconds",
        &unreachable,
        "--default-not-ready-toleration-seconds",
        &not_ready,
        "--allow-privileged=true",
        "--profiling=false",
        // Proxying to a node (logs, exec, configz) picks its InternalIP. The
        // default list starts with Hostname, which the API server resolves
        // through the host's DNS before anything else (seen with a real
        // kubelet in a VM): a query that would leave the machine.
        "--kubelet-preferred-address-types",
        "InternalIP",
    ])
}

/// The API server's traffic to nodes, pods and services (the egress
/// selector's `cluster`) goes to a Unix socket nothing listens on: the sim's
/// nodes have no kubelet to reach and their addresses are made up, so a
/// node proxy request (`kubectl logs`, `/configz`) fails here instead of
/// dialling an address beyond this machine. A test that plays kubelets
/// passes its own configuration after this one (the last flag wins).
pub(super) fn egress_args(layout: &Layout) -> Vec<String> {
    vec![
        "--egress-selector-config-file".to_owned(),
        layout.egress_config().display().to_string(),
    ]
}

/// An egress selector configuration sending the API server's `cluster`
/// traffic (to nodes, pods and services) to an HTTP CONNECT proxy on the
/// Unix socket `socket`: [`egress_args`] names one with a socket nothing
/// listens on; tests that play kubelets give theirs a proxy.
pub fn egress_selector_config(socket: &Path) -> String {
    format!(
        "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\n\
         egressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n\
         \x20   transport:\n      uds:\n        udsName: {}\n",
        socket.display()
    )
}

/// kube-controller-manager with the profile's node-lifecycle timings.
pub(super) fn controller_manager_args(
    kubeconfig: &Path,
    pki: &Pki,
    profile: &TimingProfile,
) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    let sa = pki.service_account_key.display().to_string();
    let ca = pki.ca_cert.display().to_string();
    let grace = go_duration(profile.node_monitor_grace_period);
    let period = go_duration(profile.node_monitor_period);
    let startup = go_duration(profile.node_startup_grace_period);
    strings([
        "--kubeconfig",
        &kc,
        "--authentication-kubeconfig",
        &kc,
        "--authorization-kubeconfig",
        &kc,
        "--secure-port",
        "0",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--controllers",
        "*,-serviceaccount-token",
        "--service-account-private-key-file",
        &sa,
        "--root-ca-file",
        &ca,
        "--node-monitor-grace-period",
        &grace,
        "--node-monitor-period",
        &period,
        "--node-startup-grace-period",
        &startup,
        "--profiling=false",
    ])
    .into_iter()
    .chain(
        profile
            .zone_flags()
            .into_iter()
            .map(|(name, value)| format!("--{name}={value}")),
    )
    .collect()
}

/// kube-scheduler.
pub(super) fn scheduler_args(kubeconfig: &Path) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    strings([
        "--kubeconfig",
        &kc,
        "--authentication-kubeconfig",
        &kc,
        "--authorization-kubeconfig",
        &kc,
        "--secure-port",
        "0",
        "--leader-elect=false",
        "--profiling=false",
    ])
}

/// kube-apiserver's audit log and its policy, both in the cluster's
/// directory (the bring-up writes the policy, see `up.rs`).
pub(super) fn audit_args(layout: &Layout) -> Vec<String> {
    vec![
        "--audit-policy-file".to_owned(),
        layout.audit_policy().display().to_string(),
        "--audit-log-path".to_owned(),
        layout.audit_log().display().to_string(),
        "--audit-log-format".to_owned(),
        "json".to_owned(),
        // Written before the response is sent: complete when read.
        "--audit-log-mode".to_owned(),
        "blocking".to_owned(),
        // Rotated at 100 MB by default; a 10,000-pod run writes more. The
        // reader also reads rotated files (audit-<time>.log) before it.
        "--audit-log-maxsize".to_owned(),
        "4096".to_owned(),
    ]
}

/// Client rate limits for a large cluster's controllers and scheduler.
pub(super) fn raised_qps() -> [String; 2] {
    [
        "--kube-api-qps=200".to_owned(),
        "--kube-api-burst=400".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::duration::external::parse_go;
    use crate::profile::Var;
    use crate::profile::flags::{Component, command_line, settings};

    fn pki() -> Pki {
        Pki::at(Path::new("/state/c1/pki"), "t0ken".into())
    }

    fn layout() -> Layout {
        Layout::new(Path::new("/state"), "c1").unwrap()
    }

    /// A profile whose every timing differs from the others and from the
    /// built-in ones, some of them not whole seconds.
    fn odd_profile() -> TimingProfile {
        TimingProfile {
            name: "odd".into(),
            node_monitor_grace_period: Duration::from_millis(7_500),
            node_monitor_period: Duration::from_millis(700),
            node_startup_grace_period: Duration::from_secs(13),
            unreachable_toleration: Duration::from_secs(21),
            not_ready_toleration: Duration::from_secs(34),
            ..TimingProfile::fast()
        }
    }

    /// Flag name (no dashes) -> value, as the component parses it.
    fn flags(args: &[String]) -> BTreeMap<String, String> {
        command_line(args)
    }

    fn value<'a>(flags: &'a BTreeMap<String, String>, name: &str) -> &'a str {
        flags
            .get(name)
            .unwrap_or_else(|| panic!("no --{name} in {flags:?}"))
    }

    #[test]
    fn go_durations_are_exact_to_the_millisecond() {
        assert_eq!(go_duration(Duration::from_secs(8)), "8000ms");
        assert_eq!(go_duration(Duration::from_millis(2_500)), "2500ms");
        assert_eq!(go_duration(Duration::ZERO), "0ms");
        for ms in [1, 700, 1_000, 7_500, 40_000, 300_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse_go(&go_duration(d)), Ok(d), "{ms} ms");
        }
    }

    #[test]
    fn toleration_seconds_are_whole_and_never_zero() {
        // A toleration of 0 s would evict at once; under a second rounds up.
        assert_eq!(secs(Duration::ZERO), "1");
        assert_eq!(secs(Duration::from_millis(999)), "1");
        assert_eq!(secs(Duration::from_millis(20_900)), "20");
        assert_eq!(secs(Duration::from_secs(300)), "300");
    }

    #[test]
    fn the_controller_manager_runs_with_the_profiles_node_lifecycle_timings() {
        let kubeconfig = Path::new("/state/c1/kubeconfig");
        let f = flags(&controller_manager_args(kubeconfig, &pki(), &odd_profile()));
        assert_eq!(value(&f, "node-monitor-grace-period"), "7500ms");
        assert_eq!(value(&f, "node-monitor-period"), "700ms");
        assert_eq!(value(&f, "node-startup-grace-period"), "13000ms");
        for name in [
            "kubeconfig",
            "authentication-kubeconfig",
            "authorization-kubeconfig",
        ] {
            assert_eq!(value(&f, name), "/state/c1/kubeconfig", "--{name}");
        }
        assert_eq!(
            value(&f, "service-account-private-key-file"),
            "/state/c1/pki/sa.key"
        );
        assert_eq!(value(&f, "root-ca-file"), "/state/c1/pki/ca.crt");
        // One controller manager, not elected; tokens come from the static
        // token file, so the token controller stays off.
        assert_eq!(value(&f, "leader-elect"), "false");
        assert_eq!(value(&f, "controllers"), "*,-serviceaccount-token");
        assert_eq!(value(&f, "secure-port"), "0");
    }

    #[test]
    fn the_apiserver_gives_pods_the_profiles_default_tolerations() {
        let f = flags(&apiserver_args(&pki(), 2379, 6443, &odd_profile()));
        assert_eq!(value(&f, "default-unreachable-toleration-seconds"), "21");
        assert_eq!(value(&f, "default-not-ready-toleration-seconds"), "34");
        let mut short = odd_profile();
        short.unreachable_toleration = Duration::from_millis(300);
        short.not_ready_toleration = Duration::ZERO;
        let f = flags(&apiserver_args(&pki(), 2379, 6443, &short));
        assert_eq!(value(&f, "default-unreachable-toleration-seconds"), "1");
        assert_eq!(value(&f, "default-not-ready-toleration-seconds"), "1");
    }

    #[test]
    fn the_apiserver_serves_on_loopback_from_the_given_etcd_with_the_credentials() {
        let f = flags(&apiserver_args(
            &pki(),
            41_001,
            41_003,
            &TimingProfile::fast(),
        ));
        assert_eq!(value(&f, "etcd-servers"), "http://127.0.0.1:41001");
        assert_eq!(value(&f, "secure-port"), "41003");
        assert_eq!(value(&f, "bind-address"), "127.0.0.1");
        assert_eq!(value(&f, "advertise-address"), "127.0.0.1");
        // Node proxying never resolves a node's hostname through DNS.
        assert_eq!(value(&f, "kubelet-preferred-address-types"), "InternalIP");
        assert_eq!(value(&f, "tls-cert-file"), "/state/c1/pki/apiserver.crt");
        assert_eq!(
            value(&f, "tls-private-key-file"),
            "/state/c1/pki/apiserver.key"
        );
        assert_eq!(value(&f, "token-auth-file"), "/state/c1/pki/tokens.csv");
        assert_eq!(
            value(&f, "service-account-key-file"),
            "/state/c1/pki/sa.pub"
        );
        assert_eq!(
            value(&f, "service-account-signing-key-file"),
            "/state/c1/pki/sa.key"
        );
        assert_eq!(value(&f, "authorization-mode"), "RBAC");
    }

    #[test]
    fn a_sim_cluster_is_discovered_with_the_profile_it_was_started_with() {
        // What `discover` reads back from the flags (the kubeadm-config the
        // sim publishes holds exactly these command lines).
        let kubeconfig = Path::new("/state/c1/kubeconfig");
        for profile in [
            TimingProfile::fast(),
            TimingProfile::upstream_default(),
            odd_profile(),
        ] {
            let mut found = BTreeMap::new();
            let kcm = flags(&controller_manager_args(kubeconfig, &pki(), &profile));
            let api = flags(&apiserver_args(&pki(), 2379, 6443, &profile));
            for (component, flags) in [
                (Component::ControllerManager, &kcm),
                (Component::ApiServer, &api),
            ] {
                let (settings, unreadable) = settings(component, flags);
                assert!(unreadable.is_empty(), "{unreadable:?}");
                found.extend(settings.into_iter().map(|s| (s.var, s.value)));
            }
            let want = BTreeMap::from([
                (
                    Var::NodeMonitorGracePeriod,
                    profile.node_monitor_grace_period,
                ),
                (Var::NodeMonitorPeriod, profile.node_monitor_period),
                (
                    Var::NodeStartupGracePeriod,
                    profile.node_startup_grace_period,
                ),
                (
                    Var::UnreachableTolerationSeconds,
                    profile.unreachable_toleration,
                ),
                (Var::NotReadyTolerationSeconds, profile.not_ready_toleration),
                (Var::NodeEvictionInterval, profile.node_eviction_interval),
                (
                    Var::SecondaryEvictionInterval,
                    profile.secondary_eviction_interval,
                ),
            ]);
            assert_eq!(
                value(&kcm, "large-cluster-size-threshold"),
                profile.zones.large_cluster_size_threshold.to_string()
            );
            assert_eq!(
                value(&kcm, "unhealthy-zone-threshold"),
                profile.zones.unhealthy_zone_threshold.to_string()
            );
            assert_eq!(found, want, "profile {}", profile.name);
        }
    }

    #[test]
    fn the_apiservers_node_traffic_goes_to_a_socket_in_the_layout() {
        let layout = layout();
        let f = flags(&egress_args(&layout));
        assert_eq!(
            Path::new(value(&f, "egress-selector-config-file")),
            layout.egress_config().as_path()
        );
        let config: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&egress_selector_config(&layout.no_egress_socket()))
                .expect("YAML");
        let cluster = &config["egressSelections"][0];
        assert_eq!(cluster["name"].as_str(), Some("cluster"));
        assert_eq!(
            cluster["connection"]["transport"]["uds"]["udsName"].as_str(),
            Some(layout.no_egress_socket().to_str().expect("UTF-8"))
        );
    }

    #[test]
    fn etcd_listens_on_loopback_at_the_given_ports_with_its_data_in_the_layout() {
        let layout = layout();
        let f = flags(&etcd_args(&layout, 41_001, 41_002));
        assert_eq!(value(&f, "listen-client-urls"), "http://127.0.0.1:41001");
        assert_eq!(value(&f, "advertise-client-urls"), "http://127.0.0.1:41001");
        assert_eq!(value(&f, "listen-peer-urls"), "http://127.0.0.1:41002");
        assert_eq!(
            value(&f, "initial-advertise-peer-urls"),
            "http://127.0.0.1:41002"
        );
        // The initial cluster names this member at its peer URL.
        assert_eq!(value(&f, "name"), "nodefall");
        assert_eq!(
            value(&f, "initial-cluster"),
            "nodefall=http://127.0.0.1:41002"
        );
        assert_eq!(
            Path::new(value(&f, "data-dir")),
            layout.etcd_data().as_path()
        );
        assert_eq!(value(&f, "unsafe-no-fsync"), "true");
    }

    #[test]
    fn the_audit_log_and_its_policy_are_in_the_clusters_directory() {
        let layout = layout();
        let f = flags(&audit_args(&layout));
        let policy = Path::new(value(&f, "audit-policy-file"));
        let log = Path::new(value(&f, "audit-log-path"));
        assert_eq!(policy, layout.audit_policy().as_path());
        assert_eq!(log, layout.audit_log().as_path());
        assert!(policy.starts_with(&layout.dir) && log.starts_with(&layout.dir));
        // Complete when read (the observer's ground truth), one JSON per line.
        assert_eq!(value(&f, "audit-log-mode"), "blocking");
        assert_eq!(value(&f, "audit-log-format"), "json");
        assert_eq!(value(&f, "audit-log-maxsize"), "4096");
    }

    #[test]
    fn the_scheduler_uses_the_clusters_kubeconfig_unelected() {
        let f = flags(&scheduler_args(Path::new("/state/c1/kubeconfig")));
        for name in [
            "kubeconfig",
            "authentication-kubeconfig",
            "authorization-kubeconfig",
        ] {
            assert_eq!(value(&f, name), "/state/c1/kubeconfig", "--{name}");
        }
        assert_eq!(value(&f, "leader-elect"), "false");
        assert_eq!(value(&f, "secure-port"), "0");
    }

    #[test]
    fn no_component_gets_a_flag_twice() {
        // Go's flags keep the last of two: a second one would silently undo
        // the first. Checked on the command lines as the bring-up assembles
        // them (audit flags appended, raised rate limits for shards).
        let layout = layout();
        let kubeconfig = layout.kubeconfig();
        let profile = TimingProfile::fast();
        let mut api = apiserver_args(&pki(), 2379, 6443, &profile);
        api.extend(audit_args(&layout));
        let mut kcm = controller_manager_args(&kubeconfig, &pki(), &profile);
        kcm.extend(raised_qps());
        let mut sched = scheduler_args(&kubeconfig);
        sched.extend(raised_qps());
        for (what, args) in [
            ("etcd", etcd_args(&layout, 2379, 2380)),
            ("kube-apiserver", api),
            ("kube-controller-manager", kcm),
            ("kube-scheduler", sched),
        ] {
            let names: Vec<&str> = args
                .iter()
                .filter_map(|w| w.strip_prefix("--"))
                .map(|f| f.split_once('=').map_or(f, |(name, _)| name))
                .collect();
            let mut seen = std::collections::BTreeSet::new();
            for name in &names {
                assert!(seen.insert(*name), "{what} gets --{name} twice: {args:?}");
            }
            // Every word is a flag or the value of the flag before it.
            assert_eq!(flags(&args).len(), names.len(), "{what}: {args:?}");
        }
    }

    #[test]
    fn a_large_clusters_clients_get_raised_rate_limits() {
        let f = flags(&raised_qps());
        assert_eq!(value(&f, "kube-api-qps"), "200");
        assert_eq!(value(&f, "kube-api-burst"), "400");
    }
}
