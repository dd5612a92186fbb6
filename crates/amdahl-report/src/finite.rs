//! The last check before a result is printed: every number in it is finite.
//!
//! serde_json writes NaN and ±inf as `null` and the table renderers as "-", "inf" or "NaN %", so
//! a result that overflowed would leave with exit 0 looking like data. [`check`] walks any
//! `Serialize` value (the same traversal the JSON writer does) and names the first non-finite
//! field by its path, e.g. `systems[3].efficiency_hpl`. The binary calls it once, at its output
//! sink, for every result of every command.

use serde::ser::{self, Serialize};
use std::fmt;

/// A result held a number that is not finite.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the result has a non-finite number ({value}) at `{path}`; the inputs are outside the range the model can compute (check for extreme or tiny values)")]
pub struct NonFinite {
    /// Where in the result: field names and `[i]` indices, joined by dots.
    pub path: String,
    /// The value as Rust prints it: `inf`, `-inf` or `NaN`.
    pub value: String,
}

/// Ok when every float in `value` is finite; else the path of the first that is not.
pub fn check<T: Serialize + ?Sized>(value: &T) -> Result<(), NonFinite> {
    let mut w = Walker { path: Vec::new() };
    match value.serialize(&mut w) {
        Ok(()) => Ok(()),
        Err(Stop::Found(e)) => Err(e),
        // A value that cannot be serialised is the JSON writer's error to report, not ours.
        Err(Stop::Custom(_)) => Ok(()),
    }
}

#[derive(Debug)]
enum Stop {
    Found(NonFinite),
    Custom(String),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Found(e) => e.fmt(f),
            Stop::Custom(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Stop::Custom(msg.to_string())
    }
}

struct Walker {
    path: Vec<String>,
}

impl Walker {
    fn float(&mut self, v: f64) -> Result<(), Stop> {
        if v.is_finite() {
            return Ok(());
        }
        Err(Stop::Found(NonFinite {
            path: self.path.join(".").replace(".[", "["),
            value: v.to_string(),
        }))
    }

    /// Serialise `v` with `segment` pushed on the path.
    fn nested<T: Serialize + ?Sized>(&mut self, segment: String, v: &T) -> Result<(), Stop> {
        self.path.push(segment);
        let r = v.serialize(&mut *self);
        self.path.pop();
        r
    }
}

/// Sequences, tuples and maps count their elements for the path.
struct Seq<'a> {
    w: &'a mut Walker,
    i: usize,
    key: Option<String>,
}

impl<'a> ser::Serializer for &'a mut Walker {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Seq<'a>;
    type SerializeStruct = Seq<'a>;
    type SerializeStructVariant = Seq<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Stop> {
        self.float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Stop> {
        self.float(v)
    }
    fn serialize_char(self, _: char) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Stop> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Stop> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Stop> {
        self.nested(variant.to_string(), v)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, Stop> {
        Ok(Seq {
            w: self,
            i: 0,
            key: None,
        })
    }
    fn serialize_tuple(self, _: usize) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, Stop> {
        self.serialize_seq(None)
    }
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Stop> {
        let segment = format!("[{}]", self.i);
        self.i += 1;
        self.w.nested(segment, v)
    }
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> Result<(), Stop> {
        self.w.nested(key.to_string(), v)
    }
}

macro_rules! seq_like {
    ($($t:ident :: $m:ident),*) => {$(
        impl ser::$t for Seq<'_> {
            type Ok = ();
            type Error = Stop;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Stop> {
                self.element(v)
            }
            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}
seq_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

macro_rules! struct_like {
    ($($t:ident),*) => {$(
        impl ser::$t for Seq<'_> {
            type Ok = ();
            type Error = Stop;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), Stop> {
                self.field(key, v)
            }
            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}
struct_like!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Seq<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        // Keys are names (strings) in every amdahl result; JSON renders them as text.
        self.key = Some(serde_json::to_value(key).map_or_else(
            |_| format!("[{}]", self.i),
            |k| k.as_str().map_or_else(|| k.to_string(), str::to_string),
        ));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Stop> {
        let key = self.key.take().unwrap_or_else(|| format!("[{}]", self.i));
        self.i += 1;
        self.field(&key, v)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Inner {
        e: f64,
        maybe: Option<f32>,
    }

    #[derive(Serialize)]
    struct Outer {
        name: &'static str,
        items: Vec<Inner>,
        map: BTreeMap<String, f64>,
    }

    fn outer(bad: f64) -> Outer {
        Outer {
            name: "x",
            items: vec![
                Inner {
                    e: 1.0,
                    maybe: None,
                },
                Inner {
                    e: bad,
                    maybe: Some(2.0),
                },
            ],
            map: BTreeMap::from([("a".to_string(), 0.5)]),
        }
    }

    #[test]
    fn finite_results_pass() {
        assert_eq!(check(&outer(3.0)), Ok(()));
        assert_eq!(check(&serde_json::json!({"a": [1.0, 2.5e300]})), Ok(()));
    }

    #[test]
    fn nan_and_inf_are_named_by_path() {
        let e = check(&outer(f64::NAN)).unwrap_err();
        assert_eq!(e.path, "items[1].e");
        assert_eq!(e.value, "NaN");
        let e = check(&outer(f64::NEG_INFINITY)).unwrap_err();
        assert_eq!(e.value, "-inf");
        let mut m = BTreeMap::new();
        m.insert("power".to_string(), f64::INFINITY);
        assert_eq!(check(&m).unwrap_err().path, "power");
        let v = Inner {
            e: 0.0,
            maybe: Some(f32::NAN),
        };
        assert_eq!(check(&v).unwrap_err().path, "maybe");
    }
}
