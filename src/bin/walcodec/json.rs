//! The JSON objects of `verify`, `stat`, `dir` and `dump --format batch-json`, built
//! field by field in a fixed order and written by serde_json (with `preserve_order`,
//! so fields come out in the order they are added, as the `--help` texts list them).

use serde::Serialize;
use serde_json::{Map, Value};
use walcodec::LogPosition;

use crate::common::hex_into;

/// One JSON object, built field by field in the order the fields are added.
#[derive(Debug, Default)]
pub(crate) struct JsonObject {
    fields: Map<String, Value>,
}

impl JsonObject {
    pub(crate) fn new() -> JsonObject {
        JsonObject::default()
    }

    fn field(&mut self, name: &str, value: Value) -> &mut Self {
        self.fields.insert(name.to_string(), value);
        self
    }

    pub(crate) fn number(&mut self, name: &str, value: u64) -> &mut Self {
        self.field(name, value.into())
    }

    pub(crate) fn boolean(&mut self, name: &str, value: bool) -> &mut Self {
        self.field(name, value.into())
    }

    pub(crate) fn null(&mut self, name: &str) -> &mut Self {
        self.field(name, Value::Null)
    }

    pub(crate) fn string(&mut self, name: &str, value: &str) -> &mut Self {
        self.field(name, value.into())
    }

    pub(crate) fn strings(&mut self, name: &str, values: &[String]) -> &mut Self {
        self.field(name, values.into())
    }

    pub(crate) fn object(&mut self, name: &str, value: JsonObject) -> &mut Self {
        self.field(name, Value::Object(value.fields))
    }

    pub(crate) fn objects(&mut self, name: &str, values: Vec<JsonObject>) -> &mut Self {
        let values = values
            .into_iter()
            .map(|value| Value::Object(value.fields))
            .collect();
        self.field(name, Value::Array(values))
    }

    /// The object's text, without a newline.
    pub(crate) fn finish(self) -> String {
        Value::Object(self.fields).to_string()
    }
}

/// A line of `dump --format json`: a record by its offsets in the file, its bytes
/// in hex.
#[derive(Debug, Serialize)]
pub(crate) struct FileRecordLine<'a> {
    pub(crate) offset: u64,
    pub(crate) end: u64,
    pub(crate) len: usize,
    pub(crate) data: Hex<'a>,
    /// Bytes cut by `--max-bytes` (present only with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) omitted: Option<usize>,
}

/// A line of `dir dump --format json`: a record by its positions in the log
/// (`"000007:1234"`, the library's own serde form), its bytes in hex.
#[derive(Debug, Serialize)]
pub(crate) struct DirRecordLine<'a> {
    pub(crate) position: LogPosition,
    pub(crate) end: LogPosition,
    pub(crate) len: usize,
    pub(crate) data: Hex<'a>,
    /// Bytes cut by `--max-bytes` (present only with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) omitted: Option<usize>,
}

/// Bytes written as a JSON string of lowercase hex.
#[derive(Debug)]
pub(crate) struct Hex<'a>(pub(crate) &'a [u8]);

impl Serialize for Hex<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(self.0.len() * 2);
        hex_into(self.0, &mut text);
        // hex_into writes ASCII digits only.
        serializer.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }
}

/// Appends `value` as one line of JSON, without the newline.
pub(crate) fn write_line(value: &impl Serialize, line: &mut Vec<u8>) {
    // Writing these types into a Vec cannot fail: no I/O, no maps with non-string
    // keys, no floats.
    let _ = serde_json::to_writer(line, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        let mut object = JsonObject::new();
        object.string("a\"b", "q\" b\\ n\n t\t c\u{1} é");
        assert_eq!(object.finish(), r#"{"a\"b":"q\" b\\ n\n t\t c\u0001 é"}"#);
    }

    #[test]
    fn fields_nest_in_order() {
        let mut inner = JsonObject::new();
        inner.number("n", 3);
        let mut row = JsonObject::new();
        row.boolean("b", false);
        let mut object = JsonObject::new();
        object
            .number("x", u64::MAX)
            .boolean("ok", true)
            .strings("notes", &["a".to_string(), "b".to_string()])
            .strings("none", &[])
            .object("inner", inner)
            .objects("rows", vec![row, JsonObject::new()]);
        assert_eq!(
            object.finish(),
            r#"{"x":18446744073709551615,"ok":true,"notes":["a","b"],"none":[],"inner":{"n":3},"rows":[{"b":false},{}]}"#
        );
        assert_eq!(JsonObject::new().finish(), "{}");
    }
}
