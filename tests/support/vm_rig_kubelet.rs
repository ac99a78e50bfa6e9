//! The real-kubelet VM: the kind node image's parts (Debian with systemd,
//! logind, udev, containerd, the kubelet, preloaded pause and agnhost
//! images), booted under libvirt with Debian's kernel as one node of a
//! simulated control plane. `scripts/vm-rig/build-node-disk.sh` makes its
//! disk; a second, small disk per VM carries what differs (node name, MACs,
//! addresses, the kubeconfig, the kubelet's configuration, authorized_keys),
//! read by the guest's `nodefall-vm-setup` unit (`scripts/vm-rig/node/`).
//!
//! What it adds to the rig's kwok guest ([`super::Rig`]: the same domain
//! life cycle, SSH, console and waits):
//! - **containment**: the node NIC is QEMU user-mode networking, whose
//!   traffic leaves as the QEMU process's own sockets. QEMU runs as a uid
//!   with no account ([`GUARD_UID`], libvirt's static DAC label), and before
//!   the domain starts iptables and ip6tables drop everything that uid sends
//!   beyond loopback ([`Guard`]; the API server listens on 127.0.0.1, the
//!   guest reaches it as its gateway). The guest has no DNS server either.
//! - **the API server reaching the kubelet** (`/configz` for the
//!   graceful-shutdown preflight, logs): it refuses loopback node addresses,
//!   so the sim's API server sends its node traffic through an egress
//!   selector to an HTTP CONNECT proxy on a Unix socket ([`Egress`]), which
//!   connects only the VMs' kubelets (by node name or InternalIP) to their
//!   forwarded loopback ports; anything else is refused and nothing is
//!   resolved or dialled beyond loopback.
//! - the Node is registered by the kubelet itself, with the domain's UUID as
//!   its systemUUID (QEMU's SMBIOS).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodefall::profile::TimingProfile;
use nodefall::sim::SimCluster;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpStream, UnixListener};

use super::{Rig, files, virsh};

/// The uid QEMU runs as for a real-kubelet VM: no account has it (checked
/// before use); the guard's rules match it.
pub const GUARD_UID: u32 = 64434;
/// The kubelet's port in the guest (upstream default).
const KUBELET_PORT: u16 = 10250;
/// Boot to Ready: 23 s measured on the 2-core machine
/// (`scripts/vm-rig/real-kubelet-probe.sh`), generously.
const BOOT_TIMEOUT: Duration = Duration::from_secs(240);

/// How the VM's kubelet is configured.
#[derive(Debug, Clone)]
pub struct Options {
    /// `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods` (None:
    /// both 0s, graceful node shutdown off).
    pub shutdown_grace: Option<(Duration, Duration)>,
    pub vcpus: u32,
    pub memory_mib: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            shutdown_grace: Some((Duration::from_secs(30), Duration::from_secs(10))),
            vcpus: 1,
            memory_mib: 2048,
        }
    }
}

/// A simulated control plane's timings for real kubelets in VMs: a grace
/// period of 40 s (the go/no-go's bar: a kubelet under TCG keeps a 40 s
/// lease renewed every 10 s without a miss), the rest compressed.
pub fn vm_profile() -> TimingProfile {
    let mut p = TimingProfile::fast();
    p.name = "vm".into();
    p.node_monitor_grace_period = Duration::from_secs(40);
    p.node_monitor_period = Duration::from_secs(2);
    p.node_startup_grace_period = Duration::from_secs(60);
    p.node_lease_duration = Duration::from_secs(40);
    p.node_status_update_frequency = Duration::from_secs(10);
    p
}

/// The HTTP CONNECT proxy the sim's API server sends its node traffic
/// through (an egress selector's `cluster` connection on a Unix socket).
/// Only registered kubelets are connected, each to its loopback port.
#[derive(Debug, Clone)]
pub struct Egress {
    socket: PathBuf,
    config: PathBuf,
    routes: Arc<Mutex<HashMap<String, u16>>>,
    /// Every CONNECT target asked for, in order (tests read it).
    pub asked: Arc<Mutex<Vec<String>>>,
}

