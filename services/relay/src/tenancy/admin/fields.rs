//! Serde rules for the nested fields of admin request bodies: a field that holds an object takes
//! only an object (serde's derive would also fill a struct from an array).

/// `deserialize_with` for a field that holds an object: serde's own derive would also take
/// an array for it (nested bodies are checked here, the top level by the edge's
/// `jsonbody::objects_only`).
pub fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    serde_json::from_value(serde_json::Value::Object(map)).map_err(serde::de::Error::custom)
}

/// Like [`object`], for an optional field (`null` is `None`).
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    Option::<serde_json::Map<String, serde_json::Value>>::deserialize(d)?
        .map(|map| serde_json::from_value(serde_json::Value::Object(map)))
        .transpose()
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Inner {
        a: Option<i64>,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        #[serde(default, deserialize_with = "super::optional_object")]
        inner: Option<Inner>,
    }

    #[test]
    fn nested_fields_take_objects_and_null_but_not_arrays() {
        let read = |s: &str| serde_json::from_str::<Outer>(s).map(|o| o.inner);
        assert_eq!(
            read(r#"{"inner": {"a": 1}}"#).ok(),
            Some(Some(Inner { a: Some(1) }))
        );
        assert_eq!(read(r#"{"inner": null}"#).ok(), Some(None));
        assert_eq!(read("{}").ok(), Some(None));
        assert!(read(r#"{"inner": [1]}"#).is_err());
        assert!(read(r#"{"inner": [null]}"#).is_err());
    }
}
