//! How far a YAML text from outside may expand, checked before it is
//! parsed.
//!
//! YAML aliases (`*name`) replay the node their anchor (`&name`) marks.
//! `serde_yaml` bounds the number of *jumps* to aliases (100 per event of
//! the document), not the nodes each jump replays: one anchor of N items
//! referenced N times is N² values from a text of a few times N bytes, so a
//! 150 KB file can take gigabytes once parsed. [`check`] walks the text with
//! `serde_yaml` itself — the same parser, so nothing is read differently by
//! the check and by the parse that follows — and counts every node with the
//! aliases expanded, stopping as soon as the count passes the budget that
//! [`YamlLimits`] gives the text's size: its cost is bounded by that budget,
//! whatever the document expands to. Nesting is bounded by `serde_yaml`
//! itself (128 levels for every document), in the check and in the parse.
//!
//! Two more bounds hold whatever the text, aliases or not:
//!
//! - `serde_yaml` reads every event (node, start and end of a collection)
//!   of a document into memory before it builds anything from it, at about
//!   a hundred bytes or more each, so a 15 MiB `[1,1,1,…]` takes gigabytes
//!   before any value exists. [`check`] counts each document's events with
//!   a streaming parser (`granit-parser`: constant memory, no tree) and
//!   refuses a document past [`YamlLimits::max_document_events`].
//! - Without aliases a text still holds up to about two nodes per byte; a
//!   long one is counted too, and held to [`YamlLimits::max_nodes`].
//!
//! Short texts cost nothing: a text without `*` holds at most about two
//! events (and nodes) per byte, so one short enough that this cannot pass
//! a limit is not walked at all.
//!
//! Every YAML text Kiln reads from outside (repository files, plugin output,
//! API request bodies, settings files) goes through [`check`] first: in the
//! host and in the first-party plugins, which is why this crate depends only
//! on `serde` and `serde_yaml` and builds for `wasm32-wasip2`.

use core::cell::Cell;
use core::fmt;

use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// Budget every text has, however short: small files may use aliases
/// freely. Reaching it takes a text of at least a hundred bytes, so many
/// small texts cannot add up to much more than [`DEFAULT_NODES_PER_BYTE`]
/// per byte.
pub const DEFAULT_MIN_NODES: u64 = 1_000;
/// Nodes each byte of input may expand to. YAML without aliases has at most
/// about one node per byte (`[1,1,1]`, `{a,b,c}`), usually one per ten.
pub const DEFAULT_NODES_PER_BYTE: u64 = 8;
/// Nodes no text may expand to, however long: about a few hundred MB once
/// parsed into values.
pub const DEFAULT_MAX_NODES: u64 = 4_000_000;

/// Parser events one document may hold (a scalar or alias is one, a
/// collection two: start and end). The largest object the API server
/// stores is about 1.5 MiB, some 150,000 events; a `List` of many objects
/// in one document is the only ordinary reason to come near this.
pub const DEFAULT_MAX_DOCUMENT_EVENTS: u64 = 1_000_000;

/// How many nodes (scalars, sequences, mappings; mapping keys count) a YAML
/// text may hold with its aliases expanded: `nodes_per_byte` × its length,
/// at least `min_nodes`, at most `max_nodes`. The budget covers all the
/// documents of the text together. Each document may also hold at most
/// `max_document_events` parser events as written (aliases unexpanded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YamlLimits {
    /// Budget of any text, however short. Default: [`DEFAULT_MIN_NODES`].
    pub min_nodes: u64,
    /// Budget per byte of text. Default: [`DEFAULT_NODES_PER_BYTE`].
    pub nodes_per_byte: u64,
    /// Absolute cap, aliases or not. Default: [`DEFAULT_MAX_NODES`].
    pub max_nodes: u64,
    /// Parser events of one document. Default:
    /// [`DEFAULT_MAX_DOCUMENT_EVENTS`].
    pub max_document_events: u64,
}

impl Default for YamlLimits {
    fn default() -> Self {
        Self {
            min_nodes: DEFAULT_MIN_NODES,
            nodes_per_byte: DEFAULT_NODES_PER_BYTE,
            max_nodes: DEFAULT_MAX_NODES,
            max_document_events: DEFAULT_MAX_DOCUMENT_EVENTS,
        }
    }
}

/// The most events (and nodes) an alias-free text of `bytes` bytes (YAML or
/// JSON) can hold: two per byte (`[:,:,:]` is four events per two bytes),
/// plus the stream's and a document's own. A text within a budget by this
/// bound needs no counting.
pub fn most_nodes_without_aliases(bytes: usize) -> u64 {
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .saturating_mul(2)
        .saturating_add(8)
}

