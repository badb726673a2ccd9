//! A hash map keyed by text whose keys are compared word-wise
//! ([`kiln_bytes::eq`]): inside WebAssembly, `str` equality is wasi-libc's
//! byte-at-a-time `memcmp`, and the caches keyed by whole `tpl` and
//! `fromYaml` texts compare kilobytes at every hit. Hashed with the
//! standard library's randomly keyed SipHash, as `HashMap`, so that texts
//! crafted to collide do not line up in one bucket.

use std::hash::{BuildHasher as _, RandomState};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

/// Values by text.
#[derive(Debug)]
pub struct TextMap<K, V> {
    table: HashTable<(K, V)>,
    hasher: RandomState,
}

impl<K, V> Default for TextMap<K, V> {
    fn default() -> Self {
        TextMap {
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl<K: AsRef<str>, V> TextMap<K, V> {
    /// A map with room for `n` texts.
    pub fn with_capacity(n: usize) -> Self {
        TextMap {
            table: HashTable::with_capacity(n),
            hasher: RandomState::new(),
        }
    }

    /// The value kept under `text`.
    pub fn get(&self, text: &str) -> Option<&V> {
        let hash = self.hasher.hash_one(text);
        self.table
            .find(hash, |(k, _)| same(k, text))
            .map(|(_, v)| v)
    }

    /// The entry of `text`.
    fn entry(&mut self, text: &str) -> Entry<'_, (K, V)> {
        let hash = self.hasher.hash_one(text);
        let hasher = &self.hasher;
        self.table.entry(
            hash,
            |(k, _)| same(k, text),
            |(k, _)| hasher.hash_one(k.as_ref()),
        )
    }

    /// The value under `key`, inserted by `make` when there is none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let entry = self.entry(key.as_ref());
        &mut entry.or_insert_with(|| (key, make())).into_mut().1
    }

    /// Keeps `value` under `key`, in place of any value kept under it.
    pub fn insert(&mut self, key: K, value: V) {
        match self.entry(key.as_ref()) {
            Entry::Occupied(mut kept) => kept.get_mut().1 = value,
            Entry::Vacant(free) => {
                free.insert((key, value));
            }
        }
    }

    /// Texts kept.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.table.clear();
    }

    /// Every text kept and its value, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.table.iter().map(|(k, v)| (k, v))
    }
}

fn same(key: &impl AsRef<str>, text: &str) -> bool {
    kiln_bytes::eq(key.as_ref().as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_replaces_and_finds_texts_as_a_hash_map_does() {
        let mut ours: TextMap<Box<str>, usize> = TextMap::default();
        let mut std = std::collections::HashMap::new();
        let texts: Vec<String> = (0..300)
            .map(|i| format!("{}{}", "k".repeat(i % 40), i % 97))
            .collect();
        for (i, t) in texts.iter().enumerate() {
            ours.insert(Box::from(t.as_str()), i);
            std.insert(t.clone(), i);
            *ours.get_or_insert_with(Box::from("shared"), || 0) += 1;
        }
        assert_eq!(ours.len(), std.len() + 1);
        assert_eq!(ours.get("shared"), Some(&300));
        for t in &texts {
            assert_eq!(ours.get(t), std.get(t));
        }
        assert_eq!(ours.get("missing"), None);
        ours.clear();
        assert!(ours.is_empty() && ours.get(&texts[0]).is_none());
    }
}
