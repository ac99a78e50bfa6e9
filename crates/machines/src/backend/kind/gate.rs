//! One gate per node container, between the witness's `docker exec` into it
//! and a `docker pause` of it. An exec whose process is still joining the
//! container's cgroups when the pause freezes them is frozen with them:
//! `runc exec` never returns, and Docker's `unpause` of that container then
//! waits on it for good (seen in CI, dockerd 20.10 on cgroup v1: the
//! witness's look at a worker was in flight when a scenario pausing both
//! workers at once paused it; the unpause hung, and only writing `THAWED`
//! to the container's freezer let it go). A pause waits for a look in flight; a
//! look waits for a pause; Docker refuses an exec into a container already
//! paused, so once the pause is done nothing else needs to wait.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedMutexGuard};

#[derive(Debug, Clone, Default)]
pub struct Gates(Arc<BTreeMap<String, Arc<Mutex<()>>>>);

impl Gates {
    pub fn new(containers: impl IntoIterator<Item = String>) -> Gates {
        Gates(Arc::new(
            containers
                .into_iter()
                .map(|c| (c, Arc::new(Mutex::new(()))))
                .collect(),
        ))
    }

    /// Holds `container`'s gate until the guard is dropped (none for a
    /// container it does not know), from async code.
    pub async fn hold(&self, container: &str) -> Option<OwnedMutexGuard<()>> {
        match self.0.get(container) {
            Some(gate) => Some(Arc::clone(gate).lock_owned().await),
            None => None,
        }
    }

    /// The same from a blocking thread (the witness's looks).
    pub fn hold_blocking(&self, container: &str) -> Option<OwnedMutexGuard<()>> {
        self.0
            .get(container)
            .map(|gate| Arc::clone(gate).blocking_lock_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A look in flight holds a pause back until it is done, and a pause
    /// holds a look back; other containers' gates are free meanwhile.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pause_waits_for_a_look_in_flight_and_other_nodes_do_not() {
        let gates = Gates::new(["w1".to_owned(), "w2".to_owned()]);
        let looking = gates.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let look = tokio::task::spawn_blocking(move || {
            let _held = looking.hold_blocking("w1");
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
        rx.recv().unwrap();
        let began = std::time::Instant::now();
        assert!(gates.hold("w2").await.is_some(), "another node is free");
        assert!(began.elapsed() < Duration::from_millis(200));
        let held = gates.hold("w1").await;
        assert!(held.is_some());
        assert!(
            began.elapsed() >= Duration::from_millis(250),
            "the pause went on while the look was in flight"
        );
        look.await.unwrap();
        assert!(gates.hold("nope").await.is_none());
    }
}