impl YamlLimits {
    /// The number of nodes a text of `bytes` bytes may expand to.
    pub fn budget(&self, bytes: usize) -> u64 {
        u64::try_from(bytes)
            .unwrap_or(u64::MAX)
            .saturating_mul(self.nodes_per_byte)
            .max(self.min_nodes)
            .min(self.max_nodes)
    }
}

/// Which bound a text passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Excess {
    /// Its aliases expand beyond its budget of nodes.
    Aliases,
    /// It holds more nodes than any text may ([`YamlLimits::max_nodes`]).
    Nodes,
    /// One of its documents holds more parser events than one may
    /// ([`YamlLimits::max_document_events`]); `bytes` is that document's
    /// length.
    DocumentEvents,
    /// It is too long to be read without counting its events, and the
    /// counting parser cannot read it (at `line`).
    Uncountable,
}

/// A YAML text beyond its limits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(self))]
pub struct ExpansionError {
    /// The budget that was exceeded.
    pub limit: u64,
    /// The length of the text (of the document, for
    /// [`Excess::DocumentEvents`]).
    pub bytes: usize,
    /// 1-based line of the node at which the budget ran out, when known
    /// (inside the anchor being replayed; the document's first line).
    pub line: Option<usize>,
    /// Which bound.
    pub excess: Excess,
}

fn describe(e: &ExpansionError) -> String {
    match e.excess {
        Excess::Aliases => format!(
            "YAML aliases expand to more than {} nodes, the limit for {} bytes of YAML \
             (an alias bomb?)",
            e.limit, e.bytes
        ),
        Excess::Nodes => format!(
            "YAML text of {} bytes holds more than {} nodes, the most one text may hold",
            e.bytes, e.limit
        ),
        Excess::DocumentEvents => format!(
            "YAML document of {} bytes holds more than {} nodes and collection ends, the most \
             one document may hold (split it into several documents)",
            e.bytes, e.limit
        ),
        Excess::Uncountable => format!(
            "YAML text of {} bytes is too long to be read without counting its nodes (over {} \
             per document), and it is not YAML that can be counted",
            e.bytes, e.limit
        ),
    }
}

/// Checks that `text` (every document of it) stays within `limits`: its
/// nodes with aliases expanded within the budget for its length, each
/// document's events within [`YamlLimits::max_document_events`]. Syntax
/// errors are not reported here: the parse that follows reports them with
/// its own context (a text too long to be read without counting, which the
/// counting parser cannot read, is refused with that parser's error).
pub fn check(text: &str, limits: &YamlLimits) -> Result<(), ExpansionError> {
    let aliases = text.contains('*');
    let bound = most_nodes_without_aliases(text.len());
    if bound > limits.max_document_events {
        check_documents(text, limits)?;
    }
    let budget = limits.budget(text.len());
    // Every alias is spelled with `*`: without one, a text holds no more
    // nodes than its own size allows, and counting would only cost time.
    if !aliases && bound <= budget {
        return Ok(());
    }
    let counter = Counter {
        left: Cell::new(budget),
        exhausted: Cell::new(false),
    };
    for document in serde_yaml::Deserializer::from_str(text) {
        if let Err(error) = Count(&counter).deserialize(document) {
            if counter.exhausted.get() {
                return Err(ExpansionError {
                    limit: budget,
                    bytes: text.len(),
                    line: error.location().map(|l| l.line()),
                    excess: if aliases {
                        Excess::Aliases
                    } else {
                        Excess::Nodes
                    },
                });
            }
            // Any other error (syntax, unknown anchor, nesting) is the
            // parse's to report, and every parse stops at it: so does the
            // count (serde_yaml panics on the documents after an unknown
            // anchor).
            break;
        }
    }
    Ok(())
}

