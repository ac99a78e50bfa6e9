//! What a contained kind cluster changes on the host, and how each change is
//! made and put back: the host-global sysctls its kubelets write, its own
//! Docker network, and the drop rule that keeps its traffic on this machine.
//! The command lines are built here (pure, tested); they run through
//! [`Exec`], so the tests need neither Docker nor iptables.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::exec::{Cmd, Exec};

/// The host-global sysctls a kubelet sets at its start (its
/// `setupKernelTunables`; with `protectKernelDefaults: false`, kind's setting,
/// it writes rather than refuses). The host kernel is shared by every node
/// container, so they are the host's.
pub const KUBELET_SYSCTLS: [&str; 6] = [
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
];

/// The label on everything `nodefall kind up` makes in Docker (its value is
/// the cluster's name): nothing without it is ever removed.
pub const LABEL: &str = "io.nodefall.kind-cluster";

const QUICK: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {value} to {path}")]
    Write {
        path: String,
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Command(#[from] crate::exec::Error),
    #[error(
        "no free subnet for the cluster's network: 172.18-31.0.0/16 and 10.200-249.0.0/16 all \
         overlap Docker's networks or the host's routes"
    )]
    NoSubnet,
    #[error(
        "the Docker network {name} exists but was not made by nodefall for cluster {cluster} \
         (its label {LABEL} is `{found}`): left alone"
    )]
    NotOurs {
        name: String,
        cluster: String,
        found: String,
    },
}

/// `/proc/sys` path of a dotted sysctl name under `root` (`/proc/sys`).
fn sysctl_path(root: &Path, name: &str) -> std::path::PathBuf {
    name.split('.')
        .fold(root.to_owned(), |p, part| p.join(part))
}

/// The current values of `names` under `root` (`/proc/sys` on a host); a
/// sysctl this kernel does not have is left out (nothing to put back).
pub fn read_sysctls(root: &Path, names: &[&str]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for name in names {
        let path = sysctl_path(root, name);
        match std::fs::read_to_string(&path) {
            Ok(value) => {
                out.insert((*name).to_owned(), value.trim().to_owned());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Error::Read {
                    path: path.display().to_string(),
                    source,
                });
            }
        }
    }
    Ok(out)
}

/// Puts `values` back under `root`; returns what differed (`name: now -> was`).
/// A value already right is not written.
pub fn restore_sysctls(
    root: &Path,
    values: &BTreeMap<String, String>,
) -> Result<Vec<String>, Error> {
    let mut changed = Vec::new();
    for (name, was) in values {
        let path = sysctl_path(root, name);
        let now = std::fs::read_to_string(&path).map_err(|source| Error::Read {
            path: path.display().to_string(),
            source,
        })?;
        if now.trim() == was {
            continue;
        }
        std::fs::write(&path, format!("{was}\n")).map_err(|source| Error::Write {
            path: path.display().to_string(),
            value: was.clone(),
            source,
        })?;
        changed.push(format!("{name}: {} -> {was}", now.trim()));
    }
    Ok(changed)
}

