//! The files of a rig VM: the base initramfs (built by
//! `scripts/vm-rig/build-initramfs.sh`), the per-run overlay cpio, the domain
//! XML, and small helpers (ids, ports, keys).

use std::fmt::Write as _;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{NODE_GATEWAY, NODE_IP};

/// The management network (SSH only; restricted: the guest cannot reach out
/// through it).
const MGMT_NET: &str = "10.0.3.0/24";
const MGMT_IP: &str = "10.0.3.15";
/// Guest memory: the initramfs (~70 MB, kwok most of it) is unpacked into RAM.
const MEMORY_MIB: u32 = 512;

/// The kernel and base initramfs every rig VM boots.
#[derive(Debug)]
pub struct Base {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

pub fn kernel_present() -> Option<PathBuf> {
    std::fs::read_dir("/boot")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
}

/// Builds the base initramfs into `cache/vm-rig/`, or finds it there.
pub fn build_base(cache: &Path, kwok: &Path) -> Result<Base, String> {
    let script = super::repo().join("scripts/vm-rig/build-initramfs.sh");
    let out = run_script(
        &script,
        &[("NODEFALL_CACHE", cache), ("NODEFALL_KWOK", kwok)],
        300,
    )?;
    Ok(Base {
        kernel: out.field("kernel")?,
        initrd: out.field("initrd")?,
    })
}

/// What a build script printed: `key=value` lines.
pub struct Printed {
    script: PathBuf,
    stdout: String,
}

impl Printed {
    /// The path after `key=`, or an error naming the script and what it printed.
    pub fn field(&self, key: &str) -> Result<PathBuf, String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(PathBuf::from)
            .ok_or_else(|| {
                format!(
                    "{} printed no `{key}=`: {}",
                    self.script.display(),
                    self.stdout
                )
            })
    }
}

/// Runs a build script under bash (at most `secs` seconds) with `env`; what
/// it printed, or an error with its stderr.
pub fn run_script(script: &Path, env: &[(&str, &Path)], secs: u32) -> Result<Printed, String> {
    let out = Command::new("timeout")
        .arg(secs.to_string())
        .arg("bash")
        .arg(script)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Printed {
        script: script.to_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// What differs per run, carried by a cpio archive appended to the base.
#[derive(Debug)]
pub struct Overlay<'a> {
    pub node: &'a str,
    pub node_mac: &'a str,
    pub mgmt_mac: &'a str,
    pub pod_cidr: &'a str,
    pub lease: Duration,
    /// The sim cluster's kubeconfig (server, CA file and token are read from it).
    pub kubeconfig: &'a Path,
    /// The kwok stages the sim runs its own nodes with.
    pub stages: &'a Path,
    pub authorized_key: &'a Path,
}

impl Overlay<'_> {
    /// Writes the overlay's tree under `stage`, archives it, and writes
    /// `base` followed by the overlay to `out` (the kernel unpacks
    /// concatenated cpio archives in order, later files replacing earlier).
    pub fn write(&self, stage: &Path, base: &Path, out: &Path) -> Result<(), String> {
        let (server, ca, token) = read_kubeconfig(self.kubeconfig)?;
        let port = server
            .rsplit_once(':')
            .map(|(_, p)| p.trim_end_matches('/'))
            .ok_or_else(|| format!("no port in the API server URL {server}"))?;
        // The API server listens on host loopback; the guest reaches it at
        // 10.0.2.2. Its serving certificate names 127.0.0.1, so TLS checks
        // that name instead of the address dialled.
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: nodefall-sim\n  cluster:\n    \
             server: https://{NODE_GATEWAY}:{port}\n    certificate-authority: /etc/kwok/ca.crt\n    \
             tls-server-name: 127.0.0.1\nusers:\n- name: nodefall-admin\n  user:\n    token: {token}\n\
             contexts:\n- name: nodefall-sim\n  context:\n    cluster: nodefall-sim\n    \
             user: nodefall-admin\ncurrent-context: nodefall-sim\n"
        );
        let env = format!(
            "NODE_NAME={}\nNODE_MAC={}\nNODE_IP={NODE_IP}\nNODE_GATEWAY={NODE_GATEWAY}\n\
             MGMT_MAC={}\nMGMT_IP={MGMT_IP}\n",
            self.node, self.node_mac, self.mgmt_mac
        );
        let mut args = kwok_args(self.node, self.pod_cidr, self.lease).join("\n");
        args.push('\n');
        let read = |p: &Path| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
        let files: [(&str, Vec<u8>, u32); 6] = [
            ("etc/rig/env", env.into_bytes(), 0o644),
            ("etc/rig/kwok.args", args.into_bytes(), 0o644),
            ("etc/kwok/kubeconfig", kubeconfig.into_bytes(), 0o600),
            ("etc/kwok/ca.crt", read(Path::new(&ca))?, 0o644),
            ("etc/kwok/stages.yaml", read(self.stages)?, 0o644),
            (
                "root/.ssh/authorized_keys",
                read(self.authorized_key)?,
                0o600,
            ),
        ];
        for (path, contents, mode) in files {
            let path = stage.join(path);
            let parent = path.parent().unwrap_or(stage);
            std::fs::create_dir_all(parent)
                .and_then(|()| std::fs::write(&path, contents))
                .and_then(|()| std::fs::set_permissions(&path, mode_bits(mode)))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        for dir in ["root", "root/.ssh"] {
            std::fs::set_permissions(stage.join(dir), mode_bits(0o700))
                .map_err(|e| format!("chmod {dir}: {e}"))?;
        }
        let overlay = stage.with_extension("cpio");
        let cpio = Command::new("sh")
            .arg("-c")
            .arg("cd \"$1\" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >\"$2\"")
            .arg("sh")
            .arg(stage)
            .arg(&overlay)
            .output()
            .map_err(|e| format!("running cpio: {e}"))?;
        if !cpio.status.success() {
            return Err(format!(
                "cpio of the overlay: {}",
                String::from_utf8_lossy(&cpio.stderr)
            ));
        }
        let concat = || -> std::io::Result<()> {
            let mut dst = std::fs::File::create(out)?;
            std::io::copy(&mut std::fs::File::open(base)?, &mut dst)?;
            std::io::copy(&mut std::fs::File::open(&overlay)?, &mut dst)?;
            dst.sync_all()
        };
        concat().map_err(|e| format!("writing {}: {e}", out.display()))
    }
}

