//! The example remediator (`examples/remediator.rs`, built by `cargo test`
//! with the tests), started on a test's cluster and killed however the test
//! ends.

use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Remediator(Child);

impl Remediator {
    /// `target/debug/examples/remediator ARGS` on the cluster of `kubeconfig`.
    pub fn start(kubeconfig: &Path, args: &[&str]) -> Remediator {
        let exe = std::env::current_exe().unwrap();
        let path = exe
            .parent()
            .and_then(|deps| deps.parent())
            .unwrap()
            .join("examples/remediator");
        assert!(
            path.is_file(),
            "{} is not built: `cargo test` builds the examples with the tests",
            path.display()
        );
        Remediator(
            Command::new(path)
                .args(args)
                .env("KUBECONFIG", kubeconfig)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Remediator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
