//! The SVG charts as a browser draws them: each chart (the timeline of every
//! result fixture, an aggregate's distribution, a comparison) is opened in
//! headless Chromium (Debian's `chromium`), screenshotted and checked for
//! content (not blank, the tones' colours present), and every element's
//! box as laid out, text included, must lie inside the chart.
//!
//! Without chromium the test is skipped, except under `CI=true`.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodefall::record::RunResult;
use nodefall::report::{self, lanes, svg};
use nodefall::stats::{self, aggregate};

#[path = "support/skip.rs"]
mod skip;

fn chromium() -> Option<PathBuf> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .flat_map(|dir| candidates.iter().map(move |c| dir.join(c)))
        .find(|p| p.is_file())
}

/// Runs chromium headless on `page` with `args`, bounded; returns stdout.
fn run_chromium(bin: &Path, work: &Path, args: &[String], page: &Path) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--mute-audio",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let out = std::thread::spawn({
        let mut stdout = child.stdout.take().unwrap();
        move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
            s
        }
    });
    let err = std::thread::spawn({
        let mut stderr = child.stderr.take().unwrap();
        move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut s).ok();
            s
        }
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "chromium {args:?}: {status}\n{stderr}");
    stdout
}

fn fixture(name: &str) -> RunResult {
    report::read_result(
        &nodefall::disk::Disk,
        Path::new(&format!("tests/fixtures/results/{name}.json")),
    )
    .unwrap()
}

/// Every chart nodefall draws, from real data.
fn charts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in [
        "statefulset-pass",
        "deployment-fail",
        "statefulset-volumes",
        "deployment-aborted",
        "clients-probe",
        "kubelet-stop-long",
        "drain-pdb",
    ] {
        out.push((
            format!("timeline-{f}"),
            svg::timeline::render(&lanes::build(&fixture(f))),
        ));
    }
    // An aggregate of five runs: the fixture, each a little slower.
    let runs: Vec<RunResult> = (0..5)
        .map(|i| {
            let mut r = fixture("statefulset-pass");
            r.metrics.node_not_ready = r.metrics.node_not_ready.map(|v| v + i * 137);
            r.metrics.workload_ready_again = r.metrics.workload_ready_again.map(|v| v + i * 2_400);
            r
        })
        .collect();
    let series = aggregate::Series {
        scenario: "statefulset-nfs".into(),
        file: "scenarios/statefulset-nfs.yaml".into(),
        backend: "sim".into(),
        profile: "fast".into(),
        requested: 5,
        started_at: runs[0].started_at,
    };
    let entries = runs
        .iter()
        .enumerate()
        .map(|(i, r)| aggregate::entry(i + 1, &format!("run-{}", i + 1), r))
        .collect();
    let refs: Vec<&RunResult> = runs.iter().collect();
    let a = aggregate::build(&series, entries, &refs, None);
    out.push((
        "distribution".into(),
        svg::distribution::render(&report::aggregate::distribution(&a)),
    ));
    let base = fixture("statefulset-pass");
    let mut slow = fixture("statefulset-pass");
    slow.metrics.node_not_ready = slow.metrics.node_not_ready.map(|v| v * 16 / 10);
    slow.metrics.detection_lag_max = None;
    let c = stats::compare::compare(
        stats::Side::of_run("base/result.json", &base),
        stats::Side::of_run("new/result.json", &slow),
        &stats::Gate {
            fail_if_slower: Some(20.0),
            ..stats::Gate::default()
        },
    );
    out.push((
        "compare".into(),
        svg::paired::render(&report::compare::chart(&c)),
    ));
    out
}

fn size(svg: &str) -> (u32, u32) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let root = doc.root_element();
    let num = |a| root.attribute(a).unwrap().parse::<f64>().unwrap().ceil() as u32;
    (num("width"), num("height"))
}

