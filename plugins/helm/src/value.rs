//! The values templates work on: what Go's `interface{}` holds in Helm
//! (YAML/JSON data, template literals, Sprig results), with Go's printing.

use std::cell::{Cell, Ref, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// A map as Go's `map[string]interface{}`: templates see its keys sorted.
pub type Map = BTreeMap<String, Value>;

/// A map value's cell: the map, when it was made, and whether it is a
/// chart's template dot.
///
/// `born` orders maps by creation (a per-thread counter, [`births`]): a
/// map born after a moment cannot be part of any value that existed
/// then. The `include` memo ([`crate::incmemo`]) relies on it to tell the
/// maps a template changes in place from those it made itself.
///
/// A chart's template dot (`$` at the top of each of its template files,
/// [`MapCell::template_dot`]) is one map for all of them, as in Helm; only
/// its `.Template` is replaced from file to file
/// ([`MapCell::replace_template`]). Reading it is counted
/// ([`file_observations`]) unless the read is of another field
/// ([`MapCell::field`]): a template call during which the count did not
/// move gave a text that does not depend on which file runs.
#[derive(Debug)]
pub struct MapCell {
    born: u64,
    /// Whether this is a chart's template dot.
    template_dot: bool,
    /// Whether this is one of Helm's `Values` (a chart's `.Values`, the
    /// template dot, `.Template`): Go's `common.Values`, with the method
    /// `AsMap` ([`MapCell::as_map`]).
    values: Cell<bool>,
    map: RefCell<Map>,
}

thread_local! {
    /// The one nil `[]string` ([`Value::nil_strings`]).
    static NIL_STRINGS: Rc<Vec<Value>> = Rc::new(Vec::new());
    /// Maps made so far on this thread ([`MapCell::born`]).
    static BIRTHS: Cell<u64> = const { Cell::new(0) };
    /// Reads so far on this thread that could tell template files apart
    /// ([`file_observations`]).
    static FILE_OBSERVATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The birth number the next map made on this thread gets: every map that
/// exists now has a smaller one.
pub fn births() -> u64 {
    BIRTHS.with(Cell::get)
}

/// How many times so far on this thread a template could have told which
/// template file runs: a read of a chart's template dot other than of one
/// of its fields, a read of its `.Template`, a change to it, or an
/// `include` text reused from a call that did one of these
/// ([`note_file_observed`]).
pub fn file_observations() -> u64 {
    FILE_OBSERVATIONS.with(Cell::get)
}

/// Counts one [`file_observations`].
pub fn note_file_observed() {
    FILE_OBSERVATIONS.with(|n| n.set(n.get() + 1));
}

impl MapCell {
    /// A new map cell, born now.
    pub fn new(map: Map) -> Self {
        MapCell {
            born: next_birth(),
            template_dot: false,
            values: Cell::new(false),
            map: RefCell::new(map),
        }
    }

    /// The template dot of a chart: `map` holds its context (`.Values`,
    /// `.Chart`, ...), the same for all its template files.
    pub fn template_dot(map: Map) -> Self {
        MapCell {
            born: next_birth(),
            template_dot: true,
            values: Cell::new(true),
            map: RefCell::new(map),
        }
    }

    /// When the map was made ([`births`] at that moment).
    pub fn born(&self) -> u64 {
        self.born
    }

    /// Whether this is a chart's template dot.
    pub fn is_template_dot(&self) -> bool {
        self.template_dot
    }

    /// Marks the map as one of Helm's `Values` (a chart's `.Values`,
    /// `.Template`).
    pub fn mark_values(&self) {
        self.values.set(true);
    }

    /// `.name` of the map as a template evaluates it: Helm's `Values` has
    /// the method `AsMap`, which Go finds before a key of that name; any
    /// other name is a key ([`MapCell::field`]).
    pub fn method_or_field(self: &Rc<Self>, name: &str) -> Value {
        if name == "AsMap" && self.values.get() {
            return self.as_map();
        }
        self.field(name).unwrap_or_default()
    }

    /// `Values.AsMap`: the map itself, as a plain map, or a new empty map
    /// when it is empty (as Helm's does). Whether it is empty is the same
    /// in every template file, and is not counted.
    fn as_map(self: &Rc<Self>) -> Value {
        if self.map.borrow().is_empty() {
            Value::map(Map::new())
        } else {
            Value::Map(self.clone())
        }
    }

    /// The map, to read.
    pub fn borrow(&self) -> Ref<'_, Map> {
        if self.template_dot {
            note_file_observed();
        }
        self.map.borrow()
    }

    /// The map, to change in place (Sprig's `set`, `unset`, `merge`).
    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, Map> {
        if self.template_dot {
            note_file_observed();
        }
        self.map.borrow_mut()
    }

    /// `map.field` as a template reads it: a field of a chart's template
    /// dot other than `.Template` is the same in all its files, and
    /// reading it is not counted.
    pub fn field(&self, key: &str) -> Option<Value> {
        if self.template_dot && key == "Template" {
            note_file_observed();
        }
        lookup(&self.map.borrow(), key).cloned()
    }

    /// Whether the map has `key` (`hasKey`): a chart's template dot has the
    /// same keys in all its files but `.Template` (missing before its first
    /// file runs, and after an `unset`, until the renderer sets it again),
    /// and asking for another is not counted.
    pub fn contains_key(&self, key: &str) -> bool {
        if self.template_dot && key == "Template" {
            note_file_observed();
        }
        lookup(&self.map.borrow(), key).is_some()
    }

    /// The map, read by the `include` memo to compare dots (not counted:
    /// the memo itself tells what a text depends on).
    pub(crate) fn borrow_uncounted(&self) -> Ref<'_, Map> {
        self.map.borrow()
    }

    /// Sets `.Template` of a chart's template dot before one of its files
    /// runs, as Helm does (not counted: the renderer then drops the
    /// `include` texts that depended on the one before,
    /// [`crate::incmemo::IncludeMemo::template_replaced`]).
    pub(crate) fn replace_template(&self, template: Value) {
        debug_assert!(self.template_dot);
        self.map.borrow_mut().insert("Template".into(), template);
    }
}

