//! Values to and from YAML, JSON and TOML, the way Helm's functions see
//! them: every number read from YAML or JSON is a float64; `toYaml` prints
//! like `sigs.k8s.io/yaml` (through JSON: keys sorted, integral floats as
//! integers); `toJson` escapes HTML characters as Go's `encoding/json`.

use crate::gostr;
use crate::value::{Map, Value};

/// A YAML text (one document) as a value, read as Helm reads it
/// ([`crate::yaml11`]: YAML 1.1 scalars, numbers as float64).
pub fn from_yaml(text: &str) -> Result<Value, String> {
    crate::yaml11::read(text).map_err(yaml_error)
}

/// A YAML reader's error as Helm words it.
pub fn yaml_error(e: String) -> String {
    format!("error converting YAML to JSON: {e}")
}

/// A values file's document as a value: [`from_yaml`], its nodes taken
/// from the file's `budget` ([`crate::yaml11::read_within`]).
pub fn from_values_yaml(text: &str, budget: &mut crate::yaml11::Budget) -> Result<Value, String> {
    crate::yaml11::read_within(text, budget).map_err(|e| match e {
        crate::yaml11::Bounded::Expansion(message) => message,
        crate::yaml11::Bounded::Read(e) => yaml_error(e),
    })
}

/// A JSON value as a template value (numbers as float64).
pub fn from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Array(l) => Value::list(l.iter().map(from_json).collect()),
        serde_json::Value::Object(m) => {
            Value::map(m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
        }
    }
}

/// A template value as JSON, the way Go's `encoding/json` encodes it; None
/// for a map that contains itself (Go refuses a cycle), found by its depth.
pub fn to_json_value(v: &Value) -> Option<serde_json::Value> {
    json_at(v, 0, true)
}

/// With `natural`, the value as Go's readers get it back from the text:
/// strings are plain text (each byte that is not UTF-8 one U+FFFD) and a
/// negative zero is 0; without, the text as written: strings stay Go
/// strings ([`gostr`]) and a negative zero is `-0`. NaN and the infinities
/// give None, as Go's encoder refuses them.
pub(crate) fn json_at(v: &Value, depth: usize, natural: bool) -> Option<serde_json::Value> {
    let text = |s: &str| {
        if natural {
            gostr::natural(s).into_owned()
        } else {
            s.to_owned()
        }
    };
    if depth > crate::value::MAX_NESTING {
        return None;
    }
    Some(match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) | Value::Int64(i) => serde_json::Value::from(*i),
        // Go's encoder refuses NaN and the infinities.
        Value::Float(f) if !f.is_finite() => return None,
        // A negative zero: `-0` as written, 0 as read back.
        Value::Float(f) if !natural && *f == 0.0 && f.is_sign_negative() => {
            serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number)
        }
        Value::Float(f) => match integral(*f) {
            Some(Integral::Signed(i)) => serde_json::Value::from(i),
            Some(Integral::Unsigned(u)) => serde_json::Value::from(u),
            None => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
        },
        Value::Str(s) => serde_json::Value::String(text(s)),
        // A time.Time marshals as RFC 3339 text (none outside years
        // 0..=9999: Go's MarshalJSON fails, and `toJson` prints "").
        Value::Time(t) => serde_json::Value::String(t.rfc3339_nano().ok()?),
        Value::Go(o) => o.json(),
        // ... and a []byte is base64.
        Value::Bytes(b) => serde_json::Value::String(base64_std(b)),
        v if v.is_nil_slice() => serde_json::Value::Null,
        Value::List(l) | Value::Strings(l) => serde_json::Value::Array(
            l.iter()
                .map(|x| json_at(x, depth + 1, natural))
                .collect::<Option<_>>()?,
        ),
        Value::Map(m) => serde_json::Value::Object(
            m.borrow()
                .iter()
                .map(|(k, x)| Some((text(k), json_at(x, depth + 1, natural)?)))
                .collect::<Option<_>>()?,
        ),
        Value::Files(f) => serde_json::Value::Object(
            f.entries()
                .iter()
                .map(|(k, b)| (k.clone(), serde_json::Value::String(base64_std(b))))
                .collect(),
        ),
        Value::ApiVersions(l) => serde_json::Value::Array(
            l.iter()
                .map(|s| serde_json::Value::String(s.clone()))
                .collect(),
        ),
    })
}

