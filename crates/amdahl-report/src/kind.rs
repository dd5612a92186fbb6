//! The registry of result kinds: every versioned output amdahl writes, one line each in
//! [`KINDS`], with what a saved one can be used for.
//!
//! A line names the kind's `schema` string and result type (its JSON Schema, `crate::schema`),
//! and, where the kind has them: its section in `amdahl report` (title, what its figures are, and
//! the typed reader that parses the saved JSON into [`Typed`]), how `amdahl carbon --from` and
//! `amdahl lifetime` read its energy (`Energy`), and how `amdahl surface --from` overlays it.
//! Every reader of saved results dispatches here, so a new kind or version is one line, and the
//! messages for a schema a reader does not take list the kinds it does, from the same table.

use crate::render::Render;
use crate::schema::{CatalogListing, SampleLogLine};
use crate::surface::{self, Overlay, SurfaceError};
use amdahl_bench::{gemm, gpu, memory, roofline, scaling as bench_scaling, sparse};
use amdahl_meter::{meter, record, scale::result as scale_result, sensors};
use amdahl_model::carbon::{estimate, from_result, lifetime as life, sci, statement, CarbonError};
use amdahl_model::{
    catalog, infer as inf, plan::result as plan_result, scaling, serve as srv, top500 as t5,
};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// One versioned output: its `schema` string, the type that serialises to it, and what the
/// readers of saved results do with it.
pub struct Kind {
    /// The `"schema"` value, e.g. `amdahl.run/1`.
    pub id: &'static str,
    pub(crate) generate: fn() -> Schema,
    shown: Option<Shown>,
    energy: Energy,
    overlay: Option<OverlayReader>,
}

/// How `amdahl report` shows a kind.
struct Shown {
    /// The title of the kind's section.
    title: &'static str,
    /// One sentence: which of its figures are measured and which estimated.
    nature: &'static str,
    read: fn(&Value) -> Result<Typed, Mismatch>,
}

/// Where and how a saved result does not match its kind's type.
type Mismatch = serde_path_to_error::Error<serde_json::Error>;

