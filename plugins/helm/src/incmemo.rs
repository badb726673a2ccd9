//! The texts `include` produced, kept for the same template and an equal
//! dot: charts include their name and label helpers for every object
//! (`include "common.names.namespace" $`, `include "x.fullname" $ctx`
//! three times in one object), and each call runs the same template on
//! the same values again.
//!
//! A template's text is a function of its dot, the chart's templates and
//! the render's constants, as long as it draws no random numbers and
//! changes no map that existed before it started. The memo keeps a text
//! only for such a call, under:
//! - the template's tree (by identity, with no `tpl` layer running: a
//!   `tpl` text may define templates that replace the chart's);
//! - the dot, compared one level deep: a string, number or bool by value,
//!   a list, map or other shared value by identity (the memo holds it
//!   weakly, so its address is not reused while the text is kept, and it
//!   is freed when nothing else holds it); a map dot by its keys and
//!   entries in the same way (`dict "name" $name "context" $` is a new map at every
//!   call, with the same entries).
//!
//! Values change in place only through Sprig's `set`, `unset` and the
//! `merge` family, which report the map they change ([`IncludeMemo::changed`]).
//! Every map that a kept call could read existed when that call started,
//! so its birth number ([`crate::value::births`]) is below the call's
//! start: a change to a map born before a kept call's start drops that
//! call's text, and a call during which such a change happens is not
//! kept. Changes to maps born later (the ones a template makes and fills
//! itself) drop nothing.
//!
//! Bounded: [`MAX_ENTRIES`] texts of at most [`MAX_TEXT`] bytes, at most
//! [`MAX_BYTES`] together (with the keys and strings of their dots, each
//! dot at most [`MAX_DOT_ENTRIES`] entries and [`MAX_DOT_TEXT`] bytes),
//! [`MAX_PER_TREE`] per template; when one would not fit, every text is
//! dropped and the memo fills again.

use std::rc::{Rc, Weak};

use crate::value::Value;

/// Most texts kept.
pub const MAX_ENTRIES: usize = 256;
/// Most texts kept for one template.
pub const MAX_PER_TREE: usize = 8;
/// Most bytes kept, all entries together: their texts, and the keys and
/// strings of their dots.
pub const MAX_BYTES: usize = 1 << 20;
/// Longest text kept.
pub const MAX_TEXT: usize = 64 << 10;
/// Most entries of a map dot compared (a larger one is not kept).
pub const MAX_DOT_ENTRIES: usize = 12;

/// Longest string (or `[]byte`) in a dot the memo compares; a dot with a
/// longer one, or with map keys longer than this together, is not kept.
pub const MAX_DOT_TEXT: usize = 4 << 10;

/// One entry of a dot as the memo compares it.
#[derive(Debug)]
enum Atom {
    Nil,
    Bool(bool),
    Int(i64),
    Int64(i64),
    /// The bits: `-0` and `0` differ, which only costs a miss.
    Float(u64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// A shared value by identity: its address, and a weak hold on it so
    /// that the address is not reused while the entry lives (the value
    /// itself is freed as it would be without the memo).
    Shared(usize, Held),
}

/// A weak hold on a shared value ([`Atom::Shared`]): never read, only
/// held (the allocation, and with it the address, stays the value's).
#[derive(Debug)]
#[allow(dead_code)]
enum Held {
    List(Weak<Vec<Value>>),
    Strings(Weak<Vec<Value>>),
    Map(Weak<crate::value::MapCell>),
    Files(Weak<crate::files::Files>),
    ApiVersions(Weak<Vec<String>>),
    Time(Weak<crate::gotime::Time>),
}

/// The address of a shared value, `None` for a plain one.
fn address(v: &Value) -> Option<usize> {
    fn at<T: ?Sized>(rc: &Rc<T>) -> usize {
        Rc::as_ptr(rc) as *const u8 as usize
    }
    Some(match v {
        Value::List(l) | Value::Strings(l) => at(l),
        Value::Map(m) => at(m),
        Value::Files(f) => at(f),
        Value::ApiVersions(a) => at(a),
        Value::Time(t) => at(t),
        Value::Nil
        | Value::Bool(_)
        | Value::Int(_)
        | Value::Int64(_)
        | Value::Float(_)
        | Value::Str(_)
        | Value::Bytes(_) => return None,
    })
}

impl Held {
    /// The address and hold of a shared value, `None` for a plain one.
    fn of(v: &Value) -> Option<(usize, Held)> {
        let held = match v {
            Value::List(l) => Held::List(Rc::downgrade(l)),
            Value::Strings(l) => Held::Strings(Rc::downgrade(l)),
            Value::Map(m) => Held::Map(Rc::downgrade(m)),
            Value::Files(f) => Held::Files(Rc::downgrade(f)),
            Value::ApiVersions(a) => Held::ApiVersions(Rc::downgrade(a)),
            Value::Time(t) => Held::Time(Rc::downgrade(t)),
            _ => return None,
        };
        Some((address(v)?, held))
    }

