use super::*;

#[test]
fn shows_the_command_and_its_stderr_on_failure() {
    let cmd = Cmd::new(
        "sh",
        &["-c", "echo out; echo 'no such container' >&2; exit 3"],
    );
    let err = System.run(&cmd, Duration::from_secs(10)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`sh -c 'echo out; echo '\\''no such container'\\'' >&2; exit 3'` failed (exit status: 3): no such container"
    );
    assert_eq!(
        System
            .run(&Cmd::new("echo", &["ok"]), Duration::from_secs(10))
            .unwrap(),
        "ok\n"
    );
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    // The shell's child would outlive a kill of the shell alone.
    let dir = std::env::temp_dir().join(format!("nodefall-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid");
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let c = System
        .capture(
            &Cmd::new("sh", &["-c", &script]),
            Duration::from_millis(500),
        )
        .unwrap();
    assert!(c.timed_out && !c.success(), "{c:?}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed and reaped by init (or zombie until then): not running. A
    // SIGKILLed process can still show `R` for a moment while it dies (seen
    // in CI on a loaded machine), so its end is waited for, 5 s at most.
    let gone = |stat: &str| {
        let state = stat.rsplit(") ").next().unwrap_or("").chars().next();
        matches!(state, None | Some('Z'))
    };
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let mut stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    while !gone(&stat) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
        stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    }
    assert!(
        gone(&stat),
        "sleep {pid} still runs 5 s after the kill: {stat}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn capture_keeps_stdout_and_stderr_of_a_failure() {
    let c = System
        .capture(
            &Cmd::new("sh", &["-c", "echo out; echo err >&2; exit 4"]),
            Duration::from_secs(10),
        )
        .unwrap();
    assert_eq!(
        (c.code, c.stdout.as_str(), c.stderr.as_str()),
        (Some(4), "out\n", "err\n")
    );
    assert_eq!(c.status, "exit status: 4");
    assert!(!c.success());
}

#[test]
fn a_hanging_command_times_out_and_is_reaped() {
    let err = System
        .run(&Cmd::new("sleep", &["30"]), Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
}

fn sh(script: &str) -> Cmd {
    Cmd::new("sh", &["-c", script])
}

fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn pid_in(file: &std::path::Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0)
}

/// A backend's command, as the command and vagrant backends run it.
async fn capture(cmd: &Cmd, timeout: Duration) -> Result<Captured, Error> {
    call_blocking(&System, Job::acting(cmd.clone(), timeout)).await
}

#[tokio::test]
async fn output_is_kept_and_what_a_command_leaves_behind_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!(
        "echo out; echo err >&2; sleep 60 >/dev/null 2>&1 & echo $! > {}; exit 3",
        pidfile.display()
    );
    let c = capture(&sh(&script), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        (c.code, c.stdout.as_str(), c.stderr.as_str()),
        (Some(3), "out\n", "err\n")
    );
    assert!(c.elapsed < Duration::from_secs(5), "{c:?}");
    let pid = pid_in(&pidfile);
    assert!(pid > 0);
    // Killed with its group; reaped by init.
    let t = Instant::now();
    while running(pid) && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!running(pid), "the background sleep {pid} survived");
}

#[tokio::test]
async fn a_timeout_keeps_what_was_printed() {
    let c = capture(&sh("echo before; sleep 30"), Duration::from_millis(500))
        .await
        .unwrap();
    assert!(c.timed_out && !c.success(), "{c:?}");
    assert_eq!(c.stdout, "before\n");
    assert_eq!(c.status, "timed out after 0.5s");
}

#[tokio::test]
async fn a_dropped_run_kills_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; sleep 60", pidfile.display());
    let cmd = sh(&script);
    let run = capture(&cmd, Duration::from_secs(60));
    // Cancelled like a run stopped by a signal.
    let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
    let pid = pid_in(&pidfile);
    assert!(pid > 0);
    let t = Instant::now();
    while running(pid) && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!running(pid), "the command {pid} outlived its run");
}

#[tokio::test]
async fn a_flood_keeps_only_its_end() {
    let c = capture(
        &sh("head -c 200000 /dev/zero | tr '\\0' a; echo END"),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(
        c.stdout.starts_with("[134468 bytes cut]...") && c.stdout.ends_with("aEND\n"),
        "{}",
        &c.stdout[..40]
    );
}

#[test]
fn a_job_runs_in_its_directory_and_a_plain_one_keeps_all_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let c = System
        .call(
            &Job::new(
                sh("pwd; head -c 70000 /dev/zero | tr '\\0' a"),
                Duration::from_secs(10),
            )
            .in_dir(dir.path()),
        )
        .unwrap();
    let (pwd, rest) = c.stdout.split_once('\n').unwrap();
    assert_eq!(
        std::fs::canonicalize(pwd).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
    assert_eq!(rest.len(), 70000);
}
