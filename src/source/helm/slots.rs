//! Download slots, per origin: at most so many downloads in flight to one
//! scheme, host and port, and so many in all. A repository that never
//! answers holds only its own slots, each for at most one request's
//! deadline: charts of every other repository keep being fetched. The
//! total bounds the memory of downloads in flight (each holds its body, up
//! to an index's or an archive's limit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Origins remembered before the ones with no download in flight are
/// forgotten (an origin costs a few bytes and an idle semaphore).
const PRUNE_AT: usize = 1_024;

/// The slots of every origin.
#[derive(Debug)]
pub struct Slots {
    per_origin: usize,
    origins: Mutex<HashMap<String, Weak<Semaphore>>>,
    total: Arc<Semaphore>,
}

/// A slot held: the download may run while it lives.
#[derive(Debug)]
pub struct Slot {
    _origin: OwnedSemaphorePermit,
    _total: OwnedSemaphorePermit,
}

impl Slots {
    /// `per_origin` downloads in flight per origin, `total` in all (each
    /// at least one).
    pub fn new(per_origin: usize, total: usize) -> Self {
        Self {
            per_origin: per_origin.max(1),
            origins: Mutex::new(HashMap::new()),
            total: Arc::new(Semaphore::new(total.max(1))),
        }
    }

    /// Waits for a slot of `url`'s origin (`oci://` references count by
    /// their registry; anything that is not a URL counts as itself).
    pub async fn acquire(&self, url: &str) -> Slot {
        let semaphore = self.semaphore(&origin(url));
        // The origin's slot first: a download waiting on a stalled origin
        // holds none of the total.
        let origin = semaphore
            .acquire_owned()
            .await
            .expect("a slot semaphore is never closed");
        let total = self
            .total
            .clone()
            .acquire_owned()
            .await
            .expect("a slot semaphore is never closed");
        Slot {
            _origin: origin,
            _total: total,
        }
    }

    fn semaphore(&self, origin: &str) -> Arc<Semaphore> {
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(semaphore) = origins.get(origin).and_then(Weak::upgrade) {
            return semaphore;
        }
        if origins.len() >= PRUNE_AT {
            origins.retain(|_, slot| slot.strong_count() > 0);
        }
        let semaphore = Arc::new(Semaphore::new(self.per_origin));
        origins.insert(origin.to_owned(), Arc::downgrade(&semaphore));
        semaphore
    }

    /// How many origins are remembered (for tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.origins.lock().unwrap().len()
    }
}

/// `scheme://host:port` of `url`, lower-cased, the port made explicit.
fn origin(url: &str) -> String {
    let url = url
        .strip_prefix("oci://")
        .map(|rest| format!("https://{rest}"))
        .unwrap_or_else(|| url.to_owned());
    match url::Url::parse(&url) {
        Ok(parsed) => format!(
            "{}://{}:{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or_default(),
            parsed.port_or_known_default().unwrap_or_default()
        ),
        Err(_) => url,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_origin_however_it_is_spelled() {
        assert_eq!(
            origin("https://Charts.Example/a/index.yaml"),
            "https://charts.example:443"
        );
        assert_eq!(
            origin("https://charts.example:443//a"),
            "https://charts.example:443"
        );
        assert_eq!(
            origin("http://charts.example/x"),
            "http://charts.example:80"
        );
        assert_eq!(origin("oci://ghcr.io/acme/chart"), "https://ghcr.io:443");
    }

    #[tokio::test]
    async fn a_stalled_origin_holds_only_its_own_slots() {
        let slots = Slots::new(2, 8);
        let _a = slots.acquire("https://stalled.example/index.yaml").await;
        let _b = slots.acquire("https://STALLED.example/x.tgz").await;
        // A third download of the stalled origin waits...
        let third = tokio::time::timeout(
            Duration::from_millis(50),
            slots.acquire("https://stalled.example/y.tgz"),
        )
        .await;
        assert!(third.is_err(), "the origin has two slots");
        // ...while another origin gets a slot at once.
        tokio::time::timeout(
            Duration::from_secs(5),
            slots.acquire("https://other.example/index.yaml"),
        )
        .await
        .expect("another origin is not stalled");
        // A slot given back is taken by the next download.
        drop(_a);
        tokio::time::timeout(
            Duration::from_secs(5),
            slots.acquire("https://stalled.example/y.tgz"),
        )
        .await
        .expect("a freed slot is reused");
    }

    #[tokio::test]
    async fn the_total_holds_across_origins() {
        let slots = Slots::new(4, 2);
        let _a = slots.acquire("https://a.example/").await;
        let _b = slots.acquire("https://b.example/").await;
        let third = tokio::time::timeout(
            Duration::from_millis(50),
            slots.acquire("https://c.example/"),
        )
        .await;
        assert!(third.is_err(), "two downloads in all");
    }

    #[tokio::test]
    async fn idle_origins_are_forgotten() {
        let slots = Slots::new(1, 1);
        for i in 0..(PRUNE_AT + 10) {
            drop(slots.acquire(&format!("https://h{i}.example/")).await);
        }
        assert!(slots.remembered() <= PRUNE_AT, "{}", slots.remembered());
    }
}