/// What `amdahl carbon --from` (and `amdahl lifetime`) does with a saved result of a kind.
enum Energy {
    /// Not an energy source: "not supported", with the list of those that are.
    No,
    /// Its IT energy, read from the fields the producer's contract names.
    Reads(fn(&Value, &str) -> Result<from_result::Saved, CarbonError>),
    /// Refused with a message saying which result to pass instead.
    Refuses(&'static str),
}

type OverlayReader = fn(&str, &Value) -> Result<Overlay, SurfaceError>;

/// Every versioned output amdahl writes, in the order `amdahl report` lists the kinds it shows.
/// To add one: `Kind::of::<T>(ID)`, and `.shown(…)`, `.energy(…)` or `.overlay(…)` for the
/// readers that take it.
pub const KINDS: &[Kind] = &[
    // A run's nature depends on its devices (which were only estimated): the page words it.
    Kind::of::<record::RunRecord>(record::RUN_SCHEMA)
        .shown("Measured runs", "", |v| Ok(Typed::Run(typed(v)?)))
        .energy(from_result::read_run),
    // As a run's, a merge's nature depends on its devices' methods: the page words it.
    Kind::of::<record::MergeResult>(record::MERGE_SCHEMA).shown(
        "Merged runs",
        "",
        |v| Ok(Typed::Merge(typed(v)?)),
    ),
    Kind::of::<scale_result::ScaleResult>(scale_result::SCHEMA)
        .shown(
            "Scaling measurements",
            "Measured times and energies at each N; the fitted models and their predictions are estimates.",
            |v| Ok(Typed::Scale(typed(v)?)),
        )
        .overlay(surface::scale_points),
    Kind::of::<scaling::analysis::FitResult>(scaling::analysis::SCHEMA)
        .shown(
            "Scaling fits",
            "The points are the input measurements; the models, their parameters and predictions are fitted estimates.",
            |v| Ok(Typed::Fit(typed(v)?)),
        )
        .overlay(surface::fit_points),
    Kind::of::<t5::Top500Result>(t5::SCHEMA)
        .shown(
            "TOP500 analyses",
            "Rmax and Rpeak are the published TOP500 figures; α_eff and the derived quantities are estimates from them.",
            |v| Ok(Typed::Top500(typed(v)?)),
        )
        .overlay(surface::top500_points),
    Kind::of::<plan_result::PlanResult>(plan_result::PLAN_SCHEMA)
        .shown(
            "Training plans",
            "Estimated: a model prediction from published device specifications; nothing was measured.",
            |v| Ok(Typed::Plan(typed(v)?)),
        )
        .energy(from_result::read_plan),
    Kind::of::<plan_result::SearchResult>(plan_result::SEARCH_SCHEMA).shown(
        "Training plan searches",
        "Estimated: model predictions for each layout searched; nothing was measured.",
        |v| Ok(Typed::PlanSearch(typed(v)?)),
    ),
    Kind::of::<inf::InferResult>(inf::INFER_SCHEMA)
        .shown(
            "Inference plans",
            "Estimated: a serving model's prediction from published device specifications; nothing was measured.",
            |v| Ok(Typed::Infer(typed(v)?)),
        )
        .energy(from_result::read_infer),
    Kind::of::<inf::InferSearchResult>(inf::INFER_SEARCH_SCHEMA)
        .shown(
            "Inference plan searches",
            "Estimated: serving predictions for each configuration searched; nothing was measured.",
            |v| Ok(Typed::InferSearch(typed(v)?)),
        )
        .refuses_energy(
            "this is an `amdahl infer --search` result, a ranking of configurations rather than \
             one; re-run `amdahl infer` without --search on the configuration you chose and pass \
             its --json output",
        ),
    Kind::of::<srv::ServeResult>(srv::SERVE_SCHEMA)
        .shown(
            "Serving simulations",
            "Estimated: a discrete-event simulation whose iteration times and power are the serving model's predictions; nothing was measured.",
            |v| Ok(Typed::Serve(typed(v)?)),
        )
        .energy(from_result::read_serve),
    Kind::of::<srv::search::ServeSearch>(srv::search::SERVE_SEARCH_SCHEMA).refuses_energy(
        "this is an `amdahl serve --search` result, a ranking of configurations rather than one; \
         re-run `amdahl serve` without --search on the configuration you chose and pass its \
         --json output",
    ),
    Kind::of::<srv::max_rate::MaxRate>(srv::max_rate::SERVE_MAX_RATE_SCHEMA).refuses_energy(
        "this is an `amdahl serve --max-rate` result, the rates one configuration was tried at; \
         re-run `amdahl serve --rate R` at the rate you chose and pass its --json output",
    ),
    // A lifetime's nature depends on its phases (given, predicted or measured): the page words it.
    Kind::of::<life::LifetimeReport>(life::SCHEMA).shown(
        "Lifetime costs",
        "",
        |v| Ok(Typed::Lifetime(typed(v)?)),
    ),
    Kind::of::<sci::SciResult>(sci::SCHEMA).shown(
        "Software Carbon Intensity",
        "(E × I + M) per R of the figures named in each row, with R as declared; estimated or measured as those figures were.",
        |v| Ok(Typed::Sci(typed(v)?)),
    ),
    Kind::of::<gemm::GemmReport>(gemm::SCHEMA).shown("GEMM benchmarks", BENCH, |v| {
        Ok(Typed::Gemm(typed(v)?))
    }),
    Kind::of::<sparse::SparseReport>(sparse::SCHEMA).shown("Sparse benchmarks", BENCH, |v| {
        Ok(Typed::Sparse(typed(v)?))
    }),
    Kind::of::<memory::MemoryReport>(memory::SCHEMA).shown("Memory benchmarks", BENCH, |v| {
        Ok(Typed::Memory(typed(v)?))
    }),
    Kind::of::<roofline::RooflineReport>(roofline::SCHEMA).shown(
        "Roofline benchmarks",
        BENCH,
        |v| Ok(Typed::Roofline(typed(v)?)),
    ),
    Kind::of::<bench_scaling::ScalingReport>(bench_scaling::SCHEMA).shown(
        "Thread-scaling benchmarks",
        BENCH,
        |v| Ok(Typed::BenchScaling(typed(v)?)),
    ),
    Kind::of::<gpu::GpuReport>(gpu::SCHEMA).shown("GPU benchmarks", BENCH, |v| {
        Ok(Typed::Gpu(typed(v)?))
    }),
    Kind::of::<amdahl_model::profile::DeviceProfile>(amdahl_model::profile::PROFILE_SCHEMA),
    Kind::of::<amdahl_model::calibrate::Calibration>(
        amdahl_model::calibrate::CALIBRATION_SCHEMA,
    ),
    Kind::of::<crate::surface::SurfaceResult>(crate::surface::SCHEMA),
    Kind::of::<scaling::whatif::AccelerateResult>(scaling::whatif::SCHEMA),
    Kind::of::<SampleLogLine>(meter::SAMPLES_SCHEMA),
    Kind::of::<estimate::CarbonReport>(estimate::SCHEMA),
    Kind::of::<statement::Statement>(statement::SCHEMA),
    Kind::of::<CatalogListing>(catalog::SCHEMA),
    Kind::of::<sensors::DetectResult>(sensors::DETECT_SCHEMA),
];

/// What every benchmark result's figures are.
const BENCH: &str = "Measured on the machine named in the provenance: rates are timed repeats; energy is measured where a counter was readable, else marked \"not measured\".";

impl Kind {
    pub const fn of<T: JsonSchema>(id: &'static str) -> Self {
        Kind {
            id,
            generate: crate::schema::root_schema::<T>,
            shown: None,
            energy: Energy::No,
            overlay: None,
        }
    }

