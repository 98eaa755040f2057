//! `jsonb` as Freshet stores it: canonical text. Everything that makes
//! `jsonb` values (casts, functions, sources decoding JSON) writes this one
//! form, so equal documents are equal strings.

/// Canonical `jsonb` text, as Postgres prints it: object keys deduplicated
/// (last wins) and ordered by length then bytes, `", "` and `": "`
/// separators.
pub fn canonical_jsonb(s: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(s).ok()?;
    Some(jsonb_text(&v))
}

/// A JSON value's canonical `jsonb` text (see [`canonical_jsonb`]).
pub fn jsonb_text(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_jsonb(v, &mut out);
    out
}

/// An object's entries in the order `jsonb` stores and prints them:
/// shorter keys first, then by bytes (what `jsonb_each` and
/// `jsonb_object_keys` list, too).
pub fn stored_order(
    map: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(&String, &serde_json::Value)> {
    let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then(a.as_bytes().cmp(b.as_bytes())));
    entries
}

fn write_jsonb(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in stored_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                write_jsonb(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_jsonb(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_is_canonical() {
        assert_eq!(
            canonical_jsonb(r#"{"bb":1,"a":[1,2,{"y":null,"x":true}],"a":3}"#).unwrap(),
            r#"{"a": 3, "bb": 1}"#
        );
        assert!(canonical_jsonb("{nope").is_none());
    }
}
