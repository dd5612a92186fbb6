//! The one default per carbon-accounting quantity, used by every command that turns energy into
//! emissions (`plan`, `run`, `scale`, `carbon`, and any later one), so the same job gets the same
//! numbers whichever command computes them. Each output names the value it used and where it
//! comes from. Why these values: docs/methodology.md, "Defaults".

use crate::catalog::grid::GridScope;

/// The PUE preset when `--pue` is not given: `local` = 1.0, no facility overhead. amdahl cannot
/// know the facility a job runs in; adding a data-centre average to a laptop's measured energy
/// would overstate it by half, so overhead is added only when the user names it (`--pue industry`,
/// `--pue 1.2`). CodeCarbon's default (`pue=1.0`) is the same, so its CSV rows stay comparable.
pub const PUE_PRESET: &str = "local";

/// The grid when neither `--region` nor `--intensity` is given: the world average of the same
/// life-cycle data set as the country rows (Ember, 436 gCO2e/kWh in 2022; `data/grid.csv`).
pub const GRID_REGION: &str = "world";

/// The scope of a user's `--intensity` when `--intensity-scope` is not given: life-cycle, the
/// scope of every catalogued grid, so a user figure compares with them.
pub const INTENSITY_SCOPE: GridScope = GridScope::Lifecycle;

/// How an output names a default it used, e.g. "local preset (default)".
pub const DEFAULT_MARK: &str = "default";