    /// Whether `v` is the value held (same address, same kind).
    fn is(&self, address_held: usize, v: &Value) -> bool {
        let same_kind = matches!(
            (self, v),
            (Held::List(_), Value::List(_))
                | (Held::Strings(_), Value::Strings(_))
                | (Held::Map(_), Value::Map(_))
                | (Held::Files(_), Value::Files(_))
                | (Held::ApiVersions(_), Value::ApiVersions(_))
                | (Held::Time(_), Value::Time(_))
        );
        same_kind && address(v) == Some(address_held)
    }
}

impl Atom {
    /// The atom of `v` and the bytes of text it holds, `None` for a text
    /// longer than [`MAX_DOT_TEXT`].
    fn of(v: &Value) -> Option<(Atom, usize)> {
        Some(match v {
            Value::Nil => (Atom::Nil, 0),
            Value::Bool(b) => (Atom::Bool(*b), 0),
            Value::Int(i) => (Atom::Int(*i), 0),
            Value::Int64(i) => (Atom::Int64(*i), 0),
            Value::Float(f) => (Atom::Float(f.to_bits()), 0),
            Value::Str(s) if s.len() <= MAX_DOT_TEXT => (Atom::Str(s.clone()), s.len()),
            Value::Bytes(b) if b.len() <= MAX_DOT_TEXT => (Atom::Bytes(b.clone()), b.len()),
            Value::Str(_) | Value::Bytes(_) => return None,
            shared => {
                let (address, held) = Held::of(shared)?;
                (Atom::Shared(address, held), 0)
            }
        })
    }

    /// Whether `v` is this atom: the same plain value, or the same
    /// shared one.
    fn is(&self, v: &Value) -> bool {
        match (self, v) {
            (Atom::Nil, Value::Nil) => true,
            (Atom::Bool(a), Value::Bool(b)) => a == b,
            (Atom::Int(a), Value::Int(b)) | (Atom::Int64(a), Value::Int64(b)) => a == b,
            (Atom::Float(a), Value::Float(b)) => *a == b.to_bits(),
            (Atom::Str(a), Value::Str(b)) => {
                Rc::ptr_eq(a, b) || kiln_bytes::eq(a.as_bytes(), b.as_bytes())
            }
            (Atom::Bytes(a), Value::Bytes(b)) => Rc::ptr_eq(a, b) || kiln_bytes::eq(a, b),
            (Atom::Shared(address, held), v) => held.is(*address, v),
            _ => false,
        }
    }
}

/// A dot as the memo compares it.
#[derive(Debug)]
enum DotKey {
    /// A map dot: its entries in key order.
    Map(Vec<(Box<str>, Atom)>),
    /// Any other dot.
    Atom(Atom),
}

impl DotKey {
    /// The key of `dot` and the bytes of text it holds, if the memo keeps
    /// calls with it.
    fn of(dot: &Value) -> Option<(DotKey, usize)> {
        match dot {
            Value::Map(m) => {
                let m = m.borrow();
                if m.len() > MAX_DOT_ENTRIES {
                    return None;
                }
                let mut bytes = 0;
                let mut entries = Vec::with_capacity(m.len());
                for (k, v) in m.iter() {
                    let (atom, held) = Atom::of(v)?;
                    bytes += k.len() + held;
                    entries.push((Box::from(k.as_str()), atom));
                }
                (bytes <= MAX_DOT_TEXT).then_some((DotKey::Map(entries), bytes))
            }
            other => Atom::of(other).map(|(atom, bytes)| (DotKey::Atom(atom), bytes)),
        }
    }

