//! What each node fault means, said once.
//!
//! A [`FaultKind`] either breaks a node or restores it ([`Does`]), and what
//! it breaks or restores is one [`Effect`] on the node's machine: powered
//! off, paused, cut off its network, its kubelet stopped. Everything else
//! about a fault follows from that: the fault that reverts it and the ones
//! it undoes, whether the node's workloads keep serving, whether the machine
//! must be running before it. Two tables say it, one exhaustive `match`
//! each ([`FaultKind::props`], [`Effect::props`]), so a new fault kind is a
//! compile error there until it is described, and in each backend until the
//! backend carries it out (their matches on a fault have no `_` arm).
//! Backends, the witness, fencing, the report's wording, validation and the
//! plan read these tables; none keeps a list of its own.

#![deny(clippy::wildcard_enum_match_arm)]

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares [`FaultKind`] and [`FaultKind::ALL`] from one list of variants,
/// so `ALL` cannot miss one (what [`FaultKind::undoes`] relies on).
macro_rules! fault_kinds {
    ($($(#[$attr:meta])* $variant:ident,)+) => {
        /// A node fault, as a scenario's `fault:` names it (`pause-vm`).
        /// Each breaking fault has a revert ([`FaultKind::revert`]); what
        /// each one means is [`FaultKind::props`].
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize,
        )]
        #[serde(rename_all = "kebab-case")]
        pub enum FaultKind {
            $($(#[$attr])* $variant,)+
        }

        impl FaultKind {
            /// Every fault kind, in the order of the enum (the order
            /// messages and `BTreeMap`s list them in).
            pub const ALL: [FaultKind; [$(FaultKind::$variant,)+].len()] =
                [$(FaultKind::$variant,)+];
        }
    };
}

fault_kinds! {
    /// The machine frozen (its processes stop until it is resumed).
    PauseVm,
    ResumeVm,
    /// The machine cut off its power: no shutdown, nothing runs on.
    Poweroff,
    Poweron,
    /// The machine's OS asked to shut down (the kubelet's graceful node
    /// shutdown runs), then off.
    Shutdown,
    /// The kubelet's service stopped; the machine and its containers run on.
    StopKubelet,
    StartKubelet,
    /// The machine's link to the cluster's network taken down.
    DropNic,
    RestoreNic,
}

/// What a fault does to its node's machine: puts it in a broken state, or
/// takes it out of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Does {
    /// Leaves the machine in this state until a fault that restores it.
    Breaks(Effect),
    /// Takes the machine out of this state (the revert of the faults that
    /// break it so).
    Restores(Effect),
}

/// A state a breaking fault leaves the node's machine in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Off: nothing runs on it (poweroff, shutdown).
    Off,
    /// Frozen: its processes run again when it is resumed (pause-vm).
    Paused,
    /// Running, but off the cluster's network (drop-nic).
    CutOff,
    /// Running, its kubelet stopped (stop-kubelet).
    KubeletStopped,
}

/// What one fault kind is: the row of [`FaultKind::props`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Props {
    /// As a scenario writes it (`pause-vm`; serde's name for the variant).
    pub name: &'static str,
    pub does: Does,
    /// What the node was made, for the report's sentences: `paused`,
    /// `powered off`, ...
    pub done_to_node: &'static str,
}

/// What one effect means: the row of [`Effect::props`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectProps {
    /// The fault that takes the machine out of this state (the revert of
    /// every fault that leaves it so).
    pub restored_by: FaultKind,
    /// Whether the pods' containers on the node keep answering clients
    /// that reach them meanwhile (only a stopped kubelet leaves them
    /// running and reachable).
    pub keeps_serving: bool,
    /// Whether the node itself still answers at its own address (SSH
    /// reaches it), so a revert may go through it.
    pub node_answers: bool,
    /// Whether what holds the machine (hypervisor, container runtime, BMC)
    /// does this to the machine itself, rather than a service inside its OS
    /// being stopped: such a fault must find the machine running, or its
    /// revert would change what the run did not.
    pub on_machine: bool,
}

