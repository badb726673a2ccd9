//! `data.inventory` as Gatekeeper lays it out: namespaced objects under
//! `namespace[NAMESPACE][APIVERSION][KIND][NAME]`, the others under
//! `cluster[APIVERSION][KIND][NAME]`. Built once per review from the whole
//! rendered set and the inventory files (a later object of the same
//! identity replaces an earlier one).

use std::collections::BTreeMap;

use regorus::Value;

/// apiVersion -> kind -> name -> object.
type ByVersion = BTreeMap<String, BTreeMap<String, BTreeMap<String, Value>>>;

/// Builds `data.inventory` incrementally.
#[derive(Debug, Default)]
pub struct Inventory {
    cluster: ByVersion,
    namespaced: BTreeMap<String, ByVersion>,
}

impl Inventory {
    /// Adds one object; `object` is its regorus value (shared, not copied).
    pub fn add(
        &mut self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        object: Value,
    ) {
        let tree = match namespace.filter(|n| !n.is_empty()) {
            Some(ns) => self.namespaced.entry(ns.to_owned()).or_default(),
            None => &mut self.cluster,
        };
        tree.entry(api_version.to_owned())
            .or_default()
            .entry(kind.to_owned())
            .or_default()
            .insert(name.to_owned(), object);
    }

    /// `{"inventory": {"cluster": …, "namespace": …}}`, the data document.
    pub fn into_data(self) -> Value {
        fn by_version(tree: ByVersion) -> Value {
            object(tree.into_iter().map(|(v, kinds)| {
                (
                    v,
                    object(kinds.into_iter().map(|(k, names)| (k, object(names)))),
                )
            }))
        }
        let namespace = object(
            self.namespaced
                .into_iter()
                .map(|(ns, t)| (ns, by_version(t))),
        );
        let inventory = object([
            ("cluster".to_owned(), by_version(self.cluster)),
            ("namespace".to_owned(), namespace),
        ]);
        object([("inventory".to_owned(), inventory)])
    }
}

fn object(entries: impl IntoIterator<Item = (String, Value)>) -> Value {
    Value::from(
        entries
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect::<BTreeMap<Value, Value>>(),
    )
}