/// The next birth number ([`births`]).
fn next_birth() -> u64 {
    BIRTHS.with(|b| {
        let n = b.get();
        b.set(n + 1);
        n
    })
}

/// Most entries of a map [`lookup`] scans rather than searches (one
/// B-tree node holds eleven).
const SCANNED_MAP: usize = 11;

/// `map[key]`: small maps are scanned comparing lengths first and bytes
/// word-wise ([`kiln_bytes::eq`]); a B-tree search compares each key on
/// its way with `memcmp`, a byte at a time inside WebAssembly.
pub fn lookup<'m>(map: &'m Map, key: &str) -> Option<&'m Value> {
    if map.len() <= SCANNED_MAP {
        return map
            .iter()
            .find(|(k, _)| kiln_bytes::eq(k.as_bytes(), key.as_bytes()))
            .map(|(_, v)| v);
    }
    map.get(key)
}

/// A template value.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// Go's nil (also a missing map key under `missingkey=zero`).
    #[default]
    Nil,
    /// `bool`.
    Bool(bool),
    /// Go's `int` (template literals, `len`, `int`, `atoi`).
    Int(i64),
    /// Go's `int64` (Sprig's arithmetic, `int64`).
    Int64(i64),
    /// `float64` (every number of values files and JSON).
    Float(f64),
    /// `string`.
    Str(Rc<str>),
    /// `[]interface{}`.
    List(Rc<Vec<Value>>),
    /// `[]string` (Sprig's `splitList`, `keys`, ...).
    Strings(Rc<Vec<Value>>),
    /// `map[string]interface{}`: shared, as Go's maps are (Sprig's `set`,
    /// `unset` and `merge` change it in place, for every holder).
    Map(Rc<MapCell>),
    /// `.Files`: the chart's non-template files.
    Files(Rc<crate::files::Files>),
    /// `.Capabilities.APIVersions`.
    ApiVersions(Rc<Vec<String>>),
    /// `[]byte` (`.Files.GetBytes`, the values of ranging over `.Files`).
    Bytes(Rc<[u8]>),
    /// `time.Time` (`now`, `toDate`, `dateModify`).
    Time(Rc<crate::gotime::Time>),
    /// Another Go value with methods: a semantic version, a duration, a
    /// month… ([`crate::goobj`]).
    Go(Rc<crate::goobj::GoObject>),
}

impl Value {
    /// A string value.
    pub fn str(s: impl AsRef<str>) -> Value {
        Value::Str(Rc::from(s.as_ref()))
    }

    /// Go's nil `[]string` (what `regexFindAll` returns without a match):
    /// empty, but `null` to `toJson` and `toYaml`.
    pub fn nil_strings() -> Value {
        NIL_STRINGS.with(|l| Value::Strings(l.clone()))
    }

