//! VirtualBox through `VBoxManage`, every call addressed by the VM's UUID
//! (what Vagrant keeps in `.vagrant/machines/<m>/virtualbox/id`; Vagrant's
//! own driver does the same). The mapping (docs/vagrant-backend.md):
//!
//! | fault | VBoxManage |
//! |---|---|
//! | pause-vm / resume-vm | `controlvm UUID pause` / `resume` |
//! | poweroff | `controlvm UUID poweroff` |
//! | poweron | `startvm UUID --type headless` (a paused VM: `resume`) |
//! | shutdown | `controlvm UUID acpipowerbutton`, then `showvminfo` until `VMState="poweroff"` |
//! | drop-nic / restore-nic | `controlvm UUID setlinkstateN off` / `on` |
//!
//! The pure part (parsing `showvminfo --machinereadable`, what a fault
//! runs in which state) is here with its tests; running is [`VBox`].

use std::time::{Duration, Instant};

use crate::backend::{CommandFailure, Error};
use crate::exec::{self, Captured, Cmd, Exec, Job, System};
use crate::record::CommandRecord;
use crate::scenario::model::{Does, Effect, FaultKind};

/// The VirtualBox CLI as VirtualBox installs it (Linux packages also link
/// `vboxmanage`).
pub const PROGRAM: &str = "VBoxManage";
/// How long one VBoxManage call may take (`startvm` waits for the power-on).
const TIMEOUT: Duration = Duration::from_secs(120);
/// How often a shutdown's progress is looked at.
const POLL: Duration = Duration::from_secs(1);

/// A VM as `showvminfo UUID --machinereadable` tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmInfo {
    pub name: String,
    pub uuid: String,
    /// The UUID the guest sees in SMBIOS (`hardwareuuid`): the VM's own
    /// unless set apart with `modifyvm --hardwareuuid`.
    pub hardware_uuid: Option<String>,
    /// VirtualBox's short state name: `running`, `paused`, `poweroff`,
    /// `saved`, `aborted`, `stopping`, ...
    pub state: String,
    /// Enabled network adapters (attachment not `none`), by index.
    pub adapters: Vec<Adapter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapter {
    /// 1-based, as in `setlinkstateN`.
    pub index: u8,
    /// `nat`, `hostonly`, `intnet`, `bridged`, ...
    pub attachment: String,
    /// Whether its cable is connected.
    pub cable: bool,
}

impl VmInfo {
    /// `key="value"` lines; unknown keys are skipped.
    pub fn parse(text: &str) -> VmInfo {
        let mut info = VmInfo::default();
        let mut cables = std::collections::BTreeMap::new();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"').to_owned();
            let numbered = |prefix: &str| key.strip_prefix(prefix)?.parse::<u8>().ok();
            match key {
                "name" => info.name = value,
                "UUID" => info.uuid = value.to_ascii_lowercase(),
                "hardwareuuid" => info.hardware_uuid = Some(value.to_ascii_lowercase()),
                "VMState" => info.state = value,
                _ => {
                    if let Some(i) = numbered("nic") {
                        if value != "none" {
                            info.adapters.push(Adapter {
                                index: i,
                                attachment: value,
                                cable: true,
                            });
                        }
                    } else if let Some(i) = numbered("cableconnected") {
                        cables.insert(i, value == "on");
                    }
                }
            }
        }
        for a in &mut info.adapters {
            a.cable = cables.get(&a.index).copied().unwrap_or(true);
        }
        info
    }

    pub fn adapter(&self, index: u8) -> Option<&Adapter> {
        self.adapters.iter().find(|a| a.index == index)
    }

    /// `1 nat, 2 hostonly` (for errors).
    pub fn adapter_list(&self) -> Vec<String> {
        self.adapters
            .iter()
            .map(|a| format!("{} {}", a.index, a.attachment))
            .collect()
    }
}

