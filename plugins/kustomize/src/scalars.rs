//! Plain scalars read the way kustomize reads them.
//!
//! `serde_yaml` resolves plain scalars by YAML 1.2's core schema. kustomize
//! reads with two Go YAML libraries, neither of which is that:
//!
//! - [`Reader::Kyaml`] — resources and strategic merge patches go through
//!   kyaml, that is go-yaml v3, and back to JSON: besides YAML 1.2's forms,
//!   a leading `0` is octal (`017` is 15), `_` is dropped from numbers
//!   (`1_000` is 1000), `08` is the float 8, and a timestamp (`2024-01-01`,
//!   `2024-01-01 10:00:00`, `2024-1-2T3:04:05.5+02:00`) becomes the RFC 3339
//!   text Go's `time.Time` marshals to (`2024-01-01T00:00:00Z`). Annotation
//!   values are the exception: kustomize reads them back as the text they
//!   are written with, so there `017`, `1e3`, `True` and `~` stay
//!   `"017"`, `"1e3"`, `"True"` and `"~"` (and a list is an error); in a
//!   patch, where `null` deletes an annotation, plain annotation values are
//!   left as `serde_yaml` reads them.
//! - [`Reader::GoYamlV2`] — JSON 6902 patches written in YAML go through
//!   `sigs.k8s.io/yaml`, that is go-yaml v2, a YAML 1.1 reader: the same
//!   numbers, plus the booleans `y Y yes Yes YES n N no No NO on On ON off
//!   Off OFF`; timestamps stay strings; a mapping key that reads as a
//!   boolean or a number becomes its JSON text (`on:` is `"true"`).
//!
//! Only *plain*, untagged scalars are resolved: [`Read`] tells a plain
//! scalar from a quoted one by where `serde_yaml` borrowed its text from (a
//! quoted scalar's text follows its opening quote), and a tagged one
//! (`!!str 017`) by the properties written before it. Block scalars (`|`, `>`) and
//! quoted scalars with escapes are never borrowed, and are strings. The
//! parse itself — syntax, errors, aliases, nesting — stays `serde_yaml`'s.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Which Go YAML library kustomize reads a text with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// go-yaml v3 through kyaml: resources, strategic merge patches.
    Kyaml,
    /// go-yaml v2 through `sigs.k8s.io/yaml`: JSON 6902 patches.
    GoYamlV2,
}

/// Where in a document a node is (annotation values keep their text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// An object: a document, or an item of a `List`.
    Object,
    /// The object's `metadata`.
    Metadata,
    /// The object's `metadata.annotations`.
    Annotations,
    /// An annotation value.
    Annotation,
    /// Anywhere else.
    Other,
}

/// A [`DeserializeSeed`] that reads a `serde_yaml` document of `text` into a
/// JSON value, resolving plain scalars as `reader` does.
#[derive(Clone, Copy)]
pub struct Read<'t> {
    text: &'t str,
    reader: Reader,
    place: Place,
    /// Annotation values are read as their text (resources; in a patch a
    /// `null` annotation deletes).
    annotation_text: bool,
    /// Where fields written without a value are recorded (resources).
    blanks: Option<&'t RefCell<Blanks>>,
}

/// One step of a path into a document: a mapping key or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A mapping key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// The fields of a document written without a value (`key:` with nothing
/// after it), which kyaml reads as a null it drops when a strategic merge
/// walks the object (a null written `null` or `~` it keeps).
#[derive(Debug, Default)]
pub struct Blanks {
    /// Where the reader is.
    path: Vec<Step>,
    /// The paths of the fields found so far.
    pub found: Vec<Vec<Step>>,
}

impl<'t> Read<'t> {
    /// Reads documents of `text` (the very text the `serde_yaml`
    /// deserializer was made from).
    pub fn new(text: &'t str, reader: Reader) -> Self {
        Read {
            text,
            reader,
            place: Place::Object,
            annotation_text: false,
            blanks: None,
        }
    }

    /// [`Read::resources`], also recording into `blanks` the fields
    /// written without a value.
    pub fn resources_recording(text: &'t str, blanks: &'t RefCell<Blanks>) -> Self {
        Read {
            blanks: Some(blanks),
            ..Read::resources(text)
        }
    }

    /// The byte range of `s` in the text, if `serde_yaml` borrowed it from
    /// there.
    fn span(&self, s: &str) -> Option<(usize, usize)> {
        let start = self.text.as_ptr() as usize;
        let at = s.as_ptr() as usize;
        (at >= start && at + s.len() <= start + self.text.len())
            .then(|| (at - start, at - start + s.len()))
    }

    /// Reads resources of `text` with [`Reader::Kyaml`], annotation values
    /// as their text.
    pub fn resources(text: &'t str) -> Self {
        Read {
            annotation_text: true,
            ..Read::new(text, Reader::Kyaml)
        }
    }

