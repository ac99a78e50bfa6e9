//! How a node played by KWOK comes back, as a kubelet comes back (pure).
//!
//! KWOK reports a node Ready as soon as its process runs. A kubelet does
//! not, and how long it takes depends on what happened to it (measured on a
//! real kind cluster, docs/fidelity.md):
//! - **resumed after a pause** (a frozen VM): its clocks jumped, so the
//!   first status it posts after a pause longer than the PLEG relist
//!   threshold (3 min, compiled into the kubelet) says Ready=False
//!   (`KubeletNotReady`, "PLEG is not healthy"), and the next one, a status
//!   update period later, Ready=True (seen: Ready=False at once, Ready=True
//!   10.1 s later with the default 10 s period). After a pause longer than
//!   its runtime check's threshold (30 s) its first status and its first
//!   runtime check race ([`ThawRace`]): the status first says "container
//!   runtime is down", Ready=True a status update later; the check first,
//!   straight to Ready=True. After a shorter pause: straight to Ready=True.
//! - **powered on**: the machine boots first (seen on kind: Ready=True 8.0-8.8 s
//!   after `docker start`, on both seeds that power a node on), then reports
//!   the pods deleted while it was off `Failed` and removes them;
//! - **NIC restored**, **kubelet started**: the kubelet kept its state or
//!   registers afresh (`agents.rs`); Ready at its first status.
//!
//! And how it goes down on a `shutdown` (logind announcing it): with a
//! graceful shutdown period it reports the node NotReady and stops its pods
//! first ([`ShutdownGrace::shutdown`], `shutdown.rs`); without one, as on a
//! power-off.
//!
//! The sim writes the first report itself and tells KWOK's node-initialize
//! stage when to report Ready with the [`READY_AT`] annotation.

use std::time::Duration;

/// The node annotation (an RFC 3339 time) that delays KWOK's
/// node-initialize stage (`stages/node-initialize.yaml`) until then.
pub const READY_AT: &str = "nodefall.dev/ready-at";

/// The pod annotation (an RFC 3339 time) at which a resumed node's kubelet
/// re-reports the pods it runs as it last knew them (`stages/pod-recover.yaml`,
/// `stages/pod-resync.yaml`).
pub const RESYNC_AT: &str = "nodefall.dev/resync-at";

/// The pod annotation (a duration or an RFC 3339 time) that delays its stop
/// (`stages/pod-stop.yaml`).
pub const STOP_DELAY: &str = "pod-stop.stage.kwok.x-k8s.io/delay";

/// After a resume, when the kubelet re-reports its pods (Ready again, even a
/// Terminating one the node lifecycle controller had marked not Ready): seen
/// on kind 2.18-2.69 s after `docker unpause` (five pods, a short and a long
/// pause).
pub const RESYNC_AFTER: Duration = Duration::from_millis(2400);

/// After a resume, when the kubelet stops the pods deleted meanwhile: seen on
/// kind 2.49-2.93 s after `docker unpause` (four pods).
pub const STOP_AFTER: Duration = Duration::from_millis(2700);

/// The pod annotation (`Failed`) that makes pod-stop report that phase: the
/// pods of a node powered off and on again, whose containers died with it.
pub const STOP_PHASE: &str = "nodefall.dev/stop-phase";

/// The pod annotation (a duration or an RFC 3339 time) that delays its
/// removal once stopped (`stages/pod-delete.yaml`).
pub const DELETE_DELAY: &str = "pod-delete.stage.kwok.x-k8s.io/delay";

/// After a powered-on node is Ready, when its kubelet reports the pods
/// deleted while it was off `Failed` (kind: 0.85-0.92 s, four pods) and when
/// it removes them (1.0-1.1 s later).
pub const FAIL_AFTER_BOOT: Duration = Duration::from_millis(900);
pub const DELETE_AFTER_FAIL: Duration = Duration::from_millis(1000);

/// When a returning node's kubelet acts on its pods, from its return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTimes {
    /// Running pods re-reported as they were (none: at once).
    pub resync: Option<Duration>,
    /// Pods deleted meanwhile stopped.
    pub stop: Duration,
    /// ... in this phase (none: `Succeeded`).
    pub stop_phase: Option<&'static str>,
    /// ... and removed (none: the stage's own delay after the stop).
    pub delete: Option<Duration>,
}

