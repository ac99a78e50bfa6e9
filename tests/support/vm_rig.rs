//! The real-VM test rig: a tiny QEMU guest under libvirt (`qemu:///system`)
//! that is one Kubernetes node of a simulated control plane.
//!
//! The guest boots Debian's kernel directly with the rig's base initramfs
//! (`scripts/vm-rig/build-initramfs.sh`: busybox, e1000/button/evdev, dropbear,
//! kwok) plus a small per-run overlay cpio appended to it (node name, MACs,
//! the kubeconfig for the sim's API server at `https://10.0.2.2:PORT`, kwok's
//! arguments and stages, authorized_keys). Two NICs:
//! - the **node network**: a libvirt-managed `<interface type='user'>` e1000
//!   (guest 10.0.2.15, the Node's InternalIP; 10.0.2.2 is host loopback). It
//!   is the only interface libvirt lists, and `domif-setlink` cuts it;
//! - the **management** NIC, added with `<qemu:commandline>` (a second
//!   user-mode network, restricted, with a forward from a loopback port to the
//!   guest's SSH), so SSH keeps working while the node network is cut.
//!
//! Include it from a test crate with
//! `#[path = "support/vm_rig.rs"] mod vm_rig;` (Cargo builds only the files
//! directly under `tests/` as test crates). Tests may shell out to `virsh`;
//! the product may not. See `scripts/vm-rig/README.md`.

#![allow(dead_code, reason = "each test crate uses its own part of the rig")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nodefall::profile::TimingProfile;
use nodefall::sim::binaries::{Binaries, cache_root};
use nodefall::sim::{SimCluster, UpOptions};

#[path = "vm_rig_files.rs"]
mod files;
/// Node object, Ready and Lease watches.
#[path = "vm_rig_k8s.rs"]
pub mod k8s;
/// The real-kubelet VM (the kind node image's parts), its guard and the
/// API server's way to its kubelet.
#[path = "vm_rig_kubelet.rs"]
pub mod kubelet;

use k8s::{wait_lease_renewed, wait_node_ready, wait_node_untainted};

#[path = "skip.rs"]
pub mod skip;

/// The guest's address on the node network (QEMU user-mode default), the
/// Node's InternalIP.
pub const NODE_IP: &str = "10.0.2.15";
/// The node network's gateway: QEMU maps it to the host's loopback, where the
/// sim's API server listens.
pub const NODE_GATEWAY: &str = "10.0.2.2";
/// Where the guest's SSH is forwarded to (port: [`Rig::ssh_port`]).
pub const SSH_HOST: &str = "127.0.0.1";
/// The libvirt connection every rig domain lives on.
pub const URI: &str = "qemu:///system";
/// Every rig domain's name starts with this, then `<pid>-<n>`.
pub const DOMAIN_PREFIX: &str = "nodefall-rig-";
/// Label on the Node objects the rig creates.
pub const RIG_NODE_LABEL: &str = "nodefall.dev/vm-rig";

/// Boot to Ready, generously: about 10 s when idle, TCG on a loaded 2-core
/// machine can take several times that.
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A running rig VM. Dropping it destroys and undefines the domain and
/// removes its files, however the test ends (on a panic it prints the tail of
/// the serial console first).
#[derive(Debug)]
pub struct Rig {
    /// The libvirt domain name (`nodefall-rig-<pid>-<n>`).
    pub domain: String,
    /// The domain UUID: also the guest's SMBIOS UUID and the Node's
    /// `status.nodeInfo.systemUUID`.
    pub uuid: String,
    /// The Kubernetes node the guest plays.
    pub node: String,
    /// MAC of the node-network NIC (the libvirt-managed interface).
    pub node_mac: String,
    /// MAC of the management NIC (SSH; not a libvirt interface).
    pub mgmt_mac: String,
    /// SSH to the guest: `root@127.0.0.1:ssh_port` with `ssh_key`.
    pub ssh_port: u16,
    /// Time from `virsh start` to the Node Ready.
    pub booted_in: Duration,
    /// Whether `virsh define` succeeded (Drop undefines only then).
    defined: bool,
    dir: tempfile::TempDir,
}