/// States in which the VM has no session: `controlvm` refuses them and
/// `startvm` starts them.
fn off(state: &str) -> bool {
    matches!(state, "poweroff" | "saved" | "aborted" | "aborted-saved")
}

/// The arguments of `VBoxManage controlvm UUID ...`.
fn controlvm(uuid: &str, what: &[&str]) -> Vec<String> {
    let mut v = vec!["controlvm".to_owned(), uuid.to_owned()];
    v.extend(what.iter().map(|s| (*s).to_owned()));
    v
}

fn startvm(uuid: &str) -> Vec<String> {
    ["startvm", uuid, "--type", "headless"]
        .map(str::to_owned)
        .to_vec()
}

/// `showvminfo UUID --machinereadable`.
pub fn showvminfo(uuid: &str) -> Vec<String> {
    ["showvminfo", uuid, "--machinereadable"]
        .map(str::to_owned)
        .to_vec()
}

/// What a fault runs on a VM in `state`: the VBoxManage arguments, None
/// when the VM already is as the fault leaves it (reverts are idempotent),
/// or why it cannot be done. Not for the kubelet faults (SSH).
pub fn next(
    fault: FaultKind,
    state: &str,
    uuid: &str,
    nic: u8,
) -> Result<Option<Vec<String>>, String> {
    let link = |on: &str| controlvm(uuid, &[&format!("setlinkstate{nic}"), on]);
    Ok(Some(match fault {
        FaultKind::PauseVm => controlvm(uuid, &["pause"]),
        FaultKind::ResumeVm => match state {
            "paused" => controlvm(uuid, &["resume"]),
            "running" => return Ok(None),
            s => {
                return Err(format!(
                    "the VM is {s}: resume-vm resumes a paused VM (poweron starts a stopped one)"
                ));
            }
        },
        FaultKind::Poweroff => controlvm(uuid, &["poweroff"]),
        FaultKind::Poweron => match state {
            "running" => return Ok(None),
            "paused" => controlvm(uuid, &["resume"]),
            s if off(s) => startvm(uuid),
            s => return Err(format!("the VM is {s}; it cannot be started from there")),
        },
        FaultKind::Shutdown => controlvm(uuid, &["acpipowerbutton"]),
        FaultKind::DropNic => link("off"),
        FaultKind::RestoreNic => link("on"),
        FaultKind::StopKubelet | FaultKind::StartKubelet => {
            return Err("the kubelet is reached over SSH, not VBoxManage".into());
        }
    }))
}

/// The VBoxManage lines of a fault as a user would type them (plans and
/// reports): the running-VM case, plus the wait of `shutdown`.
pub fn lines(program: &str, uuid: &str, nic: u8, fault: FaultKind, wait_secs: u64) -> Vec<String> {
    let line = |args: Vec<String>| {
        Cmd {
            program: program.to_owned(),
            args,
        }
        .to_string()
    };
    // The state its revert finds a VM in (a breaking fault: running).
    let state = match fault.does() {
        Does::Restores(Effect::Paused) => "paused",
        Does::Restores(Effect::Off) => "poweroff",
        Does::Restores(Effect::CutOff | Effect::KubeletStopped) | Does::Breaks(_) => "running",
    };
    let mut out: Vec<String> = match next(fault, state, uuid, nic) {
        Ok(Some(args)) => vec![line(args)],
        _ => Vec::new(),
    };
    match fault {
        FaultKind::Shutdown => out.push(format!(
            "then {} until VMState=\"poweroff\" (at most {wait_secs}s)",
            line(showvminfo(uuid))
        )),
        FaultKind::Poweron => out.push(format!(
            "(a paused VM: {})",
            line(controlvm(uuid, &["resume"]))
        )),
        FaultKind::PauseVm
        | FaultKind::ResumeVm
        | FaultKind::Poweroff
        | FaultKind::StopKubelet
        | FaultKind::StartKubelet
        | FaultKind::DropNic
        | FaultKind::RestoreNic => {}
    }
    out
}

