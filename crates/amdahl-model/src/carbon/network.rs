//! Where to run: moving a job to a cleaner grid means shipping its data there. The transfer's
//! energy is data × network intensity (kWh/GB); its emissions are charged to the *origin's* grid
//! (the chosen one), where the data and its first network hops are. Moving pays while
//!
//!   E_facility · g_remote + G · k · g_origin < E_facility · g_origin,
//!
//! i.e. up to the break-even volume G* = E_facility · (g_origin − g_remote) / (k · g_origin);
//! a site whose grid is not cleaner never pays. Sources and caveats: docs/methodology.md.

use super::{positive, CarbonError};
use crate::units::{GramsPerKwh, Joules};
use serde::Serialize;

/// Aslan et al. 2018 (J. Industrial Ecology 22(4):785-798, doi:10.1111/jiec.12630): 0.06 kWh/GB
/// for fixed-line core and access networks in 2015 ...
pub const ASLAN_2015_KWH_PER_GB: f64 = 0.06;
/// ... the year of that figure ...
pub const ASLAN_YEAR: u16 = 2015;
/// ... and its trend: the intensity halved about every 2 years from 2000 to 2015.
pub const ASLAN_HALVING_YEARS: f64 = 2.0;
/// The year the default extrapolates Aslan's trend to (an estimate: the trend was observed only
/// to 2015, and later authors dispute that network energy scales with traffic at all).
pub const DEFAULT_YEAR: u16 = 2025;

/// A network's electricity per gigabyte carried, with where the figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NetworkIntensity {
    pub kwh_per_gb: f64,
    pub source: String,
    /// True for an extrapolated literature figure, false for one the user gave.
    pub estimate: bool,
}

impl NetworkIntensity {
    /// Aslan et al.'s 2015 figure halved every [`ASLAN_HALVING_YEARS`] up to `year`
    /// (0.06 × 2^−(year−2015)/2; 0.001875 kWh/GB for 2025).
    pub fn aslan(year: u16) -> Self {
        let years = f64::from(year) - f64::from(ASLAN_YEAR);
        let kwh_per_gb = ASLAN_2015_KWH_PER_GB * 0.5f64.powf(years / ASLAN_HALVING_YEARS);
        Self {
            kwh_per_gb,
            source: format!(
                "estimate: Aslan et al. 2018 (0.06 kWh/GB in {ASLAN_YEAR}, halving every \
                 {ASLAN_HALVING_YEARS} years) extrapolated to {year}"
            ),
            estimate: true,
        }
    }

    /// The default: [`Self::aslan`] at [`DEFAULT_YEAR`].
    pub fn default_estimate() -> Self {
        Self::aslan(DEFAULT_YEAR)
    }

    /// A figure the user gave (`--network-kwh-per-gb`).
    pub fn given(kwh_per_gb: f64) -> Result<Self, CarbonError> {
        positive("network energy intensity (kWh/GB)", kwh_per_gb)?;
        Ok(Self {
            kwh_per_gb,
            source: "given".into(),
            estimate: false,
        })
    }
}

/// The data shipped to each remote site, its energy and its emissions on the origin's grid.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Transfer {
    pub data_gb: f64,
    pub network: NetworkIntensity,
    /// data × kWh/GB (network equipment's electricity; no data-centre PUE applies).
    pub energy_kwh: f64,
    /// The grid the transfer is charged to: the chosen (origin) grid's code.
    pub charged_to: String,
    pub co2e_kg: f64,
}

impl Transfer {
    /// Ship `data_gb` over `network`, charged to the `origin` grid (`origin_code` names it).
    pub fn new(
        data_gb: f64,
        network: NetworkIntensity,
        origin_code: &str,
        origin: GramsPerKwh,
    ) -> Result<Self, CarbonError> {
        positive("data volume (GB)", data_gb)?;
        let energy = Joules::from_kwh(data_gb * network.kwh_per_gb);
        Ok(Self {
            data_gb,
            energy_kwh: energy.kwh(),
            co2e_kg: (energy * origin).kg(),
            charged_to: origin_code.into(),
            network,
        })
    }
}

/// One remote site with the transfer added.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Move {
    pub transfer_co2e_kg: f64,
    /// Operational emissions at the remote site + the transfer's.
    pub total_co2e_kg: f64,
    /// `total_co2e_kg` ÷ the job's emissions where it is (on the chosen grid).
    pub ratio: f64,
    /// Whether moving emits less than staying.
    pub pays: bool,
    /// The data volume up to which moving pays; `None` when the remote grid is not cleaner, so
    /// moving never pays.
    pub break_even_gb: Option<f64>,
}

