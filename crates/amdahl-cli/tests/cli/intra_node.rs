//! Devices without a catalogued intra-node link bandwidth — MI300A and Max 1550 (no primary
//! source found), TPUs — run without `--intra-gbs` wherever no two devices of a node talk to
//! each other, and are refused, naming `--intra-gbs` and the part of the layout that needs it,
//! where they do. Regression: `infer`, `serve` and `plan` on one MI300A or Max 1550 used to demand
//! `--intra-gbs` for a link they never use.

use crate::support::{amdahl, json, words};
use predicates::prelude::*;

const SYSTEMS: [(&str, &str); 2] = [("mi300a", "MI300A"), ("max-1550", "Max 1550")];

fn refused_naming_intra_gbs(line: &str, device: &str, part: &str) {
    amdahl()
        .args(words(line))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--intra-gbs"))
        .stderr(predicate::str::contains(device))
        .stderr(predicate::str::contains(part))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn infer_on_one_device_needs_no_intra_node_figure() {
    for (system, _) in SYSTEMS {
        let v = json(&words(&format!(
            "infer --model llama3-8b --system {system}"
        )));
        assert_eq!(v["schema"], "amdahl.infer/1");
        // The TP what-if leaves out the TPs that would need the link.
        let tps: Vec<_> = v["tp_scaling"]
            .as_array()
            .expect("a TP series")
            .iter()
            .map(|p| p["tp"].as_u64())
            .collect();
        assert_eq!(tps, [Some(1)], "{system}");
        // Independent replicas of one device: still nothing between devices.
        json(&words(&format!(
            "infer --model llama3-8b --system {system} --gpus 8"
        )));
    }
}

#[test]
fn serve_on_one_device_needs_no_intra_node_figure() {
    for (system, _) in SYSTEMS {
        let v = json(&words(&format!(
            "serve --model llama3-8b --system {system} --rate 2 --requests 40"
        )));
        assert_eq!(v["schema"], "amdahl.serve/1");
    }
}

#[test]
fn a_plan_on_one_device_shows_no_intra_node_figure() {
    for (system, _) in SYSTEMS {
        let v = json(&words(&format!(
            "plan --model llama3-8b --system {system} --gpus 1 --batch 8"
        )));
        assert_eq!(v["schema"], "amdahl.plan/1");
        assert!(v["network"].get("intra").is_none(), "{}", v["network"]);
        assert!(
            v["device"].get("intra_node_bandwidth").is_none(),
            "{system}"
        );
        // The scaling tables stop at one device.
        for series in ["strong", "weak"] {
            let pts = v["scaling"][series].as_array().expect("a series");
            assert!(
                pts.iter().all(|p| p["gpus"].as_u64() == Some(1)),
                "{system} {series}"
            );
        }
    }
}

#[test]
fn devices_that_talk_to_each_other_need_intra_gbs() {
    for (system, name) in SYSTEMS {
        refused_naming_intra_gbs(
            &format!("infer --model llama3-8b --system {system} --tp 2"),
            name,
            "tp 2 × pp 1 per replica",
        );
        refused_naming_intra_gbs(
            &format!("serve --model llama3-8b --system {system} --tp 2 --rate 1 --requests 10"),
            name,
            "tp 2 × pp 1 per replica",
        );
        refused_naming_intra_gbs(
            &format!("plan --model llama3-8b --system {system} --gpus 2 --batch 8"),
            name,
            "the layout tp 1 × pp 1 × dp 2",
        );
        refused_naming_intra_gbs(
            &format!("plan --model llama3-8b --system {system} --gpus 2 --batch 8 --search"),
            name,
            "--gpus 2",
        );
    }
}

#[test]
fn with_intra_gbs_the_same_layouts_run_and_show_it() {
    for (system, _) in SYSTEMS {
        let v = json(&words(&format!(
            "infer --model llama3-8b --system {system} --tp 2 --intra-gbs 100"
        )));
        assert_eq!(v["schema"], "amdahl.infer/1");
        json(&words(&format!(
            "serve --model llama3-8b --system {system} --tp 2 --intra-gbs 100 --rate 1 \
             --requests 10"
        )));
        let v = json(&words(&format!(
            "plan --model llama3-8b --system {system} --gpus 2 --tp 2 --batch 8 --intra-gbs 100"
        )));
        assert_eq!(v["network"]["intra"]["bandwidth"].as_f64(), Some(100e9));
        assert_eq!(v["device"]["intra_node_bandwidth"].as_f64(), Some(100e9));
    }
}

#[test]
fn serve_search_without_intra_gbs_tries_one_device_replicas_and_says_why() {
    let v = json(&words(
        "serve --model llama3-8b --system mi300a --rate 2 --requests 40 --search",
    ));
    assert_eq!(v["schema"], "amdahl.serve-search/1");
    assert!(v["ranked"]
        .as_array()
        .expect("ranked")
        .iter()
        .all(|c| c["tp"].as_u64() == Some(1)));
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for tp in [2, 4, 8] {
        assert!(
            skipped
                .iter()
                .any(|s| s.starts_with(&format!("tp {tp}: ")) && s.contains("--intra-gbs")),
            "{skipped:?}"
        );
    }
}
