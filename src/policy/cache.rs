//! Reviews reused while nothing they depend on has changed: the policy
//! component, its settings and mode, the Application's identity, the
//! rendered objects, and what the review read of the policy's source (its
//! read set, checked against the source's new tree as the render cache
//! checks renders). A commit to a policy repository that touches nothing
//! a policy read, or a commit to the application that renders the same
//! objects, costs a digest and a re-read of a few files, not a review.
//! The revision in the policy's context is not part of the key (as for
//! renders): a review depends on what it read, not on the commit's name.
//!
//! What a review asked of the destination cluster is checked the same way:
//! a cached review holds while the review's [`ClusterView`] gives every
//! answer it was given.
//!
//! Only reviews that ran to the end are kept (a policy that could not run
//! runs again), and only with at most [`MAX_CACHED_FINDINGS`] findings;
//! the cache holds at most [`DEFAULT_REVIEWS`] reviews and
//! [`DEFAULT_REVIEW_BYTES`] bytes of them (their findings and read sets,
//! measured as JSON) by default, least recently used first out. It lives
//! in memory only.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clru::CLruCache;

use super::{PolicyResult, PolicySource, PolicyStep, Report, evaluate};
use crate::digest::Digest;
use crate::manifest::Object;
use crate::plugin::cluster::{ClusterView, Lookups};
use crate::plugin::{AppContext, Finding};
use crate::source::{ReadSet, SourceView};

/// Reviews the cache holds by default.
pub const DEFAULT_REVIEWS: usize = 4096;
/// Bytes of reviews (findings and read sets, as JSON) the cache holds by
/// default: 64 MiB.
pub const DEFAULT_REVIEW_BYTES: usize = 64 * 1024 * 1024;
/// Reviews with more findings than this are not kept (they are the rare,
/// broken case, and the large one).
pub const MAX_CACHED_FINDINGS: usize = 1000;

/// Cached reviews, by what shapes them.
pub struct ReviewCache {
    entries: Mutex<Entries>,
    reviews: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

type Entries = CLruCache<Digest, Arc<Entry>, std::collections::hash_map::RandomState, EntryBytes>;

struct Entry {
    read_set: ReadSet,
    lookups: Lookups,
    findings: Vec<Finding>,
    /// Its findings' and read set's JSON size.
    bytes: usize,
}

/// Weighs an entry by its bytes.
struct EntryBytes;

impl clru::WeightScale<Digest, Arc<Entry>> for EntryBytes {
    fn weight(&self, _key: &Digest, entry: &Arc<Entry>) -> usize {
        entry.bytes
    }
}

impl Default for ReviewCache {
    fn default() -> Self {
        Self::with_bytes(DEFAULT_REVIEWS, DEFAULT_REVIEW_BYTES)
    }
}

impl std::fmt::Debug for ReviewCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewCache")
            .field("stats", &self.stats())
            .finish()
    }
}

impl ReviewCache {
    /// A cache of at most `reviews` reviews (at least one) and
    /// `DEFAULT_REVIEW_BYTES`.
    pub fn new(reviews: usize) -> Self {
        Self::with_bytes(reviews, DEFAULT_REVIEW_BYTES)
    }