impl FaultKind {
    /// The table: every fault kind described once. Everything else about a
    /// fault is derived from its row and its effect's.
    pub fn props(self) -> Props {
        let row = |name, does, done_to_node| Props {
            name,
            does,
            done_to_node,
        };
        match self {
            FaultKind::PauseVm => row("pause-vm", Does::Breaks(Effect::Paused), "paused"),
            FaultKind::ResumeVm => row("resume-vm", Does::Restores(Effect::Paused), "resumed"),
            FaultKind::Poweroff => row("poweroff", Does::Breaks(Effect::Off), "powered off"),
            FaultKind::Poweron => row("poweron", Does::Restores(Effect::Off), "powered on"),
            FaultKind::Shutdown => row("shutdown", Does::Breaks(Effect::Off), "shut down"),
            FaultKind::StopKubelet => row(
                "stop-kubelet",
                Does::Breaks(Effect::KubeletStopped),
                "left without its kubelet",
            ),
            FaultKind::StartKubelet => row(
                "start-kubelet",
                Does::Restores(Effect::KubeletStopped),
                "given its kubelet back",
            ),
            FaultKind::DropNic => row(
                "drop-nic",
                Does::Breaks(Effect::CutOff),
                "cut off its network",
            ),
            FaultKind::RestoreNic => {
                row("restore-nic", Does::Restores(Effect::CutOff), "reconnected")
            }
        }
    }

    /// As a scenario writes it: `pause-vm`, `poweroff`, ...
    pub fn name(self) -> &'static str {
        self.props().name
    }

    /// Whether it breaks its node or restores it, and what state of the
    /// machine that is.
    pub fn does(self) -> Does {
        self.props().does
    }

    /// The state of the machine it leaves (a breaking fault) or ends (a
    /// restoring one).
    pub fn effect(self) -> Effect {
        match self.does() {
            Does::Breaks(e) | Does::Restores(e) => e,
        }
    }

    /// Whether it breaks its node (it has a revert, the journal keeps it).
    pub fn breaks(self) -> bool {
        match self.does() {
            Does::Breaks(_) => true,
            Does::Restores(_) => false,
        }
    }

    /// The faults that break a node, in the enum's order: the ones a
    /// command file gives commands for.
    pub fn breaking() -> impl Iterator<Item = FaultKind> {
        FaultKind::ALL.into_iter().filter(|f| f.breaks())
    }

    /// Whether it breaks the machine itself (powers it off, pauses it, cuts
    /// its link) rather than a service in its OS: a backend must find the
    /// machine running before it.
    pub fn breaks_machine(self) -> bool {
        match self.does() {
            Does::Breaks(e) => e.props().on_machine,
            Does::Restores(_) => false,
        }
    }

    /// The fault that undoes this one, for faults that break something.
    pub fn revert(self) -> Option<FaultKind> {
        match self.does() {
            Does::Breaks(e) => Some(e.props().restored_by),
            Does::Restores(_) => None,
        }
    }

    /// For a restoring fault, the breaking faults it undoes (those that
    /// leave the state it ends), in the enum's order; none for a breaking
    /// fault.
    pub fn undoes(self) -> impl Iterator<Item = FaultKind> {
        let ends = match self.does() {
            Does::Restores(e) => Some(Does::Breaks(e)),
            Does::Breaks(_) => None,
        };
        FaultKind::ALL
            .into_iter()
            .filter(move |f| Some(f.does()) == ends)
    }

    /// Whether the pods' containers on the node keep answering clients that
    /// reach them while this fault holds: only a stopped kubelet leaves
    /// them running and reachable (a paused, powered-off or shut-down
    /// machine, or one cut off its network, answers nothing). A restoring
    /// fault leaves them serving.
    pub fn keeps_serving(self) -> bool {
        match self.does() {
            Does::Breaks(e) => e.props().keeps_serving,
            Does::Restores(_) => true,
        }
    }

    /// Whether the node still answers at its own address while this fault
    /// holds (a revert may reach it there: only after stop-kubelet). A
    /// restoring fault leaves it answering.
    pub fn node_answers(self) -> bool {
        match self.does() {
            Does::Breaks(e) => e.props().node_answers,
            Does::Restores(_) => true,
        }
    }

    /// What the node was made, for sentences: `paused`, `powered off`, ...
    pub fn done_to_node(self) -> &'static str {
        self.props().done_to_node
    }
}