/// Counts the nodes (scalars, sequences, mappings; keys count; aliases
/// expanded) `deserializer` yields for one value, stopping as soon as the
/// count passes `budget`: `Ok(Some(n))` with `n <= budget`, `Ok(None)` past
/// it, `Err` for the deserializer's own errors. Any `serde` format:
/// `serde_json` streams, so counting a JSON text holds nothing of it.
pub fn count_nodes<'de, D: de::Deserializer<'de>>(
    deserializer: D,
    budget: u64,
) -> Result<Option<u64>, D::Error> {
    let counter = Counter {
        left: Cell::new(budget),
        exhausted: Cell::new(false),
    };
    match Count(&counter).deserialize(deserializer) {
        Ok(()) => Ok(Some(budget - counter.left.get())),
        Err(_) if counter.exhausted.get() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Counts the events of each document of `text` as it streams by (no
/// document is held), refusing the first document past the limit.
fn check_documents(text: &str, limits: &YamlLimits) -> Result<(), ExpansionError> {
    use granit_parser::{Event, Parser};
    let mut events = 0u64;
    let mut start = (0usize, 1usize);
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(item) => item,
            // It cannot be counted, and it is too long to be read
            // uncounted: refused, with the reason.
            Err(error) => {
                return Err(ExpansionError {
                    limit: limits.max_document_events,
                    bytes: text.len(),
                    line: Some(error.marker().line()),
                    excess: Excess::Uncountable,
                });
            }
        };
        match event {
            Event::DocumentStart(..) => {
                events = 0;
                start = (span.start.byte_offset().unwrap_or(0), span.start.line());
            }
            Event::Scalar(..)
            | Event::Alias(..)
            | Event::UnresolvedAlias(..)
            | Event::SequenceStart(..)
            | Event::SequenceEnd
            | Event::MappingStart(..)
            | Event::MappingEnd => {
                events += 1;
                if events > limits.max_document_events {
                    let end = span.end.byte_offset().unwrap_or(start.0).min(text.len());
                    let bytes = document_length(text, start.0, end);
                    return Err(ExpansionError {
                        limit: limits.max_document_events,
                        bytes,
                        line: Some(start.1),
                        excess: Excess::DocumentEvents,
                    });
                }
            }
            // Stream and document ends, anchors' metadata.
            _ => {}
        }
    }
    Ok(())
}

/// The length of the document that starts at byte `start` (at least up to
/// `seen`): up to the next line that starts with `---` or `...`.
fn document_length(text: &str, start: usize, seen: usize) -> usize {
    let rest = text.get(seen..).unwrap_or_default();
    let end = rest
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| rest[i..].starts_with("---") || rest[i..].starts_with("..."))
        .map_or(text.len(), |i| seen + i);
    end.saturating_sub(start)
}

/// The nodes left to count.
struct Counter {
    left: Cell<u64>,
    exhausted: Cell<bool>,
}

impl Counter {
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exhausted.set(true);
                Err(E::custom("YAML alias expansion budget exhausted"))
            }
        }
    }
}

