//! YAML read as Helm reads values (`sigs.k8s.io/yaml`: go-yaml v2, then
//! JSON): plain scalars resolved by YAML 1.1 (`yes`, `on`, `y` are
//! booleans, `017` is octal), numbers as float64, timestamps as their
//! text, anchors, aliases and `<<` merge keys expanded. Quoted and block
//! scalars are strings.

//!
//! Two readers give the same values: [`fast`] reads the common shapes
//! (block mappings and sequences of one-line scalars) straight from the
//! text, and says "not sure" on anything else; the events of
//! `granit-parser` read every other text and give every error.

#[cfg(test)]
mod differential;
mod fast;
mod resolve;

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle};

use resolve::key_text;
pub use resolve::{resolve, resolve_output};

use crate::value::{Map, Value};

/// Bytes of a scalar that count as one more node: an alias of a long
/// string costs its length (the budget then bounds the bytes aliases
/// repeat too, at most 16 per node).
const SCALAR_BYTES_PER_NODE: u64 = 16;

/// How many nodes reading may still produce, each alias counted at the
/// full size of what it repeats: the budget of one text
/// ([`kiln_yaml_limits::YamlLimits`]' rule, shared by all its documents),
/// so that an alias bomb is refused while it is read.
#[derive(Debug)]
pub struct Budget {
    left: u64,
    limit: u64,
    bytes: usize,
    exhausted: bool,
}

impl Budget {
    /// The budget of a text of `bytes` bytes.
    pub fn for_text(bytes: usize) -> Budget {
        let limit = kiln_yaml_limits::YamlLimits::default().budget(bytes);
        Budget {
            left: limit,
            limit,
            bytes,
            exhausted: false,
        }
    }

    /// Takes `nodes` from the budget; the limit's message past it.
    fn charge(&mut self, nodes: u64) -> Result<(), String> {
        match self.left.checked_sub(nodes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.exhausted = true;
                Err(kiln_yaml_limits::ExpansionError {
                    limit: self.limit,
                    bytes: self.bytes,
                    line: None,
                    excess: kiln_yaml_limits::Excess::Aliases,
                }
                .to_string())
            }
        }
    }
}

/// The documents of `text` (an empty document is [`Value::Nil`]).
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    documents_within(text, &mut Budget::for_text(text.len()))
}

/// [`documents`], taking the nodes from `budget`.
fn documents_within(text: &str, budget: &mut Budget) -> Result<Vec<Value>, String> {
    read_documents(text, budget, resolve)
}

/// The first document of `text`, a rendered manifest, as Helm's install
/// reads it (plain scalars by [`resolve_output`]: integers exact); Nil
/// when empty. Its aliases are held to the text's budget.
pub fn read_output(text: &str) -> Result<Value, String> {
    let mut budget = Budget::for_text(text.len());
    let documents = read_documents(text, &mut budget, resolve_output)?;
    Ok(documents.into_iter().next().unwrap_or_default())
}

fn read_documents(
    text: &str,
    budget: &mut Budget,
    plain: fn(&str) -> Value,
) -> Result<Vec<Value>, String> {
    let mut reader = Reader {
        events: Parser::new_from_str(text),
        anchors: HashMap::new(),
        non_finite: false,
        budget,
        plain,
    };
    let mut out = Vec::new();
    loop {
        match reader.next()? {
            None | Some(Event::StreamEnd) => return Ok(out),
            Some(Event::DocumentStart(..)) => {
                let first = reader.next()?;
                match first {
                    Some(Event::DocumentEnd) | None => out.push(Value::Nil),
                    Some(event) => {
                        let value = reader.node(event)?;
                        if reader.non_finite {
                            refuse_non_finite(&value, 0)?;
                        }
                        out.push(value);
                        reader.next()?;
                    }
                }
            }
            Some(_) => {}
        }
    }
}

/// The first document of `text` (Nil when empty).
pub fn read(text: &str) -> Result<Value, String> {
    #[cfg(test)]
    differential::record(text);
    match fast::read(text) {
        Some(value) => Ok(value),
        None => read_events(text),
    }
}

/// The first document of `text` when the fast reader is sure of it (then
/// it holds no alias), else None.
pub fn read_fast(text: &str) -> Option<Value> {
    #[cfg(test)]
    differential::record(text);
    fast::read(text)
}

/// The first document `text` of a values file whose nodes `budget` holds
/// (the whole file's, shared by its documents): as [`read`]; a text the
/// fast reader reads holds no alias and takes nothing from the budget.
pub fn read_within(text: &str, budget: &mut Budget) -> Result<Value, Bounded> {
    if let Some(value) = read_fast(text) {
        return Ok(value);
    }
    match documents_within(text, budget) {
        Ok(documents) => Ok(documents.into_iter().next().unwrap_or_default()),
        Err(message) if budget.exhausted => Err(Bounded::Expansion(message)),
        Err(message) => Err(Bounded::Read(message)),
    }
}

/// Why [`read_within`] refused a text.
#[derive(Debug)]
pub enum Bounded {
    /// Its aliases expand past the budget (the limit's own message).
    Expansion(String),
    /// The reader's error.
    Read(String),
}

/// The first document of `text` read from the parser's events (every
/// text, every error): what [`read`] gives when the fast reader is not sure.
pub fn read_events(text: &str) -> Result<Value, String> {
    Ok(documents(text)?.into_iter().next().unwrap_or_default())
}

