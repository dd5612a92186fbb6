//! Launcher detection. Under Slurm (`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_JOB_ID`) or torchrun
//! (`RANK`, `LOCAL_RANK`, `TORCHELASTIC_RUN_ID`) or Open MPI's `mpirun` (`OMPI_COMM_WORLD_RANK`,
//! `OMPI_COMM_WORLD_LOCAL_RANK`, Open MPI FAQ "What environment variables are set by mpirun?")
//! one `amdahl run` starts per rank. Machine
//! counters (RAPL, NVML) are shared by every rank on a node, so only local rank 0 measures; the
//! others record a reference to it. Summing every rank would count each node once per rank.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// This process measured its node.
    Measured,
    /// Another rank on this node (local rank 0) measured it; this record holds no energy.
    Reference,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cluster {
    /// `slurm`, `torchrun`, or none.
    pub launcher: Option<String>,
    pub job_id: Option<String>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub role: Role,
}

/// Every environment variable [`detect`] reads. Tests clear exactly these, so the shell they
/// run in (a CI job under Slurm, say) cannot change what is detected; a test below holds the
/// list to what `detect` asks for.
pub const VARIABLES: &[&str] = &[
    "LOCAL_RANK",
    "RANK",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_JOB_ID",
];

/// Detect from environment variables (`get` is `std::env::var` in production).
/// torchrun's variables win when both are set: torchrun started inside an `srun` step spawns one
/// worker per GPU, and its `LOCAL_RANK` is the finer one.
pub fn detect(get: impl Fn(&str) -> Option<String>) -> Cluster {
    let num = |k: &str| get(k).and_then(|v| v.trim().parse::<u32>().ok());
    let (launcher, rank, local_rank, job_id) = if let Some(lr) = num("LOCAL_RANK") {
        (
            Some("torchrun".to_string()),
            num("RANK"),
            Some(lr),
            get("TORCHELASTIC_RUN_ID").or_else(|| get("SLURM_JOB_ID")),
        )
    } else if let Some(lr) = num("OMPI_COMM_WORLD_LOCAL_RANK") {
        // Before Slurm: `mpirun` inside an allocation runs every rank in one Slurm task, whose
        // SLURM_PROCID is the same for all of them.
        (
            Some("openmpi".to_string()),
            num("OMPI_COMM_WORLD_RANK"),
            Some(lr),
            get("SLURM_JOB_ID"),
        )
    } else if let Some(pr) = num("SLURM_PROCID") {
        (
            Some("slurm".to_string()),
            Some(pr),
            num("SLURM_LOCALID"),
            get("SLURM_JOB_ID"),
        )
    } else {
        (None, None, None, get("SLURM_JOB_ID"))
    };
    let role = match local_rank {
        Some(lr) if lr > 0 => Role::Reference,
        _ => Role::Measured,
    };
    Cluster {
        launcher,
        job_id,
        rank,
        local_rank,
        role,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_lists_exactly_what_detect_reads() {
        // Each launcher's branch is taken in turn (every variable set, then each winner
        // removed), so every name detect can ask for is asked for at least once.
        let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
        let mut set: Vec<&str> = VARIABLES.to_vec();
        for winner in [
            "LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "SLURM_PROCID",
            "",
        ] {
            detect(|k| {
                asked.borrow_mut().insert(k.to_string());
                set.contains(&k).then(|| "1".to_string())
            });
            set.retain(|v| *v != winner);
        }
        let want: std::collections::BTreeSet<String> =
            VARIABLES.iter().map(|v| v.to_string()).collect();
        assert_eq!(asked.into_inner(), want);
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn slurm_local_rank_zero_measures_others_reference() {
        let c = detect(env(&[
            ("SLURM_PROCID", "4"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_JOB_ID", "77"),
        ]));
        assert_eq!(
            (c.role, c.rank, c.job_id.as_deref()),
            (Role::Measured, Some(4), Some("77"))
        );
        let c = detect(env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "77"),
        ]));
        assert_eq!(c.role, Role::Reference);
    }

    #[test]
    fn open_mpi_ranks_inside_a_slurm_allocation() {
        let c = detect(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("SLURM_PROCID", "0"),
            ("SLURM_JOB_ID", "9"),
        ]));
        assert_eq!(
            (c.launcher.as_deref(), c.rank, c.role, c.job_id.as_deref()),
            (Some("openmpi"), Some(1), Role::Reference, Some("9"))
        );
    }

    #[test]
    fn torchrun_and_plain() {
        let c = detect(env(&[
            ("RANK", "3"),
            ("LOCAL_RANK", "3"),
            ("SLURM_PROCID", "0"),
        ]));
        assert_eq!(
            (c.launcher.as_deref(), c.role),
            (Some("torchrun"), Role::Reference)
        );
        let c = detect(env(&[]));
        assert_eq!((c.launcher, c.role), (None, Role::Measured));
    }
}
