//! Renderers for `amdahl.top500/1` results: a terminal table and CSV. (JSON is `to_json`.)
//!
//! Every 1−α_eff is printed with what N counts, because TOP500 "Total Cores" counts GPU SMs as
//! cores and the same run gives values that differ by the SMs per GPU.

use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::top500::{NCounts, Top500Result};

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

/// The human table: one row per system and list.
pub fn table(r: &Top500Result) -> String {
    let what = r.n_counts;
    let per = match what {
        NCounts::Cores => "core",
        NCounts::Accelerators => "accelerator",
        NCounts::Nodes => "node",
    };
    let mut headers = vec![
        "list".to_string(),
        "rank".into(),
        "name".into(),
        format!("N ({what})"),
        "E_HPL".into(),
        format!("1−α_eff HPL (N = {what})"),
        "E_HPCG".into(),
        format!("1−α_eff HPCG (N = {what})"),
        "GFlops/W".into(),
    ];
    let explain = what != NCounts::Cores;
    if explain {
        headers.push("how N was counted".into());
    }
    let mut t = Table::new(headers)
        .align(2, Align::Left)
        .align(9, Align::Left);
    for s in &r.systems {
        let mut row = vec![
            s.list.clone(),
            s.rank.to_string(),
            s.name.clone(),
            s.n.map_or_else(|| "unknown".into(), |n| n.to_string()),
            pct(s.efficiency_hpl),
            opt(s.serial_fraction_hpl, |x| sig(x, 3)),
            opt(s.efficiency_hpcg, pct),
            opt(s.serial_fraction_hpcg, |x| sig(x, 3)),
            opt(s.gflops_per_watt, |x| sig(x, 3)),
        ];
        if explain {
            row.push(s.n_source.clone());
        }
        t.row(row);
    }
    let mut out = t.render();
    out.push_str(&format!(
        "N counts {what}; 1−α_eff = (1-E)/(E·(N-1)) per {per} (Végh); E = Rmax/Rpeak, E_HPCG = HPCG/Rpeak.\n"
    ));
    if what == NCounts::Cores {
        out.push_str(
            "TOP500 \"Total Cores\" counts each GPU streaming multiprocessor as a core; try --n accelerators.\n",
        );
    }
    out
}

/// CSV with one row per system; columns are the JSON fields plus `n_counts`.
pub fn csv(r: &Top500Result) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "list",
        "rank",
        "name",
        "system",
        "site",
        "country",
        "n_counts",
        "n",
        "n_source",
        "rmax_tflops",
        "rpeak_tflops",
        "efficiency_hpl",
        "serial_fraction_hpl",
        "efficiency_hpcg",
        "serial_fraction_hpcg",
        "gflops_per_watt",
        "total_cores",
        "accelerator",
        "source",
    ])?;
    let o = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    for s in &r.systems {
        w.write_record([
            s.list.clone(),
            s.rank.to_string(),
            s.name.clone(),
            s.system.clone(),
            s.site.clone(),
            s.country.clone(),
            r.n_counts.to_string(),
            s.n.map(|n| n.to_string()).unwrap_or_default(),
            s.n_source.clone(),
            s.rmax_tflops.to_string(),
            s.rpeak_tflops.to_string(),
            s.efficiency_hpl.to_string(),
            o(s.serial_fraction_hpl),
            o(s.efficiency_hpcg),
            o(s.serial_fraction_hpcg),
            o(s.gflops_per_watt),
            s.total_cores.to_string(),
            s.accelerator.clone().unwrap_or_default(),
            s.source.clone(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::top500::{analyse, builtin_history, Query};

    fn history(n: NCounts) -> Top500Result {
        let h = builtin_history().unwrap();
        analyse(
            std::slice::from_ref(&h),
            &Query {
                n_counts: n,
                system: Some("Piz Daint".into()),
                top: None,
            },
        )
    }

    #[test]
    fn table_states_what_n_counts() {
        let t = table(&history(NCounts::Accelerators));
        assert!(t.contains("1−α_eff HPL (N = accelerators)"), "{t}");
        // 2018-11: 319,424 accelerator cores / 56 SMs = 5,704 P100; 1−α = 4.89e-5.
        assert!(t.contains("5704"), "{t}");
        assert!(t.contains("4.89e-5"), "{t}");
        assert!(t.contains("78.18 %"), "{t}");
        // 2013-06 Piz Daint was CPU-only: no accelerator count.
        assert!(t.contains("unknown"), "{t}");
    }

    #[test]
    fn csv_has_one_row_per_system_and_the_n_counts() {
        let r = history(NCounts::Cores);
        let c = csv(&r).unwrap();
        assert_eq!(c.lines().count(), r.systems.len() + 1);
        assert!(
            c.lines().nth(1).is_some_and(|l| l.contains(",cores,")),
            "{c}"
        );
    }
}
