//! The GitHub Action (action.yml) run as the runner runs a composite action:
//! each `run:` step through `bash --noprofile --norc -eo pipefail FILE`, its
//! `env:` evaluated from the inputs (given, else their defaults), with the
//! runner's files (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_PATH) and
//! directories (GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP). The
//! `uses:` steps (the artifact upload) are not run; what they would upload is
//! resolved from their `with:` and listed.

#![allow(dead_code, reason = "each test crate uses its own part")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

/// One step of the composite action.
#[derive(Debug, Clone)]
pub struct Step {
    pub id: Option<String>,
    pub name: String,
    pub condition: Option<String>,
    pub run: Option<String>,
    pub uses: Option<String>,
    /// Its `env:` (runs) or `with:` (uses), as written.
    pub env: BTreeMap<String, String>,
    pub with: BTreeMap<String, String>,
}

/// action.yml, read.
#[derive(Debug, Clone)]
pub struct Action {
    pub defaults: BTreeMap<String, String>,
    pub required: Vec<String>,
    /// Output name -> the expression giving it.
    pub outputs: BTreeMap<String, String>,
    pub steps: Vec<Step>,
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => panic!("not a scalar: {other:?}"),
    }
}

fn map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_mapping)
        .map(|m| m.iter().map(|(k, v)| (text(k), text(v))).collect())
        .unwrap_or_default()
}

impl Action {
    pub fn load() -> Action {
        let raw = std::fs::read_to_string(repo().join("action.yml")).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&raw).unwrap();
        let inputs = doc["inputs"].as_mapping().unwrap();
        let mut defaults = BTreeMap::new();
        let mut required = Vec::new();
        for (k, v) in inputs {
            let name = text(k);
            if v.get("required").and_then(Value::as_bool) == Some(true) {
                required.push(name.clone());
            }
            defaults.insert(name, v.get("default").map(text).unwrap_or_default());
        }
        let outputs = doc["outputs"]
            .as_mapping()
            .unwrap()
            .iter()
            .map(|(k, v)| (text(k), text(&v["value"])))
            .collect();
        assert_eq!(text(&doc["runs"]["using"]), "composite");
        let steps = doc["runs"]["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|s| Step {
                id: s.get("id").map(text),
                name: s.get("name").map(text).unwrap_or_default(),
                condition: s.get("if").map(text),
                run: s.get("run").map(text),
                uses: s.get("uses").map(text),
                env: map(s.get("env")),
                with: map(s.get("with")),
            })
            .collect();
        Action {
            defaults,
            required,
            outputs,
            steps,
        }
    }

    pub fn step(&self, id: &str) -> &Step {
        self.steps
            .iter()
            .find(|s| s.id.as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no step with id {id}"))
    }

    /// The `if: always()` step that runs `nodefall recover`.
    pub fn recover_step(&self) -> &Step {
        self.steps
            .iter()
            .find(|s| {
                s.run.as_deref().is_some_and(|r| r.contains(" recover"))
                    && s.condition
                        .as_deref()
                        .is_some_and(|c| c.contains("always()"))
            })
            .expect("an `if: always()` step running recover")
    }
}

/// One job's runner files and directories, and the inputs given.
pub struct Job {
    pub dir: tempfile::TempDir,
    pub inputs: BTreeMap<String, String>,
    pub workspace: PathBuf,
    /// Environment for every step (the test's state directories).
    pub env: Vec<(String, String)>,
    /// Variables of the test's own environment the steps must not see.
    pub env_remove: Vec<String>,
}

impl Job {
    pub fn new(inputs: &[(&str, &str)]) -> Job {
        let dir = tempfile::tempdir().unwrap();
        for f in ["output", "summary", "path", "env"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("temp")).unwrap();
        Job {
            dir,
            inputs: inputs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            workspace: repo(),
            env: Vec::new(),
            env_remove: Vec::new(),
        }
    }

    /// `${{ inputs.NAME }}`, the only expression a `run` step's env may
    /// hold: the value given, else the input's default.
    fn evaluate(&self, action: &Action, expr: &str) -> String {
        let name = expr
            .trim()
            .strip_prefix("${{")
            .and_then(|e| e.strip_suffix("}}"))
            .map(str::trim)
            .and_then(|e| e.strip_prefix("inputs."))
            .unwrap_or_else(|| panic!("unexpected expression in a step's env: {expr}"));
        assert!(
            action.defaults.contains_key(name),
            "the env names input {name}, which action.yml does not declare"
        );
        self.inputs
            .get(name)
            .or_else(|| action.defaults.get(name))
            .cloned()
            .unwrap_or_default()
    }