impl Move {
    /// The job (facility energy `facility`) moved from a grid of `origin` g/kWh to one of
    /// `remote`, with `t`'s data shipped there.
    pub fn of(facility: Joules, origin: GramsPerKwh, remote: GramsPerKwh, t: &Transfer) -> Self {
        let stay = (facility * origin).kg();
        let total = (facility * remote).kg() + t.co2e_kg;
        let saving_per_job = stay - (facility * remote).kg();
        // Each GB costs k · g_origin grams; moving pays until the transfer eats the saving.
        let per_gb = (Joules::from_kwh(t.network.kwh_per_gb) * origin).kg();
        let break_even_gb = (saving_per_job > 0.0).then(|| {
            if per_gb > 0.0 {
                saving_per_job / per_gb
            } else {
                f64::INFINITY
            }
        });
        Self {
            transfer_co2e_kg: t.co2e_kg,
            total_co2e_kg: total,
            ratio: if stay > 0.0 { total / stay } else { f64::NAN },
            pays: total < stay,
            break_even_gb,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aslan_trend_halves_every_two_years() {
        // 0.06 kWh/GB in 2015 (Aslan et al. 2018); 2025 is five halvings later: 0.06 / 32.
        assert!((NetworkIntensity::aslan(2015).kwh_per_gb - 0.06).abs() < 1e-15);
        assert!((NetworkIntensity::aslan(2017).kwh_per_gb - 0.03).abs() < 1e-15);
        let d = NetworkIntensity::default_estimate();
        assert!((d.kwh_per_gb - 0.001875).abs() < 1e-15);
        assert!(d.estimate && d.source.contains("2025"), "{}", d.source);
    }

    #[test]
    fn move_by_hand() {
        // 1,000 kWh facility energy; origin 400 g/kWh, remote 50 g/kWh; 10,000 GB at 0.01 kWh/GB.
        // Staying: 400 kg. Remote: 50 kg + transfer 100 kWh × 400 g = 40 kg -> 90 kg, pays.
        // Break-even: 1,000 × (400 − 50) / (0.01 × 400) = 87,500 GB.
        let t = Transfer::new(
            10_000.0,
            NetworkIntensity::given(0.01).unwrap(),
            "custom",
            GramsPerKwh(400.0),
        )
        .unwrap();
        assert!((t.energy_kwh - 100.0).abs() < 1e-9);
        assert!((t.co2e_kg - 40.0).abs() < 1e-9);
        let m = Move::of(
            Joules::from_kwh(1000.0),
            GramsPerKwh(400.0),
            GramsPerKwh(50.0),
            &t,
        );
        assert!((m.total_co2e_kg - 90.0).abs() < 1e-9);
        assert!((m.ratio - 0.225).abs() < 1e-12);
        assert!(m.pays);
        assert!((m.break_even_gb.unwrap() - 87_500.0).abs() < 1e-6);
        // A dirtier site never pays, whatever the volume.
        let m = Move::of(
            Joules::from_kwh(1000.0),
            GramsPerKwh(400.0),
            GramsPerKwh(500.0),
            &t,
        );
        assert!(!m.pays && m.break_even_gb.is_none());
    }

    #[test]
    fn bad_volumes_and_intensities_are_errors() {
        let n = NetworkIntensity::default_estimate();
        for gb in [0.0, -1.0, f64::NAN] {
            assert!(Transfer::new(gb, n.clone(), "FR", GramsPerKwh(56.0)).is_err());
        }
        assert!(NetworkIntensity::given(0.0).is_err());
        assert!(NetworkIntensity::given(-0.1).is_err());
    }

    proptest::proptest! {
        #[test]
        fn moving_pays_exactly_below_break_even(
            kwh in 1.0f64..1e6, go in 1.0f64..1000.0, gr in 0.0f64..1000.0,
            k in 1e-4f64..0.1, gb in 1.0f64..1e7,
        ) {
            let t = Transfer::new(gb, NetworkIntensity::given(k).unwrap(), "o", GramsPerKwh(go)).unwrap();
            let m = Move::of(Joules::from_kwh(kwh), GramsPerKwh(go), GramsPerKwh(gr), &t);
            match m.break_even_gb {
                None => proptest::prop_assert!(!m.pays),
                Some(be) if (gb / be - 1.0).abs() > 1e-9 => proptest::prop_assert_eq!(m.pays, gb < be),
                Some(_) => {}
            }
        }
    }
}