    /// A cache of at most `reviews` reviews (at least one) and `bytes` of
    /// them; a review larger than that is not kept.
    pub fn with_bytes(reviews: usize, bytes: usize) -> Self {
        let reviews = reviews.max(1);
        // clru bounds entries plus weight by one capacity; the count of
        // entries is bounded on its own in `put`.
        let capacity =
            NonZeroUsize::new(bytes.saturating_add(reviews)).unwrap_or(NonZeroUsize::MIN);
        Self {
            entries: Mutex::new(CLruCache::with_config(
                clru::CLruCacheConfig::new(capacity).with_scale(EntryBytes),
            )),
            reviews,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// `(reviews, bytes)` held now.
    pub fn held(&self) -> (usize, usize) {
        let entries = self.lock();
        let bytes = entries.iter().map(|(_, entry)| entry.bytes).sum();
        (entries.len(), bytes)
    }

    /// `(hits, misses)` so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key of one policy's review of `objects` (their digest).
    fn key(
        step: &PolicyStep,
        context: &AppContext,
        objects: &Digest,
        cluster: Option<&Arc<ClusterView>>,
    ) -> Digest {
        let (repo_url, path) = match &step.source {
            PolicySource::Own { repo_url, .. } => (repo_url.as_str(), ""),
            _ => (context.repo_url.as_str(), context.path.as_str()),
        };
        let parts = [
            step.plugin.digest().to_string(),
            format!("{:?}", step.settings),
            step.mode.to_string(),
            context.name.clone(),
            context.namespace.clone(),
            context.project.clone(),
            repo_url.to_owned(),
            path.to_owned(),
            objects.to_string(),
            // Without a cluster, lookups are answered `no-cluster` and not
            // recorded: such a review is never reused with one.
            cluster.is_some().to_string(),
        ];
        let mut text = String::new();
        for part in &parts {
            // Length-prefixed, so that parts cannot run into each other.
            text.push_str(&format!("{}:{part};", part.len()));
        }
        Digest::of(text.as_bytes())
    }

    /// The cached findings of `key`, when what the review read still holds
    /// in `view` and what it asked of the cluster, in `cluster`.
    async fn get(
        &self,
        key: &Digest,
        view: Arc<dyn SourceView>,
        cluster: Option<&Arc<ClusterView>>,
    ) -> Option<Arc<Entry>> {
        let entry = self.lock().get(key).cloned()?;
        let check = entry.clone();
        let cluster = cluster.cloned();
        // Re-reading files and hashing answers: off the async workers.
        let holds = tokio::task::spawn_blocking(move || {
            let cluster_holds =
                check.lookups.is_empty() || cluster.is_some_and(|view| check.lookups.hold(&view));
            cluster_holds && check.read_set.holds(&*view)
        })
        .await
        .unwrap_or(false);
        holds.then_some(entry)
    }

    fn put(&self, key: Digest, result: &PolicyResult) {
        if result.error.is_some()
            || !result.pending.is_empty()
            || result.findings.len() > MAX_CACHED_FINDINGS
        {
            return;
        }
        let bytes = json_size(&(&result.findings, &result.read_set, &result.lookups));
        let entry = Arc::new(Entry {
            read_set: result.read_set.clone(),
            lookups: result.lookups.clone(),
            findings: result.findings.clone(),
            bytes,
        });
        let mut entries = self.lock();
        // Larger than the whole cache: not kept.
        let _ = entries.put_with_weight(key, entry);
        while entries.len() > self.reviews {
            entries.pop_back();
        }
    }
}

/// The length of `value`'s JSON, counted without building it.
fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The view a policy's review reads, if it can read one.
fn view_of(source: &PolicySource) -> Option<Arc<dyn SourceView>> {
    match source {
        PolicySource::Application(view) | PolicySource::Own { view, .. } => Some(view.clone()),
        PolicySource::Unavailable { .. } => None,
    }
}

/// [`evaluate`], reusing the reviews of `cache` that still hold and keeping
/// the new ones. Results are in the order of `policies`; reused ones say so
/// ([`PolicyResult::cached`]).
pub async fn evaluate_cached(
    cache: &ReviewCache,
    context: &AppContext,
    objects: Vec<Object>,
    policies: &[PolicyStep],
    cluster: Option<&Arc<ClusterView>>,
) -> Report {
    let values: Vec<serde_json::Map<String, serde_json::Value>> =
        objects.iter().map(|o| o.value().clone()).collect();
    let digest = tokio::task::spawn_blocking(move || {
        serde_json::to_vec(&values).map(|bytes| Digest::of(&bytes))
    })
    .await;
    let Ok(Ok(digest)) = digest else {
        return evaluate(context, objects, policies, cluster).await;
    };
    let mut results: Vec<Option<PolicyResult>> = vec![None; policies.len()];
    let mut missed = Vec::new();
    for (index, step) in policies.iter().enumerate() {
        let key = ReviewCache::key(step, context, &digest, cluster);
        let hit = match view_of(&step.source) {
            Some(view) => cache.get(&key, view, cluster).await,
            None => None,
        };
        match hit {
            Some(entry) => {
                cache.hits.fetch_add(1, Ordering::Relaxed);
                results[index] = Some(PolicyResult {
                    policy: step.plugin.name().to_owned(),
                    mode: step.mode,
                    findings: entry.findings.clone(),
                    error: None,
                    duration: std::time::Duration::ZERO,
                    read_set: entry.read_set.clone(),
                    lookups: entry.lookups.clone(),
                    pending: Vec::new(),
                    cached: true,
                });
            }
            None => {
                cache.misses.fetch_add(1, Ordering::Relaxed);
                missed.push((index, key, step.clone()));
            }
        }
    }
    if !missed.is_empty() {
        let steps: Vec<PolicyStep> = missed.iter().map(|(_, _, step)| step.clone()).collect();
        let report = evaluate(context, objects, &steps, cluster).await;
        for ((index, key, _), result) in missed.into_iter().zip(report.results) {
            cache.put(key, &result);
            results[index] = Some(result);
        }
    }
    Report {
        results: results.into_iter().flatten().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::Severity;

    fn review(findings: usize, message: usize) -> PolicyResult {
        PolicyResult {
            policy: "p".into(),
            mode: super::super::Mode::Enforce,
            findings: (0..findings)
                .map(|_| Finding {
                    object: None,
                    field_path: None,
                    message: "m".repeat(message),
                    severity: Severity::Error,
                    rule: None,
                })
                .collect(),
            error: None,
            duration: std::time::Duration::ZERO,
            read_set: ReadSet::default(),
            lookups: Lookups::default(),
            pending: Vec::new(),
            cached: false,
        }
    }

    #[test]
    fn reviews_with_large_findings_are_bounded_in_bytes_as_in_entries() {
        // A policy whose findings carry 100 KiB messages, reviewed over
        // and over, against a cache of 1 MiB: the cache never holds more.
        const BYTES: usize = 1024 * 1024;
        let cache = ReviewCache::with_bytes(DEFAULT_REVIEWS, BYTES);
        for i in 0..100u32 {
            cache.put(Digest::of(&i.to_be_bytes()), &review(1, 100 * 1024));
            let (_, bytes) = cache.held();
            assert!(bytes <= BYTES, "{bytes} bytes held");
        }
        let (reviews, _) = cache.held();
        assert!((5..=10).contains(&reviews), "{reviews} reviews held");
        // The bound in entries still holds for small reviews.
        let cache = ReviewCache::with_bytes(3, BYTES);
        for i in 0..10u32 {
            cache.put(Digest::of(&i.to_be_bytes()), &review(1, 10));
        }
        assert_eq!(cache.held().0, 3);
        // A review larger than the whole cache is not kept.
        let cache = ReviewCache::with_bytes(3, 1024);
        cache.put(Digest::of(b"x"), &review(1, 4096));
        assert_eq!(cache.held(), (0, 0));
    }
}
