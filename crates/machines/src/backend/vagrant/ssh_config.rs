//! How Vagrant reaches a machine over SSH, from `vagrant ssh-config NAME`
//! (run once per machine at preflight, in the project): the host and port
//! (VirtualBox: a loopback port forwarded to the guest's 22 over NIC 1;
//! vagrant-libvirt: the management network's address), the user, the keys,
//! and the options Vagrant itself passes (no host key checks for its
//! throwaway hosts). Each step's SSH command then runs `ssh` with those,
//! not `vagrant ssh`, which would load the whole Vagrant environment each
//! time.

use std::time::Duration;

use crate::backend::ssh::SshTarget;
use crate::exec::Cmd;

/// How long `vagrant ssh-config` may take (Vagrant loads its plugins and
/// asks the provider for the machine's address).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The command that prints a machine's SSH settings.
pub fn command(vagrant: &str, machine: &str) -> Cmd {
    Cmd {
        program: vagrant.to_owned(),
        args: vec!["ssh-config".into(), machine.to_owned()],
    }
}

/// Options of Vagrant's block nodefall leaves out: `Include` has no
/// command-line form, and `LogLevel FATAL` would hide why SSH failed.
const LEFT_OUT: &[&str] = &["include", "loglevel"];

/// The block of `host` in `vagrant ssh-config` output: `Host NAME` then
/// indented `Keyword value` lines. None when there is no such block or it
/// names no `HostName`.
pub fn parse(text: &str, host: &str) -> Option<SshTarget> {
    let mut target: Option<SshTarget> = None;
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = match line.split_once(|c: char| c.is_whitespace() || c == '=') {
            Some((k, v)) => (k, unquote(v.trim_start_matches(['=', ' ', '\t']).trim())),
            None => (line, String::new()),
        };
        if key.eq_ignore_ascii_case("host") {
            if target.is_some() {
                break;
            }
            inside = value.split_whitespace().any(|h| h == host);
            if inside {
                target = Some(SshTarget::at(String::new(), None));
            }
            continue;
        }
        let Some(t) = target.as_mut().filter(|_| inside) else {
            continue;
        };
        match key.to_ascii_lowercase().as_str() {
            "hostname" => t.host = value,
            "port" => t.port = value.parse().ok(),
            "user" => t.user = Some(value),
            "identityfile" => t.keys.push(value),
            k if LEFT_OUT.contains(&k) => {}
            _ => t.options.push(format!("{key}={value}")),
        }
    }
    target.filter(|t| !t.host.is_empty())
}

/// A value as ssh_config writes it: in double quotes when it has spaces.
fn unquote(v: &str) -> String {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ssh::{self, SshSettings};

    /// `vagrant ssh-config` of a VirtualBox project with two machines
    /// (Vagrant 2.4's template, its own key inserted for k8s-2).
    const VIRTUALBOX: &str = "Host k8s-1
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /home/u/.vagrant.d/insecure_private_keys/vagrant.key.ed25519
  IdentityFile /home/u/.vagrant.d/insecure_private_keys/vagrant.key.rsa
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa

Host k8s-2
  HostName 127.0.0.1
  User vagrant
  Port 2200
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile \"/home/u/my lab/.vagrant/machines/k8s-2/virtualbox/private_key\"
  IdentitiesOnly yes
  LogLevel FATAL
";

    #[test]
    fn a_machines_block_gives_its_host_port_user_keys_and_options() {
        let t = parse(VIRTUALBOX, "k8s-2").expect("k8s-2");
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", Some(2200)));
        assert_eq!(t.user.as_deref(), Some("vagrant"));
        assert_eq!(
            t.keys,
            ["/home/u/my lab/.vagrant/machines/k8s-2/virtualbox/private_key"]
        );
        assert_eq!(
            t.options,
            [
                "UserKnownHostsFile=/dev/null",
                "StrictHostKeyChecking=no",
                "PasswordAuthentication=no",
                "IdentitiesOnly=yes"
            ]
        );
        let first = parse(VIRTUALBOX, "k8s-1").expect("k8s-1");
        assert_eq!(first.port, Some(2222));
        assert_eq!(first.keys.len(), 2);
        assert!(
            first
                .options
                .contains(&"HostKeyAlgorithms=+ssh-rsa".to_owned())
        );
        assert_eq!(parse(VIRTUALBOX, "k8s-3"), None);
        assert_eq!(parse("Host k8s-1\n  User vagrant\n", "k8s-1"), None);
    }

    #[test]
    fn the_ssh_line_uses_vagrants_settings_under_the_flags() {
        let t = parse(VIRTUALBOX, "k8s-2").expect("k8s-2");
        let mut s = SshSettings::new();
        let line = ssh::command(&s, &t, "sudo -n systemctl stop kubelet").to_string();
        assert_eq!(
            line,
            "ssh -o BatchMode=yes -o ConnectTimeout=10 -o UserKnownHostsFile=/dev/null -o \
             StrictHostKeyChecking=no -o PasswordAuthentication=no -o IdentitiesOnly=yes -i \
             '/home/u/my lab/.vagrant/machines/k8s-2/virtualbox/private_key' -p 2200 -l vagrant \
             -- 127.0.0.1 'sudo -n systemctl stop kubelet'"
        );
        s.user = Some("root".into());
        s.key = Some("/k".into());
        s.options = vec!["StrictHostKeyChecking=yes".into()];
        let line = ssh::command(&s, &t, "true").to_string();
        // ssh keeps an option's first value: the flag's.
        assert!(
            line.contains("-o StrictHostKeyChecking=yes -o UserKnownHostsFile"),
            "{line}"
        );
        assert!(line.contains("-i /k -p 2200 -l root"), "{line}");
    }

    #[test]
    fn the_command_is_vagrant_ssh_config_of_one_machine() {
        assert_eq!(
            command("vagrant", "k8s-2").to_string(),
            "vagrant ssh-config k8s-2"
        );
    }
}
