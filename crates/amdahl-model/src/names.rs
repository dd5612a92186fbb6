//! The names of the model's enums as a user types them (`--recompute full`, `"bf16"` in a
//! file): each enum lists them in a `NAMES` constant, in declaration order, and parses them
//! with [`std::str::FromStr`], whose error is [`UnknownName`]. Front ends (the CLI's flags, the
//! Python package) offer exactly these names instead of keeping copies of the enums.

/// A name that is none of an enum's [`NAMES`](crate::plan::Recompute::NAMES).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{given}`: expected one of {}", expected.join(", "))]
pub struct UnknownName {
    /// What was being named ("precision", "recomputation", …).
    pub what: &'static str,
    pub given: String,
    pub expected: &'static [&'static str],
}

/// Implements `FromStr` through the enum's own `parse(&str) -> Option<Self>`, which also
/// accepts the aliases and the case it documents.
macro_rules! from_str_by_parse {
    ($ty:ty, $what:literal) => {
        impl std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s).ok_or_else(|| $crate::names::UnknownName {
                    what: $what,
                    given: s.to_string(),
                    expected: &Self::NAMES,
                })
            }
        }
    };
}
pub(crate) use from_str_by_parse;

#[cfg(test)]
mod tests {
    use crate::plan::{
        ComputePrecision, Objective, OptimizerDtype, Recompute, RecomputeModule, Zero3Prefetch,
    };
    use crate::serve::scheduler::PrefillBatching;

    /// Every enum's `NAMES` are its variants' `name()`s in order and parse back to them.
    macro_rules! names_round_trip {
        ($($ty:ty),*) => {$(
            assert_eq!(<$ty>::ALL.len(), <$ty>::NAMES.len());
            for (v, n) in <$ty>::ALL.into_iter().zip(<$ty>::NAMES) {
                assert_eq!(v.name(), n);
                assert_eq!(n.parse::<$ty>(), Ok(v));
            }
        )*};
    }

    #[test]
    fn names_are_the_variants_names_and_parse_back() {
        names_round_trip!(
            Recompute,
            Zero3Prefetch,
            OptimizerDtype,
            RecomputeModule,
            ComputePrecision,
            Objective,
            PrefillBatching
        );
    }

    #[test]
    fn serving_formats_parse_every_name_and_name_every_format() {
        // Their NAMES add fp16, bf16's storage under its other name.
        use crate::infer::{KvFormat, WeightFormat};
        for n in WeightFormat::NAMES {
            assert!(n.parse::<WeightFormat>().is_ok(), "{n}");
        }
        for f in WeightFormat::ALL {
            assert!(WeightFormat::NAMES.contains(&f.name()));
        }
        for n in KvFormat::NAMES {
            assert!(n.parse::<KvFormat>().is_ok(), "{n}");
        }
        for f in KvFormat::ALL {
            assert!(KvFormat::NAMES.contains(&f.name()));
        }
        assert_eq!("fp16".parse::<WeightFormat>(), Ok(WeightFormat::Bf16));
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = "fp6".parse::<ComputePrecision>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown precision `fp6`: expected one of fp32, bf16, fp16, fp8, tf32, fp4"
        );
        assert_eq!(
            "F16".parse::<ComputePrecision>(),
            Ok(ComputePrecision::Fp16)
        );
    }
}