    /// Whether `dot` has this key.
    fn is(&self, dot: &Value) -> bool {
        match (self, dot) {
            (DotKey::Map(entries), Value::Map(m)) => {
                let m = m.borrow();
                m.len() == entries.len()
                    && m.iter().zip(entries).all(|((k, v), (key, atom))| {
                        kiln_bytes::eq(k.as_bytes(), key.as_bytes()) && atom.is(v)
                    })
            }
            (DotKey::Atom(atom), dot) if !matches!(dot, Value::Map(_)) => atom.is(dot),
            _ => false,
        }
    }
}

/// A template as the memo tells them apart: the addresses of its shared
/// name and of its tree.
pub type TreeKey = (usize, usize);

/// A kept text.
#[derive(Debug)]
struct Entry {
    dot: DotKey,
    /// [`crate::value::births`] when the call started: every map the
    /// call could read was born before.
    start: u64,
    /// The nesting of template calls the call used below itself.
    depth: usize,
    text: Rc<str>,
    /// The bytes it holds: its text and its dot's keys and texts.
    size: usize,
    /// Whether a later call took it: a template's texts make room first
    /// by dropping the oldest never taken (a call with a dot made just
    /// for it, as `dict "value" . "context" $` in a loop, is never taken
    /// again; the texts that are should survive them).
    taken: bool,
}

/// A memoizable call that is running ([`IncludeMemo::begin`]).
#[derive(Debug)]
#[must_use]
pub struct Call {
    /// Its place on the stack of running calls.
    index: usize,
    /// [`crate::value::births`] when it started.
    pub start: u64,
}

/// The kept texts, by template tree.
#[derive(Debug, Default)]
pub struct IncludeMemo {
    /// Per template tree (its address): the texts of its calls, oldest
    /// first.
    trees: Vec<(TreeKey, Vec<Entry>)>,
    entries: usize,
    bytes: usize,
    /// The largest start of a kept entry: a change to a map born at or
    /// after it drops nothing.
    newest_start: u64,
    /// Calls answered from the memo.
    hits: u64,
    /// The starts of the running calls, outermost first (increasing).
    running: Vec<u64>,
    /// The first running call a change concerned: it and every call it
    /// made are not kept.
    tainted_from: usize,
}

impl IncludeMemo {
    /// The text of template `tree` with `dot`, if kept and if its call
    /// fits in `room` more levels of nesting, with the levels it used.
    pub fn get(&mut self, tree: TreeKey, dot: &Value, room: usize) -> Option<(Rc<str>, usize)> {
        let (_, entries) = self.trees.iter_mut().find(|(t, _)| *t == tree)?;
        let entry = entries
            .iter_mut()
            .rev()
            .find(|e| e.depth <= room && e.dot.is(dot))?;
        entry.taken = true;
        let found = (entry.text.clone(), entry.depth);
        self.hits += 1;
        Some(found)
    }

    /// How many calls were answered from the memo.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// How many texts are kept.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no text is kept.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// A memoizable call starts.
    pub fn begin(&mut self) -> Call {
        if self.running.is_empty() {
            self.tainted_from = usize::MAX;
        }
        let start = crate::value::births();
        self.running.push(start);
        Call {
            index: self.running.len() - 1,
            start,
        }
    }

    /// `call` ends; whether it changed no map that existed before it.
    pub fn end(&mut self, call: Call) -> bool {
        debug_assert_eq!(call.index + 1, self.running.len());
        self.running.truncate(call.index);
        let clean = call.index < self.tainted_from;
        if self.tainted_from >= call.index {
            self.tainted_from = usize::MAX;
        }
        clean
    }