/// Counts one node and everything under it.
#[derive(Clone, Copy)]
struct Count<'a>(&'a Counter);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.take()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.take()
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.0.take()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.take()
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.0.take()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.take()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.take()
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<(), E> {
        self.0.take()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.take()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.take()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_newtype_struct<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.take()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.take()?;
        while map.next_entry_seed(self, self)?.is_some() {}
        Ok(())
    }
    /// A tagged node (`!Tag value`): the tag, then the value.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One anchor of `n` scalars referenced `n` times: n² nodes from about
    /// 5n bytes.
    fn square_bomb(n: usize) -> String {
        let items = vec!["1"; n].join(",");
        let refs = vec!["*a"; n].join(",");
        format!("a: &a [{items}]\nb: [{refs}]\n")
    }

    #[test]
    fn a_square_bomb_is_refused_at_the_budget() {
        let text = square_bomb(4_000);
        let limits = YamlLimits::default();
        let err = check(&text, &limits).unwrap_err();
        assert_eq!(err.limit, limits.budget(text.len()));
        assert_eq!(err.limit, 8 * text.len() as u64);
        assert_eq!(err.line, Some(1), "{err:?}");
        let expected = format!(
            "YAML aliases expand to more than {} nodes, the limit for {} bytes",
            err.limit,
            text.len()
        );
        assert!(err.to_string().starts_with(&expected), "{err}");
    }

    #[test]
    fn the_expansion_is_counted_exactly() {
        // 3 scalars + the anchored list, replayed 3 times under `b`, plus
        // the two keys, `b`'s list and the root mapping: 4 + 3·4 + 4 = 20.
        let text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n";
        let exact = YamlLimits {
            min_nodes: 20,
            nodes_per_byte: 0,
            max_nodes: 20,
            ..YamlLimits::default()
        };
        check(text, &exact).unwrap();
        let one_less = YamlLimits {
            min_nodes: 19,
            max_nodes: 19,
            ..exact
        };
        assert_eq!(check(text, &one_less).unwrap_err().limit, 19);
    }

    #[test]
    fn nested_laughs_are_refused() {
        // 9 levels of 9 references: 9⁹ scalars from 300 bytes.
        let mut text = String::from("l0: &l0 [x,x,x,x,x,x,x,x,x]\n");
        for level in 1..9 {
            let refs = vec![format!("*l{}", level - 1); 9].join(",");
            text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
        }
        let err = check(&text, &YamlLimits::default()).unwrap_err();
        assert_eq!(err.limit, DEFAULT_MIN_NODES.max(8 * text.len() as u64));
    }

    #[test]
    fn the_absolute_cap_holds_for_long_texts() {
        let limits = YamlLimits::default();
        assert_eq!(limits.budget(0), DEFAULT_MIN_NODES);
        assert_eq!(limits.budget(10_000), 80_000);
        assert_eq!(limits.budget(100 << 20), DEFAULT_MAX_NODES);
    }

    #[test]
    fn ordinary_documents_pass() {
        let text = "defaults: &defaults {cpu: 100m, memory: 64Mi}\n\
                    web: {resources: *defaults}\n\
                    worker: {resources: *defaults}\n\
                    ---\n\
                    tagged: !Thing {a: &x 1, b: [*x]}\n\
                    host: \"*.example.com\"\n";
        check(text, &YamlLimits::default()).unwrap();
        // Errors are the parse's to report.
        check("[broken, *a", &YamlLimits::default()).unwrap();
        check("a: *unknown\n---\nb: 1\n", &YamlLimits::default()).unwrap();
    }

    #[test]
    fn the_budget_covers_all_documents_together() {
        let doc = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n";
        let limits = YamlLimits {
            min_nodes: 50,
            nodes_per_byte: 0,
            max_nodes: 50,
            ..YamlLimits::default()
        };
        check(&format!("{doc}---\n{doc}"), &limits).unwrap();
        check(&format!("{doc}---\n{doc}---\n{doc}"), &limits).unwrap_err();
    }

    /// `[1,1,1,…]`: about one node per two bytes, no alias.
    fn flood(n: usize) -> String {
        format!("[{}]\n", vec!["1"; n].join(","))
    }

    #[test]
    fn an_alias_free_text_is_held_to_the_node_cap() {
        let limits = YamlLimits {
            max_nodes: 10_000,
            ..YamlLimits::default()
        };
        check(&flood(9_000), &limits).unwrap();
        let text = flood(20_000);
        let err = check(&text, &limits).unwrap_err();
        assert_eq!(err.excess, Excess::Nodes);
        assert_eq!(err.limit, 10_000);
        assert!(
            err.to_string().starts_with(&format!(
                "YAML text of {} bytes holds more than 10000 nodes",
                text.len()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_document_is_held_to_its_events_whatever_the_text() {
        let limits = YamlLimits {
            max_document_events: 1_000,
            ..YamlLimits::default()
        };
        // Many small documents pass; one large one is refused, naming the
        // line it starts on and its length.
        let small = vec!["a: [1, 2, 3]\n"; 500].join("---\n");
        check(&small, &limits).unwrap();
        let big = flood(2_000);
        let text = format!("a: 1\n---\n{big}---\nb: 2\n");
        let err = check(&text, &limits).unwrap_err();
        assert_eq!(err.excess, Excess::DocumentEvents, "{err}");
        assert_eq!(err.line, Some(2), "{err}");
        assert!((big.len()..big.len() + 8).contains(&err.bytes), "{err:?}");
        assert!(
            err.to_string().contains("split it into several documents"),
            "{err}"
        );
        // The same within one flow mapping, block sequence or nesting.
        for text in [
            format!("{{{}}}\n", vec!["a"; 1_000].join(",")),
            "- x\n".repeat(1_100),
            "- [[]]\n".repeat(400),
        ] {
            assert_eq!(
                check(&text, &limits).unwrap_err().excess,
                Excess::DocumentEvents,
                "{text:.40}"
            );
        }
    }

    #[test]
    fn a_long_text_the_counting_parser_refuses_is_refused() {
        let limits = YamlLimits {
            max_document_events: 100,
            ..YamlLimits::default()
        };
        let text = format!("a: ]]\nb: [{}]\n", vec!["1"; 100].join(","));
        let err = check(&text, &limits).unwrap_err();
        assert_eq!(err.excess, Excess::Uncountable, "{err}");
        // A short one is the parse's to report.
        check("a: [1, 2\n b: ]]\n", &limits).unwrap();
    }

    #[test]
    fn the_default_document_limit_leaves_room_for_large_objects() {
        // A 1.4 MiB ConfigMap (the largest object the API server stores)
        // of ordinary keys: far below the default.
        let mut text =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n");
        let mut i = 0;
        while text.len() < 1_400_000 {
            text.push_str(&format!(
                "  key-{i}: \"value, with: punctuation [and] {{braces}}\"\n"
            ));
            i += 1;
        }
        check(&text, &YamlLimits::default()).unwrap();
    }
}
