//! A JSON object writer for `verify --format json` and `stat --format json`.
//!
//! Written here rather than taken from serde_json: the tool prints two fixed objects
//! of counters, a few strings and one array, so a builder of forty lines does it, and
//! the part that is easy to get wrong, string escaping (RFC 8259 section 7), is short
//! and tested below. The CLI's tests parse every object with serde_json.

/// One JSON object, built field by field in the order the fields are added.
#[derive(Debug)]
pub(crate) struct JsonObject {
    text: String,
    empty: bool,
}

impl JsonObject {
    pub(crate) fn new() -> JsonObject {
        JsonObject {
            text: String::from("{"),
            empty: true,
        }
    }

    fn key(&mut self, name: &str) -> &mut String {
        if !self.empty {
            self.text.push(',');
        }
        self.empty = false;
        write_string(name, &mut self.text);
        self.text.push(':');
        &mut self.text
    }

    pub(crate) fn number(&mut self, name: &str, value: u64) -> &mut Self {
        let text = self.key(name);
        text.push_str(&value.to_string());
        self
    }

    pub(crate) fn boolean(&mut self, name: &str, value: bool) -> &mut Self {
        let text = self.key(name);
        text.push_str(if value { "true" } else { "false" });
        self
    }

    pub(crate) fn string(&mut self, name: &str, value: &str) -> &mut Self {
        let text = self.key(name);
        write_string(value, text);
        self
    }

    pub(crate) fn strings(&mut self, name: &str, values: &[String]) -> &mut Self {
        let text = self.key(name);
        text.push('[');
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            write_string(value, text);
        }
        text.push(']');
        self
    }

    pub(crate) fn object(&mut self, name: &str, value: JsonObject) -> &mut Self {
        let text = self.key(name);
        text.push_str(&value.finish());
        self
    }

    pub(crate) fn objects(&mut self, name: &str, values: Vec<JsonObject>) -> &mut Self {
        let text = self.key(name);
        text.push('[');
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&value.finish());
        }
        text.push(']');
        self
    }

    /// The object's text, without a newline.
    pub(crate) fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

/// Appends `value` as a JSON string: quotes, backslashes and control characters
/// escaped; everything else, non-ASCII included, as it is (JSON text is UTF-8).
fn write_string(value: &str, text: &mut String) {
    text.push('"');
    for c in value.chars() {
        match c {
            '"' => text.push_str("\\\""),
            '\\' => text.push_str("\\\\"),
            '\n' => text.push_str("\\n"),
            '\r' => text.push_str("\\r"),
            '\t' => text.push_str("\\t"),
            c if (c as u32) < 0x20 => text.push_str(&format!("\\u{:04x}", c as u32)),
            c => text.push(c),
        }
    }
    text.push('"');
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