    /// The command that runs `step` as the runner would.
    pub fn command(&self, action: &Action, step: &Step) -> Command {
        for name in &action.required {
            assert!(
                self.inputs.contains_key(name),
                "required input {name} not given"
            );
        }
        for name in self.inputs.keys() {
            assert!(
                action.defaults.contains_key(name),
                "action.yml has no input {name}"
            );
        }
        let run = step.run.as_deref().expect("a run step");
        // An expression in `run:` would be pasted into the script unquoted
        // (script injection); inputs reach the script through `env:` only.
        assert!(!run.contains("${{"), "an expression in run: {run}");
        let script = self.dir.path().join(format!(
            "step-{}.sh",
            step.id.as_deref().unwrap_or("unnamed")
        ));
        std::fs::write(&script, run).unwrap();
        let mut c = Command::new("bash");
        c.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script)
            .current_dir(&self.workspace)
            .stdin(std::process::Stdio::null())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", self.dir.path().join("output"))
            .env("GITHUB_STEP_SUMMARY", self.dir.path().join("summary"))
            .env("GITHUB_PATH", self.dir.path().join("path"))
            .env("GITHUB_ENV", self.dir.path().join("env"))
            .env("GITHUB_WORKSPACE", &self.workspace)
            .env("GITHUB_ACTION_PATH", repo())
            .env("RUNNER_TEMP", self.dir.path().join("temp"));
        for (k, v) in &step.env {
            c.env(k, self.evaluate(action, v));
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for k in &self.env_remove {
            c.env_remove(k);
        }
        c
    }

    /// Runs `step` to its end (at most 10 minutes, its output's end
    /// included: a process left holding the step's output would hang the
    /// runner's step too): exit code and everything it printed.
    pub fn run(&self, action: &Action, step: &Step) -> (Option<i32>, String) {
        let mut cmd = self.command(action, step);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(600)) {
            Ok(out) => {
                let out = out.unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr);
                (out.status.code(), text)
            }
            Err(_) => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                panic!(
                    "step {:?} did not end (or left its output open) within 10 minutes",
                    step.name
                );
            }
        }
    }

    /// What the steps wrote to GITHUB_OUTPUT (`name=value` or the
    /// delimiter form).
    pub fn outputs(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.dir.path().join("output")).unwrap();
        let mut out = BTreeMap::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if let Some((name, delim)) = line.split_once("<<") {
                let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delim).collect();
                out.insert(name.to_owned(), value.join("\n"));
            } else if let Some((name, value)) = line.split_once('=') {
                out.insert(name.to_owned(), value.to_owned());
            }
        }
        out
    }

    pub fn summary(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("summary")).unwrap()
    }

    pub fn path_added(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("path")).unwrap()
    }

    /// The action's outputs as the workflow sees them: each
    /// `${{ steps.ID.outputs.NAME }}` resolved from the step's outputs
    /// (every one must be there).
    pub fn action_outputs(&self, action: &Action) -> BTreeMap<String, String> {
        let written = self.outputs();
        action
            .outputs
            .iter()
            .map(|(name, expr)| {
                let key = expr
                    .trim()
                    .strip_prefix("${{")
                    .and_then(|e| e.strip_suffix("}}"))
                    .map(str::trim)
                    .and_then(|e| e.split_once(".outputs."))
                    .map(|(_, k)| k.to_owned())
                    .unwrap_or_else(|| panic!("output {name}: {expr}"));
                let value = written
                    .get(&key)
                    .unwrap_or_else(|| panic!("output {name}: the step never wrote {key}"));
                (name.clone(), value.clone())
            })
            .collect()
    }

    /// The files the `uses: actions/upload-artifact` step would upload,
    /// relative to its `path:`.
    pub fn artifact(&self, action: &Action) -> Vec<String> {
        let upload = action
            .steps
            .iter()
            .find(|s| {
                s.uses
                    .as_deref()
                    .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
            })
            .expect("an upload-artifact step");
        let path_expr = upload.with.get("path").expect("upload's path");
        let key = path_expr
            .trim_start_matches("${{")
            .trim_end_matches("}}")
            .trim()
            .split_once(".outputs.")
            .map(|(_, k)| k.to_owned())
            .expect("the upload's path is a step output");
        let root = PathBuf::from(self.outputs().get(&key).expect("the upload's path written"));
        let mut files = Vec::new();
        let mut todo = vec![root.clone()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    todo.push(p);
                } else {
                    files.push(rel(&root, &p));
                }
            }
        }
        files.sort();
        files
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap().to_string_lossy().into_owned()
}

/// The README's example workflow: the `with:` of its nodefall step.
pub fn readme_example_inputs() -> BTreeMap<String, String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split_once("\n```").map(|(y, _)| y))
        .find(|y| y.contains("jobs:") && y.contains("helm/kind-action"))
        .expect("a workflow in README.md using helm/kind-action");
    let doc: Value = serde_yaml_ng::from_str(block).unwrap();
    let jobs = doc["jobs"].as_mapping().unwrap();
    let steps = jobs.iter().next().unwrap().1["steps"]
        .as_sequence()
        .unwrap();
    let ours = steps
        .iter()
        .find(|s| {
            s.get("uses")
                .map(text)
                .is_some_and(|u| u.contains("/nodefall@") || u == "./")
        })
        .expect("a step using nodefall's action");
    map(ours.get("with"))
}