    const fn shown(
        self,
        title: &'static str,
        nature: &'static str,
        read: fn(&Value) -> Result<Typed, Mismatch>,
    ) -> Self {
        Kind {
            shown: Some(Shown {
                title,
                nature,
                read,
            }),
            ..self
        }
    }

    const fn energy(
        self,
        read: fn(&Value, &str) -> Result<from_result::Saved, CarbonError>,
    ) -> Self {
        Kind {
            energy: Energy::Reads(read),
            ..self
        }
    }

    const fn refuses_energy(self, why: &'static str) -> Self {
        Kind {
            energy: Energy::Refuses(why),
            ..self
        }
    }

    const fn overlay(self, read: OverlayReader) -> Self {
        Kind {
            overlay: Some(read),
            ..self
        }
    }

    /// The title of the kind's section in `amdahl report`, if the report shows it.
    pub fn title(&self) -> Option<&'static str> {
        self.shown.as_ref().map(|s| s.title)
    }

    /// What the kind's figures are (measured, estimated), as the report says it.
    pub fn nature(&self) -> &'static str {
        self.shown.as_ref().map_or("", |s| s.nature)
    }

    /// Whether `amdahl carbon --from` reads this kind's energy (and so a statement can be
    /// written for it).
    pub fn reads_energy(&self) -> bool {
        matches!(self.energy, Energy::Reads(_))
    }
}

/// The kind whose `schema` string is `id`, if any.
pub fn kind(id: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.id == id)
}

/// `v` as the type `T`, an error naming the path of the field that does not match.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<Box<T>, Mismatch> {
    serde_path_to_error::deserialize(v).map(Box::new)
}