    /// Whether this is [`Value::nil_strings`].
    pub fn is_nil_slice(&self) -> bool {
        matches!(self, Value::Strings(l) if NIL_STRINGS.with(|n| Rc::ptr_eq(l, n)))
    }

    /// A map value.
    pub fn map(m: Map) -> Value {
        Value::Map(Rc::new(MapCell::new(m)))
    }

    /// A list value.
    pub fn list(l: Vec<Value>) -> Value {
        Value::List(Rc::new(l))
    }

    /// Go's truth: false, 0, nil and empty strings, lists and maps are false.
    pub fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) | Value::Strings(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            // Go's map (`engine.files`) and slice (`common.VersionSet`):
            // true when not empty (an empty `.Files.Glob` is false).
            Value::Files(f) => !f.entries().is_empty(),
            Value::ApiVersions(a) => !a.is_empty(),
            Value::Time(_) => true,
            Value::Go(o) => o.truth(),
            Value::Bytes(b) => !b.is_empty(),
        }
    }

    /// Go's type name (`typeOf`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Strings(_) => "[]string",
            Value::Map(_) => "map[string]interface {}",
            Value::Files(_) => "engine.files",
            Value::Bytes(_) => "[]uint8",
            Value::ApiVersions(_) => "common.VersionSet",
            Value::Time(_) => "time.Time",
            Value::Go(o) => o.type_name(),
        }
    }

    /// Go's kind name (`kindOf`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) | Value::Strings(_) | Value::ApiVersions(_) | Value::Bytes(_) => "slice",
            Value::Map(_) | Value::Files(_) => "map",
            Value::Time(_) => "struct",
            Value::Go(o) => o.kind_name(),
        }
    }

    /// The string inside, if a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if a list.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) | Value::Strings(l) => Some(l),
            _ => None,
        }
    }

    /// The map, if a map.
    pub fn as_map(&self) -> Option<Ref<'_, Map>> {
        match self {
            Value::Map(m) => Some(m.borrow()),
            _ => None,
        }
    }

    /// A copy of the map (its values still shared), if a map.
    pub fn map_clone(&self) -> Option<Map> {
        self.as_map().map(|m| m.clone())
    }

    /// A copy sharing nothing with `self` (Sprig's `deepCopy`).
    pub fn deep_copy(&self) -> Value {
        self.deep_copy_at(0)
    }

    fn deep_copy_at(&self, depth: usize) -> Value {
        if depth > MAX_NESTING {
            return Value::Nil;
        }
        match self {
            Value::Map(m) => Value::map(
                m.borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.deep_copy_at(depth + 1)))
                    .collect(),
            ),
            Value::List(l) => Value::list(l.iter().map(|v| v.deep_copy_at(depth + 1)).collect()),
            other => other.clone(),
        }
    }

    /// Whether the value is an integer of either Go type.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) | Value::Int64(i) => Some(*i),
            _ => None,
        }
    }

    /// Go's `fmt.Sprint` of the value (`%v`).
    pub fn to_go_string(&self) -> String {
        let mut out = String::new();
        write_go(&mut out, self, 0);
        out
    }

    /// Appends what a template action prints ([`Value::to_template_string`])
    /// to `out`.
    pub fn write_template(&self, out: &mut String) {
        match self {
            Value::Nil => out.push_str("<no value>"),
            other => write_go(out, other, 0),
        }
    }

    /// What a template action prints: `<no value>` for nil.
    pub fn to_template_string(&self) -> String {
        match self {
            Value::Nil => "<no value>".to_owned(),
            other => other.to_go_string(),
        }
    }
}

/// Deepest nesting printed or copied: a map that contains itself (Go maps
/// are shared, and `set` can make a cycle) stops here instead of
/// exhausting the stack.
pub const MAX_NESTING: usize = 256;

/// Appends `%v` of `v` (nil as `<nil>`) at nesting `depth`.
fn write_go(out: &mut String, v: &Value, depth: usize) {
    if depth > MAX_NESTING {
        out.push_str("...");
        return;
    }
    match v {
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float_g(*f)),
        Value::Str(s) => out.push_str(s),
        // Go prints a time.Time with its String method.
        Value::Time(t) => out.push_str(&t.go_string()),
        // ... and these with theirs.
        Value::Go(o) => out.push_str(&o.go_string()),
        Value::List(l) | Value::Strings(l) => {
            out.push('[');
            for (i, item) in l.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(out, item, depth + 1);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push_str("map[");
            for (i, (k, item)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_go(out, item, depth + 1);
            }
            out.push(']');
        }
        Value::Files(f) => {
            out.push_str("map[");
            for (i, (k, _)) in f.entries().iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{k}:[...]");
            }
            out.push(']');
        }
        Value::ApiVersions(l) => {
            let _ = write!(out, "[{}]", l.join(" "));
        }
        Value::Bytes(b) => {
            out.push('[');
            for (i, byte) in b.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{byte}");
            }
            out.push(']');
        }
    }
}

