//! nodefall's container image (`Dockerfile`, docs/container-image.md), built
//! with no registry by `scripts/image/build.sh` from this test build's own
//! binary, then run as a user runs it: its labels, `--version`, `validate`
//! and `plan` on the repository mounted read-only, the Docker CLI in it
//! reaching the host's engine through the mounted socket as a user who is
//! not root, reports written as that user, and `nodefall scenario --backend
//! kind` with everything a kind run mounts (`support/image.rs`,
//! `run_for_kind`): its kubeconfig's API server on the host's loopback is
//! reached through `--network host`, and the missing cluster is reported by
//! the kind backend's `docker ps`. No cluster: the real one is
//! `tests/kind_real.rs`'s.
//!
//! Every container is run with `--rm`, named and labelled, and removed by a
//! guard if the test fails while it runs; the test checks none is left. The
//! image stays in Docker's store (reused while the binary is the same).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::io::Read as _;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[path = "support/image.rs"]
mod image;
#[path = "support/skip.rs"]
mod skip;

const TEST: &str = "the_image_runs_nodefall_and_the_hosts_docker";

#[test]
fn the_image_runs_nodefall_and_the_hosts_docker() {
    if let Some(why) = image::missing() {
        skip::skip(TEST, &why);
        return;
    }
    let began = Instant::now();
    let tag = image::build().unwrap_or_else(|e| panic!("{e}"));
    let built = began.elapsed();

    labels_and_config(&tag);
    version_and_files(&tag);
    docker_cli_as_a_user(&tag);
    kind_run_mounts(&tag);

    assert_eq!(
        image::leftovers(),
        Vec::<String>::new(),
        "containers this test started are left"
    );
    eprintln!(
        "image built (or reused) in {:.1} s; the whole test {:.1} s",
        built.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
}

fn inspect(tag: &str, format: &str) -> String {
    let o = image::docker(&["image", "inspect", "--format", format, tag]);
    assert!(o.status.success(), "docker image inspect {tag}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// The OCI labels, the entrypoint, the working directory, no volume (a
/// `--rm` run leaves no anonymous one behind).
fn labels_and_config(tag: &str) {
    let version = env!("CARGO_PKG_VERSION");
    let repo_tag = tag.strip_prefix("nodefall/nodefall:").unwrap();
    let (tag_version, hash) = repo_tag.rsplit_once('-').unwrap();
    assert_eq!(tag_version, version, "{tag}");
    assert!(
        hash.len() == 12 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{tag}: the tag ends in 12 hex digits of the inputs"
    );

    let labels: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&inspect(tag, "{{json .Config.Labels}}")).unwrap();
    let label = |k: &str| {
        labels
            .get(&format!("org.opencontainers.image.{k}"))
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| {
                panic!("{tag} has no label org.opencontainers.image.{k}: {labels:?}")
            })
            .to_owned()
    };
    assert_eq!(label("title"), "nodefall");
    assert_eq!(label("licenses"), "Apache-2.0");
    assert_eq!(label("version"), version);
    assert!(!label("description").is_empty());
    let _ = label("source"); // the repository's URL: git's `origin`, if it has one
    // The commit the build was made from (HEAD then; a commit made since
    // moves HEAD, not the label), `-dirty` when the tree differed from it.
    let revision = label("revision");
    let commit = revision.strip_suffix("-dirty").unwrap_or(&revision);
    let in_git = std::process::Command::new("git")
        .args(["rev-parse", "--is-inside-work-tree"])
        .current_dir(image::repo())
        .output()
        .is_ok_and(|o| o.status.success());
    if in_git {
        let known = std::process::Command::new("git")
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .current_dir(image::repo())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            commit.len() == 40 && known,
            "revision {revision}: not a commit of this repository"
        );
    } else {
        assert_eq!(revision, "unknown");
    }
    let created = label("created");
    assert!(
        created.len() == 20 && created.ends_with('Z') && created.as_bytes()[10] == b'T',
        "created: {created} (RFC 3339, UTC)"
    );

    assert_eq!(
        inspect(tag, "{{json .Config.Entrypoint}}"),
        r#"["/usr/local/bin/nodefall"]"#
    );
    assert_eq!(inspect(tag, "{{.Config.WorkingDir}}"), "/work");
    assert_eq!(inspect(tag, "{{json .Config.Volumes}}"), "null");
    assert!(
        inspect(tag, "{{json .Config.Env}}").contains("XDG_STATE_HOME=/state"),
        "run journals under /state"
    );
}

/// `--version` as the host's binary says it; `validate` of every scenario and
/// `plan` of a kind scenario (no cluster) on the repository mounted
/// read-only at /work.
fn version_and_files(tag: &str) {
    let (status, said) = image::run(tag, &[], &["--version"]);
    assert!(status.success(), "{said}");
    let host = std::process::Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(said, String::from_utf8_lossy(&host.stdout), "--version");

    let repo_ro = vec![
        "--mount".to_owned(),
        format!(
            "type=bind,source={},target=/work,readonly",
            image::repo().display()
        ),
    ];
    let mut files: Vec<String> = std::fs::read_dir(image::repo().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("scenarios/{n}"))
        .collect();
    files.sort();
    let mut args = vec!["validate"];
    args.extend(files.iter().map(String::as_str));
    let (status, said) = image::run(tag, &repo_ro, &args);
    assert!(status.success(), "validate: {said}");
    for f in &files {
        assert!(
            said.lines()
                .any(|l| l.starts_with("ok ") && l.contains(f.as_str())),
            "validate says nothing of {f}:\n{said}"
        );
    }

    let (status, said) = image::run(
        tag,
        &repo_ro,
        &[
            "plan",
            "scenarios/kind-pause-worker.yaml",
            "--profile",
            "fast",
        ],
    );
    assert!(status.success(), "plan: {said}");
    for want in ["kind-pause-worker", "Backend    kind", "Profile    fast"] {
        assert!(said.contains(want), "plan says no `{want}`:\n{said}");
    }
}

