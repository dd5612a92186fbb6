//! The viridis colour map, exactly: matplotlib's 256 colours (Stéfan van der Walt and Nathaniel
//! Smith, 2015, CC0), as 8-bit sRGB in the order of matplotlib's `_viridis_data` rounded to the
//! nearest integer (the same table d3-scale-chromatic publishes as `interpolateViridis`).

/// 256 colours, `#rrggbb` without the `#`, concatenated (6 hex digits each).
const TABLE: [&str; 16] = [
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769",
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a",
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85",
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b",
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d",
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e",
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e",
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d",
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88",
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81",
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74",
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863",
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d",
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32",
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a",
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725",
];

/// The `i`-th of the 256 colours (clamped), as `(r, g, b)`.
pub fn rgb(i: usize) -> (u8, u8, u8) {
    let i = i.min(255);
    let row = TABLE[i / 16];
    let at = (i % 16) * 6;
    let byte = |k: usize| {
        row.get(at + k..at + k + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    };
    (byte(0), byte(2), byte(4))
}

/// The colour for `t` in [0, 1] (clamped; NaN maps to 0): the table entry `round(t × 255)`,
/// as matplotlib picks it for a 256-colour map.
pub fn color(t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (r, g, b) = rgb((t * 255.0).round() as usize);
    format!("#{r:02x}{g:02x}{b:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_matplotlib_at_known_entries() {
        // matplotlib _viridis_data: [0] (0.267004, 0.004874, 0.329415), [128] (0.127568,
        // 0.566949, 0.550556), [255] (0.993248, 0.906157, 0.143936); × 255, rounded.
        assert_eq!(rgb(0), (68, 1, 84));
        assert_eq!(rgb(128), (33, 145, 140));
        assert_eq!(rgb(255), (253, 231, 37));
        assert_eq!(color(0.0), "#440154");
        assert_eq!(color(1.0), "#fde725");
        assert_eq!(color(f64::NAN), "#440154");
        for row in TABLE {
            assert_eq!(row.len(), 96);
        }
    }
}
