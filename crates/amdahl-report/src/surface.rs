//! The efficiency surface E(N, 1−α) = 1/(N·(1−α) + α) (Végh, arXiv:2005.00872) as an SVG colour
//! map over log N × log(1−α), with exact iso-efficiency contours and measured systems on top.
//!
//! Contours are the closed-form level sets 1−α = (1−E)/(E·(N−1))
//! (`amdahl_model::surface::iso_efficiency_serial`), sampled densely in log N and clipped
//! exactly to the plotted range; the colour map is a grid of cells coloured by E at each cell's
//! centre. Points come from `amdahl.top500/1` (each system at (n, serial_fraction_hpl)) or
//! `amdahl.fit/1` results (each point at (n, karp_flatt)), read loosely from JSON so either
//! producer may add fields.

use crate::svg::{
    colormap, figure, Axis, ColorBar, Label, Plot, Raster, Scale, Series, Style, PALETTE,
};
use amdahl_model::surface::{efficiency, iso_efficiency_serial};
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

/// What to draw.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SurfaceSpec {
    /// N range (both > 0; the surface is defined for N ≥ 1).
    pub n_range: (f64, f64),
    /// 1−α range (both in (0, 1]).
    pub serial_range: (f64, f64),
    /// Efficiencies of the contours, each in (0, 1).
    pub contours: Vec<f64>,
    pub title: String,
}

impl Default for SurfaceSpec {
    fn default() -> Self {
        Self {
            // 1e8 rather than 1e7: Sunway TaihuLight lists 10.6 million cores.
            n_range: (1.0, 1e8),
            serial_range: (1e-9, 1e-1),
            contours: vec![0.9, 0.5, 0.1],
            title: "Efficiency E(N, 1−α) = 1/(N(1−α)+α); colour: E from 0 (dark) to 1 (yellow)"
                .into(),
        }
    }
}

/// One point to place on the surface.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SurfacePoint {
    pub n: f64,
    /// 1−α_eff (or Karp–Flatt e) of the point.
    pub serial: f64,
    /// Legend entry the point belongs to ("TOP500 (N = cores)", a fit series label).
    pub group: String,
    /// Text written next to the point, if any.
    pub label: Option<String>,
}

/// The `amdahl surface` result: what was drawn and where it was written.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SurfaceResult {
    pub schema: &'static str,
    pub output: String,
    pub spec: SurfaceSpec,
    pub points: Vec<SurfacePoint>,
    /// Points outside the plotted ranges (drawn nowhere; widen --n-range / --serial-range).
    pub outside: usize,
}

/// The `schema` of a surface result.
pub const SCHEMA: &str = "amdahl.surface/1";

impl SurfaceResult {
    pub fn new(output: String, spec: SurfaceSpec, points: Vec<SurfacePoint>) -> Self {
        let (a, b) = spec.n_range;
        let (c, d) = spec.serial_range;
        let outside = points
            .iter()
            .filter(|p| !(p.n >= a && p.n <= b && p.serial >= c && p.serial <= d))
            .count();
        Self {
            schema: SCHEMA,
            output,
            spec,
            points,
            outside,
        }
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        let mut groups: Vec<(&str, usize)> = Vec::new();
        for p in &self.points {
            match groups.iter_mut().find(|(g, _)| *g == p.group) {
                Some((_, n)) => *n += 1,
                None => groups.push((&p.group, 1)),
            }
        }
        let contours: Vec<String> = self
            .spec
            .contours
            .iter()
            .map(|e| format!("{:.0}", e * 100.0))
            .collect();
        let mut s = format!(
            "{}: E(N, 1−α) over N {:e}..{:e}, 1−α {:e}..{:e}, contours at {} %, {} points",
            self.output,
            self.spec.n_range.0,
            self.spec.n_range.1,
            self.spec.serial_range.0,
            self.spec.serial_range.1,
            contours.join("/"),
            self.points.len()
        );
        for (g, n) in groups {
            s.push_str(&format!(
                "
  {n:>4}  {g}"
            ));
        }
        s.push('\n');
        s
    }
}

