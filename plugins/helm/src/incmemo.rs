//! The texts `include` produced, kept for the same template and an equal
//! dot: charts include their name and label helpers for every object
//! (`include "common.names.namespace" $`, `include "x.fullname" $ctx`
//! three times in one object, and again in every template file), and each
//! call runs the same template on the same values again.
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
//! A chart's template dot (`$` at the top of its files) is one map for
//! all its files, whose `.Template` the renderer replaces from file to
//! file ([`IncludeMemo::template_replaced`]): a template dot is compared
//! as itself, never by its entries. A call that never looked at which
//! file runs ([`crate::value::file_observations`] did not move: it read
//! only other fields of a template dot) gave a *portable* text, kept
//! from file to file; the others are dropped when the file changes.
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
//! [`MAX_BYTES`] together (with the keys and strings of their dots and
//! each entry's own size, each dot at most [`MAX_DOT_ENTRIES`] entries
//! and [`MAX_DOT_TEXT`] bytes), [`MAX_PER_TREE`] per template; when one
//! would not fit, every text is dropped and the memo fills again. A
//! lookup compares at most [`MAX_COMPARES`] dots in full; a change drops
//! texts through an index by start, at a cost in the texts it drops.

use std::rc::{Rc, Weak};

use crate::value::{MapCell, Value};

/// Most texts kept.
pub const MAX_ENTRIES: usize = 2048;
/// Most texts kept for one template (a helper included for each of a few
/// hundred services, from each template file).
pub const MAX_PER_TREE: usize = 512;
/// Most bytes kept, all entries together: their texts, the keys and
/// strings of their dots, and the entries themselves.
pub const MAX_BYTES: usize = 1 << 20;
/// Longest text kept.
pub const MAX_TEXT: usize = 64 << 10;
/// Most kept dots compared in full by one lookup (those whose hash is the
/// dot's): past them the lookup is a miss, however the hashes collide.
pub const MAX_COMPARES: usize = 4;
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
    Map(Weak<MapCell>),
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
        | Value::Bytes(_)
        // Immutable: a copy is the same value.
        | Value::Go(_) => return None,
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

/// A quick hash of what [`Atom::is`] compares: equal atoms hash equal,
/// and most unequal ones differ.
fn atom_hash(v: &Value) -> u64 {
    match v {
        Value::Nil => 1,
        Value::Bool(b) => 2 + u64::from(*b),
        Value::Int(i) => mix(4, *i as u64),
        Value::Int64(i) => mix(5, *i as u64),
        Value::Float(f) => mix(6, f.to_bits()),
        Value::Str(s) => mix(7, text_hash(s.as_bytes())),
        Value::Bytes(b) => mix(8, text_hash(b)),
        shared => mix(9, address(shared).unwrap_or_default() as u64),
    }
}

/// A hash of a text: its length and every byte, eight at a step.
fn text_hash(b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(8);
    let mut h = mix(12, b.len() as u64);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(word));
    }
    let mut word = [0u8; 8];
    word[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(h, u64::from_le_bytes(word))
}

/// A [`std::hash::Hasher`] of [`mix`] steps, for the memo's maps (keyed
/// by addresses and numbers the memo made).
#[derive(Default)]
struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = mix(self.0, text_hash(bytes));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0, n);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = mix(self.0, n as u64);
    }
}

type MixMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<MixHasher>>;

/// One step of a multiplicative hash.
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// A dot as the memo compares it.
#[derive(Debug)]
enum DotKey {
    /// A map dot (not a template dot): its entries in key order.
    Map(Vec<(Box<str>, Atom)>),
    /// Any other dot.
    Atom(Atom),
}

/// The map of `dot` if it is compared entry by entry ([`DotKey::Map`]):
/// a map other than a chart's template dot (which is compared as itself,
/// its `.Template` being replaced from file to file).
fn by_entries(dot: &Value) -> Option<&Rc<MapCell>> {
    match dot {
        Value::Map(m) if !m.is_template_dot() => Some(m),
        _ => None,
    }
}

impl DotKey {
    /// The key of `dot` and the bytes of text it holds, if the memo keeps
    /// calls with it.
    fn of(dot: &Value) -> Option<(DotKey, usize)> {
        let Some(m) = by_entries(dot) else {
            return Atom::of(dot).map(|(atom, bytes)| (DotKey::Atom(atom), bytes));
        };
        let m = m.borrow_uncounted();
        if m.len() > MAX_DOT_ENTRIES {
            return None;
        }
        let mut bytes = 0;
        let mut entries = Vec::with_capacity(m.len());
        for (k, v) in m.iter() {
            let (atom, held) = Atom::of(v)?;
            bytes += k.len() + held + std::mem::size_of::<(Box<str>, Atom)>();
            entries.push((Box::from(k.as_str()), atom));
        }
        (bytes <= MAX_DOT_TEXT).then_some((DotKey::Map(entries), bytes))
    }

