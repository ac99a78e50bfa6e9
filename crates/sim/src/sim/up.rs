//! Bring-up of a simulated cluster: its directory, credentials and
//! kubeconfig, the control plane's processes and the node agents, with a
//! wait for each stage.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::time::Instant;

use super::Error;
use super::agents;
use super::args::{
    apiserver_args, audit_args, controller_manager_args, egress_args, egress_selector_config,
    etcd_args, raised_qps, scheduler_args,
};
use super::binaries::Binaries;
use super::cluster::{CONTEXT, Progress, SimCluster, UpOptions, unix_ms};
use super::csi;
use super::evidence;
use super::pki::{self, Pki};
use super::process::Proc;
use super::reaper;
use super::state::{self, AgentState, Layout, State};
use super::state_dir::prepare_dir;
use super::volume_agent;

/// KWOK stages every node agent runs with (see `crates/sim/src/sim/stages/README.md`).
const STAGES: [&str; 9] = [
    include_str!("stages/node-initialize.yaml"),
    include_str!("stages/node-heartbeat-with-lease.yaml"),
    include_str!("stages/pod-ready.yaml"),
    include_str!("stages/pod-probe-ready.yaml"),
    include_str!("stages/pod-stop.yaml"),
    include_str!("stages/pod-resync.yaml"),
    include_str!("stages/pod-complete.yaml"),
    include_str!("stages/pod-delete.yaml"),
    include_str!("stages/pod-recover.yaml"),
];

/// What the API server's audit log records: every write to Nodes and Pods
/// (status and binding included) with the objects, stamped when the
/// response completed (microseconds). It is the ground truth the observer
/// is checked against (`crates/io/src/audit/`); leases, events and reads stay out.
const AUDIT_POLICY: &str = include_str!("audit-policy.yaml");

/// The loopback ports a new cluster's etcd and API server listen on.
struct Ports {
    etcd_client: u16,
    etcd_peer: u16,
    api: u16,
}

impl SimCluster {
    /// Starts a cluster and waits until every node is Ready.
    pub async fn up(opts: &UpOptions, progress: Progress<'_>) -> Result<SimCluster, Error> {
        // A bad name is refused before anything is built or started.
        let layout = Layout::new(&opts.root, &opts.name)?;
        let started = Instant::now();
        // Provisioning may build for minutes: off the runtime's workers, so
        // a signal is still heard (it cancels the build, see binaries::cancel).
        let binaries = tokio::task::spawn_blocking(Binaries::ensure)
            .await
            .map_err(|e| Error::Other(format!("provisioning stopped: {e}")))??;
        prepare_dir(&layout, &opts.name)?;

        let [etcd_client, etcd_peer, api_port] = free_ports()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let mut nodes = agents::nodes(opts.nodes, opts.shards, &opts.zones);
        if opts.control_plane_node {
            nodes.insert(0, agents::control_plane_node(opts.shards, &opts.zones));
        }
        let mut cluster = SimCluster {
            layout,
            state: State {
                schema: state::SCHEMA,
                name: opts.name.clone(),
                server: server.clone(),
                versions: binaries.versions.clone(),
                profile: opts.profile.clone(),
                started_at_ms: 0,
                components: Vec::new(),
                nodes,
                reaper: None,
                kept: false,
                node_boot_ms: state::millis(opts.node_boot),
                pleg_threshold_ms: state::millis(opts.pleg_threshold),
                shutdown_grace_ms: state::millis(opts.shutdown_grace.all),
                shutdown_grace_critical_ms: state::millis(opts.shutdown_grace.critical),
            },
            procs: BTreeMap::new(),
            reaper: None,
            teardown_on_drop: true,
            lock: None,
            volume_task: None,
            shared_client: None,
        };
        let ports = Ports {
            etcd_client,
            etcd_peer,
            api: api_port,
        };
        match cluster.bring_up(opts, &binaries, ports, progress).await {
            Ok(()) => {
                progress(&format!(
                    "cluster `{}` ready in {:.1}s",
                    opts.name,
                    started.elapsed().as_secs_f64()
                ));
                Ok(cluster)
            }
            Err(e) => {
                // Its processes stopped, its logs kept where the error says.
                cluster.teardown_on_drop = false;
                cluster.stop_all();
                let (e, kept) = evidence::keep(&cluster.layout, &opts.root, &opts.name, e);
                if let Some(dir) = kept {
                    tracing::warn!("the failed start's logs are kept in {}", dir.display());
                }
                Err(e)
            }
        }
    }