/// A saved result, parsed into the type that wrote it.
#[derive(Debug, Clone)]
pub enum Typed {
    Run(Box<record::RunRecord>),
    Merge(Box<record::MergeResult>),
    Scale(Box<scale_result::ScaleResult>),
    Fit(Box<scaling::analysis::FitResult>),
    Top500(Box<t5::Top500Result>),
    Plan(Box<plan_result::PlanResult>),
    PlanSearch(Box<plan_result::SearchResult>),
    Infer(Box<inf::InferResult>),
    InferSearch(Box<inf::InferSearchResult>),
    Serve(Box<srv::ServeResult>),
    Lifetime(Box<life::LifetimeReport>),
    Sci(Box<sci::SciResult>),
    Gemm(Box<gemm::GemmReport>),
    Sparse(Box<sparse::SparseReport>),
    Memory(Box<memory::MemoryReport>),
    Roofline(Box<roofline::RooflineReport>),
    BenchScaling(Box<bench_scaling::ScalingReport>),
    Gpu(Box<gpu::GpuReport>),
}

impl Typed {
    /// The result's renderers (the one place that looks at which kind it is).
    pub fn render(&self) -> &dyn Render {
        match self {
            Typed::Run(r) => r.as_ref(),
            Typed::Merge(r) => r.as_ref(),
            Typed::Scale(r) => r.as_ref(),
            Typed::Fit(r) => r.as_ref(),
            Typed::Top500(r) => r.as_ref(),
            Typed::Plan(r) => r.as_ref(),
            Typed::PlanSearch(r) => r.as_ref(),
            Typed::Infer(r) => r.as_ref(),
            Typed::InferSearch(r) => r.as_ref(),
            Typed::Serve(r) => r.as_ref(),
            Typed::Lifetime(r) => r.as_ref(),
            Typed::Sci(r) => r.as_ref(),
            Typed::Gemm(r) => r.as_ref(),
            Typed::Sparse(r) => r.as_ref(),
            Typed::Memory(r) => r.as_ref(),
            Typed::Roofline(r) => r.as_ref(),
            Typed::BenchScaling(r) => r.as_ref(),
            Typed::Gpu(r) => r.as_ref(),
        }
    }
}

/// A saved result read once: its kind, the typed result, and the JSON it came from (for
/// readers that walk it generically, such as the report's key figures and provenance).
#[derive(Debug, Clone)]
pub struct Saved {
    pub kind: &'static Kind,
    pub typed: Typed,
    pub json: Value,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Kind").field(&self.id).finish()
    }
}

/// Why a saved result cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ReadError {
    pub file: String,
    pub message: String,
}

/// The message for JSON without a `schema` field, the same from every reader.
const NO_SCHEMA: &str = "no `schema` field; is this the --json output of an amdahl command?";

/// Parse one result file's text (`file` names it in errors) into the type of its kind, for
/// `amdahl report`: an empty or truncated file, text that is not JSON, a kind the report does
/// not show (or a version this build does not read) and a field that does not match the kind's
/// type each get their own message.
pub fn read(text: &str, file: &str) -> Result<Saved, ReadError> {
    let err = |message: String| ReadError {
        file: file.to_string(),
        message,
    };
    if text.trim().is_empty() {
        return Err(err(
            "the file is empty; give the JSON an amdahl command wrote with --json or -o".into(),
        ));
    }
    let json: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            err(format!(
                "the JSON ends early (line {}, column {}): the file is truncated; write it again",
                e.line(),
                e.column()
            ))
        } else {
            err(format!(
                "not JSON ({e}); give the JSON an amdahl command wrote with --json or -o"
            ))
        }
    })?;
    let schema = json
        .get("schema")
        .and_then(Value::as_str)
        .ok_or_else(|| err(NO_SCHEMA.into()))?;
    let (kind, shown) = kind(schema)
        .and_then(|k| Some((k, k.shown.as_ref()?)))
        .ok_or_else(|| err(not_shown(schema)))?;
    let typed = (shown.read)(&json).map_err(|e| err(mismatch(kind.id, &e)))?;
    Ok(Saved { kind, typed, json })
}