    /// The hash of `dot`'s key ([`atom_hash`] of each part), `None` if
    /// the memo keeps no call with it.
    fn hash(dot: &Value) -> Option<u64> {
        let Some(m) = by_entries(dot) else {
            return Some(atom_hash(dot));
        };
        let m = m.borrow_uncounted();
        if m.len() > MAX_DOT_ENTRIES {
            return None;
        }
        Some(m.iter().fold(mix(11, m.len() as u64), |h, (k, v)| {
            mix(mix(h, text_hash(k.as_bytes())), atom_hash(v))
        }))
    }

    /// Whether `dot` has this key.
    fn is(&self, dot: &Value) -> bool {
        match (self, by_entries(dot)) {
            (DotKey::Map(entries), Some(m)) => {
                let m = m.borrow_uncounted();
                m.len() == entries.len()
                    && m.iter().zip(entries).all(|((k, v), (key, atom))| {
                        kiln_bytes::eq(k.as_bytes(), key.as_bytes()) && atom.is(v)
                    })
            }
            (DotKey::Atom(atom), None) => atom.is(dot),
            _ => false,
        }
    }
}

/// A template as the memo tells them apart: the addresses of its shared
/// name and of its tree.
pub type TreeKey = (usize, usize);

/// The texts of `toYaml` (a function of its value alone): kept as a
/// template's, under a key no template has (no name is at address 0).
pub const TO_YAML: TreeKey = (0, 1);

/// A kept text.
#[derive(Debug)]
struct Entry {
    dot: DotKey,
    /// [`DotKey::hash`] of the dot.
    hash: u64,
    /// Whether the call never looked at which template file runs: the
    /// text stays right when the file changes.
    portable: bool,
    /// [`crate::value::births`] when the call started: every map the
    /// call could read was born before.
    start: u64,
    /// The nesting of template calls the call used below itself.
    depth: usize,
    text: Rc<str>,
    /// The bytes it holds: its text, its dot's keys and texts, and itself.
    size: usize,
    /// When it was kept (the memo's count of texts kept so far): a
    /// template's texts are in this order.
    seq: u64,
    /// Whether a later call took it: a template's texts make room first
    /// by dropping the oldest never taken (a call with a dot made just
    /// for it, as `dict "value" . "context" $` in a loop, is never taken
    /// again; the texts that are should survive them).
    taken: bool,
}

/// The texts kept for one template, oldest first, and where to find
/// them by their dot's hash (a helper included for each of a few hundred
/// services keeps as many texts: a lookup must not scan them).
#[derive(Debug, Default)]
struct Kept {
    /// Oldest first (increasing [`Entry::seq`]).
    entries: Vec<Entry>,
    /// The [`Entry::seq`]s of the entries with each hash, oldest first.
    by_hash: MixMap<u64, Vec<u64>>,
}

impl Kept {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn push(&mut self, entry: Entry) {
        self.by_hash.entry(entry.hash).or_default().push(entry.seq);
        self.entries.push(entry);
    }

    /// The entry at `i`, taken out.
    fn remove(&mut self, i: usize) -> Entry {
        let entry = self.entries.remove(i);
        self.unindex(&entry);
        entry
    }

    /// The entry kept as `seq`, taken out.
    fn remove_seq(&mut self, seq: u64) -> Option<Entry> {
        let i = self.entries.binary_search_by_key(&seq, |e| e.seq).ok()?;
        Some(self.remove(i))
    }

    fn unindex(&mut self, entry: &Entry) {
        if let Some(seqs) = self.by_hash.get_mut(&entry.hash) {
            seqs.retain(|&s| s != entry.seq);
            if seqs.is_empty() {
                self.by_hash.remove(&entry.hash);
            }
        }
    }

    /// The index of the newest entry for `dot` (whose hash is `hash`) that
    /// fits in `room` levels of nesting, comparing at most
    /// [`MAX_COMPARES`] dots in full.
    fn find(&self, hash: u64, dot: &Value, room: usize) -> Option<usize> {
        let seqs = self.by_hash.get(&hash)?;
        seqs.iter()
            .rev()
            .filter_map(|&seq| self.entries.binary_search_by_key(&seq, |e| e.seq).ok())
            .filter(|&i| self.entries[i].depth <= room)
            .take(MAX_COMPARES)
            .find(|&i| self.entries[i].dot.is(dot))
    }
}