/// An integral float64 as Go's JSON round trip gives it back (Helm's
/// `toYaml` marshals to JSON and reads the text again): Go writes it in
/// positional digits below 1e21 (the shortest that read back, padded with
/// zeros: 2^60 is `1152921504606847000`), which read as an int64 when they
/// fit, else as a uint64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Integral {
    Signed(i64),
    Unsigned(u64),
}

/// `f` as Go's JSON round trip reads it back, if as an [`Integral`].
pub(crate) fn integral(f: f64) -> Option<Integral> {
    // Below 2^53 every integral float is its own shortest digits.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    // NaN has no integral part (its `fract` is NaN).
    if f.fract() != 0.0 || f.abs() >= 1e21 {
        return None;
    }
    if f.abs() < EXACT {
        return Some(Integral::Signed(f as i64));
    }
    // Rust's `Display` writes Go's digits (see [`GoFloats`]); they are
    // parsed as go-yaml does: `strconv.ParseInt`, then `ParseUint`.
    let text = format!("{f}");
    text.parse::<i64>()
        .map(Integral::Signed)
        .or_else(|_| text.parse::<u64>().map(Integral::Unsigned))
        .ok()
}

/// serde_json's formatter `F` writing floats as Go's `encoding/json`
/// writes a float64: positional (`strconv`'s `'f'`, shortest digits) for
/// magnitudes from 1e-6 up to 1e21, exponent form otherwise, which is
/// serde_json's own (`1e+21`, `1e-7`: Go's `'e'` after its `e-07` → `e-7`
/// clean-up). serde_json alone writes `1e+20` and `1.5e-6` where Go writes
/// `100000000000000000000` and `0.0000015`.
struct GoFloats<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for GoFloats<F> {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        let abs = value.abs();
        if abs == 0.0 || (1e-6..1e21).contains(&abs) {
            // Rust's `Display`: the shortest digits that read back, never
            // an exponent.
            write!(w, "{value}")
        } else {
            self.0.write_f64(w, value)
        }
    }

    // What `PrettyFormatter` writes differently from the defaults.
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as JSON text in `style`'s layout (compact, or indented by two
/// spaces), floats as Go writes them ([`GoFloats`]); the serializer's
/// message when the value refuses to serialize. Characters are
/// serde_json's: [`go_json`] makes them Go's.
pub(crate) fn write_json(
    value: &impl serde::Serialize,
    style: JsonStyle,
) -> Result<String, String> {
    let mut out = Vec::new();
    match style {
        JsonStyle::Indented => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            GoFloats(serde_json::ser::PrettyFormatter::new()),
        )),
        JsonStyle::Compact | JsonStyle::Raw => {
            value.serialize(&mut serde_json::Serializer::with_formatter(
                &mut out,
                GoFloats(serde_json::ser::CompactFormatter),
            ))
        }
    }
    .map_err(|e| e.to_string())?;
    // serde_json writes UTF-8.
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// Bytes as Go's `encoding/json` writes a `[]byte`: standard base64.
pub(crate) fn base64_std(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// `toYaml`: the value as `sigs.k8s.io/yaml.Marshal` prints it. The value
/// is walked in place ([`crate::yamltree`]); one it declines goes through
/// JSON as Helm's does.
pub fn to_yaml(v: &Value) -> String {
    match kiln_goyaml::document_of(v) {
        Ok(text) => go_string(text),
        Err(crate::yamltree::Declined) => to_yaml_through_json(v),
    }
}

/// `toYaml` by the general path: the value as JSON, printed.
fn to_yaml_through_json(v: &Value) -> String {
    to_json_value(v).map_or_else(String::new, |j| go_string(kiln_goyaml::document(&j)))
}

/// Printed text as a Go string ([`gostr::from_bytes`]), without a copy
/// when it carries no character of the raw-byte range.
fn go_string(text: String) -> String {
    if gostr::has_raw(&text) {
        gostr::from_bytes(text.as_bytes()).into_owned()
    } else {
        text
    }
}

/// How Go's encoder writes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// `json.Marshal` (`toJson`): compact, `<>&` escaped.
    Compact,
    /// `json.MarshalIndent(v, "", "  ")` (`toPrettyJson`): `<>&` escaped.
    Indented,
    /// An `Encoder` with `SetEscapeHTML(false)` (`toRawJson`): compact,
    /// `<>&` as they are.
    Raw,
}

/// `toJson`: Go's `json.Marshal` (HTML characters escaped).
pub fn to_json(v: &Value) -> String {
    to_json_styled(v, JsonStyle::Compact)
}