impl Effect {
    /// The table of the machine's broken states: every effect described
    /// once.
    pub fn props(self) -> EffectProps {
        match self {
            Effect::Off => EffectProps {
                restored_by: FaultKind::Poweron,
                keeps_serving: false,
                node_answers: false,
                on_machine: true,
            },
            Effect::Paused => EffectProps {
                restored_by: FaultKind::ResumeVm,
                keeps_serving: false,
                node_answers: false,
                on_machine: true,
            },
            Effect::CutOff => EffectProps {
                restored_by: FaultKind::RestoreNic,
                keeps_serving: false,
                node_answers: false,
                on_machine: true,
            },
            Effect::KubeletStopped => EffectProps {
                restored_by: FaultKind::StartKubelet,
                keeps_serving: true,
                node_answers: true,
                on_machine: false,
            },
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_the_one_a_scenario_writes() {
        for f in FaultKind::ALL {
            let yaml = serde_json::to_value(f).expect("serializes");
            assert_eq!(yaml.as_str(), Some(f.name()), "{f:?}");
            let back: FaultKind =
                serde_json::from_value(serde_json::Value::String(f.name().into())).expect("parses");
            assert_eq!(back, f);
        }
    }

    #[test]
    fn every_breaking_fault_has_a_revert_that_undoes_it() {
        for f in FaultKind::breaking() {
            let r = f.revert().expect("a breaking fault has a revert");
            assert_eq!(r.does(), Does::Restores(f.effect()), "{f}");
            assert!(r.undoes().any(|u| u == f), "{r} undoes {f}");
        }
        for r in FaultKind::ALL.into_iter().filter(|f| !f.breaks()) {
            assert_eq!(
                r.effect().props().restored_by,
                r,
                "one restoring fault per effect"
            );
            assert!(r.undoes().next().is_some(), "{r} undoes something");
            assert_eq!(r.revert(), None);
        }
    }

    /// The tables give what the lists they replaced said, word for word.
    #[test]
    fn the_tables_say_what_the_lists_said() {
        use FaultKind::*;
        let rows: Vec<_> = FaultKind::ALL
            .into_iter()
            .map(|f| {
                (
                    f,
                    f.revert(),
                    f.undoes().collect::<Vec<_>>(),
                    f.keeps_serving(),
                    f.breaks_machine(),
                    f.done_to_node(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (PauseVm, Some(ResumeVm), vec![], false, true, "paused"),
                (ResumeVm, None, vec![PauseVm], true, false, "resumed"),
                (Poweroff, Some(Poweron), vec![], false, true, "powered off"),
                (
                    Poweron,
                    None,
                    vec![Poweroff, Shutdown],
                    true,
                    false,
                    "powered on"
                ),
                (Shutdown, Some(Poweron), vec![], false, true, "shut down"),
                (
                    StopKubelet,
                    Some(StartKubelet),
                    vec![],
                    true,
                    false,
                    "left without its kubelet"
                ),
                (
                    StartKubelet,
                    None,
                    vec![StopKubelet],
                    true,
                    false,
                    "given its kubelet back"
                ),
                (
                    DropNic,
                    Some(RestoreNic),
                    vec![],
                    false,
                    true,
                    "cut off its network"
                ),
                (RestoreNic, None, vec![DropNic], true, false, "reconnected"),
            ]
        );
        assert_eq!(
            FaultKind::breaking().collect::<Vec<_>>(),
            [PauseVm, Poweroff, Shutdown, StopKubelet, DropNic]
        );
        let answering: Vec<_> = FaultKind::breaking().filter(|f| f.node_answers()).collect();
        assert_eq!(answering, [StopKubelet]);
    }
}
