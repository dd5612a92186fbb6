//! JSON Schemas of every versioned output, generated from the result types (`schemars`).
//!
//! The JSON amdahl writes is its contract; these schemas make it checkable. They are committed
//! under `docs/schema/` (one file per kind, `amdahl.run/1` → `amdahl.run.1.json`) and a test
//! regenerates them and fails when a committed file differs (`AMDAHL_UPDATE_SCHEMAS=1` rewrites
//! them). The kinds are the registry's ([`KINDS`], `crate::kind`): adding a new versioned output
//! is one line there.

pub use crate::kind::{kind, Kind, KINDS};
use amdahl_meter::meter;
use amdahl_model::catalog::{self, devices::Device, grid::GridIntensity, models::ModelShape};
use schemars::{generate::SchemaSettings, JsonSchema, Schema};
use serde_json::{json, Value};

impl Kind {
    /// The committed file name under `docs/schema/`: `amdahl.run/1` → `amdahl.run.1.json`.
    pub fn file_name(&self) -> String {
        format!("{}.json", self.id.replace('/', "."))
    }

    /// The JSON Schema (draft 2020-12) of this output, with its `schema` field pinned to `id`.
    pub fn schema(&self) -> Value {
        let mut s = (self.generate)().to_value();
        pin_schema_field(&mut s, self.id);
        s
    }

    /// The schema as committed: pretty JSON with a trailing newline.
    pub fn to_file_text(&self) -> String {
        crate::to_json(&self.schema()).unwrap_or_default()
    }
}

/// The schema of what `T` serialises to (not what it would accept: fields skipped when empty
/// are optional).
pub(crate) fn root_schema<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
}

/// Require `"schema": id` on the root object, or on each alternative of a root `anyOf`/`oneOf`
/// that is an object with a `schema` property (catalog listings, sample log lines). Nested
/// results (a fit inside a scale result) keep their own kinds.
fn pin_schema_field(root: &mut Value, id: &str) {
    let pin = |obj: &mut Value| {
        if let Some(p) = obj.pointer_mut("/properties/schema") {
            *p = json!({ "const": id });
        }
    };
    pin(root);
    let refs: Vec<String> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| root.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(|alt| alt.get("$ref").and_then(Value::as_str))
        .filter_map(|r| r.strip_prefix("#/$defs/"))
        .map(String::from)
        .collect();
    for name in refs {
        if let Some(def) = root.pointer_mut(&format!("/$defs/{name}")) {
            pin(def);
        }
    }
}

// Schema-only unions of what one kind may hold (never built; the derive reads the shape).

/// `amdahl catalog --json`: a listing of devices, grid regions, model shapes, PUE presets, the
/// planner's validation runs or the serving validation set.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code)]
pub(crate) enum CatalogListing {
    Devices(catalog::Listing<Device>),
    Regions(catalog::Listing<GridIntensity>),
    Models(catalog::Listing<ModelShape>),
    Pue(catalog::Listing<catalog::pue::PuePreset>),
    Validation(catalog::Listing<amdahl_model::plan::ValidationRun>),
    ServeValidation(catalog::Listing<amdahl_model::serve::validation::ServeValidation>),
}

/// A line of an `amdahl run --log` file: the header first, then one sample per line.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code)]
pub(crate) enum SampleLogLine {
    Header(meter::SampleLogHeader),
    Sample(meter::Sample),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_unique_and_pinned() {
        let mut ids: Vec<_> = KINDS.iter().map(|k| k.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), KINDS.len(), "a kind is registered twice");
        for k in KINDS {
            let text = k.to_file_text();
            assert!(
                text.contains(&format!("\"const\": \"{}\"", k.id)),
                "{}: the schema field is not pinned",
                k.id
            );
        }
    }

    #[test]
    fn file_names_replace_the_version_slash() {
        assert_eq!(
            kind("amdahl.plan-search/1").map(Kind::file_name).as_deref(),
            Some("amdahl.plan-search.1.json")
        );
    }
}