/// `v` as Go's encoder writes it in `style`; U+2028/U+2029 are always
/// escaped, bytes that are not UTF-8 are U+FFFD.
pub fn to_json_styled(v: &Value, style: JsonStyle) -> String {
    // An error is a value Go's encoder refuses (NaN, too deep, a year it
    // cannot write): no text.
    try_to_json_styled(v, style).unwrap_or_default()
}

/// [`to_json_styled`], or what Go's encoder says of a value it refuses
/// (`json: unsupported value: NaN`), for the `must` forms.
pub fn try_to_json_styled(v: &Value, style: JsonStyle) -> Result<String, String> {
    let view = crate::jsonview::JsonView::new(v);
    let text = write_json(&view, style)?;
    Ok(go_json(text, style != JsonStyle::Raw))
}

/// serde_json's text as Go's encoder writes it: `<>&` escaped when
/// `escape_html`, U+2028/U+2029 escaped, raw bytes that are not UTF-8 as
/// U+FFFD; the text itself when none of them is in it.
fn go_json(text: String, escape_html: bool) -> String {
    let bytes = text.as_bytes();
    // U+2028, U+2029 and raw bytes are not ASCII.
    let changes = (escape_html && kiln_bytes::contains_any(bytes, [b'<', b'>', b'&']))
        || (!kiln_bytes::below_del(bytes)
            && (text.contains(['\u{2028}', '\u{2029}']) || gostr::has_raw(&text)));
    if !changes {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    gostr::for_each_rune(&text, |rune| {
        let Ok(c) = rune else {
            // A byte that is not UTF-8, as Go's encoder writes it.
            out.push_str("\\ufffd");
            return;
        };
        match c {
            '<' if escape_html => out.push_str("\\u003c"),
            '>' if escape_html => out.push_str("\\u003e"),
            '&' if escape_html => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    });
    gostr::from_bytes(out.as_bytes()).into_owned()
}

/// The JSON `text` made one that YAML readers take too (the host reads manifests
/// with a YAML parser, which refuses DEL, C1 controls, U+FEFF and the
/// noncharacters U+FFFE/U+FFFF written raw): those are written as `\uXXXX`
/// escapes, which mean the same JSON. Helm's output holds them when a
/// template quotes binary bytes (`"\x82"` is U+0082).
pub fn json_for_yaml_readers(text: String) -> String {
    // Every refused character is encoded with one of these leading bytes
    // (U+007F; C2 80..9F; EF BB BF, EF BF BE/BF): a text without them
    // holds none, checked without decoding it.
    if kiln_bytes::below_del(text.as_bytes())
        || !text.bytes().any(|b| matches!(b, 0x7f | 0xc2 | 0xef))
    {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if refused_by_yaml_readers(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn refused_by_yaml_readers(c: char) -> bool {
    matches!(c as u32, 0x7f..=0x9f | 0xfeff | 0xfffe | 0xffff)
}

/// `fromToml`: a TOML document as a map (integers int64, floats float64,
/// date-times as their text); the parser's message when it is not TOML.
pub fn from_toml(text: &str) -> Result<Value, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let message = e.message().to_owned();
        format!("toml: {message}")
    })?;
    Ok(from_toml_table(&table, 0))
}

fn from_toml_table(table: &toml::Table, depth: usize) -> Value {
    let mut map = Map::new();
    for (key, value) in table {
        map.insert(key.clone(), from_toml_value(value, depth + 1));
    }
    Value::map(map)
}

fn from_toml_value(value: &toml::Value, depth: usize) -> Value {
    if depth > crate::value::MAX_NESTING {
        return Value::Nil;
    }
    match value {
        toml::Value::String(s) => Value::str(s),
        toml::Value::Integer(i) => Value::Int64(*i),
        toml::Value::Float(f) => Value::Float(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::str(d.to_string()),
        toml::Value::Array(items) => Value::list(
            items
                .iter()
                .map(|item| from_toml_value(item, depth + 1))
                .collect(),
        ),
        toml::Value::Table(table) => from_toml_table(table, depth),
    }
}

/// `toToml`: a map as TOML (scalars first, then tables), as BurntSushi's
/// encoder writes it.
pub fn to_toml(v: &Value) -> String {
    let mut out = String::new();
    if let Value::Map(m) = v {
        toml_table(&mut out, &m.borrow(), "");
    }
    out
}

fn toml_scalar(v: &Value) -> Option<String> {
    Some(match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) | Value::Int64(i) => i.to_string(),
        Value::Float(f) => {
            if f.fract() == 0.0 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        Value::Str(s) => crate::gofmt::quote(s),
        // A TOML datetime, RFC 3339 with nanoseconds (any year).
        Value::Time(t) => crate::golayout::format(t, "2006-01-02T15:04:05.999999999Z07:00"),
        Value::List(l) | Value::Strings(l) => {
            let parts: Option<Vec<String>> = l.iter().map(toml_scalar).collect();
            format!("[{}]", parts?.join(", "))
        }
        _ => return None,
    })
}

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        crate::gofmt::quote(k)
    }
}