impl Kubelet {
    /// What the kubelet of a node coming back `how` does with the pods the
    /// API server still binds to it, when it does something else than KWOK
    /// (none: KWOK's stages as they are).
    pub fn pod_times(&self, how: Comeback) -> Option<PodTimes> {
        match how {
            Comeback::Resumed { .. } => Some(PodTimes {
                resync: Some(RESYNC_AFTER),
                stop: STOP_AFTER,
                stop_phase: None,
                delete: None,
            }),
            Comeback::Booted => Some(PodTimes {
                resync: None,
                stop: self.boot + FAIL_AFTER_BOOT,
                stop_phase: Some("Failed"),
                delete: Some(self.boot + FAIL_AFTER_BOOT + DELETE_AFTER_FAIL),
            }),
            Comeback::Restarted => None,
        }
    }
}

/// The kubelet's PLEG relist threshold (`genericPlegRelistThreshold`,
/// pkg/kubelet/pleg/generic.go): a relist older than this makes the runtime
/// unhealthy and the node NotReady.
pub const PLEG_RELIST_THRESHOLD: Duration = Duration::from_secs(180);

/// How long a powered-on node takes to boot to its first status by default:
/// a kind node on this project's 2-core machine (8.0-8.8 s from `poweron` to
/// Ready=True over five power-ons: two seeds, default and fast timings).
pub const DEFAULT_BOOT: Duration = Duration::from_secs(8);

/// The kubelet's runtime check threshold (`maxWaitForContainerRuntime`,
/// pkg/kubelet/kubelet.go, the `runtimeState`'s `baseRuntimeSyncThreshold`
/// in pkg/kubelet/runtime.go): while its last successful runtime check
/// (`updateRuntimeUp`, every 5 s) is older than this, the node's Ready
/// condition says "container runtime is down".
pub const RUNTIME_SYNC_THRESHOLD: Duration = Duration::from_secs(30);

/// The message of the Ready=False condition a kubelet posts while its last
/// runtime check is older than [`RUNTIME_SYNC_THRESHOLD`].
pub const RUNTIME_DOWN: &str = "container runtime is down";

/// Which of a thawed kubelet's two overdue loops acts first: its node status
/// update (`syncNodeStatus`) or its runtime check (`updateRuntimeUp`). Both
/// timers expired during the pause and fire together on the thaw; after a
/// pause longer than [`RUNTIME_SYNC_THRESHOLD`] the status, if first, says
/// the runtime is down. Seen on kind after `docker unpause` (13 kubelets
/// thawed after 48-90 s): 8 posted Ready=False first, 3 went straight to
/// Ready, and 2 posted nothing until a status update later (which the sim
/// does not play: its cause is not established, docs/zones.md). Each node
/// by chance, as the sim plays it ([`ThawRace::toss`]): the status first
/// two times in three (kind: 8 of the 11 that posted at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThawRace {
    StatusFirst,
    RuntimeCheckFirst,
}

impl ThawRace {
    /// The race's outcome for `node` thawed at `at_ms` (Unix ms): the
    /// status first two times in three, the same for the same node and
    /// moment (so a run can be explained from its record) and independent
    /// across nodes.
    pub fn toss(node: &str, at_ms: u64) -> ThawRace {
        use std::hash::{Hash, Hasher};
        // `DefaultHasher::new()` has fixed keys: the same toss on every
        // build of this version.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (node, at_ms).hash(&mut h);
        if !h.finish().is_multiple_of(3) {
            ThawRace::StatusFirst
        } else {
            ThawRace::RuntimeCheckFirst
        }
    }
}

/// How the node's agent comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comeback {
    /// `resume-vm` after a pause that lasted this long, its kubelet's loops
    /// racing so.
    Resumed {
        paused_for: Duration,
        race: ThawRace,
    },
    /// `poweron`.
    Booted,
    /// `restore-nic`, `start-kubelet`, a revert.
    Restarted,
}

/// What the returning kubelet reports, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstReport {
    /// Ready=False with this message, posted at once (none: nothing posted
    /// before Ready=True).
    pub not_ready: Option<String>,
    /// How long after its return the node reports Ready=True.
    pub ready_after: Duration,
}

/// What decides a returning node's first report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kubelet {
    /// `nodeStatusUpdateFrequency`.
    pub status_update: Duration,
    /// A powered-on node's boot.
    pub boot: Duration,
    /// [`PLEG_RELIST_THRESHOLD`], or a shorter one in tests.
    pub pleg_threshold: Duration,
}

impl Comeback {
    /// `resume-vm` of `node`, paused at `paused_at_ms` and thawed at
    /// `now_ms` (Unix ms), its race tossed ([`ThawRace::toss`]).
    pub fn resumed(node: &str, paused_at_ms: u64, now_ms: u64) -> Comeback {
        Comeback::Resumed {
            paused_for: Duration::from_millis(now_ms.saturating_sub(paused_at_ms)),
            race: ThawRace::toss(node, now_ms),
        }
    }
}

