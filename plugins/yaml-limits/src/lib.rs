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

/// How many nodes (scalars, sequences, mappings; mapping keys count) a YAML
/// text may hold with its aliases expanded: `nodes_per_byte` × its length,
/// at least `min_nodes`, at most `max_nodes`. The budget covers all the
/// documents of the text together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YamlLimits {
    /// Budget of any text, however short. Default: [`DEFAULT_MIN_NODES`].
    pub min_nodes: u64,
    /// Budget per byte of text. Default: [`DEFAULT_NODES_PER_BYTE`].
    pub nodes_per_byte: u64,
    /// Absolute cap. Default: [`DEFAULT_MAX_NODES`].
    pub max_nodes: u64,
}

impl Default for YamlLimits {
    fn default() -> Self {
        Self {
            min_nodes: DEFAULT_MIN_NODES,
            nodes_per_byte: DEFAULT_NODES_PER_BYTE,
            max_nodes: DEFAULT_MAX_NODES,
        }
    }
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

/// A YAML text whose aliases expand beyond its budget.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "YAML aliases expand to more than {limit} nodes, the limit for {bytes} bytes of YAML \
     (an alias bomb?)"
)]
pub struct ExpansionError {
    /// The budget that was exceeded.
    pub limit: u64,
    /// The length of the text.
    pub bytes: usize,
    /// 1-based line of the node at which the budget ran out, when known
    /// (inside the anchor being replayed).
    pub line: Option<usize>,
}

/// Checks that `text` (every document of it) expands to no more nodes than
/// `limits` allow for its length. Syntax errors are not reported here: the
/// parse that follows reports them with its own context.
pub fn check(text: &str, limits: &YamlLimits) -> Result<(), ExpansionError> {
    // Every alias is spelled with `*`: without one, a text holds no more
    // nodes than its own size allows, and counting would only cost time.
    if !text.contains('*') {
        return Ok(());
    }
    let budget = limits.budget(text.len());
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
        };
        check(&format!("{doc}---\n{doc}"), &limits).unwrap();
        check(&format!("{doc}---\n{doc}---\n{doc}"), &limits).unwrap_err();
    }
}
