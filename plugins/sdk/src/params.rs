//! Ordered key/value parameters and settings.

use crate::Param;

/// A read-only view over an ordered parameter list, with lookups that keep
/// the last value when a key repeats (the operator's later word wins).
#[derive(Debug, Clone, Copy)]
pub struct Params<'a>(pub &'a [Param]);

impl<'a> Params<'a> {
    /// The last value given for `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// Every value given for `key`, in order.
    pub fn get_all(&self, key: &str) -> impl Iterator<Item = &'a str> + 'a {
        let key = key.to_owned();
        self.0
            .iter()
            .filter(move |p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// A comma-separated list value, trimmed, empty items dropped.
    pub fn list(&self, key: &str) -> Vec<&'a str> {
        self.get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first key not in `known`, to reject typos instead of ignoring them.
    pub fn unknown_key(&self, known: &[&str]) -> Option<&'a str> {
        self.0
            .iter()
            .map(|p| p.key.as_str())
            .find(|k| !known.contains(k))
    }

    /// Iterates over all pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.0.iter().map(|p| (p.key.as_str(), p.value.as_str()))
    }
}