impl Kubelet {
    /// The first report of a node coming back `how`.
    pub fn first_report(&self, how: Comeback) -> FirstReport {
        match how {
            Comeback::Resumed { paused_for, .. } if paused_for > self.pleg_threshold => {
                FirstReport {
                    not_ready: Some(format!(
                        "PLEG is not healthy: pleg was last seen active {} ago; threshold is {}",
                        go_duration(paused_for),
                        go_duration(self.pleg_threshold)
                    )),
                    ready_after: self.status_update,
                }
            }
            Comeback::Resumed {
                paused_for,
                race: ThawRace::StatusFirst,
            } if paused_for > RUNTIME_SYNC_THRESHOLD => FirstReport {
                not_ready: Some(RUNTIME_DOWN.to_owned()),
                ready_after: self.status_update,
            },
            Comeback::Resumed { .. } | Comeback::Restarted => FirstReport {
                not_ready: None,
                ready_after: Duration::ZERO,
            },
            Comeback::Booted => FirstReport {
                not_ready: None,
                ready_after: self.boot,
            },
        }
    }
}

/// The kubelet's graceful node shutdown (KEP-2000) as configured:
/// `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods` (zero: off,
/// the kubelet's default; `sim up --shutdown-grace-period`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownGrace {
    pub all: Duration,
    pub critical: Duration,
}

/// The message of the Ready=False condition a shutting-down kubelet posts
/// (`nodeshutdown` manager: "node is shutting down").
pub const SHUTTING_DOWN: &str = "node is shutting down";

/// After logind announced the shutdown, when the kubelet has stopped a pod
/// whose containers exit on SIGTERM, reported not Ready, in their
/// containers' phase, with a DisruptionTarget condition. Seen on kind, two
/// agnhost pods a run, from `systemctl poweroff`: 0.47 and 0.67 s, 0.60 and
/// 1.86 s, 2.43 and 2.55 s (default timings; 2.0 s in an earlier run, 0.7 s
/// with fast timings): the middle of that range, so that either end is
/// about 1 s away.
pub const SHUTDOWN_STOP_AFTER: Duration = Duration::from_millis(1500);

/// The pods' DisruptionTarget condition from a shutting-down kubelet.
pub const SHUTDOWN_REASON: &str = "TerminationByKubelet";
pub const SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// A pod priority at or above which the kubelet counts a pod critical
/// (`system-cluster-critical`, `system-node-critical`).
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// What a kubelet does when logind announces a shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Graceful shutdown is off: the node goes down with its pods as they
    /// were, as on a power-off.
    Abrupt,
    /// It reports the node NotReady at once, stops the other pods after
    /// `pods`, then the critical ones after `critical` (both from the
    /// announcement, each within its part of the grace period), then lets
    /// the machine power off.
    Graceful { pods: Duration, critical: Duration },
}

impl ShutdownGrace {
    /// What the kubelet does with these settings. A pod's containers stop in
    /// [`SHUTDOWN_STOP_AFTER`] (they exit on SIGTERM) or when its part of the
    /// grace period is over, whichever comes first.
    pub fn shutdown(&self) -> Shutdown {
        if self.all.is_zero() {
            return Shutdown::Abrupt;
        }
        let others = self.all.saturating_sub(self.critical);
        let pods = SHUTDOWN_STOP_AFTER.min(others);
        Shutdown::Graceful {
            pods,
            critical: pods + SHUTDOWN_STOP_AFTER.min(self.critical),
        }
    }
}

