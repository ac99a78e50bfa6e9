use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Captured, Error, Exec, Job};

type Answer = Arc<dyn Fn(&Job) -> Result<Captured, Error> + Send + Sync>;

#[derive(Clone, Default)]
pub struct Fake {
    jobs: Arc<Mutex<Vec<Job>>>,
    answers: Arc<Mutex<Vec<(String, Answer)>>>,
}

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fake").field("jobs", &self.lines()).finish()
    }
}

impl Fake {
    /// Lines starting with `prefix` exit with `code`, printing `stdout`
    /// and `stderr`.
    pub fn answer(&self, prefix: &str, code: i32, stdout: &str, stderr: &str) -> &Fake {
        let c = exited(code, stdout, stderr);
        self.answer_with(prefix, move |_| Ok(c.clone()))
    }

    /// Lines starting with `prefix` get what `f` says.
    pub fn answer_with(
        &self,
        prefix: &str,
        f: impl Fn(&Job) -> Result<Captured, Error> + Send + Sync + 'static,
    ) -> &Fake {
        self.answers
            .lock()
            .expect("lock")
            .push((prefix.to_owned(), Arc::new(f)));
        self
    }

    /// The jobs run so far, in order.
    pub fn jobs(&self) -> Vec<Job> {
        self.jobs.lock().expect("lock").clone()
    }

    /// Forgets the jobs run so far.
    pub fn clear(&self) {
        self.jobs.lock().expect("lock").clear();
    }

    /// The command lines run so far, in order.
    pub fn lines(&self) -> Vec<String> {
        self.jobs().iter().map(|j| j.cmd.to_string()).collect()
    }
}

/// A command that exited with `code`.
pub fn exited(code: i32, stdout: &str, stderr: &str) -> Captured {
    Captured {
        code: Some(code),
        status: format!("exit status: {code}"),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        timed_out: false,
        elapsed: Duration::from_millis(1),
    }
}

impl Exec for Fake {
    fn call(&self, job: &Job) -> Result<Captured, Error> {
        self.jobs.lock().expect("lock").push(job.clone());
        let line = job.cmd.to_string();
        let answer = self
            .answers
            .lock()
            .expect("lock")
            .iter()
            .find(|(prefix, _)| line.starts_with(prefix.as_str()))
            .map(|(_, a)| Arc::clone(a));
        match answer {
            Some(a) => a(job),
            None => Ok(exited(0, "", "")),
        }
    }
}
