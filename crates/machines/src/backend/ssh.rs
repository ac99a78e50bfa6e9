//! Commands on a node over SSH (OpenSSH's `ssh` client, non-interactive):
//! stopping and starting the kubelet, and reading what only the node knows
//! (logind's inhibitor locks for the graceful-shutdown preflight).
//!
//! A revert that goes over SSH needs the node's SSH path to work while the
//! fault is in place: stop-kubelet leaves the network up, so that holds; a
//! fault that cuts the node's network is never reverted over SSH.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exec::{self, Cmd, Exec};

/// How to reach nodes over SSH (flags `--ssh-*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshSettings {
    /// Login user (default: ssh's own default, the local user or ~/.ssh/config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Private key file (`ssh -i`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Port for nodes without their own (default 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Extra `-o KEY=VALUE` options, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// The command that stops the kubelet.
    pub stop_kubelet: String,
    /// The command that starts it again.
    pub start_kubelet: String,
}

pub use crate::scenario::command::{START_KUBELET, STOP_KUBELET};

impl SshSettings {
    pub fn new() -> SshSettings {
        SshSettings {
            stop_kubelet: STOP_KUBELET.into(),
            start_kubelet: START_KUBELET.into(),
            ..SshSettings::default()
        }
    }
}

/// Where one node's SSH server is, and what that node's own SSH
/// configuration says (`vagrant ssh-config`: its user, keys and options);
/// the `--ssh-*` flags win over the node's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Private keys to offer (`-i`, in order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// `-o KEY=VALUE` options, after the flags' own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl SshTarget {
    /// A host (and port) with nothing else known about it.
    pub fn at(host: impl Into<String>, port: Option<u16>) -> SshTarget {
        SshTarget {
            host: host.into(),
            port,
            user: None,
            keys: Vec::new(),
            options: Vec::new(),
        }
    }

    /// `HOST`, `HOST:PORT` or `[V6]:PORT`.
    pub fn parse(s: &str) -> Result<SshTarget, String> {
        let bad = || format!("`{s}` is not HOST or HOST:PORT");
        if let Some(rest) = s.strip_prefix('[') {
            let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
            let port = match tail.strip_prefix(':') {
                Some(p) => Some(p.parse().map_err(|_| bad())?),
                None if tail.is_empty() => None,
                None => return Err(bad()),
            };
            return Ok(SshTarget::at(host, port));
        }
        match s.split_once(':') {
            Some((h, p)) if !h.is_empty() && !p.contains(':') => {
                Ok(SshTarget::at(h, Some(p.parse().map_err(|_| bad())?)))
            }
            None if !s.is_empty() => Ok(SshTarget::at(s, None)),
            // A bare IPv6 address.
            Some(_) if s.parse::<std::net::Ipv6Addr>().is_ok() => Ok(SshTarget::at(s, None)),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for SshTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        match self.port {
            Some(p) if self.host.contains(':') => write!(f, "[{}]:{p}", self.host),
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// How long one SSH command may take (connect included).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The `ssh` command line that runs `remote` on `target`.
pub fn command(settings: &SshSettings, target: &SshTarget, remote: &str) -> Cmd {
    let mut args: Vec<String> = vec![
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=10".into(),
    ];
    // ssh keeps the first value it is given for an option: the flags' first.
    for o in settings.options.iter().chain(&target.options) {
        args.push("-o".into());
        args.push(o.clone());
    }
    let keys = match &settings.key {
        Some(k) => std::slice::from_ref(k),
        None => target.keys.as_slice(),
    };
    for key in keys {
        args.push("-i".into());
        args.push(key.clone());
    }
    if let Some(port) = target.port.or(settings.port) {
        args.push("-p".into());
        args.push(port.to_string());
    }
    if let Some(user) = settings.user.as_ref().or(target.user.as_ref()) {
        args.push("-l".into());
        args.push(user.clone());
    }
    args.push("--".into());
    args.push(target.host.clone());
    args.push(remote.to_owned());
    Cmd {
        program: "ssh".into(),
        args,
    }
}

/// Runs `remote` on `target` off the async runtime's workers.
pub async fn run<E: Exec + Clone + 'static>(
    exec: &E,
    settings: &SshSettings,
    target: &SshTarget,
    remote: &str,
) -> Result<String, exec::Error> {
    exec::run_blocking(exec, command(settings, target, remote), TIMEOUT).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_and_without_ports() {
        let t = |s: &str| SshTarget::parse(s).map(|t| (t.host, t.port));
        assert_eq!(t("10.0.0.5"), Ok(("10.0.0.5".into(), None)));
        assert_eq!(t("127.0.0.1:2222"), Ok(("127.0.0.1".into(), Some(2222))));
        assert_eq!(t("[fd00::1]:22"), Ok(("fd00::1".into(), Some(22))));
        assert_eq!(t("fd00::1"), Ok(("fd00::1".into(), None)));
        assert!(t("host:port").is_err());
        assert!(t("").is_err());
        assert_eq!(
            SshTarget::parse("[fd00::1]:22").map(|t| t.to_string()),
            Ok("[fd00::1]:22".into())
        );
    }

    #[test]
    fn the_command_line_is_non_interactive_and_keeps_the_remote_command_whole() {
        let mut s = SshSettings::new();
        s.user = Some("vagrant".into());
        s.key = Some("/k/id".into());
        s.options = vec!["StrictHostKeyChecking=no".into()];
        let t = SshTarget::parse("127.0.0.1:2222").expect("target");
        assert_eq!(
            command(&s, &t, "sudo systemctl stop kubelet").to_string(),
            "ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=no -i /k/id \
             -p 2222 -l vagrant -- 127.0.0.1 'sudo systemctl stop kubelet'"
        );
        // A node's own port wins over the default one.
        s.port = Some(22);
        let t = SshTarget::parse("10.0.0.5").expect("target");
        assert!(command(&s, &t, "true").to_string().contains("-p 22 "));
    }
}
