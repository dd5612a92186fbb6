//! Sweeps through the mock executor: exact numbers from scripted runs.

use super::*;
use crate::record::{Host, Intensity};
use amdahl_model::scaling::models::ModelKind;
use amdahl_model::units::GramsPerKwh;

fn setup() -> Setup {
    Setup {
        n_counts: Some("threads".into()),
        started_unix_s: 0.0,
        host: Host {
            hostname: "h".into(),
            os: "Linux".into(),
            cpu_model: "x".into(),
            cpu_count: 16,
            ram_total_gb: 64.0,
            boot_id: None,
        },
        pue: 1.5,
        intensity: Intensity {
            g_per_kwh: GramsPerKwh(475.0),
            region: "world".into(),
            source: "IEA 2019".into(),
            year: Some(2019),
            location: None,
        },
        idle: None,
        warnings: Vec::new(),
    }
}

fn plan(ns: &[u64], runs: u32, warmup: u32) -> Plan {
    Plan::new(
        ns.to_vec(),
        vec!["app".into(), "--threads".into(), "{n}".into()],
        &["OMP_NUM_THREADS={n}".into()],
        runs,
        warmup,
        None,
    )
    .unwrap()
}

/// Amdahl's law with serial fraction s = 0.05 of a 10 s single-processor run:
/// T(N) = 10·(0.05 + 0.95/N).
fn amdahl_time(n: u64) -> f64 {
    10.0 * (0.05 + 0.95 / n as f64)
}

/// Power P(N) = 50 W idle + 10 W per processor; energy per job = P·T.
fn amdahl_energy(n: u64) -> f64 {
    (50.0 + 10.0 * n as f64) * amdahl_time(n)
}

/// Relative jitter per run: symmetric, so the median of five runs is the exact value.
const JITTER: [f64; 5] = [0.0, 0.01, -0.01, 0.02, -0.02];

fn scripted(warmup: u32) -> MockExecutor {
    MockExecutor::new(move |job, k| {
        // Warm-ups are slow (cold caches) and must not enter the statistics.
        let Some(j) = k.checked_sub(warmup) else {
            return Ok(MockExecutor::ok(100.0, 1e6));
        };
        let d = JITTER[j as usize % JITTER.len()];
        // At N = 4 the fourth measured run is a 3× straggler.
        let d = if job.n == 4 && j == 3 { 2.0 } else { d };
        Ok(MockExecutor::ok(
            amdahl_time(job.n) * (1.0 + d),
            amdahl_energy(job.n) * (1.0 + d),
        ))
    })
}

fn run(plan: &Plan, exec: &mut MockExecutor) -> (ScaleResult, Vec<ScaleResult>, u64) {
    let mut updates = Vec::new();
    let mut starts = 0;
    let r = sweep(
        plan,
        ScaleResult::new(plan, setup()),
        exec,
        &mut |e| match e {
            Event::Starting { .. } => starts += 1,
            Event::Updated(r) => updates.push(r.clone()),
        },
    );
    (r, updates, starts)
}

#[test]
fn amdahl_series_recovers_its_serial_fraction() {
    let p = plan(&[1, 2, 4, 8, 16], 5, 1);
    let mut exec = scripted(1);
    let (r, updates, starts) = run(&p, &mut exec);
    assert!(r.complete && r.failure.is_none());
    assert_eq!(starts, 5 * 6);
    assert_eq!(updates.len(), 5, "results rewritten after every N");
    // `{n}` substituted in arguments and env values.
    let j = exec.jobs.iter().find(|j| j.n == 8).unwrap();
    assert_eq!(j.argv, ["app", "--threads", "8"]);
    assert_eq!(j.env, [("OMP_NUM_THREADS".to_string(), "8".to_string())]);
    for pt in &r.points {
        assert!((pt.time_s.median - amdahl_time(pt.n)).abs() < 1e-12);
        // Karp–Flatt e of an exact Amdahl series is its serial fraction at every N.
        if let Some(e) = pt.karp_flatt {
            assert!((e - 0.05).abs() < 1e-12, "N = {}: e = {e}", pt.n);
        }
    }
    // S(16) = 10 / (10·(0.05 + 0.95/16)) = 1/0.109375 = 9.142857…
    let p16 = r.points.last().unwrap();
    assert!((p16.speedup.unwrap() - 1.0 / 0.109375).abs() < 1e-9);
    assert!((p16.efficiency.unwrap() - 1.0 / 0.109375 / 16.0).abs() < 1e-9);
    let fit = r.fit.as_ref().expect("five N fit");
    let s = &fit.series[0];
    assert_eq!(s.chosen_model, ModelKind::Amdahl);
    assert!(
        (s.serial_fraction - 0.05).abs() < 1e-6,
        "{}",
        s.serial_fraction
    );
    // E = 50 % at N = (1 + s)/s = 21 (laws::half_efficiency_n).
    assert!((s.n_half.unwrap() - 21.0).abs() < 1e-3);
    assert_eq!(s.n_counts.as_deref(), Some("threads"));
    assert_eq!(r.rows.len(), 5);
    assert_eq!(r.rows[0].time, 10.0);
}