/// A memoizable call that is running ([`IncludeMemo::begin`]).
#[derive(Debug)]
#[must_use]
pub struct Call {
    /// Its place on the stack of running calls.
    index: usize,
    /// [`crate::value::births`] when it started.
    start: u64,
    /// [`crate::value::file_observations`] when it started.
    observed: u64,
}

/// The kept texts, by template tree.
#[derive(Debug, Default)]
pub struct IncludeMemo {
    /// Per template tree (its address): the texts of its calls, oldest
    /// first.
    trees: MixMap<TreeKey, Kept>,
    /// Every kept text by its call's start (and `seq`): a change to a map
    /// born at `born` drops those after `born` without a scan.
    by_start: std::collections::BTreeMap<(u64, u64), TreeKey>,
    /// Texts kept so far ([`Entry::seq`]).
    kept: u64,
    entries: usize,
    bytes: usize,
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
        let kept = self.trees.get_mut(&tree)?;
        let hash = DotKey::hash(dot)?;
        let i = kept.find(hash, dot, room)?;
        let entry = &mut kept.entries[i];
        entry.taken = true;
        if !entry.portable {
            // The text may tell which file runs: so may the calls that
            // reuse it.
            crate::value::note_file_observed();
        }
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
            observed: crate::value::file_observations(),
        }
    }

    /// `call` ends; whether it changed no map that existed before it.
    pub fn end(&mut self, call: &Call) -> bool {
        debug_assert_eq!(call.index + 1, self.running.len());
        self.running.truncate(call.index);
        let clean = call.index < self.tainted_from;
        if self.tainted_from >= call.index {
            self.tainted_from = usize::MAX;
        }
        clean
    }

    /// Keeps `text`, what template `tree` gave with `dot` in `call`, a
    /// clean call ([`IncludeMemo::end`]) that used `depth` levels of
    /// nesting.
    pub fn keep(&mut self, tree: TreeKey, dot: &Value, call: Call, depth: usize, text: Rc<str>) {
        if text.len() > MAX_TEXT {
            return;
        }
        let (Some((key, dot_bytes)), Some(hash)) = (DotKey::of(dot), DotKey::hash(dot)) else {
            return;
        };
        let portable = crate::value::file_observations() == call.observed;
        let size = text.len() + dot_bytes + std::mem::size_of::<Entry>();
        if self.entries >= MAX_ENTRIES || self.bytes + size > MAX_BYTES {
            self.clear();
        }
        let kept = self.trees.entry(tree).or_default();
        if kept.len() >= MAX_PER_TREE {
            let oldest = kept.entries.iter().position(|e| !e.taken).unwrap_or(0);
            let old = kept.remove(oldest);
            self.by_start.remove(&(old.start, old.seq));
            self.entries -= 1;
            self.bytes -= old.size;
        }
        self.kept += 1;
        self.entries += 1;
        self.bytes += size;
        self.by_start.insert((call.start, self.kept), tree);
        kept.push(Entry {
            dot: key,
            hash,
            portable,
            start: call.start,
            depth,
            text,
            size,
            seq: self.kept,
            taken: false,
        });
    }

    /// A map born at `born` is changed in place: the texts of calls that
    /// could have read it (those that started after it was born) are
    /// dropped, and the running calls that could have read it will not be
    /// kept. The cost is in the texts dropped, not in those kept.
    pub fn changed(&mut self, born: u64) {
        let first = self.running.partition_point(|&start| start <= born);
        if first < self.running.len() {
            self.tainted_from = self.tainted_from.min(first);
        }
        if self
            .by_start
            .last_key_value()
            .is_none_or(|(&(start, _), _)| start <= born)
        {
            return;
        }
        let later = self.by_start.split_off(&(born + 1, 0));
        for ((_, seq), tree) in later {
            let Some(kept) = self.trees.get_mut(&tree) else {
                continue;
            };
            if let Some(old) = kept.remove_seq(seq) {
                self.entries -= 1;
                self.bytes -= old.size;
            }
            if kept.is_empty() {
                self.trees.remove(&tree);
            }
        }
    }

    /// The renderer replaced the `.Template` of a chart's template dot
    /// (the next file runs): the texts of calls that looked at which file
    /// ran are dropped.
    pub fn template_replaced(&mut self) {
        let (entries, bytes, by_start) = (&mut self.entries, &mut self.bytes, &mut self.by_start);
        for kept in self.trees.values_mut() {
            if kept.entries.iter().all(|e| e.portable) {
                continue;
            }
            let (dropped, portable): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut kept.entries)
                .into_iter()
                .partition(|e| !e.portable);
            kept.entries = portable;
            for e in dropped {
                *entries -= 1;
                *bytes -= e.size;
                by_start.remove(&(e.start, e.seq));
                kept.unindex(&e);
            }
        }
        self.trees.retain(|_, kept| !kept.is_empty());
    }

    /// Every kept text is found through its template's hash index, and
    /// the index holds nothing else.
    #[cfg(test)]
    fn assert_indexed(&self) {
        for kept in self.trees.values() {
            let indexed: usize = kept.by_hash.values().map(Vec::len).sum();
            assert_eq!(indexed, kept.entries.len());
            for e in &kept.entries {
                assert!(kept.by_hash[&e.hash].contains(&e.seq));
            }
            assert!(kept.entries.windows(2).all(|w| w[0].seq < w[1].seq));
        }
    }

    fn clear(&mut self) {
        self.trees.clear();
        self.by_start.clear();
        self.entries = 0;
        self.bytes = 0;
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
        assert!(memo.end(&call));
        memo.keep(tree, dot, call, 1, Rc::from(text));
    }

    /// Keeps `text` for `dot` as a clean call that looked at which
    /// template file runs (it read `dot`'s `.Template`).
    fn keep_file_bound(memo: &mut IncludeMemo, tree: TreeKey, dot: &Value, text: &str) {
        let call = memo.begin();
        crate::value::note_file_observed();
        assert!(memo.end(&call));
        memo.keep(tree, dot, call, 1, Rc::from(text));
    }

    /// A chart's template dot holding `values`, running file `a.yaml`.
    fn template_dot(values: &Value) -> (Rc<MapCell>, Value) {
        let mut m = Map::new();
        m.insert("Values".into(), values.clone());
        let cell = Rc::new(MapCell::template_dot(m));
        cell.replace_template(dict(&[("Name", Value::str("a.yaml"))]));
        (cell.clone(), Value::Map(cell))
    }

    /// The next file runs with `dot`.
    fn next_file(memo: &mut IncludeMemo, dot: &MapCell) {
        dot.replace_template(dict(&[("Name", Value::str("b.yaml"))]));
        memo.template_replaced();
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
        memo.assert_indexed();
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
        assert!(!memo.end(&inner));
        let inner = memo.begin();
        assert!(memo.end(&inner));
        assert!(memo.end(&outer));
        // A change to a map older than both taints both.
        let outer = memo.begin();
        let inner = memo.begin();
        memo.changed(old.born());
        assert!(!memo.end(&inner));
        assert!(!memo.end(&outer));
        // And the next call starts clean.
        let next = memo.begin();
        assert!(memo.end(&next));
    }

    #[test]
    fn the_memo_is_bounded_in_texts_bytes_and_dots() {
        let mut memo = IncludeMemo::default();
        for i in 0..(3 * MAX_ENTRIES) {
            keep(&mut memo, (i % 40, 0), &Value::Int(i as i64), "t");
            assert!(memo.len() <= MAX_ENTRIES);
        }
        assert!(memo.trees.values().all(|kept| kept.len() <= MAX_PER_TREE));
        assert_eq!(memo.by_start.len(), memo.len());
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
        memo.assert_indexed();
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

    #[test]
    fn a_portable_text_is_reused_in_the_next_file() {
        let mut memo = IncludeMemo::default();
        let (cell, dot) = template_dot(&dict(&[("a", Value::Int(1))]));
        // As the dot itself, and inside a dict, as `dict "name" $n
        // "context" $` gives it.
        keep(&mut memo, TREE, &dot, "plain");
        let ctx = || dict(&[("name", Value::str("x")), ("context", dot.clone())]);
        keep(&mut memo, TREE, &ctx(), "in a dict");
        next_file(&mut memo, &cell);
        assert_eq!(&*memo.get(TREE, &dot, 10).expect("portable").0, "plain");
        assert_eq!(
            &*memo.get(TREE, &ctx(), 10).expect("portable").0,
            "in a dict"
        );
        // A template dot is compared as itself, not by its entries.
        let twin = Value::map(cell.borrow_uncounted().clone());
        assert!(memo.get(TREE, &twin, 10).is_none());
        // A change to it (`set $ ...`) drops what was read from it.
        memo.changed(cell.born());
        assert!(memo.is_empty());
    }

    #[test]
    fn a_text_that_looked_at_its_file_is_dropped_when_the_file_changes() {
        let mut memo = IncludeMemo::default();
        let (cell, dot) = template_dot(&dict(&[]));
        keep_file_bound(&mut memo, TREE, &dot, "a.yaml");
        // Reused in its own file; the reuse counts as looking, so the
        // call around it is not portable either.
        let outer = memo.begin();
        assert_eq!(&*memo.get(TREE, &dot, 10).expect("same file").0, "a.yaml");
        assert!(memo.end(&outer));
        memo.keep((9, 9), &dot, outer, 2, Rc::from("outer"));
        keep(&mut memo, (7, 7), &dot, "portable");
        assert_eq!(memo.len(), 3);
        next_file(&mut memo, &cell);
        assert_eq!(memo.len(), 1);
        assert!(memo.get(TREE, &dot, 10).is_none());
        assert!(memo.get((9, 9), &dot, 10).is_none());
        assert!(memo.get((7, 7), &dot, 10).is_some());
        memo.assert_indexed();
    }

    #[test]
    fn what_tells_template_files_apart_is_counted() {
        let (cell, _) = template_dot(&dict(&[]));
        let count = crate::value::file_observations;
        let before = count();
        // Other fields, the memo's own comparisons and the renderer's
        // replacing `.Template`: not counted.
        assert!(cell.field("Values").is_some());
        assert!(cell.field("Missing").is_none());
        assert!(cell.contains_key("Values"));
        drop(cell.borrow_uncounted());
        cell.replace_template(Value::Nil);
        assert_eq!(count(), before);
        // `.Template` (its value, or whether it is there), the map whole,
        // a change: counted.
        let _ = cell.field("Template");
        assert_eq!(count(), before + 1);
        drop(cell.borrow());
        assert_eq!(count(), before + 2);
        cell.borrow_mut().remove("none");
        assert_eq!(count(), before + 3);
        assert!(cell.contains_key("Template"));
        assert_eq!(count(), before + 4);
        // A map that is no template dot: never counted.
        let plain = Rc::new(MapCell::new(Map::new()));
        drop(plain.borrow());
        plain.borrow_mut().clear();
        let _ = plain.field("Template");
        assert_eq!(count(), before + 4);
    }

    #[test]
    fn a_helper_included_for_hundreds_of_services_in_every_file_is_reused() {
        let mut memo = IncludeMemo::default();
        let (cell, dot) = template_dot(&dict(&[("a", Value::Int(1))]));
        let service = |i: usize| {
            dict(&[
                ("name", Value::str(format!("svc-{i:03}"))),
                ("context", dot.clone()),
            ])
        };
        for i in 0..300 {
            keep(&mut memo, TREE, &service(i), &format!("labels of {i}"));
        }
        next_file(&mut memo, &cell);
        for i in 0..300 {
            let (text, _) = memo.get(TREE, &service(i), 10).expect("kept");
            assert_eq!(&*text, format!("labels of {i}"));
        }
        assert_eq!(memo.hits(), 300);
    }

    #[test]
    fn a_lookup_compares_few_dots_however_their_hashes_collide() {
        let mut memo = IncludeMemo::default();
        let (a, b) = (Value::str("a"), Value::str("b"));
        keep(&mut memo, TREE, &a, "a");
        // Forge collisions: every kept dot gets `b`'s hash.
        let hash = DotKey::hash(&b).expect("hashed");
        for i in 0..(2 * MAX_COMPARES) {
            keep(&mut memo, TREE, &Value::str(format!("x{i}")), "x");
        }
        let kept = memo.trees.get_mut(&TREE).expect("kept");
        for e in &mut kept.entries {
            e.hash = hash;
        }
        kept.by_hash = MixMap::default();
        kept.by_hash
            .insert(hash, kept.entries.iter().map(|e| e.seq).collect());
        keep(&mut memo, TREE, &b, "b");
        // The newest is found; `a`, behind more than MAX_COMPARES
        // colliding dots, is not.
        assert_eq!(&*memo.get(TREE, &b, 10).expect("newest").0, "b");
        assert!(memo.get(TREE, &Value::str("a"), 10).is_none());
    }

    #[test]
    fn a_change_drops_only_the_texts_of_later_calls_without_a_scan() {
        let mut memo = IncludeMemo::default();
        let old = Rc::new(MapCell::new(Map::new()));
        for i in 0..100 {
            keep(&mut memo, (i % 7, 0), &Value::Int(i as i64), "t");
        }
        let young = Rc::new(MapCell::new(Map::new()));
        keep(&mut memo, TREE, &Value::Int(-1), "after young");
        memo.changed(young.born());
        assert_eq!(memo.len(), 100);
        assert!(memo.get(TREE, &Value::Int(-1), 10).is_none());
        memo.changed(old.born());
        assert!(memo.is_empty());
        assert!(memo.by_start.is_empty() && memo.trees.is_empty());
        memo.assert_indexed();
    }
}
