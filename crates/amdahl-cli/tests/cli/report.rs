//! `amdahl report` end to end: results of every kind written by the real commands, one HTML
//! page from them, bad inputs refused with no page left behind, and the page opened in a real
//! headless Chromium: it loads with no console error, renders its plots (screenshot), and every
//! number it shows equals the one in the JSON it came from.
//!
//! Chromium: Debian's `chromium` (.ci/run installs it), or `$AMDAHL_CHROMIUM`. Without it the
//! browser test is skipped with a message, except under `CI=true`, where it fails.

use crate::support::ScrubEnv;
use crate::support::{amdahl, words};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Write `amdahl ARGS --json` to `dir/name`.
fn save(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let out = amdahl().args(args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "amdahl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let p = dir.join(name);
    std::fs::write(&p, &out.stdout).unwrap();
    p
}

/// One measured run on a fake powercap tree (the command adds `joules` to the package counter),
/// on the grid of `region`.
fn run(dir: &Path, name: &str, region: &str, joules: u64) -> PathBuf {
    let root = dir.join(format!("powercap-{name}"));
    crate::support::powercap::package(&root);
    let out = dir.join(name);
    let bump = format!(
        "echo {} > {}/intel-rapl:0/energy_uj",
        1_000_000 + joules * 1_000_000,
        root.display()
    );
    amdahl()
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .scrub_env()
        .args([
            "run",
            "--no-gpu",
            "--interval",
            "50ms",
            "--region",
            region,
            "-o",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", &bump])
        .assert()
        .success();
    out
}

/// Results of every kind the report shows (top500 from the built-in history; bench at its
/// smallest size).
fn results(dir: &Path) -> Vec<PathBuf> {
    let runs = [
        run(dir, "run-FR.json", "FR", 30),
        run(dir, "run-PL.json", "PL", 30),
        run(dir, "run-US.json", "US", 30),
    ];
    let mut merge = vec!["merge"];
    let names: Vec<String> = runs.iter().map(|p| p.display().to_string()).collect();
    merge.extend(names.iter().map(String::as_str));
    let mut files = runs.to_vec();
    files.extend([
        save(dir, "merge.json", &merge),
        save(
            dir,
            "fit.json",
            &["fit", "--builtin", "--predict", "64,128"],
        ),
        save(dir, "top500.json", &["top500"]),
        save(
            dir,
            "plan.json",
            &words("plan --model megatron-530b --system a100-80gb --gpus 2520 --tp 8 --pp 35 --mbs 1 --batch 2520 --recompute full --region US"),
        ),
        save(
            dir,
            "infer.json",
            &words("infer --model llama3-70b --system h100 --tp 4 --precision fp8 --kv-precision fp8 --input 1024 --output 256 --batch 64 --region FR"),
        ),
        save(
            dir,
            "lifetime.json",
            &words("lifetime --train-kwh 4480000 --kwh-per-1000-requests 0.0464 --requests-per-day 1e8 --days 1095 --region FR"),
        ),
        save(
            dir,
            "gemm.json",
            &words("bench gemm --quick --sizes 16,32 --precision fp32"),
        ),
    ]);
    files
}

fn report(files: &[PathBuf], out: &Path) -> std::process::Output {
    amdahl()
        .arg("report")
        .args(files)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

/// The JSON value at a dotted path (`training.train_time`).
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |node, key| node.get(key))
}

/// Every `<td … data-file="I" data-field="PATH">TEXT</td>` of the page: (I, PATH, TEXT).
fn shown_numbers(html: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for chunk in html.split("data-file=\"").skip(1) {
        let Some((file, rest)) = chunk.split_once('"') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("data-field=\"") else {
            continue;
        };
        let Some((field, rest)) = rest.split_once('"') else {
            continue;
        };
        let Some((_, rest)) = rest.split_once('>') else {
            continue;
        };
        let Some((text, _)) = rest.split_once('<') else {
            continue;
        };
        if let Ok(i) = file.parse() {
            out.push((i, field.replace("&amp;", "&"), text.to_string()));
        }
    }
    out
}

/// Check that every number shown equals its JSON value (relative 1e-3: the page prints four
/// significant digits, or whole numbers in full). Returns how many were checked.
fn numbers_match(html: &str, jsons: &[Value]) -> usize {
    let shown = shown_numbers(html);
    for (i, field, text) in &shown {
        let want = at(&jsons[*i], field)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("file {i}: `{field}` is shown but not a number in the JSON"));
        let got: f64 = text
            .replace(',', "")
            .parse()
            .unwrap_or_else(|e| panic!("file {i}: `{field}` shows `{text}`, not a number: {e}"));
        let ok = if want == 0.0 {
            got == 0.0
        } else {
            (got / want - 1.0).abs() <= 1e-3
        };
        assert!(ok, "file {i}: `{field}` shows {text}, the JSON has {want}");
    }
    shown.len()
}

#[test]
fn report_shows_every_kind_with_plots_statements_and_exact_numbers() {
    let t = tempfile::tempdir().unwrap();
    let files = results(t.path());
    let page = t.path().join("report.html");
    let out = report(&files, &page);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let jsons: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    // Self-contained: nothing fetched from anywhere.
    for banned in [
        "<script",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(http",
    ] {
        assert!(!html.contains(banned), "the page loads something: {banned}");
    }
    for title in [
        "Measured runs",
        "Merged runs",
        "Scaling fits",
        "TOP500 analyses",
        "Training plans",
        "Inference plans",
        "Lifetime costs",
        "GEMM benchmarks",
    ] {
        assert!(html.contains(title), "no section {title}");
    }
    // The three runs side by side, one column each.
    assert!(html.contains("Side by side"));
    // Plots: fit, plan, infer, lifetime, gemm.
    assert_eq!(html.matches("<svg ").count(), 5);
    // Statements of the three runs, the plan and the inference result, as `carbon --from`
    // computes them: the run on the French grid cites its region.
    assert_eq!(html.matches("class=\"statement\"").count(), 5);
    // The fake machine has a package counter but no dram zone: RAM is estimated, and the page
    // says so rather than calling the run measured.
    assert!(html.contains("Partly estimated: estimate:ram had no readable counter"));
    assert!(html.contains("Estimated: a model prediction"));
    let checked = numbers_match(&html, &jsons);
    assert!(checked > 150, "only {checked} numbers shown");
    key_figures_read_as_names_with_units(&html);
}

/// The key figures were raw JSON paths (`training.energy_kwh`) with unit-less numbers and the
/// year printed "2,022": each row now names its field in words with its unit (the path is the
/// row's tooltip) and years are written as years.
fn key_figures_read_as_names_with_units(html: &str) {
    let mut rows = 0;
    for chunk in html.split("<tr><th title=\"").skip(1) {
        let Some((path, rest)) = chunk.split_once("\">") else {
            continue;
        };
        let Some((name, _)) = rest.split_once("</th>") else {
            continue;
        };
        rows += 1;
        assert!(
            !name.contains('_') && (name != path || !path.contains('.')),
            "`{path}` shown as `{name}`"
        );
        let unit = if path.ends_with("g_per_kwh") {
            assert!(name.contains("g/kWh"), "`{path}` shown as `{name}`");
            None
        } else if path.ends_with("_kwh") {
            Some("(kWh)")
        } else {
            (path.ends_with("_s") && !path.ends_with("_per_s")).then_some("(s)")
        };
        if let Some(u) = unit {
            assert!(name.ends_with(u), "`{path}` shown as `{name}`");
        }
    }
    assert!(rows > 50, "only {rows} named rows");
    let years: Vec<(usize, String, String)> = shown_numbers(html)
        .into_iter()
        .filter(|(_, f, _)| f == "year" || f.ends_with(".year") || f.ends_with("_year"))
        .collect();
    assert!(!years.is_empty(), "no year shown");
    for (_, field, text) in years {
        assert!(!text.contains(','), "`{field}` shows the year as {text}");
    }
}

#[test]
fn bad_inputs_are_refused_and_leave_no_page() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let fit = save(dir, "fit.json", &["fit", "--builtin"]);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "newer.json",
            r#"{"schema":"amdahl.fit/9"}"#.into(),
            "newer than this amdahl",
        ),
        (
            "other.json",
            r#"{"schema":"someone.else/1"}"#.into(),
            "unknown schema",
        ),
        (
            "catalog.json",
            r#"{"schema":"amdahl.catalog/1"}"#.into(),
            "not shown by `amdahl report`",
        ),
        (
            "cut.json",
            {
                let full = std::fs::read_to_string(&fit).unwrap();
                full[..full.len() / 2].to_string()
            },
            "truncated",
        ),
        ("notes.txt", "these are my notes".into(), "not JSON"),
        (
            "wrong.json",
            r#"{"schema":"amdahl.fit/1","series":"none"}"#.into(),
            "does not match the amdahl.fit/1 schema",
        ),
    ];
    let page = dir.join("report.html");
    for (name, text, why) in cases {
        let bad = dir.join(name);
        std::fs::write(&bad, text).unwrap();
        let out = report(&[fit.clone(), bad], &page);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(name) && err.contains(why), "{name}: {err}");
        assert!(!page.exists(), "{name}: a page was written");
    }
    let out = amdahl().args(["report", "-o"]).arg(&page).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no result files given"));
    let missing = dir.join("no/such/dir/report.html");
    let out = report(std::slice::from_ref(&fit), &missing);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!dir.join("no").exists());
    // No temporary file left anywhere.
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".html"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