#[test]
fn straggler_is_flagged_not_counted() {
    let (r, ..) = run(&plan(&[1, 4], 5, 0), &mut scripted(0));
    let p4 = r.points.iter().find(|p| p.n == 4).unwrap();
    let flags: Vec<bool> = p4.runs.iter().map(|s| s.time_outlier).collect();
    assert_eq!(flags, [false, false, false, true, false]);
    assert!((p4.time_s.max - 3.0 * amdahl_time(4)).abs() < 1e-12);
    assert!((p4.time_s.median - amdahl_time(4)).abs() < 1e-12);
    assert!(r.points[0].runs.iter().all(|s| !s.time_outlier));
}

#[test]
fn energy_per_job_and_its_efficiency() {
    let (r, ..) = run(&plan(&[1, 8, 16], 5, 1), &mut scripted(1));
    let e = |n| r.points.iter().find(|p| p.n == n).unwrap();
    // E(1) = 60 W · 10 s = 600 J; E(8) = 130 W · 1.6875 s = 219.375 J;
    // E(16) = 210 W · 1.09375 s = 229.6875 J: beyond 8, more processors cost more joules.
    assert!((e(1).energy_j.median - 600.0).abs() < 1e-9);
    assert!((e(8).energy_j.median - 219.375).abs() < 1e-9);
    assert!((e(16).energy_ratio.unwrap() - 229.6875 / 600.0).abs() < 1e-12);
    assert!((e(8).energy_efficiency.unwrap() - 600.0 / 219.375).abs() < 1e-12);
    // 600 J = 1/6000 kWh; × PUE 1.5 = 2.5e-4 kWh; × 475 g/kWh = 0.11875 g.
    assert!((e(1).energy_kwh - 2.5e-4).abs() < 1e-15);
    assert!((e(1).co2e_g.get() - 0.11875).abs() < 1e-12);
    assert_eq!(r.devices.len(), 1);
    assert_eq!(r.devices[0].method, crate::Method::Counter);
}

#[test]
fn energy_above_idle_subtracts_idle_power_times_time() {
    let p = plan(&[1, 8, 16], 5, 0);
    let mut s = setup();
    s.idle = Some(Idle {
        duration_s: Seconds(5.0),
        power_w: amdahl_model::units::Watts(50.0),
    });
    let r = sweep(&p, ScaleResult::new(&p, s), &mut scripted(0), &mut |_| {});
    let net = |n: u64| {
        r.points
            .iter()
            .find(|q| q.n == n)
            .unwrap()
            .net_energy_j
            .unwrap()
            .median
    };
    // (50 + 10N)·T − 50·T = 10N·T: 100 J at N = 1, 135 J at 8, 175 J at 16.
    assert!((net(1) - 100.0).abs() < 1e-9);
    assert!((net(8) - 135.0).abs() < 1e-9);
    assert!((net(16) - 175.0).abs() < 1e-9);
}

#[test]
fn failure_keeps_earlier_n_and_reports_the_failing_one() {
    let mut exec = MockExecutor::new(|job, _| {
        if job.n == 4 {
            let mut o = MockExecutor::ok(1.0, 1.0);
            o.exit_code = 3;
            o.stderr_tail = "out of memory".into();
            Ok(o)
        } else {
            Ok(MockExecutor::ok(amdahl_time(job.n), 1.0))
        }
    });
    let (r, updates, _) = run(&plan(&[1, 2, 4, 8], 3, 1), &mut exec);
    assert!(!r.complete);
    let f = r.failure.as_ref().unwrap();
    assert_eq!((f.n, f.run, f.warmup, f.exit_code), (4, 1, true, 3));
    assert_eq!(f.stderr_tail, "out of memory");
    assert_eq!(r.points.iter().map(|p| p.n).collect::<Vec<_>>(), [1, 2]);
    assert!(exec.jobs.iter().all(|j| j.n != 8), "stops at the failure");
    // The last update (what the results file holds) carries the failure and both N.
    let last = updates.last().unwrap();
    assert_eq!(last.points.len(), 2);
    assert!(last.failure.is_some());
    // Two N: a speedup but no fit.
    assert!(r.points[1].speedup.is_some() && r.fit.is_none());
    assert!(r.no_fit_reason.is_some());
}