/// Non-white share and distinct colours of a PNG.
fn pixels(png_path: &Path) -> (f64, usize, (u32, u32)) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let mut colours = HashSet::new();
    let mut ink = 0usize;
    let total = data.len() / channels;
    for px in data.chunks(channels) {
        let rgb = (px[0], px[1], px[2]);
        if rgb != (255, 255, 255) {
            ink += 1;
        }
        // coarse buckets, so anti-aliasing does not count as colours
        colours.insert((rgb.0 / 32, rgb.1 / 32, rgb.2 / 32));
    }
    (
        ink as f64 / total as f64,
        colours.len(),
        (info.width, info.height),
    )
}

const CHECK: &str = r#"<script>
const out = [];
for (const root of document.querySelectorAll('body > div > svg')) {
  const box = root.getBoundingClientRect();
  for (const el of root.querySelectorAll('text, rect, line, circle, path, polygon')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.left < box.left - 0.5 || r.top < box.top - 0.5 ||
        r.right > box.right + 0.5 || r.bottom > box.bottom + 0.5) {
      out.push(root.parentNode.id + ': <' + el.tagName + '> ' +
        (el.textContent || '').slice(0, 60) + ' at ' +
        [r.left - box.left, r.top - box.top, r.right - box.left, r.bottom - box.top]
          .map(v => v.toFixed(1)).join(',') +
        ' in ' + box.width + 'x' + box.height);
    }
  }
}
document.getElementById('result').textContent = 'RESULT[' + out.join(' | ') + ']END';
</script>"#;

#[test]
fn charts_render_in_chromium_with_content_and_nothing_outside() {
    let Some(bin) = chromium() else {
        skip::skip(
            "charts_render_in_chromium_with_content_and_nothing_outside",
            "chromium is not installed (apt-get install chromium)",
        );
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let charts = charts();
    let samples = std::env::var("NODEFALL_WRITE_SAMPLES").as_deref() == Ok("1");
    let mut inline = String::new();
    for (name, text) in &charts {
        let (w, h) = size(text);
        let file = work.path().join(format!("{name}.svg"));
        std::fs::write(&file, text).unwrap();
        if samples {
            std::fs::create_dir_all("docs/img").unwrap();
            std::fs::write(format!("docs/img/{name}.svg"), text).unwrap();
        }
        let page = work.path().join(format!("{name}.html"));
        std::fs::write(
            &page,
            format!(
                "<!doctype html><html><body style=\"margin:0;background:white\">\
                 <img src=\"{name}.svg\" style=\"display:block\"></body></html>"
            ),
        )
        .unwrap();
        let shot = work.path().join(format!("{name}.png"));
        run_chromium(
            &bin,
            work.path(),
            &[
                format!("--screenshot={}", shot.display()),
                format!("--window-size={w},{h}"),
            ],
            &page,
        );
        let (ink, colours, dims) = pixels(&shot);
        assert_eq!(dims, (w, h), "{name}: screenshot size");
        assert!(ink > 0.01, "{name}: blank ({:.2} % ink)", ink * 100.0);
        assert!(colours >= 4, "{name}: only {colours} colours");
        let _ = write_inline(&mut inline, name, text);
    }
    let check = work.path().join("check.html");
    std::fs::write(
        &check,
        format!(
            "<!doctype html><html><body style=\"margin:0\">{inline}<pre id=\"result\"></pre>{CHECK}</body></html>"
        ),
    )
    .unwrap();
    let dom = run_chromium(&bin, work.path(), &["--dump-dom".to_owned()], &check);
    let result = dom
        .split("RESULT[")
        .nth(1)
        .and_then(|r| r.split("]END").next())
        .unwrap_or_else(|| panic!("no result in the page:\n{dom}"));
    assert_eq!(result, "", "elements outside their chart: {result}");
}

fn write_inline(out: &mut String, name: &str, svg: &str) -> std::fmt::Result {
    use std::fmt::Write as _;
    write!(
        out,
        "<div id=\"{name}\" style=\"width:max-content\">{svg}</div>"
    )
}