/// After a kubelet (re)starts: waits until it has written the sysctls (any
/// value differs from `values`), lets it finish its writes (`settle`), then
/// puts them back; returns what it put back (nothing when no value changed
/// within `limit`). The kubelet writes them at its start, before it posts
/// the node's status, and never again.
pub fn restore_after_kubelet_start(
    root: &Path,
    values: &BTreeMap<String, String>,
    limit: Duration,
    settle: Duration,
) -> Result<Vec<String>, Error> {
    let deadline = std::time::Instant::now() + limit;
    let names: Vec<&str> = values.keys().map(String::as_str).collect();
    loop {
        if read_sysctls(root, &names)? != *values {
            std::thread::sleep(settle);
            return restore_sysctls(root, values);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(Vec::new());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bridge interface of the cluster's network: `nfk` and 8 hex digits of
/// the run's id (interface names have at most 15 characters).
pub fn bridge_name(run: &str) -> String {
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in run.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("nfk{h:08x}")
}

/// `docker network create` of an IPv4-only bridge network (said outright: a
/// daemon may default to IPv6) on `subnet`, with a bridge of our name (so the
/// guard names it before any container exists). With a subnet given, `docker
/// network connect --ip` works, which gives a powered-on or reconnected node
/// its old address back; without one (`kind up --stock-network`) Docker
/// chooses it and refuses `--ip`, as on the network `kind create cluster`
/// makes.
pub fn network_create(
    runtime: &str,
    name: &str,
    bridge: &str,
    cluster: &str,
    subnet: Option<&str>,
) -> Cmd {
    let opt = format!("com.docker.network.bridge.name={bridge}");
    let label = format!("{LABEL}={cluster}");
    let subnet = subnet.map(|s| format!("--subnet={s}"));
    let mut args = vec!["network", "create", "--driver", "bridge", "--ipv6=false"];
    args.extend(subnet.as_deref());
    args.extend(["--opt", &opt, "--label", &label, name]);
    Cmd::new(runtime, &args)
}

/// The subnets of network `name`, space-separated.
pub fn network_subnets(exec: &dyn Exec, runtime: &str, name: &str) -> Result<String, Error> {
    Ok(subnets_of(exec, runtime, &[name])?.join(" "))
}

/// Every subnet of `networks` (names or ids), as Docker lists them.
fn subnets_of(exec: &dyn Exec, runtime: &str, networks: &[&str]) -> Result<Vec<String>, Error> {
    let mut args = vec![
        "network",
        "inspect",
        "--format",
        "{{range .IPAM.Config}}{{.Subnet}} {{end}}",
    ];
    args.extend(networks);
    let out = exec.run(&Cmd::new(runtime, &args), QUICK)?;
    Ok(out.split_whitespace().map(str::to_owned).collect())
}

/// An IPv4 network `a.b.c.d/len` as (address, prefix length).
fn cidr(text: &str) -> Option<(u32, u32)> {
    let (ip, len) = text.trim().split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    (len <= 32).then_some((u32::from(ip), len))
}

fn overlaps(a: (u32, u32), b: (u32, u32)) -> bool {
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a.0 & mask == b.0 & mask
}

/// The first of kind's usual ranges (172.18.0.0/16 to 172.31.0.0/16, then
/// 10.200.0.0/16 to 10.249.0.0/16) that overlaps none of `taken` (the
/// subnets of Docker's networks and the host's routes, as CIDRs; anything
/// else in the list is ignored).
pub fn free_subnet(taken: &[String]) -> Option<String> {
    let taken: Vec<(u32, u32)> = taken.iter().filter_map(|t| cidr(t)).collect();
    (18..=31)
        .map(|b| format!("172.{b}.0.0/16"))
        .chain((200..250).map(|b| format!("10.{b}.0.0/16")))
        .find(|c| cidr(c).is_some_and(|c| !taken.iter().any(|t| overlaps(c, *t))))
}

/// What is taken on this host: every Docker network's subnets and every
/// IPv4 route's destination (`default` is not a subnet and is skipped).
pub fn taken_subnets(exec: &dyn Exec, runtime: &str) -> Result<Vec<String>, Error> {
    let ids = exec.run(&Cmd::new(runtime, &["network", "ls", "-q"]), QUICK)?;
    let mut taken = Vec::new();
    let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
    if !ids.is_empty() {
        taken.extend(subnets_of(exec, runtime, &ids)?);
    }
    let routes = exec.run(&Cmd::new("ip", &["-4", "route", "show"]), QUICK)?;
    taken.extend(
        routes
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned),
    );
    Ok(taken)
}

/// Removes the network if it exists and carries our label for `cluster`.
pub fn network_remove(
    exec: &dyn Exec,
    runtime: &str,
    name: &str,
    cluster: &str,
) -> Result<(), Error> {
    let format = format!("{{{{index .Labels \"{LABEL}\"}}}}");
    let inspect = Cmd::new(runtime, &["network", "inspect", "--format", &format, name]);
    let found = match exec.run(&inspect, QUICK) {
        Ok(out) => out.trim().to_owned(),
        // Gone already (or never made).
        Err(crate::exec::Error::Failed { stderr, .. })
            if stderr.contains("No such network") || stderr.contains("not found") =>
        {
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if found != cluster {
        return Err(Error::NotOurs {
            name: name.to_owned(),
            cluster: cluster.to_owned(),
            found,
        });
    }
    exec.run(&Cmd::new(runtime, &["network", "rm", name]), QUICK)?;
    Ok(())
}

/// The guard: every packet that enters from the cluster's bridge and does not
/// leave on it is dropped (Docker's `DOCKER-USER` chain is consulted first in
/// FORWARD). `op` is `-I` (insert first), `-C` (check) or `-D` (delete).
pub fn guard_rule(op: &str, bridge: &str, tag: &str) -> Cmd {
    Cmd::new(
        "iptables",
        &[
            "-w",
            op,
            "DOCKER-USER",
            "-i",
            bridge,
            "!",
            "-o",
            bridge,
            "-m",
            "comment",
            "--comment",
            tag,
            "-j",
            "DROP",
        ],
    )
}

/// The comment that tags a run's guard rule.
pub fn guard_tag(run: &str) -> String {
    format!("nodefall:{run}")
}

/// Whether the guard rule is in place.
pub fn guard_present(exec: &dyn Exec, bridge: &str, tag: &str) -> Result<bool, Error> {
    match exec.run(&guard_rule("-C", bridge, tag), QUICK) {
        Ok(_) => Ok(true),
        Err(crate::exec::Error::Failed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the guard rule if it is there.
pub fn guard_remove(exec: &dyn Exec, bridge: &str, tag: &str) -> Result<(), Error> {
    while guard_present(exec, bridge, tag)? {
        exec.run(&guard_rule("-D", bridge, tag), QUICK)?;
    }
    Ok(())
}

/// Packets the guard tagged `tag` has dropped (`iptables -L -v -x` reads it).
pub fn guard_drops(exec: &dyn Exec, tag: &str) -> Result<Option<u64>, Error> {
    let out = exec.run(
        &Cmd::new("iptables", &["-w", "-L", "DOCKER-USER", "-n", "-v", "-x"]),
        QUICK,
    )?;
    Ok(parse_drops(&out, tag))
}

/// The packet count of the rule whose comment is `tag` in `iptables -L -v -x`.
pub fn parse_drops(listing: &str, tag: &str) -> Option<u64> {
    let needle = format!("/* {tag} */");
    listing
        .lines()
        .find(|l| l.contains(&needle))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctls_are_read_and_only_changed_ones_written_back() {
        let root = tempfile::tempdir().unwrap();
        for (name, v) in [("vm.overcommit_memory", "0"), ("kernel.panic", "1")] {
            let p = sysctl_path(root.path(), name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{v}\n")).unwrap();
        }
        let was = read_sysctls(root.path(), &["vm.overcommit_memory", "kernel.panic"]).unwrap();
        assert_eq!(was["vm.overcommit_memory"], "0");
        std::fs::write(sysctl_path(root.path(), "vm.overcommit_memory"), "1\n").unwrap();
        let changed = restore_sysctls(root.path(), &was).unwrap();
        assert_eq!(changed, ["vm.overcommit_memory: 1 -> 0"]);
        assert_eq!(
            std::fs::read_to_string(sysctl_path(root.path(), "vm.overcommit_memory")).unwrap(),
            "0\n"
        );
        assert!(restore_sysctls(root.path(), &was).unwrap().is_empty());
        // A sysctl this kernel lacks is not recorded.
        assert!(
            read_sysctls(root.path(), &["kernel.nope"])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_subnet_is_the_first_free_one_of_kinds_ranges() {
        let taken = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // Docker's bridge and a routed /24 inside 172.18/16: 172.18 is taken.
        assert_eq!(
            free_subnet(&taken(&[
                "172.17.0.0/16",
                "172.18.5.0/24",
                "default",
                "192.0.2.0/24"
            ])),
            Some("172.19.0.0/16".into())
        );
        assert_eq!(free_subnet(&[]), Some("172.18.0.0/16".into()));
        // A wide route covers every 172.x candidate: the 10.200 range next.
        assert_eq!(
            free_subnet(&taken(&["172.16.0.0/12"])),
            Some("10.200.0.0/16".into())
        );
        assert_eq!(free_subnet(&taken(&["0.0.0.0/0"])), None);
    }

    #[test]
    fn a_restarted_kubelets_writes_are_waited_for_and_put_back() {
        let root = tempfile::tempdir().unwrap();
        let p = sysctl_path(root.path(), "kernel.panic");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "1\n").unwrap();
        let was = read_sysctls(root.path(), &["kernel.panic"]).unwrap();
        // Nothing written within the limit: nothing to do.
        let none = restore_after_kubelet_start(root.path(), &was, Duration::ZERO, Duration::ZERO);
        assert!(none.unwrap().is_empty());
        let kubelet = {
            let p = p.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                std::fs::write(&p, "10\n").unwrap();
            })
        };
        let put_back = restore_after_kubelet_start(
            root.path(),
            &was,
            Duration::from_secs(10),
            Duration::from_millis(10),
        )
        .unwrap();
        kubelet.join().unwrap();
        assert_eq!(put_back, ["kernel.panic: 10 -> 1"]);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "1\n");
    }

    #[test]
    fn the_guard_drops_what_leaves_the_bridge_and_is_found_by_its_tag() {
        let b = bridge_name("kind-up-nf-20261125T000000Z-1");
        assert_eq!(b.len(), 11);
        assert_eq!(b, bridge_name("kind-up-nf-20261125T000000Z-1"));
        assert_ne!(b, bridge_name("kind-up-nf-20261125T000000Z-2"));
        let tag = guard_tag("r1");
        assert_eq!(
            guard_rule("-I", &b, &tag).to_string(),
            format!(
                "iptables -w -I DOCKER-USER -i {b} ! -o {b} -m comment --comment nodefall:r1 -j DROP"
            )
        );
        let listing = "Chain DOCKER-USER (1 references)\n    pkts      bytes target     prot opt in     out     source               destination\n      \
            17     1020 DROP       all  --  nfkabc   !nfkabc  0.0.0.0/0            0.0.0.0/0            /* nodefall:r1 */\n  \
            4000   999999 RETURN     all  --  *      *       0.0.0.0/0            0.0.0.0/0\n";
        assert_eq!(parse_drops(listing, "nodefall:r1"), Some(17));
        assert_eq!(parse_drops(listing, "nodefall:r2"), None);
        assert_eq!(
            network_create("docker", "nodefall-c1", &b, "c1", Some("172.19.0.0/16")).to_string(),
            format!(
                "docker network create --driver bridge --ipv6=false --subnet=172.19.0.0/16 \
                 --opt com.docker.network.bridge.name={b} --label io.nodefall.kind-cluster=c1 nodefall-c1"
            )
        );
        // --stock-network: the subnet left to Docker, as kind leaves it.
        assert_eq!(
            network_create("docker", "nodefall-c1", &b, "c1", None).to_string(),
            format!(
                "docker network create --driver bridge --ipv6=false \
                 --opt com.docker.network.bridge.name={b} --label io.nodefall.kind-cluster=c1 nodefall-c1"
            )
        );
    }
}