#[test]
fn a_command_that_cannot_start_is_127() {
    let mut exec = MockExecutor::new(|_, _| {
        Err(MeterError::CommandNotFound {
            program: "nope".into(),
        })
    });
    let (r, ..) = run(&plan(&[1, 2], 1, 0), &mut exec);
    let f = r.failure.unwrap();
    assert_eq!((f.n, f.exit_code), (1, 127));
    assert!(f.stderr_tail.contains("nope"));
}

#[test]
fn one_n_measures_but_cannot_fit() {
    let (r, ..) = run(&plan(&[4], 2, 0), &mut scripted(0));
    assert!(r.complete && r.fit.is_none());
    assert!(r.no_fit_reason.unwrap().contains("at least two"));
    assert_eq!(r.points[0].speedup, Some(1.0));
}

#[test]
fn unused_placeholder_warns() {
    let p = Plan::new(vec![1, 2], vec!["true".into()], &[], 1, 0, None).unwrap();
    assert!(!p.uses_n());
    let (r, ..) = run(&p, &mut scripted(0));
    assert!(r.warnings.iter().any(|w| w.contains("N changes nothing")));
}

#[test]
fn bad_plans_are_rejected() {
    let cmd = || vec!["x".to_string()];
    let e = |ns: &[u64], env: &[String], b| Plan::new(ns.to_vec(), cmd(), env, 1, 0, b);
    assert_eq!(e(&[1, 0], &[], None), Err(ScaleError::NonPositive(0)));
    assert_eq!(e(&[1, 2, 1], &[], None), Err(ScaleError::Duplicate(1)));
    assert_eq!(e(&[], &[], None), Err(ScaleError::NoN));
    assert!(matches!(
        e(&[2, 4], &[], Some(1)),
        Err(ScaleError::BaselineNotRun(1, _))
    ));
    assert!(matches!(
        e(&[1], &["NOEQUALS".into()], None),
        Err(ScaleError::BadEnv(_))
    ));
    assert_eq!(e(&[8, 2, 4], &[], None).unwrap().baseline_n, 2);
    assert_eq!(
        Plan::new(vec![1], cmd(), &[], 0, 0, None),
        Err(ScaleError::NoRuns)
    );
}

/// Regression: a command that does not speed up (the docs' OMP_NUM_THREADS example timed a
/// single-threaded program) got `1−α = 0.8139, S_max = 1.229` fitted to noise. The same time at
/// every N, ±2 % jitter: no fit, and the reason names the test.
#[test]
fn no_significant_speedup_is_not_fitted() {
    let p = plan(&[1, 2, 4, 8], 5, 0);
    let mut exec = MockExecutor::new(|job, k| {
        // Flat: 1 s whatever N, jitter up to 2 %, slightly "faster" at larger N by chance.
        let d = JITTER[k as usize % JITTER.len()] - 0.001 * job.n as f64;
        Ok(MockExecutor::ok(1.0 + d, 50.0))
    });
    let (r, _, _) = run(&p, &mut exec);
    assert!(r.fit.is_none(), "fitted noise: {:?}", r.fit);
    let why = r.no_fit_reason.unwrap_or_default();
    assert!(why.starts_with("no significant speedup"), "{why}");
    assert!(
        why.contains("p = 0.004"),
        "5 runs each: 1/C(10,5) = 1/252: {why}"
    );
}

#[test]
fn mann_whitney_u0_p_values() {
    // 1/C(6,3) = 1/20; 1/C(10,5) = 1/252 (Mann & Whitney 1947, table I).
    assert!((super::result::mann_whitney_p_at_u0(3, 3) - 0.05).abs() < 1e-12);
    assert!((super::result::mann_whitney_p_at_u0(5, 5) - 1.0 / 252.0).abs() < 1e-12);
}
