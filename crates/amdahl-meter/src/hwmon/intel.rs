//! Intel GPUs through the `i915` and `xe` drivers' hwmon chips.
//!
//! i915 (drivers/gpu/drm/i915/i915_hwmon.c; Documentation/ABI/testing/sysfs-driver-intel-i915-hwmon):
//! a chip named `i915` for the card with `energy1_input` (µJ, the package energy status of all
//! tiles) and, on multi-tile parts such as the Data Center GPU Max 1550, one chip per tile named
//! `i915_gt0`, `i915_gt1` with its own `energy1_input`. The tiles are inside the card's reading:
//! listed, added only where the card's own counter is unreadable.
//!
//! xe (drivers/gpu/drm/xe/xe_hwmon.c; sysfs-driver-intel-xe-hwmon): a chip named `xe` whose
//! energy channels carry labels: `card` (the whole card) and `pkg` (the GPU package, inside the
//! card). The card is used where present, else the package.
//!
//! i915 registers hwmon for discrete GPUs only (`/* hwmon is available only for dGfx */` at the
//! top of `i915_hwmon_register`), so an integrated GPU, whose power is inside the RAPL package,
//! never shows up here to be counted twice; xe is taken to do the same (not checked here).
//!
//! Both drivers extend the 32-bit hardware register (which wraps) to a 64-bit sum on every read
//! (`accum_energy += reg - reg_val_prev`, or `UINT_MAX - prev + reg` past the wrap), so the file
//! itself does not wrap; a decrease is a reset (driver reload) and is counted as one.

use super::{info, read_value, Chip, Domain, Sensor, Use};
use crate::rapl::FileReader;
use crate::source::DeviceKind;

/// Intel's PCI vendor id (hwdata pci.ids `8086  Intel Corporation`).
pub const VENDOR: u16 = 0x8086;

/// Data Center GPU names, from hwdata pci.ids (vendor 8086): `0bd5 Ponte Vecchio XT (2 Tile)
/// [Data Center GPU Max 1550]`, `0bda Ponte Vecchio XT (1 Tile) [Data Center GPU Max 1100]`.
const NAMES: &[(u16, &str)] = &[
    (0x0bd5, "Intel Data Center GPU Max 1550"),
    (0x0bda, "Intel Data Center GPU Max 1100"),
];

fn name(chip: &Chip) -> String {
    NAMES
        .iter()
        .find(|(id, _)| Some(*id) == chip.pci.device)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| match chip.pci.device {
            Some(d) => format!("Intel GPU (PCI 8086:{d:04x})"),
            None => "Intel GPU".into(),
        })
}

/// The tile number of an `i915_gtN` chip.
fn tile(name: &str) -> Option<u32> {
    name.strip_prefix("i915_gt")?.parse().ok()
}

fn card_key(chip: &Chip) -> String {
    if chip.pci.address.is_empty() {
        chip.hwmon.clone()
    } else {
        chip.pci.address.clone()
    }
}

/// The sensors of every i915/xe chip: cards numbered in PCI order per driver, tiles after their
/// card.
pub fn sensors(chips: &[Chip], reader: &FileReader) -> Vec<Sensor> {
    let mut out = Vec::new();
    for driver in ["i915", "xe"] {
        let mut cards: Vec<&Chip> = chips.iter().filter(|c| c.name == driver).collect();
        cards.sort_by_key(|c| card_key(c));
        for (k, card) in cards.iter().enumerate() {
            let first = out.len();
            out.extend(card_sensors(card, reader, driver, k));
            let card_ok = out[first..].iter().any(|s: &Sensor| s.usable());
            if driver == "i915" {
                let mut tiles: Vec<&Chip> = chips
                    .iter()
                    .filter(|c| tile(&c.name).is_some() && card_key(c) == card_key(card))
                    .collect();
                tiles.sort_by_key(|c| tile(&c.name));
                for t in tiles {
                    out.extend(tile_sensor(t, reader, k, card_ok));
                }
            }
        }
    }
    out
}

fn card_sensors(card: &Chip, reader: &FileReader, driver: &str, k: usize) -> Vec<Sensor> {
    let chans: Vec<(u32, String)> = card
        .channels("energy")
        .into_iter()
        .map(|n| {
            let label = card
                .text(reader, &format!("energy{n}_label"))
                .unwrap_or_else(|| {
                    if n == 1 {
                        "card".into()
                    } else {
                        format!("energy{n}")
                    }
                });
            (n, label)
        })
        .collect();
    let has_card = chans.iter().any(|(_, l)| l == "card");
    let mut out = Vec::new();
    for (n, label) in &chans {
        let Some((path, reading)) = card.best(*n) else {
            continue;
        };
        let status = read_value(reader, &path);
        let is_card = label == "card";
        let id = if is_card {
            format!("{driver}:{k}")
        } else {
            format!("{driver}:{k}:{label}")
        };
        let use_ = if !is_card && has_card {
            Use::Inside(format!(
                "`{label}` energy, inside the card's reading ({driver}:{k}); never added to it"
            ))
        } else {
            Use::Metered
        };
        out.push(Sensor {
            info: info(id, DeviceKind::Gpu, name(card), reading),
            driver: driver.into(),
            pci: card.pci.address.clone(),
            covers: if is_card {
                "the whole card (every tile, its memory)".into()
            } else {
                format!("the `{label}` channel of the card")
            },
            path,
            reading,
            domain: super::Domain::Gpu,
            package: format!("intel-card:{}", card_key(card)),
            covers_cpu_package: false,
            covers_host: false,
            use_,
            status,
        });
    }
    out
}

fn tile_sensor(t: &Chip, reader: &FileReader, k: usize, card_ok: bool) -> Option<Sensor> {
    let n = tile(&t.name)?;
    let (path, reading) = t.best(1)?;
    let status = read_value(reader, &path);
    let use_ = if card_ok {
        Use::Inside(format!(
            "tile {n}, inside the card's energy1_input (i915:{k}); never added to it"
        ))
    } else {
        Use::Metered
    };
    Some(Sensor {
        info: info(
            format!("i915:{k}:gt{n}"),
            DeviceKind::Gpu,
            format!("{} tile {n}", name(t)),
            reading,
        ),
        driver: t.name.clone(),
        pci: t.pci.address.clone(),
        covers: format!("tile {n} of the card"),
        path,
        reading,
        domain: Domain::Gpu,
        package: format!("intel-tile:{}:{n}", card_key(t)),
        covers_cpu_package: false,
        covers_host: false,
        use_,
        status,
    })
}
