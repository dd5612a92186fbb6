//! Panels laid out in rows into one SVG document, with the plotted data carried along.

use super::text::{c, esc, wrap};
use super::{size, Drawn, Plot, Size, SizeSpec, Style};
use crate::font;
use std::fmt::Write as _;

/// The panels' layout at the current [`size`]: panel width, height and columns per row.
/// `panel_w`/`panel_h` give the aspect ratio the renderer asked for.
fn grid(n: usize, panel_w: f64, panel_h: f64, z: &SizeSpec) -> (f64, f64, usize) {
    let cols = n.clamp(1, z.per_row);
    let w = z.width / cols as f64;
    let aspect = if panel_w > 0.0 && panel_h > 0.0 {
        (panel_h / panel_w).clamp(0.5, 1.0)
    } else {
        0.72
    };
    // Narrow panels get relatively taller, so their plot area keeps a usable height.
    let h = (w * aspect)
        .max(z.width * 0.42 / cols as f64 + 60.0)
        .min(w * 1.05);
    (w, h, cols)
}

/// A rendered figure and the layout of each panel.
#[derive(Debug, Clone)]
pub struct Figure {
    pub svg: String,
    pub panels: Vec<Drawn>,
    /// Labels left out of every panel (listed in the caption under the figure).
    pub caption: Option<String>,
}

/// Render panels in rows at the current [`size`] into one SVG document. `panel_w` × `panel_h`
/// is the aspect ratio each panel is drawn at (points; the width is the size's).
pub fn figure(panels: &[Plot], panel_w: f64, panel_h: f64) -> String {
    let f = figure_at(panels, panel_w, panel_h, size());
    #[cfg(test)]
    super::testing::LAST.with(|l| *l.borrow_mut() = Some(f.clone()));
    f.svg
}

/// [`figure`] at a given size, with the layout of what was drawn.
pub fn figure_at(panels: &[Plot], panel_w: f64, panel_h: f64, size: Size) -> Figure {
    let z = size.spec();
    let (w, h, cols) = grid(panels.len(), panel_w, panel_h, &z);
    let rows = panels.len().div_ceil(cols).max(1);
    let mut body = String::new();
    let mut drawn = Vec::new();
    for (i, p) in panels.iter().enumerate() {
        let (r, col) = (i / cols, i % cols);
        drawn.push(p.render_into(&mut body, col as f64 * w, r as f64 * h, w, h, &z));
    }
    let dropped: Vec<&str> = drawn
        .iter()
        .flat_map(|d| d.dropped.iter().map(String::as_str))
        .collect();
    let mut height = rows as f64 * h;
    let caption = (!dropped.is_empty()).then(|| {
        format!(
            "Not labelled (no free space near the point): {}.",
            dropped.join("; ")
        )
    });
    if let Some(text) = &caption {
        let f = z.label_font;
        for line in wrap(text, z.width - 2.0 * f, f) {
            height += f * 1.3;
            let _ = writeln!(
                body,
                r##"<text x="{}" y="{}" font-size="{}" fill="#333" class="caption">{}</text>"##,
                c(f),
                c(height - f * 0.3),
                c(f),
                esc(&line)
            );
        }
        height += f * 0.5;
    }
    let width = w * cols as f64;
    let mut svg = String::with_capacity(body.len() + 400);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{0}pt" height="{1}pt" viewBox="0 0 {0} {1}" font-family="{2}">"#,
        c(width),
        c(height),
        font::FONT_STACK
    );
    svg.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    // The plotted data travel inside the SVG until the writer splits them off ([`split_data`]).
    let _ = writeln!(
        svg,
        "<metadata id=\"amdahl-data\"><![CDATA[{}]]></metadata>",
        data_csv(panels).replace("]]>", "]]]]><![CDATA[>")
    );
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    Figure {
        svg,
        panels: drawn,
        caption,
    }
}

