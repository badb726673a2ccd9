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
//! Only reviews that ran to the end are kept (a policy that could not run
//! runs again), and only with at most [`MAX_CACHED_FINDINGS`] findings;
//! the cache holds at most [`DEFAULT_REVIEWS`] reviews by default, least
//! recently used first out. It lives in memory only.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clru::CLruCache;

use super::{PolicyResult, PolicySource, PolicyStep, Report, evaluate};
use crate::digest::Digest;
use crate::manifest::Object;
use crate::plugin::{AppContext, Finding};
use crate::source::{ReadSet, SourceView};

/// Reviews the cache holds by default.
pub const DEFAULT_REVIEWS: usize = 4096;
/// Reviews with more findings than this are not kept (they are the rare,
/// broken case, and the large one).
pub const MAX_CACHED_FINDINGS: usize = 1000;

/// Cached reviews, by what shapes them.
pub struct ReviewCache {
    entries: Mutex<CLruCache<Digest, Arc<Entry>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Entry {
    read_set: ReadSet,
    findings: Vec<Finding>,
}

impl Default for ReviewCache {
    fn default() -> Self {
        Self::new(DEFAULT_REVIEWS)
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
    /// A cache of at most `reviews` reviews (at least one).
    pub fn new(reviews: usize) -> Self {
        Self {
            entries: Mutex::new(CLruCache::new(
                NonZeroUsize::new(reviews).unwrap_or(NonZeroUsize::MIN),
            )),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// `(hits, misses)` so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CLruCache<Digest, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key of one policy's review of `objects` (their digest).
    fn key(step: &PolicyStep, context: &AppContext, objects: &Digest) -> Digest {
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
        ];
        let mut text = String::new();
        for part in &parts {
            // Length-prefixed, so that parts cannot run into each other.
            text.push_str(&format!("{}:{part};", part.len()));
        }
        Digest::of(text.as_bytes())
    }

    /// The cached findings of `key`, when what the review read still holds
    /// in `view`.
    async fn get(&self, key: &Digest, view: Arc<dyn SourceView>) -> Option<Arc<Entry>> {
        let entry = self.lock().get(key).cloned()?;
        let check = entry.clone();
        let holds = tokio::task::spawn_blocking(move || check.read_set.holds(&*view))
            .await
            .unwrap_or(false);
        holds.then_some(entry)
    }

    fn put(&self, key: Digest, result: &PolicyResult) {
        if result.error.is_some() || result.findings.len() > MAX_CACHED_FINDINGS {
            return;
        }
        let entry = Arc::new(Entry {
            read_set: result.read_set.clone(),
            findings: result.findings.clone(),
        });
        let _ = self.lock().put(key, entry);
    }
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
) -> Report {
    let values: Vec<serde_json::Map<String, serde_json::Value>> =
        objects.iter().map(|o| o.value().clone()).collect();
    let digest = tokio::task::spawn_blocking(move || {
        serde_json::to_vec(&values).map(|bytes| Digest::of(&bytes))
    })
    .await;
    let Ok(Ok(digest)) = digest else {
        return evaluate(context, objects, policies).await;
    };
    let mut results: Vec<Option<PolicyResult>> = vec![None; policies.len()];
    let mut missed = Vec::new();
    for (index, step) in policies.iter().enumerate() {
        let key = ReviewCache::key(step, context, &digest);
        let hit = match view_of(&step.source) {
            Some(view) => cache.get(&key, view).await,
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
        let report = evaluate(context, objects, &steps).await;
        for ((index, key, _), result) in missed.into_iter().zip(report.results) {
            cache.put(key, &result);
            results[index] = Some(result);
        }
    }
    Report {
        results: results.into_iter().flatten().collect(),
    }
}