/// As a user who is not root (nobody, with the socket's group, as
/// docs/container-image.md runs it): the Docker CLI in the image reaches the
/// host's engine through the mounted socket; nodefall writes reports that
/// are that user's, in the mounted directory, and nothing else.
fn docker_cli_as_a_user(tag: &str) {
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::fs::PermissionsExt as _;

    let host = image::docker(&["version", "--format", "{{.Server.Version}}"]);
    assert!(host.status.success(), "{host:?}");
    let host_server = String::from_utf8_lossy(&host.stdout).trim().to_owned();
    let socket = image::docker_socket();
    let socket_gid = std::fs::metadata(&socket).unwrap().gid();
    let reports = tempfile::tempdir().unwrap();
    std::fs::set_permissions(reports.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::copy(
        image::repo().join("reports/examples/vm-halt-deployment/result.json"),
        reports.path().join("result.json"),
    )
    .unwrap();
    let nobody = vec![
        "--user".to_owned(),
        "65534:65534".to_owned(),
        "--group-add".to_owned(),
        socket_gid.to_string(),
        "--mount".to_owned(),
        format!(
            "type=bind,source={},target=/var/run/docker.sock",
            socket.display()
        ),
        "--mount".to_owned(),
        format!("type=bind,source={},target=/out", reports.path().display()),
    ];

    let mut entry_docker = vec!["--entrypoint".to_owned(), "docker".to_owned()];
    entry_docker.extend(nobody.iter().cloned());
    let (status, said) = image::run(
        tag,
        &entry_docker,
        &[
            "version",
            "--format",
            "{{.Client.Version}} {{.Server.Version}}",
        ],
    );
    assert!(status.success(), "docker version in the image: {said}");
    let (_client, server) = said.trim().split_once(' ').unwrap();
    assert_eq!(
        server, host_server,
        "the server the CLI in the image reached"
    );

    let (status, said) = image::run(
        tag,
        &nobody,
        &[
            "report",
            "render",
            "/out/result.json",
            "--out",
            "/out/rendered",
        ],
    );
    assert!(status.success(), "report render as nobody: {said}");
    let mut made = Vec::new();
    walk(reports.path(), &mut made);
    for (path, uid) in &made {
        let ours = path.ends_with("result.json") && path.parent() == Some(reports.path());
        if !ours {
            assert_eq!(*uid, 65534, "{} is not the user's", path.display());
        }
    }
    for want in ["report.md", "timeline.svg", "junit.xml"] {
        assert!(
            made.iter().any(|(p, _)| p.ends_with(want)),
            "no {want} rendered: {made:?}"
        );
    }
}

fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, u32)>) {
    use std::os::unix::fs::MetadataExt as _;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        out.push((e.path(), m.uid()));
        if m.is_dir() {
            walk(&e.path(), out);
        }
    }
}

/// `run_for_kind`'s mounts, with no cluster: the kubeconfig's API server is a
/// listener on the host's loopback, which the run in the image reaches
/// (`--network host`, the kubeconfig mounted, KUBECONFIG set); then the kind
/// backend's `docker ps` through the socket finds no such cluster (exit 3)
/// before any fault, so no journal is left in the state directory.
fn kind_run_mounts(tag: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let accepted = accepted.clone();
        // Accepts and hangs up (every TLS handshake fails); ends with the process.
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                accepted.fetch_add(1, Ordering::SeqCst);
                let _ = conn.read(&mut [0; 64]);
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kind-absent\n  cluster: \
             {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\n\
             contexts:\n- name: kind-absent\n  context: {{cluster: kind-absent, user: \
             kind-absent}}\ncurrent-context: kind-absent\nusers:\n- name: kind-absent\n  \
             user: {{token: not-a-token}}\n"
        ),
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let cluster = format!("nodefall-image-absent-{}", std::process::id());
    let (status, said) = image::run_for_kind(
        tag,
        &kubeconfig,
        state.path(),
        reports.path(),
        &[
            "scenario",
            "scenarios/kind-pause-worker.yaml",
            "--backend",
            "kind",
            "--kind-cluster",
            &cluster,
            "--context",
            "kind-absent",
        ],
    );
    assert_eq!(status.code(), Some(3), "an infrastructure error: {said}");
    assert!(
        said.contains(&format!("no kind cluster `{cluster}`")) && said.contains("docker ps"),
        "the kind backend's docker ps: {said}"
    );
    assert!(
        accepted.load(Ordering::SeqCst) > 0,
        "the run in the image never reached 127.0.0.1:{port}: {said}"
    );
    let mut left = Vec::new();
    walk(state.path(), &mut left);
    walk(reports.path(), &mut left);
    assert_eq!(left, Vec::new(), "nothing injected, nothing written");

    // `recover` reads the mounted state directory.
    let (status, said) =
        image::run_for_kind(tag, &kubeconfig, state.path(), reports.path(), &["recover"]);
    assert!(status.success(), "recover: {said}");
    assert!(
        said.contains("/state/nodefall/runs"),
        "recover looks in the mounted state directory: {said}"
    );
}