/// The data of a figure's panels as CSV (panel, series, x, y; labels with their text) so a
/// reader can re-plot it: what `--svg FILE.svg` writes beside it as `FILE.csv`.
pub fn data_csv(panels: &[Plot]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["panel", "series", "kind", "x", "y", "x_label", "y_label"]);
    for p in panels {
        for s in &p.series {
            let kind = match s.style {
                Style::Points => "points",
                Style::Line | Style::LinePoints => "line",
                Style::DashedLine => "dashed line",
            };
            for &(x, y) in &s.points {
                let _ = w.write_record([
                    p.title.as_str(),
                    s.label.as_str(),
                    kind,
                    &format!("{x}"),
                    &format!("{y}"),
                    p.x.label.as_str(),
                    p.y.label.as_str(),
                ]);
            }
        }
        for l in &p.labels {
            let _ = w.write_record([
                p.title.as_str(),
                l.text.as_str(),
                "label",
                &format!("{}", l.x),
                &format!("{}", l.y),
                p.x.label.as_str(),
                p.y.label.as_str(),
            ]);
        }
    }
    w.into_inner()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Split the data CSV a figure carries (see [`figure`]) off its SVG: `(svg without it, csv)`.
/// An SVG without data comes back unchanged, with no CSV.
pub fn split_data(svg: &str) -> (String, Option<String>) {
    const OPEN: &str = "<metadata id=\"amdahl-data\"><![CDATA[";
    const CLOSE: &str = "]]></metadata>\n";
    let Some(start) = svg.find(OPEN) else {
        return (svg.to_string(), None);
    };
    let Some(len) = svg[start..].find(CLOSE) else {
        return (svg.to_string(), None);
    };
    let csv = svg[start + OPEN.len()..start + len].replace("]]]]><![CDATA[>", "]]>");
    let rest = format!("{}{}", &svg[..start], &svg[start + len + CLOSE.len()..]);
    (rest, Some(csv))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::place::inside;
    use crate::svg::testing::check_layout;
    use crate::svg::{Axis, Label, Scale, Series, PALETTE};
    use proptest::prelude::*;

    fn dense_plot(points: &[(f64, f64)]) -> Plot {
        let mut p = Plot::new(
            "dense",
            Axis::new(Scale::Log10, "N"),
            Axis::new(Scale::Linear, "E"),
        );
        p.series.push(
            Series::new("runs", PALETTE[0], Style::LinePoints).points(points.iter().copied()),
        );
        p.labels
            .extend(points.iter().enumerate().map(|(i, &(x, y))| Label {
                x,
                y,
                text: format!("run {i}"),
            }));
        p
    }

    #[test]
    fn crowded_labels_are_dropped_and_listed_in_the_caption() {
        let pts: Vec<(f64, f64)> = (0..40)
            .map(|i| (1.0 + f64::from(i) * 0.05, 0.5 + f64::from(i % 3) * 0.01))
            .collect();
        let f = figure_at(&[dense_plot(&pts)], 400.0, 300.0, Size::Column);
        check_layout(&f);
        let d = &f.panels[0];
        assert!(!d.dropped.is_empty() && d.labels.len() + d.dropped.len() == 40);
        let caption = f.caption.clone().unwrap_or_default();
        for t in &d.dropped {
            assert!(caption.contains(t.as_str()), "{t} not in {caption}");
        }
        assert!(f.svg.contains("Not labelled"));
    }

    #[test]
    fn the_data_travel_with_the_figure_and_split_off() {
        let f = figure_at(
            &[dense_plot(&[(1.0, 0.5), (2.0, 0.7), (4.0, 0.9)])],
            400.0,
            300.0,
            Size::Page,
        );
        let (svg, csv) = split_data(&f.svg);
        let csv = csv.unwrap_or_default();
        assert!(!svg.contains("amdahl-data") && svg.starts_with("<svg"));
        assert_eq!(csv.lines().count(), 1 + 3 + 3, "{csv}");
        assert!(csv.contains("dense,runs,line,2,0.7,N,E"), "{csv}");
    }

    #[test]
    fn column_size_text_is_at_least_seven_points() {
        let z = Size::Column.spec();
        assert_eq!(z.width, 241.0); // 85 mm in points
        for f in [
            z.tick_font,
            z.axis_font,
            z.title_font,
            z.label_font,
            z.legend_font,
        ] {
            assert!(f >= 7.0);
        }
        let f = figure_at(
            &[dense_plot(&[(1.0, 0.5), (2.0, 0.7)])],
            400.0,
            300.0,
            Size::Column,
        );
        assert!(
            f.svg
                .starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="241pt""#),
            "{}",
            &f.svg[..120]
        );
        for size in f
            .svg
            .split("font-size=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
        {
            let pt: f64 = size.parse().unwrap_or(0.0);
            // Superscripts are 0.72 × a 7 pt tick label at the least.
            assert!(pt >= 5.0, "font-size {pt}");
        }
    }

    #[test]
    fn log_axis_drops_non_positive_points_and_escapes_text() {
        let mut p = Plot::new(
            "a<b",
            Axis::new(Scale::Log10, "N"),
            Axis::new(Scale::Linear, "E"),
        );
        p.series
            .push(Series::new("s", PALETTE[0], Style::Points).points([(0.0, 1.0), (10.0, 0.5)]));
        let svg = figure(&[p], 400.0, 300.0);
        assert!(svg.contains("a&lt;b"));
        // Data markers carry a white outline, the legend's marker does not.
        assert_eq!(
            svg.matches(r#"stroke="white" stroke-width="0.8""#).count(),
            1,
            "{svg}"
        );
    }

    /// `infer`'s latency panel (TPOT 14.4–78 ms on a log axis) was ticked from 20 ms: the
    /// lowest points could not be read off. Every axis that fits its data now has a tick at or
    /// below its lowest value.
    #[test]
    fn the_lowest_data_has_a_tick_at_or_below_it() {
        let tpot = [
            14.39, 14.42, 14.47, 14.59, 14.83, 15.39, 16.59, 20.02, 29.38, 47.87, 77.96,
        ];
        let rate = [
            138.1, 273.8, 538.1, 1040.0, 1950.0, 3448.0, 5585.0, 7833.0, 9361.0, 10395.0, 11021.0,
        ];
        let mut p = Plot::new(
            "latency vs throughput",
            Axis::new(Scale::Log10, "output tokens/s"),
            Axis::new(Scale::Log10, "time per output token (ms)"),
        );
        p.series.push(
            Series::new("batch 1 … max", PALETTE[0], Style::LinePoints)
                .points(rate.iter().copied().zip(tpot.iter().copied())),
        );
        let mut lin = p.clone();
        lin.y = Axis::new(Scale::Linear, "ms");
        for size in [Size::Column, Size::Page, Size::Slide] {
            for (plot, log) in [(&p, true), (&lin, false)] {
                let f = figure_at(&[plot.clone(), plot.clone()], 520.0, 380.0, size);
                check_layout(&f);
                let d = &f.panels[0];
                let at = |t: &crate::svg::Tick| if log { 10f64.powf(t.at) } else { t.at };
                let lowest = d.y_ticks.first().map(at).unwrap_or(f64::INFINITY);
                assert!(lowest <= 14.39 + 1e-9, "{size:?}: lowest y tick {lowest}");
                let lowest_x = d
                    .x_ticks
                    .first()
                    .map(|t| 10f64.powf(t.at))
                    .unwrap_or(f64::INFINITY);
                assert!(lowest_x <= 138.1, "{size:?}: lowest x tick {lowest_x}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the data, placed labels stay inside the frame, overlap no other label,
        /// marker or line, and every label is either placed or listed as dropped.
        #[test]
        fn label_placer_never_covers_data_or_labels(
            pts in proptest::collection::vec((1.0f64..1000.0, 0.0f64..1.0), 1..60),
            size in 0usize..3,
        ) {
            let size = [Size::Column, Size::Page, Size::Slide][size];
            let plot = dense_plot(&pts);
            let f = figure_at(&[plot.clone(), plot], 400.0, 300.0, size);
            check_layout(&f);
            for d in &f.panels {
                prop_assert_eq!(d.labels.len() + d.dropped.len(), pts.len());
                for (_, b) in &d.labels {
                    prop_assert!(inside(b, &d.frame));
                }
            }
        }
    }
}
