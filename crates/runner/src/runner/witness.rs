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
use crate::record::machines::{Look, MachineTrack};
use crate::timeline::Ms;

/// How often it looks.
pub(super) const EVERY: Duration = Duration::from_secs(1);

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
                let asked: Vec<_> = nodes
                    .iter()
                    .map(|n| {
                        let (eyes, n) = (Arc::clone(&eyes), n.clone());
                        tokio::task::spawn_blocking(move || eyes.look(&n))
                    })
                    .collect();
                for (node, asked) in nodes.iter().zip(asked) {
                    if let Ok((power, mut containers)) = asked.await {
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