fn toml_table(out: &mut String, m: &Map, prefix: &str) {
    let indent = "  ".repeat(prefix.matches('.').count() + usize::from(!prefix.is_empty()));
    for (k, v) in m {
        if let Some(s) = toml_scalar(v) {
            out.push_str(&format!("{indent}{} = {s}\n", toml_key(k)));
        }
    }
    for (k, v) in m {
        if let Value::Map(sub) = v {
            let name = if prefix.is_empty() {
                toml_key(k)
            } else {
                format!("{prefix}.{}", toml_key(k))
            };
            out.push_str(&format!("\n{indent}[{name}]\n"));
            toml_table(out, &sub.borrow(), &name);
        }
    }
}

/// Helper: a map value from pairs.
pub fn map_of(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    Value::map(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integral floats read back as Go's JSON round trip reads them, at
    /// the exact 64-bit bounds; and written as Go writes a float64.
    #[test]
    fn floats_are_written_and_read_back_as_go_does() {
        let two_63 = 9_223_372_036_854_775_808.0;
        // Go writes 2^63 as 9223372036854776000, -2^63 as
        // -9223372036854776000 (too small for ParseInt: a float again).
        assert_eq!(
            integral(two_63),
            Some(Integral::Unsigned(9_223_372_036_854_776_000))
        );
        assert_eq!(integral(-two_63), None);
        assert_eq!(
            integral(9.21e18),
            Some(Integral::Signed(9_210_000_000_000_000_000))
        );
        assert_eq!(
            integral(1.8e19),
            Some(Integral::Unsigned(18_000_000_000_000_000_000))
        );
        assert_eq!(
            integral(1_152_921_504_606_846_976.0),
            Some(Integral::Signed(1_152_921_504_606_847_000))
        );
        assert_eq!(
            integral(9_007_199_254_740_991.0),
            Some(Integral::Signed(9_007_199_254_740_991))
        );
        assert_eq!(integral(-0.0), Some(Integral::Signed(0)));
        assert_eq!(integral(1.9e19), None);
        assert_eq!(integral(-9.3e18), None);
        assert_eq!(integral(0.5), None);
        assert_eq!(integral(f64::NAN), None);
        assert_eq!(integral(f64::INFINITY), None);
        for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(to_json(&Value::Float(f)), "", "Go's encoder refuses {f}");
        }
        for (f, go) in [
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-6, "0.0000015"),
            (1e-6, "0.000001"),
            (9.9e-7, "9.9e-7"),
            (-2.5e30, "-2.5e+30"),
            (5e-324, "5e-324"),
            (1.9e19, "19000000000000000000"),
            (-0.0, "-0"),
            (12345678.5, "12345678.5"),
            (1_152_921_504_606_846_976.0, "1152921504606847000"),
        ] {
            assert_eq!(to_json(&Value::Float(f)), go, "{f:e}");
            assert_eq!(
                write_json(&[f], JsonStyle::Indented).as_deref(),
                Ok(format!("[\n  {go}\n]").as_str())
            );
        }
    }

    #[test]
    fn json_for_yaml_readers_escapes_what_they_refuse() {
        let v = serde_json::json!({"k": "a\u{82}b\u{7f}\u{feff}é\0"});
        let text = json_for_yaml_readers(v.to_string());
        assert_eq!(text, r#"{"k":"a\u0082b\u007f\ufeffé\u0000"}"#);
        let back: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), v);
    }

    // Expected strings from Helm v4.2.3 (toJson, toYaml).
    #[test]
    fn json_and_yaml_as_helm() {
        let v = from_yaml("b: <x&y>\na: 1000000\nc: [1.5, true, null]\n").unwrap();
        assert_eq!(
            to_json(&v),
            r#"{"a":1000000,"b":"\u003cx\u0026y\u003e","c":[1.5,true,null]}"#
        );
        assert_eq!(
            to_yaml(&v),
            "a: 1000000\nb: <x&y>\nc:\n- 1.5\n- true\n- null\n"
        );
    }
}