    /// Everything of a bring-up after its directory is ready: processes,
    /// credentials, nodes, and the waits for each stage. Each stage gets the
    /// whole timeout from when it starts: provisioning (minutes on a fresh
    /// machine) happened before and never eats the API server's time.
    async fn bring_up(
        &mut self,
        opts: &UpOptions,
        binaries: &Binaries,
        ports: Ports,
        progress: Progress<'_>,
    ) -> Result<(), Error> {
        let cluster = self;
        let Ports {
            etcd_client,
            etcd_peer,
            api: api_port,
        } = ports;
        let server = cluster.state.server.clone();
        // The state exists before any process, and every process is recorded
        // as soon as it starts, so a reaper always finds what to stop.
        cluster.save()?;
        if let Some(exe) = &opts.exe {
            let proc = reaper::spawn(
                exe,
                &opts.root,
                &opts.name,
                &cluster.layout.log(reaper::NAME),
            )?;
            cluster.state.reaper = Some(proc.record.clone());
            cluster.reaper = Some(proc);
            cluster.save()?;
        }

        let pki = pki::write(&cluster.layout.pki())?;
        write_kubeconfig(&cluster.layout.kubeconfig(), &server, &pki)?;
        std::fs::write(cluster.layout.stages(), STAGES.join("\n---\n"))
            .map_err(|e| Error::io("writing the kwok stages", e))?;
        std::fs::write(cluster.layout.audit_policy(), AUDIT_POLICY)
            .map_err(|e| Error::io("writing the audit policy", e))?;
        std::fs::write(
            cluster.layout.egress_config(),
            egress_selector_config(&cluster.layout.no_egress_socket()),
        )
        .map_err(|e| Error::io("writing the egress selector configuration", e))?;

        progress("starting etcd and kube-apiserver");
        cluster.spawn_component(
            "etcd",
            &binaries.etcd,
            etcd_args(&cluster.layout, etcd_client, etcd_peer),
        )?;
        let mut api_args = apiserver_args(&pki, etcd_client, api_port, &opts.profile);
        api_args.extend(audit_args(&cluster.layout));
        api_args.extend(egress_args(&cluster.layout));
        api_args.extend(opts.extra_apiserver_args.iter().cloned());
        cluster.spawn_component("kube-apiserver", &binaries.kube_apiserver, api_args.clone())?;
        let client = cluster.client().await?;
        cluster.wait_apiserver_ready(&client, opts.timeout).await?;

        progress("starting kube-controller-manager and kube-scheduler");
        let kubeconfig = cluster.layout.kubeconfig();
        let mut kcm = controller_manager_args(&kubeconfig, &pki, &opts.profile);
        let mut sched = scheduler_args(&kubeconfig);
        if opts.shards > 0 {
            // Thousands of pods: the clients' default 20 (controllers) and
            // 50 (scheduler) QPS would take minutes to create and bind them.
            // Not unlimited (as kwokctl does): a storm of creations saturates
            // a small machine's API server and every watch lags behind it.
            kcm.extend(raised_qps());
            sched.extend(raised_qps());
        }
        // What the processes really run with, where kubeadm would say it.
        let version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_default();
        super::kubeadm_config::publish(
            &client,
            super::kubeadm_config::cluster_configuration(&version, &api_args, &kcm),
            super::kubeadm_config::kubelet_configuration(
                opts.profile.node_lease_duration.as_secs(),
            ),
        )
        .await
        .map_err(|source| Error::Kube {
            what: "publishing the kubeadm-config ConfigMap".into(),
            source: source.into(),
        })?;
        cluster.spawn_component(
            "kube-controller-manager",
            &binaries.kube_controller_manager,
            kcm,
        )?;
        cluster.spawn_component("kube-scheduler", &binaries.kube_scheduler, sched)?;
        // The kind clusters' CSI driver, where it could be built: its
        // attacher answers the VolumeAttachments the attach-detach
        // controller makes for the nodes' volumes, as on kind.
        let csi = binaries.csi.is_file();
        if csi {
            csi::install(&client).await?;
            cluster.spawn_component(
                csi::ATTACHER,
                &binaries.csi,
                csi::attacher_args(&kubeconfig, &cluster.layout.csi()),
            )?;
        }

        // The kubelets' volume managers: reporting the volumes in use, and
        // holding a pod with claims until its volumes are there.
        match &opts.exe {
            Some(exe) => cluster.spawn_component(
                volume_agent::NAME,
                exe,
                volume_agent::args(&opts.root, &opts.name),
            )?,
            None => {
                let task = tokio::spawn(volume_agent::run(
                    client.clone(),
                    cluster.layout.clone(),
                    opts.profile.node_status_update_frequency,
                ));
                cluster.volume_task = Some(task.abort_handle());
            }
        }

        progress(&format!(
            "registering {} nodes and starting their agents",
            opts.nodes
        ));
        let names: Vec<String> = cluster.state.nodes.iter().map(|n| n.name.clone()).collect();
        if opts.shards == 0 {
            for name in &names {
                cluster.start_agent(&client, name).await?;
            }
        } else {
            agents::register_all(&client, &cluster.state.nodes, csi).await?;
            for k in 0..opts.shards {
                let args = agents::shard_args(&cluster.layout, k, &opts.profile);
                cluster.spawn_component(&agents::shard_name(k), &binaries.kwok, args)?;
            }
            for node in &mut cluster.state.nodes {
                node.agent_state = AgentState::Running;
            }
        }
        cluster.save()?;

        progress("waiting for nodes Ready and the controllers to run");
        cluster
            .wait_nodes_ready(&client, &names, opts.timeout)
            .await?;
        cluster.wait_controllers(&client, opts.timeout).await?;
        cluster.state.started_at_ms = unix_ms();
        cluster.save()
    }

