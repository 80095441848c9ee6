//! JSON parsed with duplicate object keys refused.
//!
//! `serde_json::Value` keeps the last of two equal keys (`{"width": 640, "width": 1}` is
//! width 1), so a parameter document could say one value and mean another without an
//! error. TOML refuses duplicates; so does this parser, at every nesting level, with
//! serde_json's line and column. (serde_json's recursion limit still applies: its
//! deserializer counts the depth.)

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` as one JSON value, refusing a duplicate key in any object.
pub(crate) fn from_str(text: &str) -> serde_json::Result<Value> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Strict, E> {
        Ok(Strict(Value::Number(i.into())))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Strict, E> {
        Ok(Strict(Value::Number(u.into())))
    }

    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<Strict, E> {
        // JSON text has no NaN or infinity: serde_json never hands one over.
        Number::from_f64(f)
            .map(|n| Strict(Value::Number(n)))
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(s)))
    }

    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Strict(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!(
                    "duplicate key {key:?} (an object names each key once)"
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Strict(Value::Object(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_is_refused_at_any_depth_with_its_position() {
        for text in [
            r#"{"width": 640, "width": 1}"#,
            r#"{"geometry": {"w": 1, "h": 2, "w": 3}}"#,
            r#"[{"a": 1}, {"b": 1, "b": 1}]"#,
        ] {
            let e = from_str(text).unwrap_err();
            assert!(e.to_string().contains("duplicate key"), "{text}: {e}");
            assert_eq!(e.line(), 1, "{text}");
        }
    }

    #[test]
    fn everything_else_parses_as_serde_json_does() {
        let text =
            r#"{"a": [1, -2, 3.5, true, null, "s"], "b": {"c": {}}, "d": 18446744073709551615}"#;
        assert_eq!(
            from_str(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }
}