struct Reader<'a, 'b> {
    events: Parser<'a, granit_parser::StrInput<'a>>,
    /// Each anchor's value and how many nodes it holds.
    anchors: HashMap<usize, (Value, u64)>,
    /// Whether a plain scalar read as an infinity or NaN.
    non_finite: bool,
    /// The nodes reading may still produce.
    budget: &'b mut Budget,
    /// How a plain scalar resolves ([`resolve`], [`resolve_output`]).
    plain: fn(&str) -> Value,
}

/// sigs.k8s.io/yaml turns what go-yaml read into JSON, and Go's encoder
/// refuses an infinity or NaN among the values (as a key it is text:
/// "+Inf").
fn refuse_non_finite(v: &Value, depth: usize) -> Result<(), String> {
    if depth > crate::value::MAX_NESTING {
        return Ok(());
    }
    match v {
        Value::Float(f) if !f.is_finite() => Err(format!(
            "error converting YAML to JSON: json: unsupported value: {}",
            Value::Float(*f).to_go_string()
        )),
        Value::List(items) => items
            .iter()
            .try_for_each(|x| refuse_non_finite(x, depth + 1)),
        Value::Map(m) => m
            .borrow()
            .values()
            .try_for_each(|x| refuse_non_finite(x, depth + 1)),
        _ => Ok(()),
    }
}

impl<'a> Reader<'a, '_> {
    fn next(&mut self) -> Result<Option<Event<'a>>, String> {
        match self.events.next() {
            None => Ok(None),
            Some(Ok((event, _))) => Ok(Some(event)),
            Some(Err(e)) => Err(format!("yaml: {e}")),
        }
    }

    fn expect(&mut self) -> Result<Event<'a>, String> {
        self.next()?
            .ok_or_else(|| "yaml: unexpected end of input".to_owned())
    }

    fn node(&mut self, event: Event<'a>) -> Result<Value, String> {
        let before = self.budget.left;
        match &event {
            Event::Alias(_) => {}
            // A long scalar weighs more than one node: an alias repeating
            // it (as a key's text, say) repeats its bytes.
            Event::Scalar(text, ..) => self
                .budget
                .charge(1 + text.len() as u64 / SCALAR_BYTES_PER_NODE)?,
            _ => self.budget.charge(1)?,
        }
        let (value, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == ScalarStyle::Plain;
                let tagged_str = tag.as_ref().is_some_and(|t| t.suffix() == "str");
                let v = if plain && !tagged_str {
                    self.non_finite |= resolve::non_finite(&text).is_some();
                    (self.plain)(&text)
                } else {
                    Value::str(&*text)
                };
                (v, anchor)
            }
            Event::Alias(id) => {
                let (value, nodes) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| "yaml: unknown anchor".to_owned())?;
                // Shared, not copied, but every use of it (a key's text,
                // a merge, toYaml, toJson) walks all of it.
                self.budget.charge(nodes)?;
                return Ok(value);
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.expect()? {
                        Event::SequenceEnd => break,
                        e => items.push(self.node(e)?),
                    }
                }
                (Value::list(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => {
                let mut map = Map::new();
                let mut merged: Vec<Map> = Vec::new();
                loop {
                    let key_event = match self.expect()? {
                        Event::MappingEnd => break,
                        e => e,
                    };
                    let is_merge = matches!(&key_event, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
                    let key = self.node(key_event)?;
                    let value_event = self.expect()?;
                    let value = self.node(value_event)?;
                    if is_merge {
                        match value {
                            Value::Map(m) => merged.push(m.borrow().clone()),
                            Value::List(l) => merged.extend(l.iter().filter_map(|v| v.map_clone())),
                            _ => {
                                return Err(
                                    "yaml: map merge requires map or sequence of maps as the value"
                                        .into(),
                                );
                            }
                        }
                        continue;
                    }
                    map.insert(key_text(&key), value);
                }
                for m in merged {
                    for (k, v) in m {
                        map.entry(k).or_insert(v);
                    }
                }
                (Value::map(map), anchor)
            }
            other => return Err(format!("yaml: unexpected {other:?}")),
        };
        if anchor != 0 {
            let nodes = before - self.budget.left;
            self.anchors.insert(anchor, (value.clone(), nodes));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::to_json;

    // Expected JSON from Helm v4.2.3 (`toJson` of values read from YAML).
    #[test]
    fn values_read_as_helm_reads_them() {
        let v = read(
            "y: yes\nn: \"no\"\non: [on, off, Y]\noct: 017\nhex: 0x1F\nf: 1.5e3\nq: '017'\n\
             t: 2024-01-01\nbase: &b {a: 1}\nref: *b\nmerged:\n  <<: *b\n  c: 2\nbig: 1e400\n\
             sexa: 190:20:30\nund: 1_000\n",
        )
        .unwrap();
        assert_eq!(
            to_json(&v),
            r#"{"base":{"a":1},"big":"1e400","f":1500,"false":"no","hex":31,"merged":{"a":1,"c":2},"oct":15,"q":"017","ref":{"a":1},"sexa":"190:20:30","t":"2024-01-01","true":[true,false,true],"und":1000}"#
        );
    }

    /// go-yaml v2 resolves
    /// `.inf`, `-.Inf`, `.nan` (and the other spellings) to float64
    /// infinities/NaN, which sigs.k8s.io/yaml cannot turn into JSON: Helm
    /// v4.2.3 refuses `a: .inf` in values.yaml ("error converting YAML to
    /// JSON: json: unsupported value: +Inf"; Kiln read the string ".inf").
    #[test]
    fn infinities_and_nan_are_refused_as_helm_refuses_them() {
        for text in ["a: .inf\n", "a: -.Inf\n", "a: .nan\n", "- +.INF\n"] {
            assert!(read(text).is_err(), "{text:?} reads as {:?}", read(text));
        }
    }
}