    fn at(self, place: Place) -> Self {
        Read { place, ..self }
    }

    /// Whether `s`, borrowed by `serde_yaml`, was a plain scalar of the text.
    fn plain(&self, s: &str) -> bool {
        let start = self.text.as_ptr() as usize;
        let at = s.as_ptr() as usize;
        if at < start || at + s.len() > start + self.text.len() {
            return false;
        }
        let offset = at - start;
        offset == 0 || !matches!(self.text.as_bytes()[offset - 1], b'"' | b'\'')
    }

    /// Whether the node properties before `s` (borrowed from the text)
    /// include a tag (`!!str 017`): a tagged scalar is not resolved.
    fn tagged(&self, s: &str) -> bool {
        let offset = s.as_ptr() as usize - self.text.as_ptr() as usize;
        let mut before = self.text[..offset].trim_end_matches([' ', '\t']);
        // The properties are `!tag` and `&anchor`, in either order.
        loop {
            let start = before
                .rfind([' ', '\t', '\n', '\r', ',', '[', '{'])
                .map_or(0, |i| i + 1);
            match before.as_bytes().get(start) {
                Some(b'!') => return true,
                Some(b'&') => before = before[..start].trim_end_matches([' ', '\t']),
                _ => return false,
            }
        }
    }

    fn string(&self, s: &str, plain: bool) -> Value {
        if plain
            && self.place != Place::Annotation
            && let Some(value) = resolve(s, self.reader)
            && !self.tagged(s)
        {
            return value;
        }
        Value::String(s.to_owned())
    }

    fn key(&self, key: String, plain: bool) -> String {
        if !plain || self.reader != Reader::GoYamlV2 {
            return key;
        }
        match resolve(&key, self.reader) {
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => key,
        }
    }
}

impl<'de: 't, 't> DeserializeSeed<'de> for Read<'t> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A mapping key: its text, whether it was plain, and where it is in the
/// text (when `serde_yaml` borrowed it).
struct Key<'t>(Read<'t>);

type KeyRead = (String, bool, Option<(usize, usize)>);

