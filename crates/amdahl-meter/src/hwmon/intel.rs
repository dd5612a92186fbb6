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
//! `ZE_AFFINITY_MASK` (Level Zero specification, "Affinity Mask"; Intel's oneAPI GPU
//! optimization guide, "Exposing the Device Hierarchy") limits a job to some GPUs, or some tiles
//! of them: a comma-separated list of device indices `N` (the whole device) and sub-device
//! indices `N.M` (tile M of device N). A card the mask leaves out is listed, hidden, not
//! measured; a card of which it names only some tiles is measured by those tiles' counters
//! where i915 exposes them, else by the whole card's, saying that the other tiles are in it.
//! Devices are numbered in PCI order per driver, as the cards are here.
//!
//! Both drivers extend the 32-bit hardware register (which wraps) to a 64-bit sum on every read
//! (`accum_energy += reg - reg_val_prev`, or `UINT_MAX - prev + reg` past the wrap), so the file
//! itself does not wrap; a decrease is a reset (driver reload) and is counted as one.

use super::{info, read_value, Chip, Domain, Sensor, Use};
use crate::rapl::FileReader;
use crate::source::DeviceKind;
use std::collections::BTreeSet;

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

/// Which Intel GPUs and tiles `ZE_AFFINITY_MASK` leaves to the job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZeMask {
    /// The mask as given; None: unset (every device).
    raw: Option<String>,
    /// Whole devices named (`N`).
    devices: BTreeSet<usize>,
    /// Tiles named (`N.M`).
    tiles: BTreeSet<(usize, u32)>,
}

/// What the mask leaves of one card.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CardMask {
    Whole,
    Tiles(Vec<u32>),
    Hidden,
}

impl ZeMask {
    /// Every device (the variable unset).
    pub fn all() -> Self {
        Self::default()
    }

    /// From the variable's value; unset or blank: every device. Items that are neither `N` nor
    /// `N.M` name nothing (Level Zero ignores them too).
    pub fn parse(value: Option<&str>) -> Self {
        let Some(raw) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Self::all();
        };
        let mut m = ZeMask {
            raw: Some(raw.to_string()),
            ..Self::default()
        };
        for item in raw.split(',').map(str::trim) {
            match item.split_once('.') {
                None => {
                    if let Ok(n) = item.parse() {
                        m.devices.insert(n);
                    }
                }
                Some((n, t)) => {
                    if let (Ok(n), Ok(t)) = (n.parse(), t.parse()) {
                        m.tiles.insert((n, t));
                    }
                }
            }
        }
        m
    }

    fn card(&self, k: usize) -> CardMask {
        if self.raw.is_none() || self.devices.contains(&k) {
            return CardMask::Whole;
        }
        let tiles: Vec<u32> = self
            .tiles
            .iter()
            .filter(|(n, _)| *n == k)
            .map(|&(_, t)| t)
            .collect();
        if tiles.is_empty() {
            CardMask::Hidden
        } else {
            CardMask::Tiles(tiles)
        }
    }

    fn describe(&self) -> String {
        format!("ZE_AFFINITY_MASK={}", self.raw.as_deref().unwrap_or(""))
    }
}

/// The sensors of every i915/xe chip: cards numbered in PCI order per driver, tiles after their
/// card; what `mask` leaves out is hidden.
pub fn sensors(chips: &[Chip], reader: &FileReader, mask: &ZeMask) -> Vec<Sensor> {
    let mut out = Vec::new();
    for driver in ["i915", "xe"] {
        let mut cards: Vec<&Chip> = chips.iter().filter(|c| c.name == driver).collect();
        cards.sort_by_key(|c| card_key(c));
        for (k, card) in cards.iter().enumerate() {
            let first = out.len();
            out.extend(card_sensors(card, reader, driver, k));
            let card_ok = out[first..].iter().any(|s: &Sensor| s.usable());
            let tiles_from = out.len();
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
            let (cards_s, tiles_s) = out[first..].split_at_mut(tiles_from - first);
            apply_mask(&mask.card(k), mask, driver, k, cards_s, tiles_s);
        }
    }
    out
}

/// Hide what the mask leaves out of card `k`: the whole card, or (tiles named) the card and its
/// other tiles where the named tiles have readable counters of their own.
fn apply_mask(
    m: &CardMask,
    mask: &ZeMask,
    driver: &str,
    k: usize,
    card: &mut [Sensor],
    tiles: &mut [Sensor],
) {
    let hide = |s: &mut Sensor, why: String| s.use_ = Use::Hidden(why);
    match m {
        CardMask::Whole => {}
        CardMask::Hidden => {
            for s in card.iter_mut().chain(tiles.iter_mut()) {
                hide(
                    s,
                    format!("hidden by {}: not one of this job's GPUs", mask.describe()),
                );
            }
        }
        CardMask::Tiles(named) => {
            let is_named = |s: &Sensor| {
                named
                    .iter()
                    .any(|t| s.info.id == format!("{driver}:{k}:gt{t}"))
            };
            let own = tiles
                .iter()
                .filter(|s| is_named(s) && s.status.is_ok())
                .count();
            if own == named.len() {
                for s in card.iter_mut() {
                    hide(
                        s,
                        format!(
                            "{} names tile(s) {} of this card only: those tiles' own counters \
                             are read instead",
                            mask.describe(),
                            list(named)
                        ),
                    );
                }
                for s in tiles.iter_mut() {
                    if is_named(s) {
                        s.use_ = Use::Metered;
                    } else {
                        hide(
                            s,
                            format!("hidden by {}: not one of this job's tiles", mask.describe()),
                        );
                    }
                }
            } else {
                // No counter per named tile: the card's reading, which holds the other tiles too.
                for s in card.iter_mut().filter(|s| s.use_ == Use::Metered) {
                    s.covers = format!(
                        "{}; {} names tile(s) {} only, so the other tiles' energy is in this \
                         reading (no per-tile counter to read instead)",
                        s.covers,
                        mask.describe(),
                        list(named)
                    );
                }
            }
        }
    }
}

fn list(tiles: &[u32]) -> String {
    tiles
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
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
