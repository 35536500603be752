//! The profile's published schema and documentation stay true to the types.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn generated() -> String {
    serde_json::to_string_pretty(&hwc_model::profile_json_schema()).unwrap() + "\n"
}

/// `docs/profile.schema.json` is generated from the types; regenerate with
/// `UPDATE_SCHEMA=1 cargo test -p hwc-profile --test schema`.
#[test]
fn published_json_schema_matches_the_types() {
    let path = docs().join("profile.schema.json");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, generated()).unwrap();
    }
    let published = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        published == generated(),
        "docs/profile.schema.json is stale: run UPDATE_SCHEMA=1 cargo test -p hwc-profile --test schema"
    );
}

fn property_names(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get("properties") {
                out.extend(props.keys().cloned());
            }
            for child in map.values() {
                property_names(child, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| property_names(i, out)),
        _ => {}
    }
}

#[test]
fn every_profile_field_is_documented() {
    let schema = serde_json::to_value(hwc_model::profile_json_schema()).unwrap();
    let mut names = BTreeSet::new();
    property_names(&schema, &mut names);
    assert!(names.len() > 50, "schema walk found only {names:?}");
    let doc = std::fs::read_to_string(docs().join("profile-schema.md")).unwrap();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "fields missing from docs/profile-schema.md: {missing:?}"
    );
}