/// The value, or the test fails with the rig's message.
pub fn ok<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Prints each fault step of a run with the commands it ran and how long
/// after the step began the next expectation saw the Node change.
pub fn print_figures(r: &nodefall::record::RunResult) {
    eprintln!("figures (fault step start -> the expectation's transition):");
    for (i, s) in r.steps.iter().enumerate() {
        let Some(e) = r
            .expectations
            .iter()
            .find(|e| Some(e.index) == s.index.map(|i| i + 1))
        else {
            continue;
        };
        let took: Vec<String> = s
            .commands
            .iter()
            .map(|c| format!("{} {}ms x{}", c.role, c.ms, c.attempts))
            .collect();
        eprintln!(
            "  {i:>2} {:<14} commands [{}] -> {:?}, the Node changed {} ms after the step began",
            s.description.split(' ').next().unwrap_or(""),
            took.join(", "),
            e.verdict,
            e.observed.map_or("-".into(), |ms| ms.to_string()),
        );
    }
}

/// Whether this machine can run the rig: `Err` says what is missing.
pub fn available() -> Result<(), String> {
    let mut missing = Vec::new();
    let tools = [
        "virsh",
        "ssh",
        "ssh-keygen",
        "cpio",
        "busybox",
        "dropbear",
        "dropbearkey",
    ];
    for tool in tools {
        if which(tool).is_none() {
            missing.push(format!("`{tool}` not found"));
        }
    }
    if files::kernel_present().is_none() {
        missing.push("no /boot/vmlinuz-* (apt-get install linux-image-amd64)".to_owned());
    }
    if missing.is_empty() {
        match virsh(&["uri"]) {
            Ok(_) => {}
            Err(e) => missing.push(format!(
                "{URI} does not answer (start it: scripts/vm-rig/libvirt-daemons.sh start): {e}"
            )),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// Whether a rig test should run: true when the rig is available. Otherwise
/// the test is skipped out loud (`SKIPPED: ...`), except under CI, where it
/// fails: CI must really run the VM tests.
pub fn should_run(test: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(why) => {
            skip::skip(test, &format!("the VM rig is unavailable: {why}"));
            false
        }
    }
}

/// Runs `virsh -c qemu:///system ARGS` (at most 2 minutes); stdout, or an error with the command
/// line and stderr.
pub fn virsh(args: &[&str]) -> Result<String, String> {
    // Bounded: a wedged libvirtd must fail the test, not hang it.
    let out = Command::new("timeout")
        .arg("120")
        .arg("virsh")
        .arg("-c")
        .arg(URI)
        .args(args)
        .output()
        .map_err(|e| format!("virsh {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "virsh {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `nodefall ARGS` against `kubeconfig`, journaling into `journals`, with
/// no libvirt URI from the environment and no stdin.
pub fn nodefall(journals: &Path, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodefall"));
    c.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NODEFALL_JOURNAL_DIR", journals)
        .env_remove("LIBVIRT_DEFAULT_URI")
        .stdin(std::process::Stdio::null());
    c
}

/// Names of the domains this process defined that libvirt still knows.
pub fn leftover_domains() -> Vec<String> {
    let mine = format!("{DOMAIN_PREFIX}{}-", std::process::id());
    virsh(&["list", "--all", "--name"])
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|n| n.starts_with(&mine))
        .map(str::to_owned)
        .collect()
}

/// A simulated control plane without nodes (`fast` profile) under `root`,
/// for the rig's VM to join as a node.
pub async fn bare_control_plane(root: &Path, name: &str) -> SimCluster {
    let mut opts = UpOptions::new(name, TimingProfile::fast());
    opts.root = root.to_owned();
    opts.nodes = 0;
    let mut progress = |m: &str| eprintln!("sim: {m}");
    SimCluster::up(&opts, &mut progress)
        .await
        .expect("a bare simulated control plane")
}

impl Rig {
    /// Boots a VM that plays node `node` of `cluster` (a sim cluster, e.g. a
    /// bare control plane from `UpOptions { nodes: 0, .. }`): builds the
    /// overlay, defines and starts the domain, creates the Node object and
    /// waits until it is Ready. `log` gets progress lines.
    pub async fn boot(
        cluster: &SimCluster,
        node: &str,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Rig, String> {
        available()?;
        let kwok = Binaries::at(&cache_root(), cluster.state().versions.clone()).kwok;
        let started = Instant::now();
        let base = files::build_base(&cache_root(), &kwok)?;
        log(&format!(
            "base initramfs {} ready in {:.1?}",
            base.initrd.display(),
            started.elapsed()
        ));
        let (mut rig, n) = Rig::new_domain(node, "nodefall-vm-rig-")?;
        files::keygen(&rig.ssh_key())?;
        let overlay = files::Overlay {
            node,
            node_mac: &rig.node_mac,
            mgmt_mac: &rig.mgmt_mac,
            pod_cidr: &format!("10.244.{}.0/24", 200 + n % 50),
            lease: cluster.state().profile.node_lease_duration,
            kubeconfig: &cluster.kubeconfig_path(),
            stages: &cluster.dir().join("kwok-stages.yaml"),
            authorized_key: &rig.ssh_key().with_extension("pub"),
        };
        let initrd = rig.dir.path().join("initrd.cpio");
        overlay.write(&rig.dir.path().join("overlay"), &base.initrd, &initrd)?;
        let xml = files::domain_xml(&files::Domain {
            name: &rig.domain,
            uuid: &rig.uuid,
            kernel: &base.kernel,
            initrd: &initrd,
            console: &rig.console_log(),
            node_mac: &rig.node_mac,
            mgmt_mac: &rig.mgmt_mac,
            ssh_port: rig.ssh_port,
        });
        let xml_path = rig.dir.path().join("domain.xml");
        std::fs::write(&xml_path, xml).map_err(|e| format!("writing the domain XML: {e}"))?;
        // From here on `rig` is dropped on any error: destroy + undefine.
        virsh(&["define", &xml_path.display().to_string()])?;
        rig.defined = true;

        let client = cluster
            .client()
            .await
            .map_err(|e| format!("a client for the sim cluster: {e}"))?;
        k8s::create_node(&client, &rig).await?;
        let t0 = Instant::now();
        virsh(&["start", &rig.domain])?;
        log(&format!(
            "domain {} ({}) started; SSH on {SSH_HOST}:{}",
            rig.domain, rig.uuid, rig.ssh_port
        ));
        let waiting_from = t0.elapsed();
        rig.booted_in = waiting_from + rig.wait_back(&client, BOOT_TIMEOUT).await?;
        log(&format!(
            "node {node} Ready {:.1?} after virsh start",
            rig.booted_in
        ));
        Ok(rig)
    }

    /// The libvirt backend's settings as a user would give them for this
    /// VM: SSH through the management NIC's forwarded loopback port.
    #[cfg(feature = "libvirt")]
    pub fn backend_settings(&self) -> nodefall::backend::libvirt::Settings {
        let mut s = nodefall::backend::libvirt::Settings::new();
        s.ssh_hosts.insert(
            self.node.clone(),
            nodefall::backend::ssh::SshTarget::at(SSH_HOST, Some(self.ssh_port)),
        );
        s.ssh.user = Some("root".into());
        s.ssh.key = Some(self.ssh_key().display().to_string());
        s.ssh.options = vec![
            "StrictHostKeyChecking=no".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "LogLevel=ERROR".into(),
        ];
        s.shutdown_timeout_secs = 120;
        s
    }

    /// A domain not yet defined: its name (`nodefall-rig-<pid>-<n>`), a
    /// random UUID, MACs and SSH port, its files in a new temporary
    /// directory named with `prefix`; and `n`, this process's count of rig
    /// VMs so far.
    fn new_domain(node: &str, prefix: &str) -> Result<(Rig, u32), String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = files::random_bytes::<16>()?;
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| format!("creating the VM's temp dir: {e}"))?;
        let rig = Rig {
            domain: format!("{DOMAIN_PREFIX}{}-{n}", std::process::id()),
            uuid: files::uuid(id),
            node: node.to_owned(),
            // Locally administered QEMU range; the last bytes tell them apart.
            node_mac: format!("52:54:00:{:02x}:{:02x}:{:02x}", id[0], id[1], id[2] & 0xfe),
            mgmt_mac: format!("52:54:00:{:02x}:{:02x}:{:02x}", id[0], id[1], id[2] | 0x01),
            ssh_port: files::free_port()?,
            booted_in: Duration::ZERO,
            defined: false,
            dir,
        };
        Ok((rig, n))
    }

    /// The throwaway SSH private key authorized in the guest.
    pub fn ssh_key(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    /// The guest's serial console (kernel, init, dropbear, acpid and kwok).
    pub fn console_log(&self) -> PathBuf {
        self.dir.path().join("console.log")
    }

    /// The last `lines` lines of the serial console.
    pub fn console_tail(&self, lines: usize) -> String {
        let text = std::fs::read(self.console_log()).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// `ssh` arguments up to the destination (openssh client to dropbear).
    pub fn ssh_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
        ]
        .map(str::to_owned)
        .to_vec();
        args.push("-i".into());
        args.push(self.ssh_key().display().to_string());
        args.push("-p".into());
        args.push(self.ssh_port.to_string());
        args.push(format!("root@{SSH_HOST}"));
        args
    }

    /// Runs a shell command in the guest over the management NIC (at most
    /// 30 s). The raw output; see [`Rig::ssh_ok`] for the checked form.
    pub fn ssh(&self, command: &str) -> Result<Output, String> {
        Command::new("timeout")
            .arg("30")
            .arg("ssh")
            .args(self.ssh_args())
            .arg(command)
            .output()
            .map_err(|e| format!("running ssh: {e}"))
    }

    /// Runs a shell command in the guest; its stdout if it succeeded.
    pub fn ssh_ok(&self, command: &str) -> Result<String, String> {
        let out = self.ssh(command)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "ssh {command:?} on {}: {}: {}",
                self.domain,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The domain's state as `virsh domstate` prints it (`running`,
    /// `paused`, `shut off`, ...).
    pub fn domstate(&self) -> Result<String, String> {
        virsh(&["domstate", &self.domain]).map(|s| s.trim().to_owned())
    }

    /// Waits until the Node is Ready again and its agent has renewed the
    /// lease since: only then has the controller a fresh heartbeat, so a
    /// fault injected right after starts its grace period from now. (After a
    /// resume, kwok turns the Node Ready at once, but with the guest clock
    /// still where it stopped, so the heartbeat time may equal the one the
    /// controller already saw; the lease renewal follows about a second
    /// later.) Then until the node lifecycle controller has taken its taints
    /// off, so pods made next can land on it. Returns the time to Ready.
    pub async fn wait_back(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> Result<Duration, String> {
        let ready = self.wait_ready(client, "True", timeout).await?;
        wait_lease_renewed(client, &self.node, timeout)
            .await
            .map_err(|e| format!("{e}; serial console tail:\n{}", self.console_tail(40)))?;
        wait_node_untainted(client, &self.node, timeout).await?;
        Ok(ready)
    }

    /// Polls `virsh domstate` (every 100 ms) until it is `want`.
    pub fn wait_domstate(&self, want: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let state = self.domstate()?;
            if state == want {
                return Ok(start.elapsed());
            }
            if start.elapsed() >= timeout {
                return Err(format!(
                    "domain {}: state `{want}` not reached within {timeout:?} (still `{state}`); \
                     serial console tail:\n{}",
                    self.domain,
                    self.console_tail(40)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Watches this rig's Node until Ready is `want`; on a timeout the error
    /// carries the domain state and the serial console tail.
    pub async fn wait_ready(
        &self,
        client: &kube::Client,
        want: &str,
        timeout: Duration,
    ) -> Result<Duration, String> {
        wait_node_ready(client, &self.node, want, timeout)
            .await
            .map_err(|e| {
                format!(
                    "{e}; domain {} is `{}`; serial console tail:\n{}",
                    self.domain,
                    self.domstate().unwrap_or_else(|e| e),
                    self.console_tail(40)
                )
            })
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "vm rig {}: serial console tail:\n{}",
                self.domain,
                self.console_tail(40)
            );
        }
        if !self.defined {
            return;
        }
        // Fails when the domain is already off: nothing to do then.
        let _ = virsh(&["destroy", &self.domain]);
        if let Err(e) = virsh(&["undefine", &self.domain]) {
            eprintln!("vm rig: {e}");
        }
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// The repository root (where `scripts/` is).
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
