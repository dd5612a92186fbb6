//! The figure sizes of `--size` and the size every figure is drawn at.

/// The figure sizes of `--size`: the width a figure is drawn for, in points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// One column of a two-column paper: 85 mm (241 pt); panels stacked.
    Column,
    /// The full text width of a paper: 174 mm (493 pt); two panels per row.
    Page,
    /// A 16:9 slide: 254 mm (720 pt) wide, larger type; up to three panels per row.
    Slide,
}

/// Font sizes and geometry of one [`Size`], in points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeSpec {
    pub width: f64,
    /// Panels side by side at most.
    pub per_row: usize,
    pub tick_font: f64,
    pub axis_font: f64,
    pub title_font: f64,
    pub label_font: f64,
    pub legend_font: f64,
    pub marker_r: f64,
    pub line_w: f64,
}

impl Size {
    pub fn spec(self) -> SizeSpec {
        match self {
            // Every text at least 7 pt when printed at 85 mm, so that a figure printed one column
            // wide stays readable.
            Size::Column => SizeSpec {
                width: 241.0,
                per_row: 1,
                tick_font: 7.0,
                axis_font: 7.5,
                title_font: 8.0,
                label_font: 7.0,
                legend_font: 7.0,
                marker_r: 2.4,
                line_w: 1.1,
            },
            Size::Page => SizeSpec {
                width: 493.0,
                per_row: 2,
                tick_font: 7.5,
                axis_font: 8.0,
                title_font: 9.0,
                label_font: 7.0,
                legend_font: 7.5,
                marker_r: 2.6,
                line_w: 1.2,
            },
            Size::Slide => SizeSpec {
                width: 720.0,
                per_row: 3,
                tick_font: 12.0,
                axis_font: 13.0,
                title_font: 14.0,
                label_font: 11.0,
                legend_font: 11.0,
                marker_r: 4.0,
                line_w: 2.0,
            },
        }
    }

    /// Parse `column`, `page` or `slide`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "column" => Some(Size::Column),
            "page" => Some(Size::Page),
            "slide" => Some(Size::Slide),
            _ => None,
        }
    }
}

thread_local! {
    /// The size figures rendered on this thread are drawn at.
    static SIZE: std::cell::Cell<Size> = const { std::cell::Cell::new(Size::Page) };
}

/// Run `f` with every figure it renders on this thread drawn at `size` (the binary gives the
/// command's `--size`; `page` without it); the size before is restored afterwards, even if `f`
/// panics. Per thread, so two commands at once keep their own.
pub fn with_size<R>(size: Size, f: impl FnOnce() -> R) -> R {
    struct Restore(Size);
    impl Drop for Restore {
        fn drop(&mut self) {
            SIZE.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SIZE.with(|s| s.replace(size)));
    f()
}

/// The size in force on this thread (see [`with_size`]).
pub fn size() -> Size {
    SIZE.with(|s| s.get())
}