    /// Keeps `text`, what template `tree` gave with `dot` in a clean call
    /// that started at `start` and used `depth` levels of nesting.
    pub fn keep(&mut self, tree: TreeKey, dot: &Value, start: u64, depth: usize, text: Rc<str>) {
        if text.len() > MAX_TEXT {
            return;
        }
        let Some((dot, dot_bytes)) = DotKey::of(dot) else {
            return;
        };
        let size = text.len() + dot_bytes;
        if self.entries >= MAX_ENTRIES || self.bytes + size > MAX_BYTES {
            self.clear();
        }
        let i = match self.trees.iter().position(|(t, _)| *t == tree) {
            Some(i) => i,
            None => {
                self.trees.push((tree, Vec::new()));
                self.trees.len() - 1
            }
        };
        let entries = &mut self.trees[i].1;
        if entries.len() >= MAX_PER_TREE {
            let oldest = entries.iter().position(|e| !e.taken).unwrap_or(0);
            let old = entries.remove(oldest);
            self.entries -= 1;
            self.bytes -= old.size;
        }
        self.entries += 1;
        self.bytes += size;
        self.newest_start = self.newest_start.max(start);
        entries.push(Entry {
            dot,
            start,
            depth,
            text,
            size,
            taken: false,
        });
    }

    /// A map born at `born` is changed in place: the texts of calls that
    /// could have read it are dropped, and the running calls that could
    /// have read it will not be kept.
    ///
    /// A change to a map born after every kept call started costs nothing;
    /// otherwise the kept texts are scanned, and the scan drops at least
    /// the newest one: scans are at most as many as texts kept, each over
    /// at most [`MAX_ENTRIES`].
    pub fn changed(&mut self, born: u64) {
        let first = self.running.partition_point(|&start| start <= born);
        if first < self.running.len() {
            self.tainted_from = self.tainted_from.min(first);
        }
        if born >= self.newest_start || self.entries == 0 {
            return;
        }
        let (mut entries, mut bytes, mut newest) = (0, 0, 0);
        for (_, kept) in &mut self.trees {
            kept.retain(|e| e.start <= born);
            for e in kept.iter() {
                entries += 1;
                bytes += e.size;
                newest = newest.max(e.start);
            }
        }
        self.trees.retain(|(_, kept)| !kept.is_empty());
        (self.entries, self.bytes, self.newest_start) = (entries, bytes, newest);
    }

    fn clear(&mut self) {
        self.trees.clear();
        self.entries = 0;
        self.bytes = 0;
        self.newest_start = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Map, MapCell};

    fn dict(entries: &[(&str, Value)]) -> Value {
        Value::map(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<Map>(),
        )
    }

    const TREE: TreeKey = (1, 2);

    /// Keeps `text` for `dot` as a clean call that started now.
    fn keep(memo: &mut IncludeMemo, tree: TreeKey, dot: &Value, text: &str) {
        let call = memo.begin();
        let start = call.start;
        assert!(memo.end(call));
        memo.keep(tree, dot, start, 1, Rc::from(text));
    }

    #[test]
    fn a_dot_is_compared_one_level_deep_shared_values_by_identity() {
        let mut memo = IncludeMemo::default();
        let shared = dict(&[("a", Value::Int(1))]);
        let dot = dict(&[("name", Value::str("x")), ("context", shared.clone())]);
        keep(&mut memo, TREE, &dot, "text");
        // A new map with the same entries is the same dot.
        let same = dict(&[("name", Value::str("x")), ("context", shared.clone())]);
        let (text, depth) = memo.get(TREE, &same, 10).expect("kept");
        assert_eq!((&*text, depth), ("text", 1));
        // An equal but distinct inner map, another string, another kind,
        // another template: not the same.
        let twin = dict(&[("a", Value::Int(1))]);
        for other in [
            dict(&[("name", Value::str("x")), ("context", twin)]),
            dict(&[("name", Value::str("y")), ("context", shared.clone())]),
            dict(&[("name", Value::Int(1)), ("context", shared.clone())]),
            dict(&[("name", Value::str("x"))]),
            shared.clone(),
        ] {
            assert!(memo.get(TREE, &other, 10).is_none(), "{other:?}");
        }
        assert!(memo.get((1, 3), &same, 10).is_none());
        // Too little room for the nesting the call used.
        assert!(memo.get(TREE, &same, 0).is_none());
        assert_eq!(memo.hits(), 1);
    }

