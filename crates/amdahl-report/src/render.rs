//! The formats every result prints in, and the one trait each result kind implements for them.
//!
//! A command builds its result and asks for it in the format the user chose
//! (`result.render(format)`); the page of `amdahl report` asks a saved result for the same table,
//! CSV and plot. So the choice between table, `--json` and `--csv` is made once, here, and a
//! kind's renderers are named once, in its `impl Render` below, instead of in a `match` in every
//! command and again in the page.

use crate::{
    accelerate, bench, bench_gpu, calibrate, carbon, fit, infer, lifetime, meter, plan, scale, sci,
    serve, serve_max_rate, serve_search,
};
use crate::{surface, top500};
use amdahl_bench::{gemm, gpu, memory, roofline, scaling as bench_scaling, sparse};
use amdahl_meter::{record, scale::result as scale_result, sensors};
use amdahl_model::carbon::{estimate::CarbonReport, lifetime::LifetimeReport, sci::SciResult};
use amdahl_model::{
    infer as inf, plan::result as plan_result, scaling, serve as srv, top500 as t5,
};

/// Which sink the user chose: a human table (the default), `--json` or `--csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// Why a result could not be rendered (neither happens for amdahl's own result types, whose
/// maps have string keys and whose CSV goes to memory; the variants keep the cause if it does).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("serialising the result: {0}")]
    Json(#[from] serde_json::Error),
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
}

/// A result kind's renderers: its terminal table, its CSV rows and, where it has one, its plot.
/// JSON needs nothing per kind: it is the result's own serialisation (the versioned contract).
pub trait Render {
    /// The human table (what the command prints without `--json` or `--csv`).
    fn table(&self) -> String;
    /// The rows of `--csv`, header first.
    fn csv(&self) -> Result<String, RenderError>;
    /// The plot `amdahl report` shows for the kind (SVG), if it has one.
    fn svg(&self) -> Option<String> {
        None
    }
    /// The result in `format`.
    fn render(&self, format: Format) -> Result<String, RenderError>
    where
        Self: serde::Serialize + Sized,
    {
        match format {
            Format::Table => Ok(self.table()),
            Format::Json => Ok(crate::to_json(self)?),
            Format::Csv => self.csv(),
        }
    }
}

/// `impl Render` for a kind from its three renderers (`csv` returning `String` or a `Result`).
macro_rules! render {
    ($t:ty, $table:expr, $csv:expr $(, $svg:expr)?) => {
        impl Render for $t {
            fn table(&self) -> String {
                $table(self)
            }
            fn csv(&self) -> Result<String, RenderError> {
                Ok(IntoCsv::into_csv($csv(self))?)
            }
            $(fn svg(&self) -> Option<String> {
                Some($svg(self))
            })?
        }
    };
}

/// The CSV renderers return either the text or a `csv` result; both become one.
trait IntoCsv {
    fn into_csv(self) -> Result<String, csv::Error>;
}
impl IntoCsv for String {
    fn into_csv(self) -> Result<String, csv::Error> {
        Ok(self)
    }
}
impl IntoCsv for Result<String, csv::Error> {
    fn into_csv(self) -> Result<String, csv::Error> {
        self
    }
}

render!(scaling::analysis::FitResult, fit::table, fit::csv, fit::svg);
render!(t5::Top500Result, top500::table, top500::csv);
render!(
    scaling::whatif::AccelerateResult,
    accelerate::table,
    accelerate::csv
);
render!(
    surface::SurfaceResult,
    surface::SurfaceResult::summary,
    |r: &surface::SurfaceResult| surface::points_csv(&r.points)
);
render!(
    plan_result::PlanResult,
    plan::plan_table,
    plan::plan_csv,
    plan::plan_svg
);
render!(
    plan_result::SearchResult,
    plan::search_table,
    plan::search_csv,
    plan::search_svg
);
render!(
    inf::InferResult,
    infer::infer_table,
    infer::infer_csv,
    infer::infer_svg
);
render!(
    inf::InferSearchResult,
    infer::search_table,
    infer::search_csv,
    infer::search_svg
);
render!(
    srv::ServeResult,
    serve::serve_table,
    serve::serve_csv,
    serve::serve_svg
);
render!(
    srv::search::ServeSearch,
    serve_search::serve_search_table,
    serve_search::serve_search_csv
);
render!(
    srv::max_rate::MaxRate,
    serve_max_rate::serve_max_rate_table,
    serve_max_rate::serve_max_rate_csv
);
render!(
    LifetimeReport,
    lifetime::table,
    lifetime::csv,
    lifetime::svg
);
render!(CarbonReport, carbon::table, carbon::csv);
render!(SciResult, sci::table, sci::csv);
render!(
    amdahl_model::calibrate::Calibration,
    calibrate::table,
    calibrate::csv
);
render!(
    record::RunRecord,
    meter::run_summary,
    meter::run_devices_csv
);
render!(record::MergeResult, meter::merge_summary, meter::merge_csv);
render!(
    scale_result::ScaleResult,
    scale::table,
    scale::csv,
    scale::svg
);
render!(
    sensors::DetectResult,
    meter::detect_table,
    meter::detect_csv
);
render!(
    gemm::GemmReport,
    bench::gemm_text,
    |r| bench::gemm_grid(r).csv(),
    bench::gemm_svg
);
render!(
    sparse::SparseReport,
    bench::sparse_text,
    |r| bench::sparse_grid(r).csv(),
    bench::sparse_svg
);
render!(
    memory::MemoryReport,
    bench::memory_text,
    |r| bench::memory_grid(r).csv(),
    bench::memory_svg
);
render!(
    roofline::RooflineReport,
    bench::roofline_text,
    |r| bench::roofline_grid(r).csv(),
    bench::roofline_svg
);
render!(
    bench_scaling::ScalingReport,
    bench::scaling_text,
    |r| bench::scaling_grid(r).csv(),
    bench::scaling_svg
);
render!(gpu::GpuReport, bench_gpu::gpu_text, |r| {
    bench_gpu::gpu_grid(r).csv()
});