// ------------------------------------------------------------------ the browser

/// The Chromium to test with, or `None` after saying why the browser test is skipped. Under
/// `CI=true` a missing browser fails the test.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AMDAHL_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let why = "no chromium on PATH (install Debian's `chromium`, or set AMDAHL_CHROMIUM)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why} (CI=true: the browser test must run)");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
    None
}

/// Run headless Chromium on `page` with `extra` flags, a fresh profile and a time limit (the
/// process is killed by its PID past it). Returns (stdout, stderr).
fn headless(browser: &Path, work: &Path, page: &Path, extra: &[String]) -> (String, String) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = work.join(format!("profile-{n}"));
    std::fs::create_dir_all(&profile).unwrap();
    let (so, se) = (
        work.join(format!("out-{n}.txt")),
        work.join(format!("err-{n}.txt")),
    );
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&so).unwrap())
        .stderr(std::fs::File::create(&se).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", browser.display()));
    let start = Instant::now();
    let limit = Duration::from_secs(90);
    loop {
        match child.try_wait().unwrap() {
            Some(_) => break,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium did not finish within {limit:?}: {}",
                    std::fs::read_to_string(&se).unwrap_or_default()
                );
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    (
        std::fs::read_to_string(&so).unwrap_or_default(),
        std::fs::read_to_string(&se).unwrap_or_default(),
    )
}

/// Console messages and load failures Chromium logged (`CONSOLE`, uncaught errors, refused or
/// failed loads).
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || l.contains("Refused to")
                || l.contains("net::ERR_")
        })
        .collect()
}