    #[test]
    fn a_change_drops_the_texts_of_calls_that_could_read_the_map() {
        let mut memo = IncludeMemo::default();
        let old = Rc::new(MapCell::new(Map::new()));
        let dot = Value::Map(old.clone());
        keep(&mut memo, TREE, &dot, "before");
        let young = Rc::new(MapCell::new(Map::new()));
        // A map made after the call started: nothing dropped.
        memo.changed(young.born());
        assert_eq!(memo.len(), 1);
        memo.changed(old.born());
        assert!(memo.is_empty());
        assert!(memo.get(TREE, &dot, 10).is_none());
    }

    #[test]
    fn a_running_call_that_changes_an_older_map_is_not_clean() {
        let mut memo = IncludeMemo::default();
        let old = Rc::new(MapCell::new(Map::new()));
        let outer = memo.begin();
        let mine = Rc::new(MapCell::new(Map::new()));
        let inner = memo.begin();
        // The inner call changes a map the outer one made before it
        // started (it may be the inner call's dot): the inner call is not
        // clean, the outer one is.
        memo.changed(mine.born());
        assert!(!memo.end(inner));
        let inner = memo.begin();
        assert!(memo.end(inner));
        assert!(memo.end(outer));
        // A change to a map older than both taints both.
        let outer = memo.begin();
        let inner = memo.begin();
        memo.changed(old.born());
        assert!(!memo.end(inner));
        assert!(!memo.end(outer));
        // And the next call starts clean.
        let next = memo.begin();
        assert!(memo.end(next));
    }

    #[test]
    fn the_memo_is_bounded_in_texts_bytes_and_dots() {
        let mut memo = IncludeMemo::default();
        for i in 0..(3 * MAX_ENTRIES) {
            keep(&mut memo, (i % 40, 0), &Value::Int(i as i64), "t");
            assert!(memo.len() <= MAX_ENTRIES);
        }
        for (tree, _) in &memo.trees {
            assert!(memo.trees.iter().filter(|(t, _)| t == tree).count() == 1);
        }
        assert!(memo.trees.iter().all(|(_, e)| e.len() <= MAX_PER_TREE));
        let mut memo = IncludeMemo::default();
        let big = "x".repeat(MAX_TEXT / 2);
        for i in 0..64 {
            keep(&mut memo, TREE, &Value::Int(i), &big);
            assert!(memo.bytes <= MAX_BYTES);
        }
        // Not kept: a text over the limit, a dot with a long string, long
        // keys or too many entries.
        let mut memo = IncludeMemo::default();
        keep(&mut memo, TREE, &Value::Int(0), &"x".repeat(MAX_TEXT + 1));
        keep(
            &mut memo,
            TREE,
            &Value::str("x".repeat(MAX_DOT_TEXT + 1)),
            "t",
        );
        let long_key = "k".repeat(MAX_DOT_TEXT + 1);
        keep(
            &mut memo,
            TREE,
            &dict(&[(long_key.as_str(), Value::Nil)]),
            "t",
        );
        let wide: Vec<(String, Value)> = (0..=MAX_DOT_ENTRIES)
            .map(|i| (format!("k{i}"), Value::Nil))
            .collect();
        keep(
            &mut memo,
            TREE,
            &Value::map(wide.into_iter().collect()),
            "t",
        );
        assert!(memo.is_empty());
    }

    #[test]
    fn a_kept_dot_does_not_keep_its_maps_alive() {
        let mut memo = IncludeMemo::default();
        let inner = Rc::new(MapCell::new(Map::new()));
        let dot = dict(&[("context", Value::Map(inner.clone()))]);
        keep(&mut memo, TREE, &dot, "t");
        drop(dot);
        assert_eq!(Rc::strong_count(&inner), 1);
    }
}
