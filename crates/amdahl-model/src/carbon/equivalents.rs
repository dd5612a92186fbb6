//! Everyday equivalents of an emission, each with its source.

use crate::units::GramsCo2e;
use serde::Serialize;

/// Tailpipe CO2 of an average US passenger car: 404 g per mile = 251 g per km (US EPA,
/// "Greenhouse Gas Emissions from a Typical Passenger Vehicle", EPA-420-F-18-008, 2018).
pub const CAR_G_PER_KM: f64 = 404.0 / 1.609_344;
pub const CAR_SOURCE: &str =
    "US EPA EPA-420-F-18-008 (2018): 404 gCO2 per mile for a typical passenger vehicle";

/// One passenger, round trip New York ↔ San Francisco: 1,984 lbs CO2e = 900 kg (Strubell et al.
/// 2019, "Energy and Policy Considerations for Deep Learning in NLP", Table 1).
pub const FLIGHT_KG: f64 = 1984.0 * 0.453_592_37;
pub const FLIGHT_SOURCE: &str =
    "Strubell et al. 2019 Table 1: one passenger, round trip NY-SF, 1,984 lbs CO2e";

/// An emission expressed as car kilometres and passenger flights.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Equivalents {
    pub car_km: f64,
    pub car_source: &'static str,
    pub flights_ny_sf: f64,
    pub flight_source: &'static str,
}

impl Equivalents {
    pub fn of(co2e: GramsCo2e) -> Self {
        Self {
            car_km: co2e.get() / CAR_G_PER_KM,
            car_source: CAR_SOURCE,
            flights_ny_sf: co2e.kg() / FLIGHT_KG,
            flight_source: FLIGHT_SOURCE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flight_is_900_kg() {
        let e = Equivalents::of(GramsCo2e(FLIGHT_KG * 1e3));
        assert!((e.flights_ny_sf - 1.0).abs() < 1e-12);
        assert!((FLIGHT_KG - 899.93).abs() < 0.01);
        // 251 g/km: 1 t is ~3,983 km.
        assert!((Equivalents::of(GramsCo2e(1e6)).car_km - 3983.6).abs() < 1.0);
    }
}
