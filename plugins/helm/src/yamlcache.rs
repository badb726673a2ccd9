//! A bounded cache of the values `fromYaml` and `fromYamlArray` read:
//! bitnami-style helpers round-trip the same maps through `toYaml` and
//! `fromYaml` for every object (`common.tplvalues.merge` merging labels,
//! a values block rendered with `tpl` and read back), so most texts a
//! render reads are texts it has read before.
//!
//! Go's `fromYaml` returns a new map at every call, and templates change
//! maps in place (`set`, `unset`, `merge`): every call gets its own deep
//! copy of the kept value, which shares only immutable strings with it.
//! Only texts the fast reader reads are kept: they hold no alias, so a
//! copy is no larger than the text made it (an aliased value, shared when
//! read, could be far larger copied). Errors are not kept.
//!
//! The cache is bounded in entries and in bytes of text, as
//! [`crate::tplcache`] is: when an entry would not fit, every entry is
//! dropped and the cache fills again.

use crate::value::Value;

/// Most texts kept.
pub const MAX_ENTRIES: usize = 512;
/// Most bytes of text kept, all entries together (the values take about
/// ten times their text).
pub const MAX_BYTES: usize = 1 << 20;
/// Longest text kept (a longer one is read at every call).
pub const MAX_TEXT: usize = 32 << 10;

/// Values read from YAML texts, by text.
#[derive(Debug, Default)]
pub struct YamlCache {
    by_text: crate::textmap::TextMap<Box<str>, Value>,
    /// Bytes of text the entries account for.
    bytes: usize,
}

impl YamlCache {
    /// The first document of `text` as [`crate::convert::from_yaml`] reads
    /// it: a copy of the kept value, or read now (and kept when the fast
    /// reader read it).
    pub fn read(&mut self, text: &str) -> Result<Value, String> {
        if let Some(value) = self.by_text.get(text) {
            return Ok(value.deep_copy());
        }
        match crate::yaml11::read_fast(text) {
            Some(value) => {
                self.insert(text, value.deep_copy());
                Ok(value)
            }
            // Not sure: the event reader, without trying the fast one again.
            None => crate::yaml11::read_events(text).map_err(crate::convert::yaml_error),
        }
    }

    fn insert(&mut self, text: &str, value: Value) {
        if text.len() > MAX_TEXT {
            return;
        }
        if self.by_text.len() >= MAX_ENTRIES || self.bytes + text.len() > MAX_BYTES {
            self.by_text.clear();
            self.bytes = 0;
        }
        self.bytes += text.len();
        self.by_text.insert(Box::from(text), value);
    }

    /// Texts kept.
    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Map;

    #[test]
    fn every_read_is_a_value_of_its_own() {
        let mut cache = YamlCache::default();
        let text = "labels:\n  app: web\nlist:\n  - a\n";
        let first = cache.read(text).unwrap();
        // A template changes the map it got, as `set` does.
        if let Value::Map(m) = &first
            && let Some(Value::Map(labels)) = m.borrow().get("labels")
        {
            labels.borrow_mut().insert("tier".into(), Value::str("x"));
        }
        let second = cache.read(text).unwrap();
        assert_eq!(cache.len(), 1);
        let labels = |v: &Value| -> Map {
            v.as_map()
                .unwrap()
                .get("labels")
                .unwrap()
                .map_clone()
                .unwrap()
        };
        assert_eq!(labels(&first).len(), 2);
        assert_eq!(labels(&second).len(), 1, "the change reached another read");
        assert_eq!(
            second.to_go_string(),
            crate::convert::from_yaml(text).unwrap().to_go_string()
        );
    }

    #[test]
    fn aliased_and_failing_texts_are_not_kept() {
        let mut cache = YamlCache::default();
        assert!(cache.read("a: &x [1, 2]\nb: *x\n").is_ok());
        assert!(cache.read("a: [").is_err());
        assert!(cache.is_empty());
    }

    #[test]
    fn the_cache_holds_at_most_its_bounds() {
        let mut cache = YamlCache::default();
        for i in 0..(MAX_ENTRIES * 3) {
            cache.read(&format!("k{i}: v\n")).unwrap();
            assert!(cache.len() <= MAX_ENTRIES);
        }
        let big = format!("k: {}\n", "x".repeat(MAX_TEXT));
        cache.read(&big).unwrap();
        assert!(cache.by_text.get(&big).is_none());
        let mut cache = YamlCache::default();
        let chunk = format!("k: {}\n", "y".repeat(MAX_TEXT - 8));
        for i in 0..(MAX_BYTES / MAX_TEXT + 4) {
            cache.read(&format!("{i}{chunk}")).unwrap();
            assert!(cache.bytes <= MAX_BYTES);
        }
    }
}
