//! Devices without a catalogued inter-node (scale-out) bandwidth — PCIe cards such as the L40S,
//! and the MI300A and MI325X — run without `--inter-gbit` wherever the layout stays within one
//! node, and are refused, naming `--inter-gbit`, where it does not. Regression: `infer` and
//! `serve` on one L40S or MI325X used to demand `--inter-gbit` for a network they never use.

use crate::support::{amdahl, json, words};
use predicates::prelude::*;

fn refused_naming_inter_gbit(line: &str, device: &str) {
    amdahl()
        .args(words(line))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--inter-gbit"))
        .stderr(predicate::str::contains(device))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn infer_on_one_node_needs_no_inter_node_figure() {
    for system in ["l40s", "mi325x"] {
        let v = json(&words(&format!(
            "infer --model llama3-8b --system {system}"
        )));
        assert_eq!(v["schema"], "amdahl.infer/1");
        // A full node of independent replicas: still nothing between nodes.
        json(&words(&format!(
            "infer --model llama3-8b --system {system} --tp 2 --gpus 16"
        )));
    }
}

#[test]
fn serve_on_one_node_needs_no_inter_node_figure() {
    for system in ["l40s", "mi325x"] {
        let v = json(&words(&format!(
            "serve --model llama3-8b --system {system} --rate 2 --requests 40"
        )));
        assert_eq!(v["schema"], "amdahl.serve/1");
    }
}

#[test]
fn a_replica_wider_than_a_node_needs_inter_gbit() {
    refused_naming_inter_gbit(
        "infer --model llama3-70b --system l40s --tp 8 --pp 2",
        "L40S",
    );
    refused_naming_inter_gbit(
        "serve --model llama3-70b --system mi325x --tp 8 --pp 2 --rate 1 --requests 10",
        "MI325X",
    );
}

#[test]
fn a_plan_within_one_node_shows_no_inter_node_figure() {
    let v = json(&words(
        "plan --model llama3-8b --system l40s --gpus 8 --tp 2 --batch 64",
    ));
    assert!(v["network"].get("inter").is_none(), "{}", v["network"]);
    // The scaling tables stop at the node.
    for series in ["strong", "weak"] {
        let pts = v["scaling"][series].as_array().expect("a series");
        assert!(!pts.is_empty());
        assert!(
            pts.iter().all(|p| p["gpus"].as_u64() <= Some(8)),
            "{series}"
        );
    }
}

#[test]
fn a_plan_whose_data_parallelism_crosses_nodes_needs_inter_gbit() {
    refused_naming_inter_gbit(
        "plan --model llama3-8b --system l40s --gpus 16 --batch 64",
        "L40S",
    );
    refused_naming_inter_gbit(
        "plan --model llama3-8b --system mi325x --gpus 16 --batch 64 --search",
        "MI325X",
    );
    amdahl()
        .args(words(
            "plan --model llama3-8b --system l40s --gpus 16 --batch 64",
        ))
        .assert()
        .stderr(predicate::str::contains(
            "spans 16 devices, more than one node of 8",
        ));
    // With the figure given the same plan runs and reports it.
    let v = json(&words(
        "plan --model llama3-8b --system l40s --gpus 16 --batch 64 --inter-gbit 100",
    ));
    assert_eq!(
        v["network"]["inter"]["bandwidth"].as_f64(),
        Some(100e9 / 8.0)
    );
}

#[test]
fn an_inter_node_option_without_the_bandwidth_is_refused() {
    refused_naming_inter_gbit(
        "infer --model llama3-8b --system l40s --inter-eff 0.5",
        "L40S",
    );
}
