//! What each Application's last render read, by Application name: the
//! webhook refreshes an Application when a push changes something under
//! these paths (repository-relative), not only under its own path. Kept in
//! memory, one set per Application (forgotten when it is deleted); until an
//! Application's first render after a start, nothing is known of it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::source::ReadSet;

/// The paths each Application's last render read.
#[derive(Debug, Default)]
pub struct ReadPaths {
    apps: Mutex<HashMap<String, Arc<BTreeSet<String>>>>,
}

impl ReadPaths {
    /// Records what the latest render of `app` read.
    pub fn record(&self, app: &str, read_set: &ReadSet) {
        let paths: BTreeSet<String> = read_set
            .iter()
            .map(|(path, _)| path.as_str().to_owned())
            .collect();
        self.lock().insert(app.to_owned(), Arc::new(paths));
    }

    /// What the latest render of `app` read, if one ran since the start.
    pub fn get(&self, app: &str) -> Option<Arc<BTreeSet<String>>> {
        self.lock().get(app).cloned()
    }

    /// Forgets a deleted Application.
    pub fn forget(&self, app: &str) {
        self.lock().remove(app);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<BTreeSet<String>>>> {
        // Each update is a single insert or remove: still consistent.
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