/// The message for a result that does not match its kind's type, with the path of the field
/// (`training.train_time`) where it is not the whole result.
fn mismatch(id: &str, e: &Mismatch) -> String {
    let path = e.path().to_string();
    if path == "." {
        format!("does not match the {id} schema: {}", e.inner())
    } else {
        format!("does not match the {id} schema at `{path}`: {}", e.inner())
    }
}

/// The kinds `amdahl report` shows, in the order it lists them.
pub fn shown() -> impl Iterator<Item = &'static Kind> {
    KINDS.iter().filter(|k| k.shown.is_some())
}

/// The message for a schema `report` cannot show: a newer version of a known kind, a kind it
/// does not show, or something that is not an amdahl schema at all.
fn not_shown(schema: &str) -> String {
    let shown: Vec<&str> = shown().map(|k| k.id).collect();
    let (kind_name, version) = schema.rsplit_once('/').unwrap_or((schema, ""));
    if let Some(known) = shown
        .iter()
        .find(|s| s.rsplit_once('/').is_some_and(|(k, _)| k == kind_name))
    {
        let newer = match (version.parse::<u32>(), known.rsplit_once('/')) {
            (Ok(v), Some((_, k))) => k.parse::<u32>().is_ok_and(|k| v > k),
            _ => false,
        };
        return if newer {
            format!(
                "schema `{schema}` is newer than this amdahl ({}) reads (`{known}`); upgrade amdahl, or write the result again with this version",
                env!("CARGO_PKG_VERSION")
            )
        } else {
            format!("schema `{schema}` is not a version this amdahl reads (`{known}`)")
        };
    }
    if kind(schema).is_some() {
        return format!(
            "`{schema}` results are not shown by `amdahl report`; it shows: {}",
            shown.join(", ")
        );
    }
    format!(
        "unknown schema `{schema}`; `amdahl report` reads results of amdahl commands: {}",
        shown.join(", ")
    )
}

