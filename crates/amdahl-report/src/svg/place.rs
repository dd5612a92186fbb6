//! Boxes on the page and where a point label can go without covering anything.

/// A box on the page: (left, top, right, bottom).
pub type Rect = (f64, f64, f64, f64);

/// Do the boxes share any area (boxes that only touch do not)?
pub(super) fn overlap(a: &Rect, b: &Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Is `a` wholly within `frame`?
pub(super) fn inside(a: &Rect, frame: &Rect) -> bool {
    a.0 >= frame.0 && a.2 <= frame.2 && a.1 >= frame.1 && a.3 <= frame.3
}

/// Does the segment p–q cross the rectangle r (Liang–Barsky clipping)?
pub(super) fn segment_hits(p: (f64, f64), q: (f64, f64), r: &Rect) -> bool {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (pk, qk) in [
        (-dx, p.0 - r.0),
        (dx, r.2 - p.0),
        (-dy, p.1 - r.1),
        (dy, r.3 - p.1),
    ] {
        if pk.abs() < 1e-12 {
            if qk < 0.0 {
                return false;
            }
        } else {
            let t = qk / pk;
            if pk < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}

/// Everything a point label must not cover.
pub struct Obstacles<'a> {
    pub markers: &'a [(f64, f64, f64)],
    pub lines: &'a [Vec<(f64, f64)>],
    pub boxes: &'a [Rect],
}

impl Obstacles<'_> {
    fn hit(&self, b: &Rect) -> bool {
        self.boxes.iter().any(|p| overlap(b, p))
            || self
                .markers
                .iter()
                .any(|&(x, y, r)| overlap(b, &(x - r, y - r, x + r, y + r)))
            || self
                .lines
                .iter()
                .any(|l| l.windows(2).any(|w| segment_hits(w[0], w[1], b)))
    }
}

/// Place a label of size (w, h) near the point (x, y): the first of sixteen spots around it
/// (right, left, above, below, then diagonals, then further out) inside `frame` that covers no
/// obstacle and no label placed before. `None`: no free spot (the caller drops the label).
/// Returns the text's box.
pub fn place_label(
    (x, y): (f64, f64),
    (w, h): (f64, f64),
    gap: f64,
    frame: &Rect,
    obstacles: &Obstacles,
    placed: &[Rect],
) -> Option<Rect> {
    for d in [gap, gap + h] {
        let spots = [
            (x + d, y - h / 2.0),
            (x - d - w, y - h / 2.0),
            (x - w / 2.0, y - d - h),
            (x - w / 2.0, y + d),
            (x + d * 0.7, y - d * 0.7 - h),
            (x - d * 0.7 - w, y - d * 0.7 - h),
            (x + d * 0.7, y + d * 0.7),
            (x - d * 0.7 - w, y + d * 0.7),
        ];
        for (l, t) in spots {
            let b = (l, t, l + w, t + h);
            if inside(&b, frame) && !obstacles.hit(&b) && !placed.iter().any(|p| overlap(&b, p)) {
                return Some(b);
            }
        }
    }
    None
}
