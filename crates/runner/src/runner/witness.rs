//! The witness: looks at the machines of the nodes the scenario's faults
//! hit, once a second, through the backend's [`Eyes`] (their power and the
//! pods' containers running on them, by the machine's own account, not the
//! API server's), from the end of preflight until cleanup has ended.
//! Read-only; each look runs on the blocking pool.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::Eyes;
use crate::observe::Recorder;
use crate::record::machines::{Look, MachineTrack, PodContainer, Power};
use crate::timeline::Ms;

/// How often it looks.
pub(super) const EVERY: Duration = Duration::from_secs(1);
/// The nodes are looked at in at most this many groups at once, each group
/// one after the other on one thread of the blocking pool. A task per node
/// (50 failed nodes of a 1,000-node sim, each look a few microseconds) kept
/// about 40 threads alive, each with memory of its own: the run's peak went
/// from 154.9 to 145.0 MiB with the groups (docs/observer-precision.md).
/// Where a look takes a while (`docker exec`), more than 8 nodes make a
/// round longer than one look.
const AT_ONCE: usize = 8;

/// One look at each of `nodes`, in their order (None: its look panicked).
async fn look_at(eyes: &Arc<dyn Eyes>, nodes: &[String]) -> Vec<Option<Seen>> {
    let per_group = nodes.len().div_ceil(AT_ONCE).max(1);
    let groups: Vec<_> = nodes
        .chunks(per_group)
        .map(|group| {
            let (eyes, group) = (Arc::clone(eyes), group.to_vec());
            let len = group.len();
            let task = tokio::task::spawn_blocking(move || {
                group.iter().map(|n| eyes.look(n)).collect::<Vec<_>>()
            });
            (len, task)
        })
        .collect();
    let mut looked = Vec::with_capacity(nodes.len());
    for (len, task) in groups {
        match task.await {
            Ok(seen) => looked.extend(seen.into_iter().map(Some)),
            Err(_) => looked.extend(std::iter::repeat_with(|| None).take(len)),
        }
    }
    looked
}

/// What one look saw: the machine's power, and its pods' containers.
type Seen = (Power, Result<Vec<PodContainer>, String>);

pub(super) struct Witness {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<MachineTrack>>,
}

impl Witness {
    /// Starts looking at `nodes` every `every`, on the run's clock.
    /// Only the pods of `namespace` are kept.
    pub(super) fn start(
        eyes: Arc<dyn Eyes>,
        nodes: Vec<String>,
        namespace: String,
        rec: Arc<Recorder>,
        every: Duration,
    ) -> Witness {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut looks: BTreeMap<String, Vec<Look>> = BTreeMap::new();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let at = rec.now();
                let asked = look_at(&eyes, &nodes).await;
                for (node, asked) in nodes.iter().zip(asked) {
                    if let Some((power, mut containers)) = asked {
                        if let Ok(c) = &mut containers {
                            c.retain(|c| c.namespace == namespace);
                        }
                        looks.entry(node.clone()).or_default().push(Look {
                            at,
                            power,
                            containers,
                        });
                    }
                }
            }
            let every = Ms::try_from(every.as_millis()).unwrap_or(Ms::MAX);
            looks
                .iter()
                .map(|(node, looks)| MachineTrack::of(node, &eyes.how(node), every, looks))
                .collect()
        });
        Witness { stop, task }
    }

    /// Stops looking (after the look in progress) and gives the tracks.
    pub(super) async fn stop(self) -> Vec<MachineTrack> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use super::*;

    /// Eyes that say which thread looked, and see a node named `off-*` off.
    #[derive(Default)]
    struct Threads(Mutex<HashSet<std::thread::ThreadId>>);

    impl Eyes for Threads {
        fn how(&self, _node: &str) -> String {
            "by thread".into()
        }
        fn look(&self, node: &str) -> (Power, Result<Vec<PodContainer>, String>) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(std::thread::current().id());
            let power = if node.starts_with("off-") {
                Power::Off
            } else {
                Power::On
            };
            (power, Err(node.to_owned()))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_nodes_are_looked_at_in_order_on_a_few_threads() {
        let eyes: Arc<dyn Eyes> = Arc::new(Threads::default());
        let nodes: Vec<String> = (0..50)
            .map(|i| format!("{}-{i}", if i % 7 == 0 { "off" } else { "on" }))
            .collect();
        for _ in 0..5 {
            let looked = look_at(&eyes, &nodes).await;
            assert_eq!(looked.len(), nodes.len());
            for (node, seen) in nodes.iter().zip(looked) {
                let (power, said) = seen.expect("looked");
                assert_eq!(said.unwrap_err(), *node, "in the nodes' order");
                assert_eq!(power == Power::Off, node.starts_with("off-"), "{node}");
            }
        }
        // The pool has threads to spare now (idle ones are kept 10 s): a
        // round still uses one per group.
        let one = Arc::new(Threads::default());
        let eyes: Arc<dyn Eyes> = one.clone();
        let _ = look_at(&eyes, &nodes).await;
        let used = one
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        assert!(used <= AT_ONCE, "{used} threads for one round of 50 nodes");
    }
}