/// kwok's arguments in the guest: those the sim gives its own node agents
/// (`kwok_args` in crates/sim/src/sim/cluster.rs), with the guest's paths and address.
fn kwok_args(node: &str, pod_cidr: &str, lease: Duration) -> Vec<String> {
    let lease = lease.as_secs().max(1).to_string();
    [
        "--kubeconfig",
        "/etc/kwok/kubeconfig",
        "--config",
        "/etc/kwok/stages.yaml",
        "--manage-single-node",
        node,
        "--node-lease-duration-seconds",
        &lease,
        "--node-ip",
        NODE_IP,
        "--cidr",
        pod_cidr,
        "--server-address",
        "127.0.0.1:0",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Server URL, CA file and token of the sim cluster's kubeconfig.
pub(super) fn read_kubeconfig(path: &Path) -> Result<(String, String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let get = |section: &str, inner: &str, key: &str| {
        doc[section][0][inner][key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: no {section}[0].{inner}.{key}", path.display()))
    };
    Ok((
        get("clusters", "cluster", "server")?,
        get("clusters", "cluster", "certificate-authority")?,
        get("users", "user", "token")?,
    ))
}

/// What the domain XML needs.
#[derive(Debug)]
pub struct Domain<'a> {
    pub name: &'a str,
    pub uuid: &'a str,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub console: &'a Path,
    pub node_mac: &'a str,
    pub mgmt_mac: &'a str,
    pub ssh_port: u16,
}

/// The libvirt domain: direct kernel boot under TCG, the node NIC as a
/// libvirt `user` interface, the management NIC as raw QEMU arguments.
pub fn domain_xml(d: &Domain<'_>) -> String {
    let p = |p: &Path| xml_escape(&p.display().to_string());
    let mut xml = String::new();
    let _ = write!(
        xml,
        "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <memory unit='MiB'>{MEMORY_MIB}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0 ipv6.disable=1</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <interface type='user'>
      <mac address='{node_mac}'/>
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
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=mgmt,net={MGMT_NET},restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:{port}-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='e1000,netdev=mgmt,mac={mgmt_mac},romfile=,bus=pci.0,addr=0x9'/>
  </qemu:commandline>
</domain>
",
        name = xml_escape(d.name),
        uuid = d.uuid,
        kernel = p(d.kernel),
        initrd = p(d.initrd),
        console = p(d.console),
        node_mac = d.node_mac,
        mgmt_mac = d.mgmt_mac,
        port = d.ssh_port,
    );
    xml
}

pub(super) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

pub(super) fn mode_bits(mode: u32) -> std::fs::Permissions {
    std::fs::Permissions::from_mode(mode)
}

pub fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| format!("reading /dev/urandom: {e}"))?;
    Ok(buf)
}

/// A random (version 4) UUID in its usual text form.
pub fn uuid(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A free loopback port (bound, read, released) for the SSH forward.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free loopback port: {e}"))
}

/// A throwaway ed25519 key pair at `path` and `path.pub`.
pub fn keygen(path: &Path) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "nodefall-vm-rig",
            "-f",
        ])
        .arg(path)
        .output()
        .map_err(|e| format!("running ssh-keygen: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ssh-keygen: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
