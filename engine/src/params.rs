//! What the configuration's parameters are made of, below the policies and edge functions that
//! read them and the configuration file (config.rs) that lists them: buffer sizes, queue
//! thresholds and their units, and how the error of one kind's parameters is told
//! ([`deep_error`]).

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Buffer {
    Packets(u64),
    Bytes(u64),
}

/// Unit of a RED-family policy's thresholds, and so of its average queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Packets,
    Bytes,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Packets => "packets",
            Unit::Bytes => "bytes",
        }
    }
}

/// A queue threshold: a number (packets), `{"packets": x}` or `{"bytes": x}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub unit: Unit,
}

impl Threshold {
    pub fn packets(value: f64) -> Threshold {
        Threshold { value, unit: Unit::Packets }
    }

    pub fn bytes(value: f64) -> Threshold {
        Threshold { value, unit: Unit::Bytes }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Threshold, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Threshold;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"a number of packets, {"packets": x} or {"bytes": x}"#)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Threshold, E> {
                Ok(Threshold::packets(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Threshold, E> {
                Ok(Threshold::packets(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Threshold, E> {
                Ok(Threshold::packets(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Threshold, A::Error> {
                let key: String = map.next_key()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let unit = match key.as_str() {
                    "packets" => Unit::Packets,
                    "bytes" => Unit::Bytes,
                    _ => return Err(de::Error::unknown_field(&key, &["packets", "bytes"])),
                };
                let value: f64 = map.next_value()?;
                if let Some(other) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!("one unit only, not {key:?} and {other:?}")));
                }
                Ok(Threshold { value, unit })
            }
        }
        d.deserialize_any(V)
    }
}

/// The one unit of a policy's thresholds: the first one's, and an error naming the first field
/// that differs.
pub fn one_unit(fields: &[(String, Threshold)]) -> std::result::Result<Unit, String> {
    let (first, t0) = &fields[0];
    match fields.iter().find(|(_, t)| t.unit != t0.unit) {
        None => Ok(t0.unit),
        Some((name, t)) => Err(format!(
            "{name}: in {} but {first} is in {}; one policy's thresholds take one unit",
            t.unit.name(),
            t0.unit.name()
        )),
    }
}

/// Deserialize `value` as `T`; the error with its path (`.a[1]: msg`, or `: msg` at the top).
pub fn deep_error<T: DeserializeOwned>(value: &serde_json::Value) -> Option<String> {
    let e = serde_path_to_error::deserialize::<_, T>(value).err()?;
    let path = e.path().to_string();
    Some(if path == "." { format!(": {}", e.into_inner()) } else { format!(".{path}: {}", e.into_inner()) })
}

/// A parameter that may be null but must be given: `#[serde(deserialize_with = "crate::params::nullable")]`
/// on an `Option` field. (Serde's derive reads a missing `Option` field as None; with this it is
/// an error naming the field, `missing field `buffer``, as for every other parameter: the engine
/// has no defaults, the controller's schema writes every parameter; docs/engine.md.)
pub fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> std::result::Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// The fields a struct's derived `Deserialize` reads (a kind's parameters, for `catnip-engine
/// kinds`): serde's derive hands them to the deserializer's `deserialize_struct`, which this one
/// records and then stops. A `#[serde(transparent)]` wrapper gives its inner struct's. Empty for
/// anything not a struct.
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> std::result::Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields read"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}