/// A duration as Go prints it, to whole milliseconds (`6m3.5s`).
fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let (m, rest) = (ms / 60_000, ms % 60_000);
    let s = format!("{}.{:03}", rest / 1000, rest % 1000);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBELET: Kubelet = Kubelet {
        status_update: Duration::from_secs(10),
        boot: DEFAULT_BOOT,
        pleg_threshold: PLEG_RELIST_THRESHOLD,
    };

    #[test]
    fn a_long_pause_reports_not_ready_first_and_ready_one_status_update_later() {
        // Whichever loop ran first: the relist is stale either way.
        for race in [ThawRace::StatusFirst, ThawRace::RuntimeCheckFirst] {
            let r = KUBELET.first_report(Comeback::Resumed {
                paused_for: Duration::from_millis(363_500),
                race,
            });
            assert_eq!(
                r.not_ready.as_deref(),
                Some(
                    "PLEG is not healthy: pleg was last seen active 6m3.5s ago; threshold is 3m0s"
                )
            );
            assert_eq!(r.ready_after, Duration::from_secs(10));
        }
    }

    #[test]
    fn a_pause_past_the_runtime_check_threshold_races_the_first_status_against_the_check() {
        let resumed = |secs, race| {
            KUBELET.first_report(Comeback::Resumed {
                paused_for: Duration::from_secs(secs),
                race,
            })
        };
        // The status first: the runtime is down, Ready a status update later.
        assert_eq!(
            resumed(48, ThawRace::StatusFirst),
            FirstReport {
                not_ready: Some(RUNTIME_DOWN.into()),
                ready_after: Duration::from_secs(10)
            }
        );
        // The check first: straight to Ready.
        assert_eq!(
            resumed(90, ThawRace::RuntimeCheckFirst),
            FirstReport {
                not_ready: None,
                ready_after: Duration::ZERO
            }
        );
        // Within the threshold the check is recent enough either way.
        assert_eq!(resumed(30, ThawRace::StatusFirst).not_ready, None);
    }

    #[test]
    fn the_race_is_tossed_per_node_and_moment() {
        let tosses: Vec<ThawRace> = (0..200u64)
            .map(|i| ThawRace::toss(&format!("worker-{}", i % 3), 1_765_000_000_000 + i * 7919))
            .collect();
        let first = tosses
            .iter()
            .filter(|r| **r == ThawRace::StatusFirst)
            .count();
        // Two in three: 200 tosses land 133 +- 27 (4 sigma).
        assert!((106..=160).contains(&first), "{first} of 200 status-first");
        // The same node at the same moment tosses the same.
        assert_eq!(
            ThawRace::toss("worker-1", 42),
            ThawRace::toss("worker-1", 42)
        );
        // Three nodes thawed together do not all share one outcome every time.
        let mixed = (0..20u64).any(|t| {
            let at = 1_765_000_000_000 + t;
            let r: Vec<_> = ["worker-1", "worker-2", "worker-3"]
                .iter()
                .map(|n| ThawRace::toss(n, at))
                .collect();
            r.iter().any(|x| *x != r[0])
        });
        assert!(mixed);
        // The paused time comes from the two moments.
        assert_eq!(
            Comeback::resumed("worker-1", 1_000, 49_000),
            Comeback::Resumed {
                paused_for: Duration::from_secs(48),
                race: ThawRace::toss("worker-1", 49_000)
            }
        );
    }

    #[test]
    fn a_pause_within_the_relist_threshold_goes_straight_to_ready_when_the_check_is_first() {
        for paused_for in [Duration::from_secs(100), PLEG_RELIST_THRESHOLD] {
            let r = KUBELET.first_report(Comeback::Resumed {
                paused_for,
                race: ThawRace::RuntimeCheckFirst,
            });
            assert_eq!(
                r,
                FirstReport {
                    not_ready: None,
                    ready_after: Duration::ZERO
                }
            );
        }
    }

    #[test]
    fn a_graceful_shutdown_stops_the_pods_then_the_critical_ones_within_their_parts() {
        let ms = Duration::from_millis;
        let grace = |all, critical| ShutdownGrace {
            all: ms(all),
            critical: ms(critical),
        };
        // Off by default: the node goes down as on a power-off.
        assert_eq!(ShutdownGrace::default().shutdown(), Shutdown::Abrupt);
        // kind-graceful-shutdown's 20 s / 5 s: stopped as fast as they exit.
        assert_eq!(
            grace(20_000, 5_000).shutdown(),
            Shutdown::Graceful {
                pods: SHUTDOWN_STOP_AFTER,
                critical: SHUTDOWN_STOP_AFTER * 2
            }
        );
        // A part shorter than the containers take cuts them short.
        assert_eq!(
            grace(1_000, 300).shutdown(),
            Shutdown::Graceful {
                pods: ms(700),
                critical: ms(1_000)
            }
        );
        // No part for critical pods: stopped together with the others.
        assert_eq!(
            grace(10_000, 0).shutdown(),
            Shutdown::Graceful {
                pods: SHUTDOWN_STOP_AFTER,
                critical: SHUTDOWN_STOP_AFTER
            }
        );
    }

    #[test]
    fn a_powered_on_node_boots_first_and_a_restarted_agent_does_not() {
        let boot = Duration::from_secs(3);
        let k = Kubelet { boot, ..KUBELET };
        assert_eq!(
            k.first_report(Comeback::Booted),
            FirstReport {
                not_ready: None,
                ready_after: boot
            }
        );
        assert_eq!(
            k.first_report(Comeback::Restarted).ready_after,
            Duration::ZERO
        );
        // Booted: the pods deleted while it was off are Failed after the boot.
        let t = k.pod_times(Comeback::Booted).unwrap();
        assert_eq!(
            (t.stop, t.stop_phase),
            (boot + FAIL_AFTER_BOOT, Some("Failed"))
        );
        assert_eq!(k.pod_times(Comeback::Restarted), None);
        // A whole-second threshold prints as Go prints it.
        assert_eq!(go_duration(Duration::from_secs(2)), "2s");
    }
}
