//! A validator for the subset of JSON Schema (2020-12) that ordo's committed schemas use, shared by the
//! schema tests of ordo-bench and ordo-probe (`#[path]`-included; no crate needed for test support).
//! Unknown keywords fail the test, so a schema cannot drift past what is checked.

use serde_json::Value;

/// Every error found validating `v` against `schema` (empty when it conforms).
pub fn check(schema: &Value, v: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    validate(schema, schema, v, "$", &mut errors);
    errors
}

const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "const",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "$ref",
    "$defs",
    "anyOf",
    "minimum",
];

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        other => panic!("unsupported type {other}"),
    }
}

fn resolve<'a>(root: &'a Value, r: &str) -> &'a Value {
    let name = r
        .strip_prefix("#/$defs/")
        .unwrap_or_else(|| panic!("unsupported $ref {r}"));
    &root["$defs"][name]
}

pub fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let obj = schema.as_object().expect("schema is an object");
    for k in obj.keys() {
        assert!(
            KNOWN.contains(&k.as_str()),
            "schema keyword {k} at {path} is not supported by the test validator"
        );
    }
    if let Some(r) = obj.get("$ref") {
        validate(root, resolve(root, r.as_str().unwrap()), v, path, errors);
    }
    if let Some(any) = obj.get("anyOf") {
        let ok = any.as_array().unwrap().iter().any(|s| {
            let mut e = Vec::new();
            validate(root, s, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{path}: matches no anyOf branch"));
        }
    }
    if let Some(t) = obj.get("type") {
        let ok = match t {
            Value::String(s) => type_ok(s, v),
            Value::Array(a) => a.iter().any(|s| type_ok(s.as_str().unwrap(), v)),
            _ => panic!("bad type"),
        };
        if !ok {
            errors.push(format!("{path}: expected type {t}, got {v}"));
            return;
        }
    }
    if let Some(c) = obj.get("const") {
        if c != v {
            errors.push(format!("{path}: expected {c}, got {v}"));
        }
    }
    if let Some(e) = obj.get("enum") {
        if !e.as_array().unwrap().contains(v) {
            errors.push(format!("{path}: {v} not in {e}"));
        }
    }
    if let (Some(m), Some(x)) = (obj.get("minimum"), v.as_f64()) {
        if x < m.as_f64().unwrap() {
            errors.push(format!("{path}: {x} < minimum {m}"));
        }
    }
    if let Some(o) = v.as_object() {
        let props = obj.get("properties").and_then(Value::as_object);
        if let Some(req) = obj.get("required") {
            for r in req.as_array().unwrap() {
                if !o.contains_key(r.as_str().unwrap()) {
                    errors.push(format!("{path}: missing required {r}"));
                }
            }
        }
        for (k, val) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(root, s, val, &format!("{path}.{k}"), errors),
                None => {
                    if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
                        errors.push(format!("{path}: unexpected property {k}"));
                    }
                }
            }
        }
    }
    if let (Some(items), Some(a)) = (obj.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(root, items, x, &format!("{path}[{i}]"), errors);
        }
    }
}