#[test]
fn chromium_renders_the_report_without_errors_and_shows_the_json_numbers() {
    let Some(browser) = chromium() else { return };
    let t = tempfile::tempdir().unwrap();
    let files = results(t.path());
    let page = t.path().join("report.html");
    let out = report(&files, &page);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jsons: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();

    // The console check can fail: a page with a script error is caught.
    let bad = t.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><p>x</p><script>console.error('boom'); undefinedFn();</script>",
    )
    .unwrap();
    let (_, log) = headless(&browser, t.path(), &bad, &["--dump-dom".into()]);
    assert!(
        !console_errors(&log).is_empty(),
        "a console error went unnoticed:\n{log}"
    );

    // The page as the browser built it: no console errors, every number equal to the JSON's.
    let (dom, log) = headless(&browser, t.path(), &page, &["--dump-dom".into()]);
    assert!(
        console_errors(&log).is_empty(),
        "console errors:\n{}",
        console_errors(&log).join("\n")
    );
    assert!(
        dom.contains("<svg") && dom.contains("amdahl report"),
        "{}",
        &dom[..dom.len().min(500)]
    );
    let checked = numbers_match(&dom, &jsons);
    assert!(checked > 150, "only {checked} numbers in the rendered page");

    // A screenshot: the plots are drawn (the first series colour of every plot, Okabe–Ito blue
    // #0072B2, is on screen) and the page is not blank.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = headless(
        &browser,
        t.path(),
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,2600".into(),
        ],
    );
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}):\n{log}"));
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1400, 2600));
    let channels = info.line_size / info.width as usize;
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let near = |p: &[u8], (r, g, b): (i32, i32, i32)| {
        (i32::from(p[0]) - r).abs() < 12
            && (i32::from(p[1]) - g).abs() < 12
            && (i32::from(p[2]) - b).abs() < 12
    };
    let blue = pixels
        .iter()
        .filter(|p| near(p, (0x00, 0x72, 0xB2)))
        .count();
    let white = pixels.iter().filter(|p| near(p, (255, 255, 255))).count();
    assert!(
        blue > 200,
        "{blue} pixels of the plots' blue: plots not drawn? see {}",
        shot.display()
    );
    assert!(
        white < pixels.len() * 98 / 100,
        "the screenshot is blank: {}",
        shot.display()
    );
}

