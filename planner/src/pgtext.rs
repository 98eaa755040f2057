//! Postgres text input for types Arrow parses differently: `boolean`,
//! `bytea` (hex and escape formats), `uuid` and `jsonb` canonical forms.

/// Parse a Postgres boolean literal.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Parse `bytea` input: `\x` hex, or the escape format.
pub fn parse_bytea(s: &str) -> Option<Vec<u8>> {
    if let Some(hex) = s.strip_prefix("\\x") {
        let hex: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !hex.len().is_multiple_of(2) {
            return None;
        }
        return hex
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
            .collect();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else {
                let oct = bytes.get(i + 1..i + 4)?;
                let v = u8::from_str_radix(std::str::from_utf8(oct).ok()?, 8).ok()?;
                out.push(v);
                i += 4;
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Canonical `uuid` text (lower case, hyphenated).
pub fn canonical_uuid(s: &str) -> Option<String> {
    uuid::Uuid::parse_str(s.trim())
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// Canonical `jsonb` text, as Postgres prints it: object keys deduplicated
/// (last wins) and ordered by length then bytes, `", "` and `": "`
/// separators.
pub fn canonical_jsonb(s: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(s).ok()?;
    let mut out = String::new();
    write_jsonb(&v, &mut out);
    Some(out)
}

fn write_jsonb(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.len().cmp(&b.len()).then(a.as_bytes().cmp(b.as_bytes())));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                write_jsonb(&map[k.as_str()], out);
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

    #[test]
    fn bytea_forms() {
        assert_eq!(parse_bytea("\\x00ff").unwrap(), vec![0, 255]);
        assert_eq!(parse_bytea("ab\\\\c\\001").unwrap(), b"ab\\c\x01".to_vec());
        assert!(parse_bytea("\\x0").is_none());
    }

    #[test]
    fn uuids_are_canonical() {
        assert_eq!(
            canonical_uuid("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11").unwrap(),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
        );
        assert!(canonical_uuid("nope").is_none());
    }
}
