//! A small JSON Schema (draft 2020-12) validator for the schemas in `docs/schema/`: the keywords
//! they use and no other. An unknown keyword panics, so a schema never passes by a keyword this
//! validator skips.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The schema file `name` of `docs/schema/`.
///
/// ```
/// let s = relay_tests::schema::Schema::load("launch-answer.schema.json");
/// assert!(s.errors(&serde_json::json!({"event": "nope"})).len() > 0);
/// ```
pub struct Schema {
    dir: PathBuf,
    root: Value,
}

/// Keywords that say nothing about an instance.
const ANNOTATIONS: &[&str] = &["$schema", "$id", "title", "description", "$defs"];

impl Schema {
    /// Reads `docs/schema/NAME`; panics when it is missing or not JSON.
    pub fn load(name: &str) -> Schema {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema");
        let text = std::fs::read_to_string(dir.join(name)).expect("a schema of docs/schema");
        Schema {
            root: serde_json::from_str(&text).expect("the schema is JSON"),
            dir,
        }
    }

    /// Every way `v` breaks the schema (empty when it holds).
    pub fn errors(&self, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        self.check(&self.root, &self.root, v, "$", &mut out);
        out
    }

    /// Panics, naming each error, unless `v` holds.
    pub fn assert_valid(&self, v: &Value) {
        let errors = self.errors(v);
        assert!(errors.is_empty(), "{v} breaks the schema: {errors:?}");
    }

    fn resolve(&self, root: &Value, r: &str) -> (Value, Value) {
        let (file, pointer) = r.split_once('#').unwrap_or((r, ""));
        let doc = if file.is_empty() {
            root.clone()
        } else {
            let text = std::fs::read_to_string(self.dir.join(file)).expect("a $ref's file");
            serde_json::from_str(&text).expect("a $ref's file is JSON")
        };
        let target = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("$ref {r}"))
            .clone();
        (doc, target)
    }

    fn check(&self, root: &Value, s: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
        let Some(map) = s.as_object() else {
            return;
        };
        for (k, want) in map {
            let fail = |out: &mut Vec<String>, what: String| out.push(format!("{at}: {what}"));
            match k.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$ref" => {
                    let (doc, target) = self.resolve(root, want.as_str().unwrap());
                    self.check(&doc, &target, v, at, out);
                }
                "type" => {
                    let types: Vec<&str> = match want {
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        t => vec![t.as_str().unwrap()],
                    };
                    if !types.iter().any(|t| type_is(t, v)) {
                        fail(out, format!("not of type {types:?}"));
                    }
                }
                "const" if v != want => fail(out, format!("not {want}")),
                "enum" if !want.as_array().unwrap().contains(v) => {
                    fail(out, format!("not one of {want}"))
                }
                "const" | "enum" => {}
                "minimum" | "minLength" | "maxLength" | "pattern" => {
                    if let Some(what) = bound(k, want, v) {
                        fail(out, what);
                    }
                }
                "required" => {
                    for name in want.as_array().unwrap().iter().filter_map(Value::as_str) {
                        if v.is_object() && v.get(name).is_none() {
                            fail(out, format!("lacks {name:?}"));
                        }
                    }
                }
                "properties" | "additionalProperties" | "items" => {
                    self.children(root, map, k, want, v, at, out)
                }
                "oneOf" => {
                    let held = (want.as_array().unwrap().iter())
                        .filter(|sub| self.sub_errors(root, sub, v, at).is_empty())
                        .count();
                    if held != 1 {
                        fail(out, format!("holds {held} of oneOf, not exactly 1"));
                    }
                }
                "not" if self.sub_errors(root, want, v, at).is_empty() => {
                    fail(out, format!("holds what it must not: {want}"))
                }
                "not" => {}
                other => panic!("the validator does not know the keyword {other:?}"),
            }
        }
    }

    fn sub_errors(&self, root: &Value, s: &Value, v: &Value, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.check(root, s, v, at, &mut out);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn children(
        &self,
        root: &Value,
        map: &serde_json::Map<String, Value>,
        k: &str,
        want: &Value,
        v: &Value,
        at: &str,
        out: &mut Vec<String>,
    ) {
        match (k, v) {
            ("properties", Value::Object(o)) => {
                for (name, sub) in want.as_object().unwrap() {
                    if let Some(x) = o.get(name) {
                        self.check(root, sub, x, &format!("{at}.{name}"), out);
                    }
                }
            }
            ("additionalProperties", Value::Object(o)) => {
                let known = map.get("properties").and_then(Value::as_object);
                for (name, x) in o {
                    if known.is_some_and(|p| p.contains_key(name)) {
                        continue;
                    }
                    match want {
                        Value::Bool(false) => out.push(format!("{at}: unknown field {name:?}")),
                        Value::Bool(true) => {}
                        sub => self.check(root, sub, x, &format!("{at}.{name}"), out),
                    }
                }
            }
            ("items", Value::Array(a)) => {
                for (i, x) in a.iter().enumerate() {
                    self.check(root, want, x, &format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
}

fn type_is(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        other => panic!("unknown type {other:?}"),
    }
}

/// `minimum`, `minLength`, `maxLength`, `pattern` (only `^[SET][SET]*$`, a set of characters
/// and `a-z` ranges, the form the schemas use).
fn bound(k: &str, want: &Value, v: &Value) -> Option<String> {
    match (k, v) {
        ("minimum", Value::Number(n)) => {
            (n.as_f64()? < want.as_f64()?).then(|| format!("below {want}"))
        }
        ("minLength", Value::String(s)) => {
            (s.chars().count() < want.as_u64()? as usize).then(|| format!("shorter than {want}"))
        }
        ("maxLength", Value::String(s)) => {
            (s.chars().count() > want.as_u64()? as usize).then(|| format!("longer than {want}"))
        }
        ("pattern", Value::String(s)) => {
            (!pattern_holds(want.as_str()?, s)).then(|| format!("not {want}"))
        }
        _ => None,
    }
}

fn pattern_holds(pattern: &str, s: &str) -> bool {
    let inner = (pattern
        .strip_prefix("^[")
        .and_then(|p| p.strip_suffix("]*$")))
    .unwrap_or_else(|| panic!("the validator reads no pattern but ^[SET][SET]*$: {pattern}"));
    let (first, rest) = inner.split_once("][").expect("two sets");
    let in_set = |set: &str, c: char| {
        let b: Vec<char> = set.chars().collect();
        let mut i = 0;
        while i < b.len() {
            if i + 2 < b.len() && b[i + 1] == '-' {
                if (b[i]..=b[i + 2]).contains(&c) {
                    return true;
                }
                i += 3;
            } else {
                if b[i] == c {
                    return true;
                }
                i += 1;
            }
        }
        false
    };
    let mut chars = s.chars();
    chars.next().is_some_and(|c| in_set(first, c)) && chars.all(|c| in_set(rest, c))
}