/// The placed points as CSV (`group,label,n,serial_fraction`).
pub fn points_csv(points: &[SurfacePoint]) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["group", "label", "n", "serial_fraction"])?;
    for p in points {
        w.write_record([
            p.group.clone(),
            p.label.clone().unwrap_or_default(),
            p.n.to_string(),
            p.serial.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Why a JSON result cannot be overlaid.
#[derive(Debug, Error, PartialEq)]
pub enum SurfaceError {
    #[error("{source_name}: `schema` is {found}; amdahl surface overlays amdahl.top500/1 and amdahl.fit/1 results, and the fit inside amdahl.scale/1 (produce them with `amdahl top500 --json`, `amdahl fit --json` or `amdahl scale -o FILE`)")]
    UnknownSchema { source_name: String, found: String },
    #[error(
        "{source_name}: {field} is missing or not an array; is this a complete {schema} result?"
    )]
    Shape {
        source_name: String,
        schema: String,
        field: &'static str,
    },
    #[error("invalid range {what}: {lo}:{hi}; both ends must be > 0, the first smaller than the second{extra}")]
    Range {
        what: &'static str,
        lo: f64,
        hi: f64,
        extra: &'static str,
    },
}

/// Check a spec's ranges (the surface needs N ≥ 1 and 0 < 1−α ≤ 1 on log axes).
pub fn validate(spec: &SurfaceSpec) -> Result<(), SurfaceError> {
    let (a, b) = spec.n_range;
    if !(a >= 1.0 && b > a && b.is_finite()) {
        return Err(SurfaceError::Range {
            what: "--n-range",
            lo: a,
            hi: b,
            extra: ", and N ≥ 1",
        });
    }
    let (a, b) = spec.serial_range;
    if !(a > 0.0 && b > a && b <= 1.0) {
        return Err(SurfaceError::Range {
            what: "--serial-range",
            lo: a,
            hi: b,
            extra: ", and 1−α ≤ 1",
        });
    }
    Ok(())
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn text(v: &Value, k: &str) -> Option<String> {
    match v.get(k)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The points of one result, and how many of its entries could not be placed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Overlay {
    pub points: Vec<SurfacePoint>,
    /// Entries without a usable (N > 1, 0 < 1−α) pair: N unknown, E = 1, a value missing or out of
    /// range. A fit's baseline point (Karp–Flatt e undefined at N0) is not counted.
    pub skipped: usize,
}

/// The `schema` a result declares (empty when none), for the messages about its shape.
fn schema_of(v: &Value) -> &str {
    v.get("schema").and_then(Value::as_str).unwrap_or("")
}

fn shape(source_name: &str, v: &Value, field: &'static str) -> SurfaceError {
    SurfaceError::Shape {
        source_name: source_name.into(),
        schema: schema_of(v).into(),
        field,
    }
}

/// Whether (N, 1−α) has a place on the log plot.
fn usable(n: f64, s: f64) -> bool {
    n > 1.0 && s > 0.0 && s <= 1.0
}

/// Points from an `amdahl.scale/1` result: `amdahl scale` embeds its fit as an `amdahl.fit/1`
/// object, which is read as the fit it is (`crate::kind::overlay`).
pub fn scale_points(source_name: &str, v: &Value) -> Result<Overlay, SurfaceError> {
    let fit = v.get("fit").filter(|f| f.is_object()).ok_or_else(|| {
        shape(
            source_name,
            v,
            "`fit` (null when fewer than three N were measured: see `no_fit_reason`)",
        )
    })?;
    crate::kind::overlay(source_name, fit)
}

/// Points from an `amdahl.top500/1` result, one per system: (N, 1−α of HPL). Read loosely (only
/// those fields); a system without a usable pair is counted in [`Overlay::skipped`]: it has no
/// place on a log plot, and the caller says how many were left out.
pub fn top500_points(source_name: &str, v: &Value) -> Result<Overlay, SurfaceError> {
    let counts = text(v, "n_counts").unwrap_or_else(|| "cores".into());
    let group = format!("TOP500 (N = {counts})");
    let systems = v
        .get("systems")
        .and_then(Value::as_array)
        .ok_or_else(|| shape(source_name, v, "`systems`"))?;
    let points: Vec<SurfacePoint> = systems
        .iter()
        .filter_map(|s| {
            let (n, serial) = (num(s, "n")?, num(s, "serial_fraction_hpl")?);
            usable(n, serial).then(|| SurfacePoint {
                n,
                serial,
                group: group.clone(),
                label: Some(format!(
                    "{} {}",
                    text(s, "name").unwrap_or_default(),
                    text(s, "list").unwrap_or_default()
                )),
            })
        })
        .collect();
    Ok(Overlay {
        skipped: systems.len() - points.len(),
        points,
    })
}

/// Points from an `amdahl.fit/1` result: (N, Karp–Flatt e) of each series' measured points,
/// read loosely; a fit's baseline point (e undefined at N0) is not counted as skipped.
pub fn fit_points(source_name: &str, v: &Value) -> Result<Overlay, SurfaceError> {
    let series = v
        .get("series")
        .and_then(Value::as_array)
        .ok_or_else(|| shape(source_name, v, "`series`"))?;
    let mut out = Overlay::default();
    for (i, s) in series.iter().enumerate() {
        let label = text(s, "label").unwrap_or_else(|| format!("series {}", i + 1));
        let pts = s
            .get("points")
            .and_then(Value::as_array)
            .ok_or_else(|| shape(source_name, v, "`series[].points`"))?;
        // The baseline's Karp–Flatt e is undefined (null): not a point, and not a loss.
        let candidates = pts
            .iter()
            .filter(|p| !p.get("karp_flatt").is_some_and(Value::is_null));
        let total = candidates.clone().count();
        let mut mine: Vec<SurfacePoint> = candidates
            .filter_map(|p| {
                let (n, e) = (num(p, "n")?, num(p, "karp_flatt")?);
                usable(n, e).then(|| SurfacePoint {
                    n,
                    serial: e,
                    group: format!("{label} (Karp-Flatt e)"),
                    label: None,
                })
            })
            .collect();
        // Label a series once, at its largest N, to keep the plot readable.
        if let Some(last) = mine.iter_mut().max_by(|a, b| a.n.total_cmp(&b.n)) {
            last.label = Some(label);
        }
        out.skipped += total - mine.len();
        out.points.extend(mine);
    }
    Ok(out)
}

/// Colour-map resolution (pixels along N and along 1−α); the viewer interpolates between them.
const RASTER_W: usize = 240;
const RASTER_H: usize = 180;
/// Point colours: Okabe–Ito entries not used by the contours (orange, sky blue, green, blue).
const POINT_COLORS: [&str; 4] = [PALETTE[4], PALETTE[5], PALETTE[2], PALETTE[0]];
/// Samples per contour (log-spaced in N): segments shorter than a pixel at the default size.
const CONTOUR_SAMPLES: usize = 600;

/// The exact part of the iso-efficiency curve `e` inside the plotted rectangle: N from where
/// the curve enters at the top (1−α = hi) or left edge to where it leaves at the bottom
/// (1−α = lo) or right edge. 1−α(N) = (1−E)/(E(N−1)) falls monotonically in N.
pub fn contour(spec: &SurfaceSpec, e: f64) -> Vec<(f64, f64)> {
    let (n_lo, n_hi) = spec.n_range;
    let (s_lo, s_hi) = spec.serial_range;
    let k = (1.0 - e) / e;
    let start = n_lo.max(1.0 + k / s_hi);
    let end = n_hi.min(1.0 + k / s_lo);
    let visible = e > 0.0 && e < 1.0 && end > start;
    if !visible {
        return Vec::new();
    }
    let (a, b) = (start.ln(), end.ln());
    (0..CONTOUR_SAMPLES)
        .map(|i| {
            let n = (a + (b - a) * i as f64 / (CONTOUR_SAMPLES - 1) as f64).exp();
            (n, iso_efficiency_serial(n, e))
        })
        .collect()
}

fn log_space(lo: f64, hi: f64, i: usize, n: usize) -> f64 {
    10f64.powf(lo.log10() + (hi.log10() - lo.log10()) * i as f64 / n as f64)
}

/// The surface as an SVG document: E(N, 1−α) as a colour map, its contours, and the points.
pub fn svg(spec: &SurfaceSpec, points: &[SurfacePoint]) -> String {
    let (n_lo, n_hi) = spec.n_range;
    let (s_lo, s_hi) = spec.serial_range;
    let mut plot = Plot::new(
        spec.title.clone(),
        Axis::new(Scale::Log10, "N (processors, as each source counts them)").range(n_lo, n_hi),
        Axis::new(Scale::Log10, "1−α (non-parallel fraction)").range(s_lo, s_hi),
    );
    plot.raster = Some(efficiency_raster(spec));
    plot.colorbar = Some(ColorBar {
        label: "efficiency E = S/N".into(),
        lo: 0.0,
        hi: 1.0,
        color: colormap,
    });
    add_contours(&mut plot, spec);
    add_points(&mut plot, points);
    plot.labels.extend(
        point_labels(points)
            .into_iter()
            .map(|(x, y, text)| Label { x, y, text }),
    );
    figure(&[plot], 900.0, 640.0)
}

/// The colour map: E sampled at every pixel centre (in log space) of a raster the viewer
/// interpolates.
fn efficiency_raster(spec: &SurfaceSpec) -> Raster {
    let (n_lo, n_hi) = spec.n_range;
    let (s_lo, s_hi) = spec.serial_range;
    let mut rgb = Vec::with_capacity(RASTER_W * RASTER_H * 3);
    for j in 0..RASTER_H {
        // Top row first: the largest 1−α.
        let s = log_space(s_lo, s_hi, 2 * (RASTER_H - j) - 1, 2 * RASTER_H);
        for i in 0..RASTER_W {
            let n = log_space(n_lo, n_hi, 2 * i + 1, 2 * RASTER_W);
            let t = efficiency(n, s);
            let (r, g, b) = crate::viridis::rgb((t.clamp(0.0, 1.0) * 255.0).round() as usize);
            rgb.extend([r, g, b]);
        }
    }
    Raster {
        x0: n_lo,
        x1: n_hi,
        y0: s_lo,
        y1: s_hi,
        width: RASTER_W as u32,
        height: RASTER_H as u32,
        rgb,
    }
}

/// The iso-efficiency contours asked for, dashed, each labelled at the middle of its visible part.
fn add_contours(plot: &mut Plot, spec: &SurfaceSpec) {
    // Okabe–Ito colours readable on the dark-to-yellow map and on the white legend.
    let contour_colors = ["#D55E00", "#000000", "#CC79A7"];
    for (i, &e) in spec.contours.iter().enumerate() {
        let pts = contour(spec, e);
        if pts.is_empty() {
            continue;
        }
        // Label the contour at the middle of its visible part.
        if let Some(&(n, s)) = pts.get(pts.len() / 2) {
            plot.labels.push(Label {
                x: n,
                y: s,
                text: format!("E = {:.0} %", e * 100.0),
            });
        }
        let color = contour_colors.get(i).copied().unwrap_or("#000000");
        plot.series.push(
            Series::new(format!("E = {:.0} %", e * 100.0), color, Style::DashedLine).points(pts),
        );
    }
}

/// The points, one series (colour) per group, in the order the groups first appear.
fn add_points(plot: &mut Plot, points: &[SurfacePoint]) {
    let mut groups: Vec<&str> = Vec::new();
    for p in points {
        if !groups.contains(&p.group.as_str()) {
            groups.push(&p.group);
        }
    }
    for (gi, g) in groups.iter().enumerate() {
        let color = POINT_COLORS[gi % POINT_COLORS.len()];
        let pts = points
            .iter()
            .filter(|p| p.group == *g)
            .map(|p| (p.n, p.serial));
        plot.series
            .push(Series::new(*g, color, Style::Points).points(pts));
    }
}

/// The points' labels, one per position.
fn point_labels(points: &[SurfacePoint]) -> Vec<(f64, f64, String)> {
    // One label per position: the same machine on several lists sits on the same point
    // ("Titan 2013-06" and "Titan 2018-11" become "Titan 2013-06, 2018-11").
    let mut labels: Vec<(f64, f64, String)> = Vec::new();
    for p in points {
        let Some(t) = &p.label else { continue };
        match labels
            .iter_mut()
            .find(|(n, s, _)| *n == p.n && *s == p.serial)
        {
            Some((_, _, text)) => {
                let (old_name, new_name) = (text.rsplit_once(' '), t.rsplit_once(' '));
                match (old_name, new_name) {
                    (Some((a, _)), Some((b, when))) if a == b || text.starts_with(b) => {
                        text.push_str(", ");
                        text.push_str(when);
                    }
                    _ => {
                        text.push_str("; ");
                        text.push_str(t);
                    }
                }
            }
            None => labels.push((p.n, p.serial, t.clone())),
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::overlay as points_from_json;
    use serde_json::json;

    #[test]
    fn contour_points_have_their_efficiency_and_stay_in_range() {
        let spec = SurfaceSpec::default();
        for e in [0.9, 0.5, 0.1] {
            let c = contour(&spec, e);
            assert_eq!(c.len(), CONTOUR_SAMPLES);
            for (n, s) in c {
                assert!((efficiency(n, s) - e).abs() < 1e-9);
                assert!(n >= spec.n_range.0 && n <= spec.n_range.1 * (1.0 + 1e-12));
                assert!(
                    s >= spec.serial_range.0 * (1.0 - 1e-9)
                        && s <= spec.serial_range.1 * (1.0 + 1e-9)
                );
            }
        }
    }

    #[test]
    fn point_on_the_half_contour_has_efficiency_one_half() {
        // Closed form: on E = 50 %, 1−α = 1/(N-1); at N = 1e4 that is 1/9999, and
        // E = 1/(1e4/9999 + 1 - 1/9999) = 1/(2·9999/9999) = 0.5.
        let s = iso_efficiency_serial(1e4, 0.5);
        assert!((s - 1.0 / 9999.0).abs() < 1e-18);
        assert!((efficiency(1e4, s) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn svg_has_three_contours_labels_and_points() {
        let pts = [SurfacePoint {
            n: 387_872.0,
            serial: 7.19e-7,
            group: "TOP500 (N = cores)".into(),
            label: Some("Piz Daint 2018-11".into()),
        }];
        let (out, _) = crate::svg::split_data(&svg(&SurfaceSpec::default(), &pts));
        assert!(out.starts_with("<svg"));
        // Three contours are the only polylines; one marker outside the legend.
        assert_eq!(out.matches("<polyline").count(), 3);
        assert_eq!(
            out.matches(r#"stroke="white" stroke-width="0.8""#).count(),
            1
        );
        for t in ["E = 90 %", "E = 50 %", "E = 10 %", "Piz Daint 2018-11"] {
            assert!(out.contains(t), "{t}");
        }
        // N axis decades labelled 10^k from 10^0 to 10^8, 1−α from 10^−9, with superscripts.
        for t in [">0</tspan>", ">8</tspan>", ">−9</tspan>", ">10<tspan"] {
            assert!(out.contains(t), "{t}");
        }
    }

    #[test]
    fn reads_top500_and_fit_results_loosely() {
        let t = json!({"schema": "amdahl.top500/1", "n_counts": "accelerators", "systems": [
            {"list": "2018-11", "name": "Piz Daint", "n": 5704, "serial_fraction_hpl": 4.89e-5, "extra": 1},
            {"list": "2018-11", "name": "TaihuLight", "n": null, "serial_fraction_hpl": null}]});
        let o = points_from_json("t.json", &t).unwrap();
        // TaihuLight has no N: counted as skipped, so the user is warned that a system is not
        // drawn rather than losing it without a word.
        assert_eq!(o.skipped, 1);
        let p = o.points;
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].group, "TOP500 (N = accelerators)");
        assert_eq!(p[0].label.as_deref(), Some("Piz Daint 2018-11"));
        let f = json!({"schema": "amdahl.fit/1", "series": [{"label": "gemm", "serial_fraction": 0.01,
            "points": [{"n": 1, "speedup": 1, "efficiency": 1, "alpha_eff": null, "karp_flatt": null},
                       {"n": 8, "speedup": 7, "efficiency": 0.875, "alpha_eff": 0.98, "karp_flatt": 0.0204},
                       {"n": 16, "speedup": 12, "efficiency": 0.75, "alpha_eff": 0.97, "karp_flatt": 0.0222}]}]});
        let o = points_from_json("f.json", &f).unwrap();
        assert_eq!(o.skipped, 0, "the baseline point is not a loss");
        let p = o.points;
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].label.as_deref(), Some("gemm"));
        assert_eq!(p[0].label, None);
        let sc = json!({"schema": "amdahl.scale/1", "fit": f});
        assert_eq!(points_from_json("s.json", &sc).unwrap().points, p);
        let sc = json!({"schema": "amdahl.scale/1", "fit": null});
        assert!(points_from_json("s.json", &sc).is_err());
        let e = points_from_json("x.json", &json!({"schema": "amdahl.plan/1"})).unwrap_err();
        assert!(e.to_string().contains("\"amdahl.plan/1\""), "{e}");
        let e = points_from_json("x.json", &json!({"schema": "amdahl.fit/1"})).unwrap_err();
        assert!(e.to_string().contains("`series`"), "{e}");
    }

    #[test]
    fn surface_from_unknown_schema_version_is_refused_like_merge() {
        // A version this build does not know is refused, never read as if it were /1: its
        // fields may mean something else.
        for schema in [
            "amdahl.top500/2",
            "amdahl.fit/9",
            "amdahl.scale/1.1",
            "amdahl.top500/",
        ] {
            let v = json!({"schema": schema, "systems": [], "series": []});
            let e = points_from_json("x.json", &v).unwrap_err();
            assert!(e.to_string().contains(schema), "{e}");
        }
    }

    #[test]
    fn surface_counts_invalid_points_instead_of_dropping_them() {
        let t = json!({"schema": "amdahl.top500/1", "systems": [
            {"n": 10, "serial_fraction_hpl": 0.01},
            {"n": 10, "serial_fraction_hpl": 1.5},
            {"n": "ten", "serial_fraction_hpl": 0.01},
            {"n": 0.5, "serial_fraction_hpl": 0.01},
            {"serial_fraction_hpl": 0.01}]});
        let o = points_from_json("t.json", &t).unwrap();
        assert_eq!((o.points.len(), o.skipped), (1, 4));
        let f = json!({"schema": "amdahl.fit/1", "series": [{"points": [
            {"n": 1, "karp_flatt": null}, {"n": 4, "karp_flatt": -0.1}, {"n": 8, "karp_flatt": 0.02}]}]});
        let o = points_from_json("f.json", &f).unwrap();
        assert_eq!((o.points.len(), o.skipped), (1, 1));
    }

    #[test]
    fn same_point_on_several_lists_gets_one_label() {
        let p = |list: &str| SurfacePoint {
            n: 560_640.0,
            serial: 9.66e-7,
            group: "g".into(),
            label: Some(format!("Titan {list}")),
        };
        let out = svg(&SurfaceSpec::default(), &[p("2013-06"), p("2018-11")]);
        let (out, _) = crate::svg::split_data(&out);
        // Placed as one label, or listed once in the caption when no spot near it is free.
        assert_eq!(out.matches("Titan 2013-06, 2018-11").count(), 1, "{out}");
    }

    #[test]
    fn ranges_are_validated() {
        let mut s = SurfaceSpec::default();
        assert!(validate(&s).is_ok());
        s.n_range = (10.0, 1.0);
        assert!(validate(&s).is_err());
        s = SurfaceSpec {
            serial_range: (0.0, 0.1),
            ..SurfaceSpec::default()
        };
        assert!(validate(&s).is_err());
    }
}
