//! A bounded cache of the texts `tpl` parses: charts call `tpl` with the
//! same text hundreds of times in one render (a values string holding
//! `{{ .Release.Name }}`, rendered for every object), and lexing and
//! parsing it again each time was most of what `tpl` cost.
//!
//! A parse depends only on the template's name and text (and on which
//! functions exist, fixed for a build), so the result is shared as it is;
//! where it joins the chart's templates is decided at every call
//! ([`crate::exec`]), as Go decides it on a clone of the set. Errors are
//! not kept (an error ends the render).
//!
//! The cache is bounded in entries and in bytes of text (a parsed tree is
//! a bounded multiple of its text): a chart calling `tpl` with a hundred
//! thousand distinct texts keeps at most [`MAX_ENTRIES`] of them. When an
//! entry would not fit, every entry is dropped and the cache fills again
//! (no order to keep, and a hostile pattern costs at most the parse it
//! would have cost without a cache).

use std::rc::Rc;

use crate::parse::Parsed;

/// Most parsed texts kept.
pub const MAX_ENTRIES: usize = 512;
/// Most bytes of text kept, all entries together.
pub const MAX_BYTES: usize = 4 << 20;
/// Longest text kept (a longer one is parsed at every call).
pub const MAX_TEXT: usize = 256 << 10;

/// The parses of one text: each template name it was parsed as, with the
/// result.
type ByName = Vec<(Rc<str>, Rc<Parsed>)>;

/// Parsed `tpl` texts by text and template name.
#[derive(Debug, Default)]
pub struct TplCache {
    /// By text: the names it was parsed as (almost always one) and the
    /// result.
    by_text: crate::textmap::TextMap<Box<str>, ByName>,
    /// Entries kept (name and text pairs).
    entries: usize,
    /// Bytes of text the entries account for (a text parsed under two
    /// names counts twice).
    bytes: usize,
}

impl TplCache {
    /// The parse of `text` as template `name`, if kept.
    pub fn get(&self, name: &str, text: &str) -> Option<Rc<Parsed>> {
        self.by_text
            .get(text)?
            .iter()
            .find(|(n, _)| kiln_bytes::eq(n.as_bytes(), name.as_bytes()))
            .map(|(_, parsed)| parsed.clone())
    }

    /// Keeps the parse of `text` as template `name` (nothing when the text
    /// is too long to keep; everything dropped first when it would not
    /// fit).
    pub fn insert(&mut self, name: &Rc<str>, text: &str, parsed: Rc<Parsed>) {
        if text.len() > MAX_TEXT {
            return;
        }
        if self.entries >= MAX_ENTRIES || self.bytes + text.len() > MAX_BYTES {
            self.clear();
        }
        self.entries += 1;
        self.bytes += text.len();
        self.by_text
            .get_or_insert_with(Box::from(text), Vec::new)
            .push((name.clone(), parsed));
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.by_text.clear();
        self.entries = 0;
        self.bytes = 0;
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes of text the entries account for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(name: &str, text: &str) -> Rc<Parsed> {
        Rc::new(crate::parse::parse_text(name, text, &crate::funcs::exists).expect("parses"))
    }

    #[test]
    fn a_text_is_kept_per_name() {
        let mut cache = TplCache::default();
        let a: Rc<str> = Rc::from("a.yaml");
        let p = parsed("a.yaml", "{{ .x }}");
        cache.insert(&a, "{{ .x }}", p.clone());
        let got = cache.get("a.yaml", "{{ .x }}").expect("kept");
        assert!(Rc::ptr_eq(&got, &p));
        assert!(cache.get("b.yaml", "{{ .x }}").is_none());
        assert!(cache.get("a.yaml", "{{ .y }}").is_none());
        let b: Rc<str> = Rc::from("b.yaml");
        cache.insert(&b, "{{ .x }}", parsed("b.yaml", "{{ .x }}"));
        assert!(cache.get("b.yaml", "{{ .x }}").is_some());
        assert!(Rc::ptr_eq(
            &cache.get("a.yaml", "{{ .x }}").expect("kept"),
            &p
        ));
        assert_eq!((cache.len(), cache.bytes()), (2, 16));
    }

    #[test]
    fn distinct_texts_stay_within_the_entry_bound() {
        let mut cache = TplCache::default();
        let name: Rc<str> = Rc::from("t");
        let p = parsed("t", "x");
        for i in 0..100_000 {
            cache.insert(&name, &format!("{{{{ {i} }}}}"), p.clone());
            assert!(cache.len() <= MAX_ENTRIES);
            assert!(cache.by_text.len() <= MAX_ENTRIES);
        }
        // The newest text is kept.
        assert!(cache.get("t", "{{ 99999 }}").is_some());
    }

    #[test]
    fn long_texts_stay_within_the_byte_bound() {
        let mut cache = TplCache::default();
        let name: Rc<str> = Rc::from("t");
        let p = parsed("t", "x");
        for i in 0..200 {
            let text = format!("{i}{}", "a".repeat(MAX_TEXT - 8));
            cache.insert(&name, &text, p.clone());
            assert!(cache.bytes() <= MAX_BYTES);
            let held: usize = cache.by_text.iter().map(|(t, _)| t.len()).sum();
            assert!(held <= MAX_BYTES);
        }
        let too_long = "b".repeat(MAX_TEXT + 1);
        cache.insert(&name, &too_long, p);
        assert!(cache.get("t", &too_long).is_none());
    }

    #[test]
    fn many_names_for_one_text_stay_within_the_entry_bound() {
        let mut cache = TplCache::default();
        let p = parsed("t", "x");
        for i in 0..10_000 {
            let name: Rc<str> = Rc::from(format!("n{i}").as_str());
            cache.insert(&name, "{{ . }}", p.clone());
            assert!(cache.len() <= MAX_ENTRIES);
            let held: usize = cache.by_text.iter().map(|(_, v)| v.len()).sum();
            assert!(held <= MAX_ENTRIES);
        }
    }
}