    /// Starts a control-plane component and records it at once.
    fn spawn_component(
        &mut self,
        name: &str,
        program: &Path,
        args: Vec<String>,
    ) -> Result<(), Error> {
        let proc = Proc::spawn(name, program, &args, &self.layout.log(name))?;
        self.state.components.push(proc.record.clone());
        self.procs.insert(name.to_owned(), proc);
        self.save()
    }
}

/// The kubeconfig of the cluster's admin: its CA and bearer token, context
/// [`CONTEXT`].
fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> Result<(), Error> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nodefall-sim\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: nodefall-admin\n  user:\n    token: {token}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: nodefall-sim\n    user: nodefall-admin\ncurrent-context: {CONTEXT}\n",
        ca = pki.ca_cert.display(),
        token = pki.token,
    );
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Three distinct free loopback ports (bound, read, released), below the
/// kernel's ephemeral range where it leaves room: a port from that range,
/// released, can be taken by any outgoing connection before etcd or the API
/// server binds it (CI saw `bind: address already in use` for the API
/// server's); below it only a process that binds it by number can. Never
/// in Kubernetes' NodePort range either ([`NODE_PORTS_FROM`] on), which a
/// kind cluster maps to the host by number when it starts (a sim holding
/// 30080 made `kind up` fail here: `bind: address already in use`).
fn free_ports() -> Result<[u16; 3], Error> {
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let first_ephemeral = range
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<u16>().ok());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id();
    if let Some(ports) = first_ephemeral.and_then(|end| ports_below(end, seed)) {
        return Ok(ports);
    }
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| Error::io("finding free loopback ports", e))?;
    let mut ports = [0u16; 3];
    for (slot, l) in ports.iter_mut().zip(&listeners) {
        *slot = l
            .local_addr()
            .map_err(|e| Error::io("finding free loopback ports", e))?
            .port();
    }
    Ok(ports)
}

/// The lowest port [`free_ports`] picks from.
const BELOW_EPHEMERAL_FROM: u16 = 20_000;

/// The first port of Kubernetes' default NodePort range (to 32767), which
/// [`free_ports`] leaves alone.
const NODE_PORTS_FROM: u16 = 30_000;

/// Three free loopback ports in `[BELOW_EPHEMERAL_FROM, end)`, tried from a
/// point `seed` picks (so clusters started together try different ones);
/// None when the range is too small or full.
fn ports_below(end: u16, seed: u32) -> Option<[u16; 3]> {
    let span = u32::from(end.min(NODE_PORTS_FROM).checked_sub(BELOW_EPHEMERAL_FROM)?);
    if span < 1_000 {
        return None;
    }
    // Held until all three are found, so they differ.
    let mut held = Vec::new();
    for i in 0..span.min(200) {
        let offset = u16::try_from(seed.wrapping_add(i.wrapping_mul(7_919)) % span).ok()?;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", BELOW_EPHEMERAL_FROM + offset)) {
            held.push(l);
            if held.len() == 3 {
                break;
            }
        }
    }
    let ports: Vec<u16> = held
        .iter()
        .filter_map(|l| l.local_addr().ok().map(|a| a.port()))
        .collect();
    <[u16; 3]>::try_from(ports).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_three_distinct_free_ones_below_the_ephemeral_range() {
        let ports = ports_below(32_768, 12_345).unwrap();
        assert!(
            ports
                .iter()
                .all(|p| (BELOW_EPHEMERAL_FROM..NODE_PORTS_FROM).contains(p)),
            "{ports:?}"
        );
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
        // Each is free again once found (released for etcd and the API server).
        for p in ports {
            assert!(TcpListener::bind(("127.0.0.1", p)).is_ok(), "{p}");
        }
        // A range that leaves no room: the kernel's choice instead.
        assert!(ports_below(20_500, 1).is_none());
        // Every seed stays out of the NodePort range kind maps.
        for seed in [0, 9_999, 10_000, 12_767, u32::MAX] {
            let ports = ports_below(60_999, seed).unwrap();
            assert!(
                ports.iter().all(|p| *p < NODE_PORTS_FROM),
                "{seed}: {ports:?}"
            );
        }
        assert!(ports_below(10_000, 1).is_none());
        assert_eq!(free_ports().unwrap().len(), 3);
    }
}