#[test]
fn plots_carry_csv_beside_and_export_to_png_and_pdf_by_extension() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for name in ["f.svg", "f.png", "f.pdf"] {
        amdahl()
            .args(["--size", "column", "fit", "--builtin", "--svg"])
            .arg(d.join(name))
            .assert()
            .success();
    }
    let svg = std::fs::read_to_string(d.join("f.svg")).unwrap();
    // Column size: 85 mm = 241 pt wide; the data block is split off into f.csv.
    assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="241pt""#));
    assert!(!svg.contains("amdahl-data"));
    let csv = std::fs::read_to_string(d.join("f.csv")).unwrap();
    assert!(csv.starts_with("panel,series,kind,x,y,x_label,y_label\n"));
    // The 32 measured points of the built-in series, on each of the two panels.
    let measured = csv
        .lines()
        .filter(|l| l.starts_with("Speedup vs N,measured,points,"))
        .count();
    assert_eq!(measured, 32);
    let png = std::fs::read(d.join("f.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    // 241 pt at 300 dpi = 1004.2 px, rounded up.
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let reader = decoder.read_info().unwrap();
    assert_eq!(reader.info().width, 1005);
    let pdf = std::fs::read(d.join("f.pdf")).unwrap();
    assert!(pdf.starts_with(b"%PDF-"));
    // The page is the figure's size: 241 pt wide.
    let text = String::from_utf8_lossy(&pdf);
    let width: f64 = text
        .split("/MediaBox [0 0 ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .expect("a MediaBox");
    assert!((width - 241.0).abs() < 0.5, "page {width} pt wide");
}

/// The caption (the "nature" line) of each card of `page`, by file name.
fn captions(page: &str) -> Vec<(String, String)> {
    page.split("<article class=\"card\"")
        .skip(1)
        .filter_map(|card| {
            let file = card.split_once("<h3>")?.1.split_once("</h3>")?.0;
            let nature = card
                .split_once("<p class=\"nature\">")?
                .1
                .split_once("</p>")?
                .0;
            Some((file.to_string(), nature.replace("&amp;", "&")))
        })
        .collect()
}

/// The caption of the card of the file whose name ends in `file`.
fn caption_of(page: &str, file: &str) -> String {
    captions(page)
        .into_iter()
        .find(|(f, _)| f.ends_with(file))
        .unwrap_or_else(|| panic!("no card for {file}"))
        .1
}

/// A run on this machine with no readable counter (every device estimated from its use), which
/// exits with `code`.
fn estimated_run(dir: &Path, name: &str, code: i32) -> PathBuf {
    let out = dir.join(name);
    amdahl()
        .env("AMDAHL_POWERCAP_ROOT", dir.join("no-powercap"))
        .env("AMDAHL_HWMON_ROOT", dir.join("no-hwmon"))
        .scrub_env()
        .args([
            "run",
            "--no-gpu",
            "--cpu-tdp",
            "100",
            "--interval",
            "100ms",
            "-o",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", &format!("exit {code}")])
        .assert()
        .code(code);
    out
}

/// Regression: the captions were fixed sentences per kind, not the result's facts: a merge of
/// runs whose every device was estimated was captioned "Measured: the sum of the merged runs'
/// measured records", a lifetime from given kWh "training and serving energy predicted by the
/// model, embodied carbon from published factors" (a lifetime has no embodied carbon), and a
/// failed run "Measured: …" while its statement on the same card opened "Caution: the measured
/// command failed".
#[test]
fn captions_say_what_the_results_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = estimated_run(d, "est.json", 0);
    let failed = estimated_run(d, "failed.json", 3);
    let merged = save(d, "merge.json", &["merge", run.to_str().unwrap()]);
    let life = save(
        d,
        "life.json",
        &words(
            "lifetime --train-kwh 50000 --kwh-per-1000-requests 0.4 --requests-per-day 1e6 \
             --days 365",
        ),
    );
    let page_path = d.join("page.html");
    let out = report(&[merged, life, failed], &page_path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    let caption = |file: &str| caption_of(&page, file);
    let m = caption("merge.json");
    assert!(
        m.starts_with("Estimated, not measured:") && !m.contains("measured records"),
        "{m}"
    );
    let l = caption("life.json");
    assert!(
        !l.contains("embodied carbon from published factors") && !l.contains("predicted"),
        "{l}"
    );
    assert!(l.contains("no embodied carbon"), "{l}");
    let f = caption("failed.json");
    assert!(
        f.contains("the measured command failed with exit status 3"),
        "{f}"
    );
}

/// Regression: a plan's training figures are typed units with no suffix in their names, and the
/// report's key figures showed them bare: "training: emissions 4086701" beside the statement's
/// "4,087 kgCO₂e" (grams), "training: it energy 3.068e10" (joules) beside "8,521 kWh".
#[test]
fn a_plans_training_figures_are_named_with_their_units() {
    let dir = tempfile::tempdir().unwrap();
    let plan = save(
        dir.path(),
        "plan.json",
        &words("plan --model llama2-7b --system h100 --gpus 16 --tp 2 --batch 64 --recompute full"),
    );
    let page_path = dir.path().join("page.html");
    let out = report(&[plan], &page_path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    for (path, name) in [
        ("training.train_time", "training: train time (s)"),
        (
            "training.power_per_device",
            "training: power per device (W)",
        ),
        ("training.it_energy", "training: IT energy (J)"),
        ("training.facility_energy", "training: facility energy (J)"),
        ("training.emissions", "training: emissions (gCO2e)"),
        ("training.intensity", "training: intensity (g/kWh)"),
        (
            "training.server_power_per_device",
            "training: server power per device (W)",
        ),
        (
            "training.server_emissions",
            "training: server emissions (gCO2e)",
        ),
    ] {
        assert!(
            page.contains(&format!("<th title=\"{path}\">{name}</th>")),
            "`{path}` not shown as `{name}`"
        );
    }
}

/// Regression: a plan made with `--calibration` (or `--device-profile`) was captioned "from
/// published device specifications" like any other, while its JSON records the measured
/// constants it used. The caption names them; an untuned plan keeps the fixed sentence.
#[test]
fn a_tuned_predictions_caption_names_the_measurements_it_used() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // docs/usage/calibrate.md's rows: a GEMM efficiency of 0.60, 30 ms per step, 0.36 × TDP busy.
    std::fs::write(
        d.join("train.csv"),
        "command,step_s,power_w\n\
         plan --model gpt3-125m --system h100 --gpus 1 --batch 8 --recompute none,0.165,407\n\
         plan --model gpt3-350m --system h100 --gpus 1 --batch 16 --mbs 2,0.764,488\n\
         plan --model gpt3-1.3b --system h100 --gpus 2 --tp 2 --batch 32 --mbs 4,1.5,506\n\
         plan --model gpt3-2.7b --system h100 --gpus 4 --tp 4 --batch 64 --mbs 2,3.34,459\n\
         plan --model gpt3-6.7b --system h100 --gpus 8 --tp 8 --batch 64,4.03,396\n\
         plan --model gpt3-760m --system h100 --gpus 1 --batch 4 --recompute none,0.239,457\n",
    )
    .unwrap();
    let calibration = d.join("h100.json");
    amdahl()
        .current_dir(d)
        .args([
            "calibrate",
            "train.csv",
            "--fit",
            "gemm_efficiency,step_overhead_s",
            "-q",
            "-o",
        ])
        .arg(&calibration)
        .assert()
        .success();
    let layout = "plan --model gpt3-1.3b --system h100 --gpus 8 --tp 2 --batch 64";
    let plain = save(d, "plain.json", &words(layout));
    let tuned_args = format!("{layout} --calibration {}", calibration.display());
    let tuned = save(d, "tuned.json", &words(&tuned_args));
    let page_path = d.join("page.html");
    let out = report(&[plain, tuned], &page_path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    let caption = |file: &str| caption_of(&page, file);
    let t = caption("tuned.json");
    assert!(
        t.contains("constants measured by the user (calibrated"),
        "{t}"
    );
    assert!(t.contains("calibrated on 6 rows of train.csv"), "{t}");
    let p = caption("plain.json");
    assert!(
        p.starts_with("Estimated: a model prediction from published device specifications;"),
        "{p}"
    );
}

/// Regression: a merge's caption (and its table's `methods`) counted
/// the methods of every device of its records, also those left out of the total (a package
/// inside psys): a merge of a run whose every device in the total was estimated was captioned
/// "Partly estimated … the others were measured" beside that run's own "Estimated, not
/// measured". Only the devices in the total decide.
#[test]
fn a_merges_caption_counts_only_the_devices_in_its_total() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = estimated_run(d, "est.json", 0);
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    r["devices"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "id": "rapl:package-0", "kind": "cpu-package", "name": "package-0", "method": "counter",
            "energy_j": 5.0, "avg_power_w": 10.0, "in_total": false
        }));
    std::fs::write(&run, serde_json::to_string(&r).unwrap()).unwrap();
    let merged = save(d, "merge.json", &["merge", run.to_str().unwrap()]);
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(
        m["nodes"][0]["methods"],
        serde_json::json!(["estimate"]),
        "{m}"
    );
    let page_path = d.join("page.html");
    let out = report(&[merged, run], &page_path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    for (file, caption) in captions(&page) {
        assert!(
            caption.starts_with("Estimated, not measured:"),
            "{file}: {caption}"
        );
    }
}