/// Runs VBoxManage through `E` (the real [`System`], or a fake in tests),
/// keeping each call for the report.
#[derive(Debug)]
pub struct VBox<E: Exec = System> {
    pub program: String,
    exec: E,
    records: Vec<CommandRecord>,
}

/// Which fault on which node a call is for (its errors say so).
#[derive(Debug, Clone, Copy)]
pub struct For<'a> {
    pub node: &'a str,
    pub fault: FaultKind,
}

impl For<'_> {
    /// `run` for a fault that breaks, `revert` for one that repairs.
    pub fn role(&self) -> &'static str {
        if self.fault.breaks() { "run" } else { "revert" }
    }
}

/// `VBoxManage` is not there.
pub fn not_found(program: &str) -> Error {
    Error::Missing(format!(
        "`{program}` (VirtualBox's CLI) could not be started: is VirtualBox installed and on \
         PATH? pass --vboxmanage PATH otherwise"
    ))
}

impl VBox {
    pub fn new(program: impl Into<String>) -> VBox {
        VBox::with_exec(program, System)
    }
}

impl<E: Exec + Clone + 'static> VBox<E> {
    /// VBoxManage run through `exec`.
    pub fn with_exec(program: impl Into<String>, exec: E) -> VBox<E> {
        VBox {
            program: program.into(),
            exec,
            records: Vec::new(),
        }
    }

    pub fn take_records(&mut self) -> Vec<CommandRecord> {
        std::mem::take(&mut self.records)
    }

    fn cmd(&self, args: Vec<String>) -> Cmd {
        Cmd {
            program: self.program.clone(),
            args,
        }
    }

    /// Runs once; the outcome whatever the exit status.
    async fn call(&self, args: Vec<String>) -> Result<Captured, Error> {
        let cmd = self.cmd(args);
        match exec::call_blocking(&self.exec, Job::acting(cmd, TIMEOUT)).await {
            Ok(c) => Ok(c),
            Err(crate::exec::Error::Spawn { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(not_found(&self.program))
            }
            Err(e) => Err(Error::Exec(e)),
        }
    }

    fn record(&mut self, role: &str, cmd: &Cmd, c: &Captured, attempts: u32) {
        self.records.push(c.record(role, cmd, attempts));
    }

    /// Keeps another command of the backend's (SSH) with VBoxManage's.
    pub fn push(&mut self, role: &str, cmd: &Cmd, c: &Captured) {
        self.record(role, cmd, c, 1);
    }

    fn failure(&self, at: For<'_>, role: &'static str, cmd: &Cmd, c: &Captured) -> Error {
        Error::Command(Box::new(CommandFailure::new(
            at.node, at.fault, role, cmd, c,
        )))
    }

    /// The VM's state and adapters; `Ok(Err(c))` when VBoxManage answered
    /// but not with the VM (not registered, inaccessible).
    pub async fn info(&self, uuid: &str) -> Result<Result<VmInfo, Captured>, Error> {
        let c = self.call(showvminfo(uuid)).await?;
        Ok(if c.success() {
            Ok(VmInfo::parse(&c.stdout))
        } else {
            Err(c)
        })
    }

    /// The VMs VirtualBox knows (`"name" {uuid}` lines of `list vms`).
    pub async fn names(&self) -> Vec<String> {
        let Ok(c) = self.call(vec!["list".into(), "vms".into()]).await else {
            return Vec::new();
        };
        c.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .collect()
    }

    /// The VM as a fault finds it, recorded as a check.
    async fn state(&mut self, at: For<'_>, uuid: &str) -> Result<VmInfo, Error> {
        let cmd = self.cmd(showvminfo(uuid));
        let c = self.call(showvminfo(uuid)).await?;
        self.record("check", &cmd, &c, 1);
        if !c.success() {
            return Err(self.failure(at, "check", &cmd, &c));
        }
        Ok(VmInfo::parse(&c.stdout))
    }

    /// Runs `args` for the fault; a failure is an error with the line and
    /// VBoxManage's own words. `startvm` counts as done when VBoxManage
    /// says the VM started, whatever its exit status (as Vagrant does).
    async fn act(&mut self, at: For<'_>, args: Vec<String>) -> Result<(), Error> {
        let cmd = self.cmd(args.clone());
        let c = self.call(args).await?;
        let role = at.role();
        self.record(role, &cmd, &c, 1);
        let started = cmd.args.first().is_some_and(|a| a == "startvm")
            && c.stdout.contains("has been successfully started");
        if c.success() || started {
            Ok(())
        } else {
            Err(self.failure(at, role, &cmd, &c))
        }
    }

    /// Carries out a VM fault on the VM `uuid` (named `vm`).
    pub async fn inject(
        &mut self,
        at: For<'_>,
        uuid: &str,
        vm: &str,
        nic: u8,
        shutdown_limit: Duration,
    ) -> Result<(), Error> {
        let fault = at.fault;
        // Breaking faults run as asked (VBoxManage says why not); reverts of
        // the VM's power state look first, so that one already done is not
        // an error.
        let state = match fault.does() {
            Does::Restores(Effect::Paused | Effect::Off) => {
                let mut info = self.state(at, uuid).await?;
                if info.state == "stopping" {
                    info = self.until_off(at, uuid, vm, shutdown_limit).await?;
                }
                info.state
            }
            Does::Restores(Effect::CutOff | Effect::KubeletStopped) | Does::Breaks(_) => {
                "running".to_owned()
            }
        };
        let args = next(fault, &state, uuid, nic).map_err(|why| Error::NotPrepared {
            node: at.node.to_owned(),
            fault: fault.name(),
            why: format!("VirtualBox VM `{vm}` ({uuid}): {why}"),
        })?;
        if let Some(args) = args {
            self.act(at, args).await?;
        }
        if fault == FaultKind::Shutdown {
            self.until_off(at, uuid, vm, shutdown_limit).await?;
        }
        Ok(())
    }

    /// Waits until the VM is off, looking every [`POLL`]; past `limit` the
    /// guest ignored the power button (or is slow): an error that says so.
    async fn until_off(
        &mut self,
        at: For<'_>,
        uuid: &str,
        vm: &str,
        limit: Duration,
    ) -> Result<VmInfo, Error> {
        let cmd = self.cmd(showvminfo(uuid));
        let start = Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let c = self.call(showvminfo(uuid)).await?;
            if !c.success() {
                self.record("check", &cmd, &c, attempts);
                return Err(self.failure(at, "check", &cmd, &c));
            }
            let info = VmInfo::parse(&c.stdout);
            if off(&info.state) {
                self.record("check", &cmd, &c, attempts);
                return Ok(info);
            }
            if start.elapsed() >= limit {
                self.record("check", &cmd, &c, attempts);
                return Err(Error::ShutdownTimeout {
                    node: at.node.to_owned(),
                    machine: format!("VirtualBox VM `{vm}`"),
                    mode: "acpi",
                    after: limit.as_secs(),
                    state: info.state,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57";

    /// `showvminfo --machinereadable` of a Vagrant VM (VirtualBox 7.0's
    /// keys and order, shortened).
    const INFO: &str = "name=\"kubespray_k8s-2_1665804309774_65270\"
groups=\"/\"
ostype=\"Ubuntu (64-bit)\"
UUID=\"0B8A3F4E-5C1D-4E7A-9F0B-2A6C8D1E3F57\"
hardwareuuid=\"0B8A3F4E-5C1D-4E7A-9F0B-2A6C8D1E3F57\"
VMState=\"running\"
VMStateChangeTime=\"2022-10-15T03:25:41.000000000\"
nic1=\"nat\"
nictype1=\"82540EM\"
macaddress1=\"080027A1B2C3\"
cableconnected1=\"on\"
nic2=\"hostonly\"
macaddress2=\"080027D4E5F6\"
cableconnected2=\"off\"
nic3=\"none\"
nic4=\"none\"
";

    #[test]
    fn showvminfo_gives_the_state_and_the_enabled_adapters() {
        let i = VmInfo::parse(INFO);
        assert_eq!(i.name, "kubespray_k8s-2_1665804309774_65270");
        assert_eq!((i.uuid.as_str(), i.state.as_str()), (UUID, "running"));
        assert_eq!(i.hardware_uuid.as_deref(), Some(UUID));
        assert_eq!(i.adapter_list(), ["1 nat", "2 hostonly"]);
        assert!(i.adapter(1).expect("nic 1").cable);
        assert!(!i.adapter(2).expect("nic 2").cable);
        assert_eq!(i.adapter(3), None);
    }

    #[test]
    fn each_fault_maps_to_its_vboxmanage_call_by_uuid() {
        let args = |f, s| next(f, s, UUID, 2).map(|a| a.map(|a| a.join(" ")));
        let c = |s: &str| Ok(Some(format!("controlvm {UUID} {s}")));
        assert_eq!(args(FaultKind::PauseVm, "running"), c("pause"));
        assert_eq!(args(FaultKind::ResumeVm, "paused"), c("resume"));
        assert_eq!(args(FaultKind::Poweroff, "running"), c("poweroff"));
        assert_eq!(args(FaultKind::Shutdown, "running"), c("acpipowerbutton"));
        assert_eq!(args(FaultKind::DropNic, "running"), c("setlinkstate2 off"));
        assert_eq!(
            args(FaultKind::RestoreNic, "running"),
            c("setlinkstate2 on")
        );
        assert_eq!(
            args(FaultKind::Poweron, "poweroff"),
            Ok(Some(format!("startvm {UUID} --type headless")))
        );
        assert_eq!(
            next(FaultKind::DropNic, "running", UUID, 3).map(|a| a.map(|a| a[2].clone())),
            Ok(Some("setlinkstate3".into()))
        );
    }

    #[test]
    fn reverts_leave_a_vm_already_so_alone_and_refuse_what_they_cannot_do() {
        assert_eq!(next(FaultKind::ResumeVm, "running", UUID, 2), Ok(None));
        assert_eq!(next(FaultKind::Poweron, "running", UUID, 2), Ok(None));
        for s in ["saved", "aborted", "poweroff"] {
            assert_eq!(
                next(FaultKind::Poweron, s, UUID, 2).map(|a| a.map(|a| a[0].clone())),
                Ok(Some("startvm".into())),
                "{s}"
            );
        }
        assert_eq!(
            next(FaultKind::Poweron, "paused", UUID, 2).map(|a| a.map(|a| a[2].clone())),
            Ok(Some("resume".into()))
        );
        let e = next(FaultKind::ResumeVm, "poweroff", UUID, 2).expect_err("not paused");
        assert!(e.contains("poweron starts a stopped one"), "{e}");
        assert!(next(FaultKind::StopKubelet, "running", UUID, 2).is_err());
    }

    #[test]
    fn plan_lines_are_what_a_user_would_type() {
        assert_eq!(
            lines(PROGRAM, UUID, 2, FaultKind::PauseVm, 180),
            [format!("VBoxManage controlvm {UUID} pause")]
        );
        let s = lines(PROGRAM, UUID, 2, FaultKind::Shutdown, 180);
        assert_eq!(s[0], format!("VBoxManage controlvm {UUID} acpipowerbutton"));
        assert!(
            s[1].contains("until VMState=\"poweroff\" (at most 180s)"),
            "{s:?}"
        );
        let s = lines(PROGRAM, UUID, 2, FaultKind::Poweron, 180);
        assert_eq!(s[0], format!("VBoxManage startvm {UUID} --type headless"));
    }
}