impl Egress {
    /// Starts the proxy on a socket in `dir` (on the current tokio runtime)
    /// and writes the egress selector configuration beside it.
    pub fn start(dir: &Path) -> Result<Egress, String> {
        let socket = dir.join("egress.sock");
        let config = dir.join("egress.yaml");
        std::fs::write(&config, nodefall::sim::egress_selector_config(&socket))
            .map_err(|e| format!("writing {}: {e}", config.display()))?;
        let listener = UnixListener::bind(&socket)
            .map_err(|e| format!("binding {}: {e}", socket.display()))?;
        let egress = Egress {
            socket,
            config,
            routes: Arc::default(),
            asked: Arc::default(),
        };
        let (routes, asked) = (egress.routes.clone(), egress.asked.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(connect(stream, routes.clone(), asked.clone()));
            }
        });
        Ok(egress)
    }

    /// The API server's flags that send its node traffic here.
    pub fn apiserver_args(&self) -> Vec<String> {
        vec![
            "--egress-selector-config-file".into(),
            self.config.display().to_string(),
        ]
    }

    fn route(&self, host: &str, port: u16) {
        self.routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(format!("{host}:{KUBELET_PORT}"), port);
    }
}

/// One CONNECT: the target must be a registered kubelet; then bytes flow
/// both ways between the API server and the VM's forwarded port.
async fn connect(
    stream: tokio::net::UnixStream,
    routes: Arc<Mutex<HashMap<String, u16>>>,
    asked: Arc<Mutex<Vec<String>>>,
) {
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    if stream.read_line(&mut line).await.is_err() {
        return;
    }
    let target = line
        .strip_prefix("CONNECT ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("")
        .to_owned();
    // The rest of the request head, up to its blank line.
    loop {
        let mut header = String::new();
        match stream.read_line(&mut header).await {
            Ok(0) | Err(_) => return,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    asked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(target.clone());
    let port = routes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&target)
        .copied();
    let upstream = match port {
        Some(port) => TcpStream::connect(("127.0.0.1", port)).await.ok(),
        None => None,
    };
    let Some(mut upstream) = upstream else {
        let _ = stream
            .get_mut()
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            .await;
        return;
    };
    if stream
        .get_mut()
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
}

/// iptables and ip6tables rules dropping what [`GUARD_UID`] sends beyond
/// loopback, removed when dropped.
#[derive(Debug)]
pub struct Guard {
    comment: String,
    installed: Vec<&'static str>,
}

impl Guard {
    fn rule(&self, op: &str) -> Vec<String> {
        let uid = GUARD_UID.to_string();
        [
            "-w",
            op,
            "OUTPUT",
            "!",
            "-o",
            "lo",
            "-m",
            "owner",
            "--uid-owner",
            &uid,
            "-m",
            "comment",
            "--comment",
            &self.comment,
            "-j",
            "DROP",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Installs both rules (the first one at the top of OUTPUT).
    pub fn install(comment: &str) -> Result<Guard, String> {
        let account = Command::new("getent")
            .args(["passwd", &GUARD_UID.to_string()])
            .output()
            .map_err(|e| format!("getent: {e}"))?;
        if account.status.success() {
            return Err(format!(
                "uid {GUARD_UID} has an account here; the VM guard needs a uid of its own"
            ));
        }
        let mut guard = Guard {
            comment: comment.to_owned(),
            installed: Vec::new(),
        };
        for tool in ["iptables", "ip6tables"] {
            run(tool, &guard.rule("-I"))?;
            guard.installed.push(tool);
        }
        Ok(guard)
    }

    /// Packets the rules dropped so far (IPv4 and IPv6 together).
    pub fn dropped(&self) -> u64 {
        self.installed
            .iter()
            .filter_map(|tool| {
                let out = Command::new(tool)
                    .args(["-w", "-nvxL", "OUTPUT"])
                    .output()
                    .ok()?;
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.lines()
                    .find(|l| l.contains(&self.comment))
                    .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            })
            .sum()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for tool in self.installed.drain(..).rev().collect::<Vec<_>>() {
            if let Err(e) = run(tool, &self.rule("-D")) {
                eprintln!("vm guard: {e}");
            }
        }
    }
}

fn run(tool: &str, args: &[String]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg("60")
        .arg(tool)
        .args(args)
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{tool} {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The node disk, kernel and initrd (`build-node-disk.sh`, cached).
#[derive(Debug)]
struct Disk {
    kernel: PathBuf,
    initrd: PathBuf,
    disk: PathBuf,
}

fn build_disk(cache: &Path) -> Result<Disk, String> {
    let script = super::repo().join("scripts/vm-rig/build-node-disk.sh");
    let out = files::run_script(&script, &[("NODEFALL_CACHE", cache)], 900)?;
    Ok(Disk {
        kernel: out.field("kernel")?,
        initrd: out.field("initrd")?,
        disk: out.field("disk")?,
    })
}

/// A running real-kubelet VM: the rig's domain plus its guard.
#[derive(Debug)]
pub struct KubeletVm {
    /// The domain, SSH and console ([`Rig`]'s; dropping it destroys and
    /// undefines the domain).
    pub rig: Rig,
    /// The node's address on its network (the Node's InternalIP).
    pub node_ip: String,
    /// Drops what QEMU sends beyond loopback; removed after the domain.
    pub guard: Guard,
}

impl KubeletVm {
    /// Boots a VM whose kubelet joins `cluster` (started with
    /// `egress.apiserver_args()`) as node `node`, and waits until the Node
    /// it registers is Ready.
    pub async fn boot(
        cluster: &SimCluster,
        egress: &Egress,
        node: &str,
        opts: &Options,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<KubeletVm, String> {
        super::available()?;
        let started = Instant::now();
        let disk = build_disk(&nodefall::sim::binaries::cache_root())?;
        log(&format!(
            "node disk {} ready in {:.1?}",
            disk.disk.display(),
            started.elapsed()
        ));
        let (rig, n) = Rig::new_domain(node, "nodefall-vm-kubelet-")?;
        // QEMU runs as the guard uid: it must reach the files in here.
        std::fs::set_permissions(rig.dir.path(), files::mode_bits(0o755))
            .map_err(|e| format!("chmod {}: {e}", rig.dir.path().display()))?;
        // Each VM its own user-mode network, so the egress proxy tells
        // their InternalIPs apart.
        let net = format!("10.77.{}", n % 250);
        let node_ip = format!("{net}.15");
        let kubelet_port = files::free_port()?;
        files::keygen(&rig.ssh_key())?;
        let d = rig.dir.path();
        let kernel = d.join("vmlinuz");
        let initrd = d.join("initrd.img");
        let root = d.join("root.img");
        copy(&disk.kernel, &kernel, false)?;
        copy(&disk.initrd, &initrd, false)?;
        copy(&disk.disk, &root, true)?;
        let config = d.join("cfg.img");
        write_config(
            cluster,
            &ConfigDisk {
                node,
                net: &net,
                node_mac: &rig.node_mac,
                mgmt_mac: &rig.mgmt_mac,
                pod_cidr: &format!("10.244.{}.0/24", 100 + n % 100),
                authorized_key: &rig.ssh_key().with_extension("pub"),
                opts,
            },
            &d.join("cfg"),
            &config,
        )?;
        let xml = domain_xml(&Domain {
            rig: &rig,
            kernel: &kernel,
            initrd: &initrd,
            root: &root,
            config: &config,
            net: &net,
            kubelet_port,
            opts,
        });
        let xml_path = d.join("domain.xml");
        std::fs::write(&xml_path, xml).map_err(|e| format!("writing the domain XML: {e}"))?;
        let guard = Guard::install(&rig.domain)?;
        let mut vm = KubeletVm {
            rig,
            node_ip,
            guard,
        };
        virsh(&["define", &xml_path.display().to_string()])?;
        vm.rig.defined = true;
        egress.route(node, kubelet_port);
        egress.route(&vm.node_ip, kubelet_port);

        let client = cluster
            .client()
            .await
            .map_err(|e| format!("a client for the sim cluster: {e}"))?;
        let t0 = Instant::now();
        virsh(&["start", &vm.rig.domain])?;
        log(&format!(
            "domain {} ({}) started as uid {GUARD_UID}; SSH on 127.0.0.1:{}, kubelet on 127.0.0.1:{kubelet_port}",
            vm.rig.domain, vm.rig.uuid, vm.rig.ssh_port
        ));
        vm.rig.wait_ready(&client, "True", BOOT_TIMEOUT).await?;
        vm.rig.booted_in = t0.elapsed();
        log(&format!(
            "node {node} registered by its kubelet, Ready {:.1?} after virsh start",
            vm.rig.booted_in
        ));
        Ok(vm)
    }

    /// Waits until the Node is Ready again and its kubelet has renewed the
    /// lease since ([`Rig::wait_back`]).
    pub async fn wait_back(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> Result<Duration, String> {
        self.rig.wait_back(client, timeout).await
    }
}

fn copy(from: &Path, to: &Path, sparse: bool) -> Result<(), String> {
    let mut cmd = Command::new("cp");
    if sparse {
        cmd.arg("--sparse=always");
    }
    let out = cmd
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("cp: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cp {} {}: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What the guest's setup reads from its config disk.
struct ConfigDisk<'a> {
    node: &'a str,
    net: &'a str,
    node_mac: &'a str,
    mgmt_mac: &'a str,
    pod_cidr: &'a str,
    authorized_key: &'a Path,
    opts: &'a Options,
}

fn write_config(
    cluster: &SimCluster,
    c: &ConfigDisk<'_>,
    stage: &Path,
    image: &Path,
) -> Result<(), String> {
    let (server, ca, token) = files::read_kubeconfig(&cluster.kubeconfig_path())?;
    let port = server
        .rsplit_once(':')
        .map(|(_, p)| p.trim_end_matches('/'))
        .ok_or_else(|| format!("no port in the API server URL {server}"))?;
    let net = c.net;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    \
         server: https://{net}.2:{port}\n    certificate-authority: /etc/kubernetes/pki/ca.crt\n    \
         tls-server-name: 127.0.0.1\nusers:\n- name: kubelet\n  user:\n    token: {token}\n\
         contexts:\n- name: sim\n  context: {{cluster: sim, user: kubelet}}\ncurrent-context: sim\n"
    );
    let profile = &cluster.state().profile;
    let (grace, critical) = c.opts.shutdown_grace.unwrap_or_default();
    // Anonymous requests allowed: the API server presents no client
    // certificate (the sim has none for kubelets) when it proxies.
    let config = format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         cgroupDriver: systemd\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n\
         failSwapOn: false\nauthentication:\n  anonymous: {{enabled: true}}\n  webhook: {{enabled: false}}\n\
         authorization: {{mode: AlwaysAllow}}\nnodeStatusUpdateFrequency: {}s\n\
         nodeLeaseDurationSeconds: {}\nshutdownGracePeriod: {}s\nshutdownGracePeriodCriticalPods: {}s\n\
         imageGCHighThresholdPercent: 100\n\
         evictionHard: {{nodefs.available: \"0%\", nodefs.inodesFree: \"0%\", imagefs.available: \"0%\"}}\n",
        profile.node_status_update_frequency.as_secs().max(1),
        profile.node_lease_duration.as_secs().max(1),
        grace.as_secs(),
        critical.as_secs(),
    );
    let env = format!(
        "NODE_NAME={}\nNODE_MAC={}\nNODE_IP={net}.15\nNODE_GATEWAY={net}.2\nMGMT_MAC={}\n\
         MGMT_IP=10.0.3.15\nPOD_CIDR={}\n",
        c.node, c.node_mac, c.mgmt_mac, c.pod_cidr
    );
    let flags = format!(
        "KUBELET_KUBEADM_ARGS=\"--node-ip={net}.15 --hostname-override={}\"\n",
        c.node
    );
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
    std::fs::create_dir_all(stage).map_err(|e| format!("mkdir {}: {e}", stage.display()))?;
    let entries: [(&str, Vec<u8>); 6] = [
        ("env", env.into_bytes()),
        ("kubelet.conf", kubeconfig.into_bytes()),
        ("ca.crt", read(Path::new(&ca))?),
        ("config.yaml", config.into_bytes()),
        ("kubeadm-flags.env", flags.into_bytes()),
        ("authorized_keys", read(c.authorized_key)?),
    ];
    for (name, contents) in entries {
        let path = stage.join(name);
        std::fs::write(&path, contents).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-L", "nodefall-cfg", "-d"])
        .arg(stage)
        .arg(image)
        .arg("16M")
        .output()
        .map_err(|e| format!("mkfs.ext4: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "mkfs.ext4 of the config disk: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

struct Domain<'a> {
    rig: &'a Rig,
    kernel: &'a Path,
    initrd: &'a Path,
    root: &'a Path,
    config: &'a Path,
    net: &'a str,
    kubelet_port: u16,
    opts: &'a Options,
}

/// The domain: the rig's shape (direct kernel boot, a libvirt-managed
/// user-mode node NIC, the management NIC on the QEMU command line), with
/// the node disk, the config disk, the node network's own subnet, the
/// kubelet's port forwarded beside SSH, and QEMU as the guard uid.
fn domain_xml(d: &Domain<'_>) -> String {
    let p = |p: &Path| files::xml_escape(&p.display().to_string());
    format!(
        "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <memory unit='MiB'>{memory}</memory>
  <vcpu>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>root=/dev/vda rw console=ttyS0 ipv6.disable=1 systemd.show_status=1</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='unsafe'/>
      <source file='{root}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{config}'/>
      <target dev='vdb' bus='virtio'/>
      <readonly/>
    </disk>
    <interface type='user'>
      <mac address='{node_mac}'/>
      <ip family='ipv4' address='{net}.0' prefix='24'/>
      <model type='e1000'/>
      <rom enabled='no'/>
    </interface>
    <serial type='file'>
      <source path='{console}'/>
      <target port='0'/>
    </serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
  <seclabel type='static' model='dac' relabel='yes'>
    <label>+{uid}:+{uid}</label>
  </seclabel>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=mgmt,net=10.0.3.0/24,restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:{ssh}-:22,hostfwd=tcp:127.0.0.1:{kubelet}-:{KUBELET_PORT}'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='e1000,netdev=mgmt,mac={mgmt_mac},romfile=,bus=pci.0,addr=0x9'/>
  </qemu:commandline>
</domain>
",
        name = files::xml_escape(&d.rig.domain),
        uuid = d.rig.uuid,
        memory = d.opts.memory_mib,
        vcpus = d.opts.vcpus,
        kernel = p(d.kernel),
        initrd = p(d.initrd),
        root = p(d.root),
        config = p(d.config),
        node_mac = d.rig.node_mac,
        net = d.net,
        console = p(&d.rig.console_log()),
        uid = GUARD_UID,
        ssh = d.rig.ssh_port,
        kubelet = d.kubelet_port,
        mgmt_mac = d.rig.mgmt_mac,
    )
}