/// The IT energy a saved result states, for `amdahl carbon --from` and `amdahl lifetime`
/// (`file` names it in errors): read by its kind's energy reader, or refused with the kinds
/// that have one.
pub fn energy(text: &str, file: &str) -> Result<from_result::Saved, CarbonError> {
    let err = |message: String| CarbonError::Input {
        file: file.into(),
        message,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
    let schema = v
        .get("schema")
        .and_then(Value::as_str)
        .ok_or_else(|| err(NO_SCHEMA.into()))?;
    match kind(schema).map(|k| &k.energy) {
        Some(Energy::Reads(read)) => read(&v, file),
        Some(Energy::Refuses(why)) => Err(err(why.to_string())),
        Some(Energy::No) | None => {
            let supported: Vec<&str> = KINDS
                .iter()
                .filter(|k| k.reads_energy())
                .map(|k| k.id)
                .collect();
            Err(err(format!(
                "schema `{schema}` is not supported by `amdahl carbon --from`; supported: {}",
                supported.join(", ")
            )))
        }
    }
}

/// The points `amdahl surface --from` overlays from one saved result (`source_name` names it
/// in errors): read by its kind's overlay reader (TOP500 analyses, fits, and the fit inside a
/// scaling measurement); any other schema, or a version this build does not know, is refused.
pub fn overlay(source_name: &str, v: &Value) -> Result<Overlay, SurfaceError> {
    let schema = v.get("schema").and_then(Value::as_str).unwrap_or("");
    match kind(schema).and_then(|k| k.overlay) {
        Some(read) => read(source_name, v),
        None => Err(SurfaceError::UnknownSchema {
            source_name: source_name.into(),
            found: if schema.is_empty() {
                "missing".into()
            } else {
                format!("\"{schema}\"")
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    /// `amdahl report`'s typed reader.
    mod typed {
        use crate::kind::read;

        #[test]
        fn unknown_newer_and_unshown_schemas_get_distinct_messages() {
            let e = read(r#"{"schema":"amdahl.run/2"}"#, "r.json").unwrap_err();
            assert!(e.message.contains("newer than this amdahl"), "{e}");
            let e = read(r#"{"schema":"amdahl.catalog/1"}"#, "c.json").unwrap_err();
            assert!(e.message.contains("not shown by `amdahl report`"), "{e}");
            let e = read(r#"{"schema":"other/1"}"#, "o.json").unwrap_err();
            assert!(e.message.contains("unknown schema `other/1`"), "{e}");
            let e = read(r#"{"schema":"amdahl.run/1","#, "t.json").unwrap_err();
            assert!(e.message.contains("truncated"), "{e}");
            let e = read("hello", "h.txt").unwrap_err();
            assert!(e.message.contains("not JSON"), "{e}");
            let e = read(r#"{"schema":"amdahl.fit/1","series":3}"#, "f.json").unwrap_err();
            assert!(
                e.message.contains("does not match the amdahl.fit/1 schema"),
                "{e}"
            );
        }
    }

    /// A field that does not match its type is named by its path in the result.
    #[test]
    fn a_mismatch_names_the_field_by_its_path() {
        let e = crate::kind::read(
            r#"{"schema":"amdahl.fit/1","series":[{"label":"x","points":3}]}"#,
            "f.json",
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("does not match the amdahl.fit/1 schema at `series[0].points`: "),
            "{e}"
        );
    }

    /// `carbon --from`'s energy readers, through the registry's dispatch.
    mod energy {
        use crate::kind::energy as read;
        use amdahl_model::carbon::Basis;

        #[test]
        fn run_result_with_an_estimated_device_is_estimated() {
            let saved = read(
                r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"pue":1.1,
                   "devices":[{"id":"rapl:0","method":"counter","in_total":true},
                              {"id":"estimate:ram","method":"estimate","in_total":true}],
                   "intensity":{"g_per_kwh":56.0,"region":"FR","source":"OWID","year":2023}}"#,
                "r.json",
            )
            .unwrap();
            assert_eq!(saved.energy.basis, Basis::Estimated);
            assert!(
                saved.energy.method.contains("memory")
                    && !saved.energy.method.contains("estimate:"),
                "{}",
                saved.energy.method
            );
            assert_eq!(saved.pue, Some(1.1));
            let g = saved.grid.unwrap();
            assert_eq!(
                (g.region.as_str(), g.g_per_kwh, g.year),
                ("FR", 56.0, Some(2023))
            );
        }

        /// Regression: a statement was written for a run that failed (exit 2) without a word.
        #[test]
        fn failed_run_carries_a_caveat() {
            let saved = read(
                r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"exit_code":2}"#,
                "r.json",
            )
            .unwrap();
            assert_eq!(saved.energy.caveats.len(), 1);
            assert!(saved.energy.caveats[0].contains("exit status 2"));
            assert!(!saved.energy.predicted);
            let ok = read(
                r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"exit_code":0}"#,
                "r.json",
            )
            .unwrap();
            assert!(ok.energy.caveats.is_empty());
        }

        #[test]
        fn run_result_is_measured() {
            let e = read(
                r#"{"schema":"amdahl.run/1","total_energy_j":7.2e6,"duration_s":3600,"extra":1}"#,
                "r.json",
            )
            .unwrap()
            .energy;
            assert_eq!(e.basis, Basis::Measured);
            assert!((e.energy.kwh() - 2.0).abs() < 1e-12);
        }

        #[test]
        fn plan_result_is_the_estimated_training_run() {
            // A plan's own JSON: its IT energy is power per device × training time × devices.
            use amdahl_model::plan::{catalog_model, catalog_system, evaluate};
            use amdahl_model::plan::{CostInputs, Layout, PlanResult, Recompute};
            let (hw, net) = catalog_system("a100-80gb").unwrap();
            let m = catalog_model("megatron-39b").unwrap();
            let l = Layout {
                tp: 8,
                pp: 2,
                dp: 32,
                batch: 1536,
                recompute: Recompute::Full,
                ..Layout::default()
            };
            let e = evaluate(&m, &hw, &net, &l).unwrap();
            let inputs = CostInputs {
                tokens: 1e9,
                pue: 1.1,
                intensity: amdahl_model::catalog::grid::lookup("world")
                    .unwrap()
                    .g_per_kwh,
                price_per_device_hour: None,
            };
            let plan = PlanResult::new(&m, &hw, &net, &e, &inputs);
            let text = serde_json::to_string(&plan).unwrap();
            let s = read(&text, "plan.json").unwrap();
            assert_eq!(s.energy.basis, Basis::Estimated);
            assert!(
                s.energy.predicted,
                "a plan is a prediction: the statement says would"
            );
            assert_eq!(s.energy.count, Some(512));
            assert_eq!(s.device.as_deref(), Some("A100 SXM4 80GB"));
            assert_eq!(s.pue, Some(1.1));
            let want = plan.training.it_energy.get();
            assert!((s.energy.energy.get() / want - 1.0).abs() < 1e-12);
            assert!(
                (s.energy.device_hours().unwrap() / plan.training.device_hours - 1.0).abs() < 1e-12
            );
            assert!(s
                .energy
                .method
                .contains("Megatron-39B on 512 × A100 SXM4 80GB"));
            assert!(s.energy.method.contains("idle power estimated"));
        }

        #[test]
        fn infer_result_is_a_thousand_requests() {
            // 8 GPUs × 500 W ÷ 20 requests/s = 200 J per request (the hand-written contract fixture
            // crates/amdahl-cli/tests/fixtures/infer.json); 1,000 requests = 200 kJ in 50 s.
            let s = read(
                r#"{"schema":"amdahl.infer/1","model":"llama3-8b","system":"h100","gpus":8,
                   "power_per_gpu_w":500,"requests_per_s":20,"energy_per_request_j":200,
                   "pue":1.1,"grid_g_per_kwh":56,"region":"FR","co2e_per_1000_requests_g":3.42}"#,
                "i.json",
            )
            .unwrap();
            assert_eq!(s.schema, "amdahl.infer/1");
            assert_eq!(s.requests, Some(1000.0));
            assert_eq!(s.energy.basis, Basis::Estimated);
            assert!((s.energy.energy.get() - 200e3).abs() < 1e-6);
            assert!((s.energy.duration.get() - 50.0).abs() < 1e-12);
            assert_eq!(s.energy.count, Some(8));
            assert_eq!((s.device.as_deref(), s.pue), (Some("h100"), Some(1.1)));
            let g = s.grid.unwrap();
            assert_eq!((g.region.as_str(), g.g_per_kwh), ("FR", 56.0));
            assert!(
                s.energy.method.contains("llama3-8b on 8 × h100"),
                "{}",
                s.energy.method
            );
        }

        #[test]
        fn bad_inputs_are_named() {
            for (text, want) in [
                ("{", "not valid JSON"),
                (r#"{"a":1}"#, "no `schema`"),
                (r#"{"schema":"amdahl.fit/1"}"#, "not supported"),
                (r#"{"schema":"amdahl.plan/1"}"#, "`gpus` is missing"),
                (
                    r#"{"schema":"amdahl.plan/1","gpus":8.5}"#,
                    "not a device count",
                ),
                (
                    r#"{"schema":"amdahl.run/1","duration_s":1}"#,
                    "total_energy_j",
                ),
                (
                    r#"{"schema":"amdahl.run/1","total_energy_j":-5,"duration_s":1}"#,
                    "positive",
                ),
                (r#"{"schema":"amdahl.infer-search/1"}"#, "without --search"),
                (
                    r#"{"schema":"amdahl.infer/1","energy_per_request_j":200}"#,
                    "`requests_per_s` is missing",
                ),
                (
                    r#"{"schema":"amdahl.infer/1","energy_per_request_j":0,"requests_per_s":1}"#,
                    "must be positive",
                ),
            ] {
                let e = read(text, "r.json").unwrap_err().to_string();
                assert!(e.starts_with("r.json: ") && e.contains(want), "{e}");
            }
        }
    }
}
