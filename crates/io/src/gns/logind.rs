//! What systemd-logind is asked on the node: the two commands run there
//! over SSH, for the inhibitor locks (`systemd-inhibit --list`) and the
//! longest delay logind grants them (`InhibitDelayMaxUSec`). Their outputs
//! are read into facts by the record crate's `record::graceful::logind`.
//!
//! The commands need no root: listing inhibitors and reading logind's
//! properties are allowed to every user.

/// Lists the inhibitor locks. With no pager and a wide table, so that
/// neither a TTY nor a narrow terminal changes the output; old systemd
/// (before the table format, e.g. 219) ignores both variables.
pub const INHIBITORS_COMMAND: &str = "SYSTEMD_PAGER=cat COLUMNS=1000 systemd-inhibit --list";

/// Reads logind's `InhibitDelayMaxUSec` in microseconds (`t 5000000`).
/// `busctl get-property` is exact; it is not in every old systemd.
pub const INHIBIT_DELAY_BUSCTL: &str = "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec";

/// The same through `loginctl`, which prints the manager's properties when
/// `show-session` names no session (`InhibitDelayMaxUSec=5s`): in systemd
/// since at least 219 (CentOS 7) up to today.
pub const INHIBIT_DELAY_LOGINCTL: &str =
    "SYSTEMD_PAGER=cat loginctl show-session -p InhibitDelayMaxUSec";

/// One command line for `InhibitDelayMaxUSec`: `busctl`, else `loginctl`.
/// `record::graceful::logind::parse_inhibit_delay` reads either answer.
pub const INHIBIT_DELAY_COMMAND: &str = "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec 2>/dev/null || SYSTEMD_PAGER=cat loginctl show-session -p InhibitDelayMaxUSec";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_command_falls_back_to_loginctl() {
        assert!(INHIBIT_DELAY_COMMAND.starts_with(INHIBIT_DELAY_BUSCTL));
        assert!(INHIBIT_DELAY_COMMAND.ends_with(INHIBIT_DELAY_LOGINCTL));
    }
}