impl<'de: 't, 't> DeserializeSeed<'de> for Key<'t> {
    type Value = KeyRead;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de: 't, 't> Visitor<'de> for Key<'t> {
    type Value = KeyRead;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok((v.to_owned(), self.0.plain(v), self.0.span(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok((v.to_owned(), false, None))
    }
}

/// Whether the null value of the key at `key` (its byte range in `text`)
/// was written without any value: nothing but spaces and comments after
/// the colon on its line, and on the lines after it nothing indented
/// further than the key (or, in a flow mapping, a `,` or `}` next). A
/// value written `null` or `~`, or an alias, is not blank.
fn blank_after(text: &str, (start, end): (usize, usize)) -> bool {
    let bytes = text.as_bytes();
    let skip_spaces = |mut i: usize| {
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
            i += 1;
        }
        i
    };
    let mut i = end;
    // The closing quote of a quoted key.
    if i < bytes.len() && matches!(bytes[i], b'"' | b'\'') {
        i += 1;
    }
    i = skip_spaces(i);
    if i >= bytes.len() || bytes[i] != b':' {
        // `{a}`, `{a, b: 1}`: a key without a colon.
        return true;
    }
    i = skip_spaces(i + 1);
    // A tag or an anchor (`!!null`, `&a`) says nothing of the value.
    while i < bytes.len() && matches!(bytes[i], b'!' | b'&') {
        while i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i = skip_spaces(i);
    }
    match bytes.get(i) {
        None | Some(b',' | b'}' | b']') => true,
        Some(b'#' | b'\n' | b'\r') => {
            let line_start = text[..start].rfind('\n').map_or(0, |n| n + 1);
            let column = start - line_start;
            // The next line with content: a value when indented further.
            text[i..]
                .split('\n')
                .skip(1)
                .map(|line| line.trim_end_matches('\r'))
                .find(|line| {
                    let content = line.trim_start_matches([' ', '\t']);
                    !content.is_empty() && !content.starts_with('#')
                })
                .is_none_or(|line| line.len() - line.trim_start_matches(' ').len() <= column)
        }
        Some(_) => false,
    }
}

impl<'de: 't, 't> Visitor<'de> for Read<'t> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Value, E> {
        Ok(self.string(v, self.plain(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let place = if self.place == Place::Object {
            // The items of a `List` are objects.
            Place::Object
        } else {
            Place::Other
        };
        let mut out = Vec::new();
        loop {
            if let Some(blanks) = self.blanks {
                blanks.borrow_mut().path.push(Step::Index(out.len()));
            }
            let item = seq.next_element_seed(self.at(place));
            if let Some(blanks) = self.blanks {
                blanks.borrow_mut().path.pop();
            }
            match item? {
                Some(item) => out.push(item),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some((key, plain, span)) = map.next_key_seed(Key(self))? {
            let place = match (self.place, key.as_str()) {
                (Place::Object, "metadata") => Place::Metadata,
                (Place::Object, "items") => Place::Object,
                (Place::Metadata, "annotations") => Place::Annotations,
                (Place::Annotations, _) => Place::Annotation,
                _ => Place::Other,
            };
            let value = if place == Place::Annotation && self.annotation_text {
                match map.next_value_seed(Text(self))? {
                    Some(text) => Value::String(text),
                    None => continue,
                }
            } else if let Some(blanks) = self.blanks {
                blanks.borrow_mut().path.push(Step::Key(key.clone()));
                let value = map.next_value_seed(self.at(place));
                let mut blanks = blanks.borrow_mut();
                if let Ok(Value::Null) = value
                    && span.is_some_and(|span| blank_after(self.text, span))
                {
                    let path = blanks.path.clone();
                    blanks.found.push(path);
                }
                blanks.path.pop();
                value?
            } else {
                map.next_value_seed(self.at(place))?
            };
            out.insert(self.key(key, plain), value);
        }
        Ok(Value::Object(out))
    }
}

/// A scalar's text as written (`1e3`, `True`, `~`), as kustomize reads
/// annotation values; `None` for an empty plain scalar (kustomize drops
/// that annotation); a sequence or mapping there is an error.
struct Text<'t>(Read<'t>);

impl<'de: 't, 't> DeserializeSeed<'de> for Text<'t> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de: 't, 't> Visitor<'de> for Text<'t> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an annotation value (a string)")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok((!v.is_empty() || !self.0.plain(v)).then(|| v.to_owned()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
}

/// A float as JSON (non-finite floats, which JSON cannot hold, are null).
fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// What a plain scalar that `serde_yaml` read as a string is to `reader`:
/// `None` when a string too.
pub fn resolve(s: &str, reader: Reader) -> Option<Value> {
    if reader == Reader::GoYamlV2 {
        match s {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
                return Some(Value::Bool(true));
            }
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False"
            | "FALSE" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    match s.as_bytes().first()? {
        b'.' => s.parse::<f64>().ok().filter(|f| f.is_finite()).map(float),
        b'+' | b'-' | b'0'..=b'9' => {
            if reader == Reader::Kyaml
                && let Some(time) = kiln_goyaml::timestamp_rfc3339(s)
            {
                return Some(Value::String(time));
            }
            let plain = s.replace('_', "");
            go_int(&plain)
                .or_else(|| {
                    yaml_float(&plain)
                        .then(|| plain.parse::<f64>().ok())
                        .flatten()
                        .filter(|f| f.is_finite())
                        .map(float)
                })
                .or_else(|| prefixed_int(&plain))
        }
        _ => None,
    }
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: an optional sign, then
/// `0x`, `0o`, `0b` or a leading `0` (octal) or decimal.
fn go_int(s: &str) -> Option<Value> {
    let (negative, digits, radix) = kiln_goyaml::go_int_parts(s)?;
    let magnitude = u64::from_str_radix(&digits, radix).ok()?;
    if negative {
        // -9223372036854775808 is the smallest.
        let n = i64::try_from(magnitude)
            .map(|m| -m)
            .ok()
            .or_else(|| (magnitude == 1 << 63).then_some(i64::MIN))?;
        Some(Value::from(n))
    } else {
        Some(Value::from(magnitude))
    }
}

/// go-yaml's own `0b`, `-0b`, `0o`, `-0o` rules (for what `ParseInt`
/// refuses, such as `0b-1`).
fn prefixed_int(s: &str) -> Option<Value> {
    let (negative, rest) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (digits, radix) = if let Some(d) = rest.strip_prefix("0b") {
        (d, 2)
    } else if let Some(d) = rest.strip_prefix("0o") {
        (d, 8)
    } else {
        return None;
    };
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_owned()
    };
    i64::from_str_radix(&text, radix).ok().map(Value::from)
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str, reader: Reader) -> Value {
        let d = serde_yaml::Deserializer::from_str(text).next().unwrap();
        Read::new(text, reader).deserialize(d).unwrap()
    }

    fn read_resources(text: &str) -> Value {
        let d = serde_yaml::Deserializer::from_str(text).next().unwrap();
        Read::resources(text).deserialize(d).unwrap()
    }

    /// The paths of the fields written without a value, as `a.b.0.c`.
    fn blanks(text: &str) -> Vec<String> {
        let d = serde_yaml::Deserializer::from_str(text).next().unwrap();
        let found = RefCell::new(Blanks::default());
        Read::resources_recording(text, &found)
            .deserialize(d)
            .unwrap();
        found
            .into_inner()
            .found
            .iter()
            .map(|path| {
                path.iter()
                    .map(|step| match step {
                        Step::Key(k) => k.clone(),
                        Step::Index(i) => i.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            })
            .collect()
    }

    #[test]
    fn fields_written_without_a_value_are_told_from_written_nulls() {
        let text = "a:\nb: null\nc: ~\nd: # a comment\n\n  # another\ne:\n  null\nf:\n  g:\n  h: NULL\n\
                    i:\n- j:\n  k: 1\n- {l: , m, n: ~}\np: \"\"\nq: [a, ~, ]\n'r':\ns: *x\n";
        let text = format!("x: &x\n{text}");
        assert_eq!(
            blanks(&text),
            ["x", "a", "d", "f.g", "i.0.j", "i.1.l", "i.1.m", "r"]
        );
        // And the document reads as before.
        let d = serde_yaml::Deserializer::from_str("a:\nb: null\n")
            .next()
            .unwrap();
        let found = RefCell::new(Blanks::default());
        assert_eq!(
            Read::resources_recording("a:\nb: null\n", &found)
                .deserialize(d)
                .unwrap(),
            json!({"a": null, "b": null})
        );
    }

    #[test]
    fn kyaml_reads_octal_underscores_and_timestamps_in_plain_scalars_only() {
        let text = "a: 017\nb: \"017\"\nc: '017'\nd: 1_000\ne: 08\nf: 2024-01-01\n\
                    g: 2024-1-2 3:04:05.50\nh: 2024-01-01T10:00:00+02:00\ni: yes\nj: 190:20:30\n\
                    k: 0o17\nl: |\n  017\nm: [017, \"017\"]\nn: 0x_1F\no: 1e400\np: -017\n\
                    q: 2023-02-29\nr: 2024-01-01t10:00:00.000Z\ns: 017 x\nt: !!str 017\n\
                    u: &a !!str 017\nv: !!str &b 1_000\nw: &c 017\nx: [!!str 08, &d 08]\n";
        assert_eq!(
            read(text, Reader::Kyaml),
            json!({
                "a": 15, "b": "017", "c": "017", "d": 1000, "e": 8.0,
                "f": "2024-01-01T00:00:00Z", "g": "2024-01-02T03:04:05.5Z",
                "h": "2024-01-01T10:00:00+02:00", "i": "yes", "j": "190:20:30", "k": 15,
                "l": "017\n", "m": [15, "017"], "n": 31, "o": "1e400", "p": -15,
                "q": "2023-02-29", "r": "2024-01-01T10:00:00Z", "s": "017 x",
                "t": "017", "u": "017", "v": "1_000", "w": 15, "x": ["08", 8.0],
            })
        );
    }

    #[test]
    fn annotation_values_keep_their_text() {
        let text = "kind: List\nitems:\n- metadata:\n    annotations: {a: 017, b: 2024-01-01, c: 1e3, d: True, e: ~, f: , g: 1.50, h: \"\"}\n    labels: {a: 017}\n";
        assert_eq!(
            read_resources(text),
            json!({"kind": "List", "items": [{"metadata": {
                "annotations": {"a": "017", "b": "2024-01-01", "c": "1e3", "d": "True", "e": "~", "g": "1.50", "h": ""},
                "labels": {"a": 15},
            }}]})
        );
    }

    #[test]
    fn go_yaml_v2_reads_yaml_1_1_booleans_and_keeps_timestamps() {
        let text = "- {op: add, path: /a, value: yes}\n- {op: add, path: /b, value: [y, N, on, \"on\", Off, 017, 2024-01-01, 190:20:30, 1_000]}\n\
                    - {op: add, path: /c, value: {on: 1, 017: b, \"yes\": c, x: y}}\n";
        assert_eq!(
            read(text, Reader::GoYamlV2),
            json!([
                {"op": "add", "path": "/a", "value": true},
                {"op": "add", "path": "/b", "value": [true, false, true, "on", false, 15, "2024-01-01", "190:20:30", 1000]},
                {"op": "add", "path": "/c", "value": {"true": 1, "15": "b", "yes": "c", "x": true}},
            ])
        );
    }

    #[test]
    fn integers_follow_go_parse_int() {
        for (text, want) in [
            ("0x1F", json!(31)),
            ("-0x1F", json!(-31)),
            ("+12", json!(12)),
            ("0b101", json!(5)),
            ("-0b101", json!(-5)),
            ("0O17", json!(15)),
            ("-9223372036854775808", json!(i64::MIN)),
            ("18446744073709551615", json!(u64::MAX)),
            ("18446744073709551616", json!(18446744073709551616.0)),
            ("0x10000000000000000", Value::Null),
        ] {
            assert_eq!(
                resolve(text, Reader::Kyaml).unwrap_or(Value::Null),
                want,
                "{text}"
            );
        }
    }
}