/// The shortest decimal digits of `f` and its decimal exponent (`0.d1d2… ×
/// 10^exp`, like strconv's `decimal.dp`).
fn shortest_digits(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    (digits, exp + 1)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` (what `%v` prints for a
/// float64: `1e+06`, `1.5`, `100000`).
pub fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let (digits, dp) = shortest_digits(f);
    let sign = if f < 0.0 { "-" } else { "" };
    let exp = dp - 1;
    // Go: %e when the exponent is < -4 or >= 6 (the shortest form's
    // precision for this decision).
    let eprec = 6;
    if exp < -4 || exp >= eprec {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.abs();
        if e < 10 {
            out.push('0');
        }
        let _ = write!(out, "{e}");
        return out;
    }
    let mut out = String::from(sign);
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if dp as usize >= digits.len() {
        out.push_str(&digits);
        for _ in 0..(dp as usize - digits.len()) {
            out.push('0');
        }
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scanned (small) and searched (large) maps find what `get` finds,
    /// keys sharing prefixes and lengths included.
    #[test]
    fn lookup_is_get_on_either_side_of_the_scan_limit() {
        let names = [
            "",
            "a",
            "ab",
            "abc",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "Values",
            "values",
            "z",
        ];
        for size in [0, 1, SCANNED_MAP - 1, SCANNED_MAP, SCANNED_MAP + 1, 40] {
            let map: Map = (0..size)
                .map(|i| {
                    (
                        format!("{}{i}", names[i % names.len()]),
                        Value::Int(i as i64),
                    )
                })
                .chain((0..size.min(names.len())).map(|i| (names[i].to_owned(), Value::Int(-1))))
                .collect();
            let probes = map
                .keys()
                .cloned()
                .chain(["missing", "abcdefg", "Values0x"].map(String::from));
            for key in probes {
                assert_eq!(
                    lookup(&map, &key).map(|v| format!("{v:?}")),
                    map.get(&key).map(|v| format!("{v:?}")),
                    "{key:?} in a map of {}",
                    map.len()
                );
            }
        }
    }

    // Expected strings from Go (fmt.Sprint of float64).
    #[test]
    fn floats_print_as_go() {
        for (f, want) in [
            (1000000.0, "1e+06"),
            (100000.0, "100000"),
            (1.5, "1.5"),
            (3.0, "3"),
            (123456789.0, "1.23456789e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (12345678.0, "1.2345678e+07"),
            (0.1, "0.1"),
        ] {
            assert_eq!(format_float_g(f), want, "{f}");
        }
    }

    #[test]
    fn containers_print_as_go() {
        let mut m = Map::new();
        m.insert("b".into(), Value::Float(2.0));
        m.insert("a".into(), Value::Int(1));
        assert_eq!(Value::map(m).to_go_string(), "map[a:1 b:2]");
        let l = Value::list(vec![Value::str("a"), Value::str("b"), Value::Nil]);
        assert_eq!(l.to_go_string(), "[a b <nil>]");
    }

    #[test]
    fn as_map_is_a_method_of_helms_values_only() {
        let entries =
            |k: &str| -> Map { [(k.to_owned(), Value::str("key"))].into_iter().collect() };
        // A plain map: `.AsMap` is its key.
        let plain = Rc::new(MapCell::new(entries("AsMap")));
        assert_eq!(plain.method_or_field("AsMap").as_str(), Some("key"));
        // Helm's `Values`: the method wins over the key, and gives the map
        // itself (a write through it is a write to the values).
        let values = Rc::new(MapCell::new(entries("AsMap")));
        values.mark_values();
        let Value::Map(same) = values.method_or_field("AsMap") else {
            panic!("a map");
        };
        assert!(Rc::ptr_eq(&same, &values));
        assert_eq!(values.method_or_field("other").type_name(), "<nil>");
        // Empty values: a new map, as Helm's `AsMap` gives.
        let empty = Rc::new(MapCell::new(Map::new()));
        empty.mark_values();
        let Value::Map(new) = empty.method_or_field("AsMap") else {
            panic!("a map");
        };
        assert!(!Rc::ptr_eq(&new, &empty));
    }
}
