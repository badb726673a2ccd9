//! Sync options, spelled as in Argo CD (`CreateNamespace=true`), and the
//! retry policy.

use std::time::Duration;

/// How pruned objects' dependents are deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrunePropagation {
    /// Delete dependents first (Argo CD's default).
    #[default]
    Foreground,
    /// Delete the object now, dependents afterwards.
    Background,
    /// Leave dependents.
    Orphan,
}

impl PrunePropagation {
    /// The `propagationPolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Foreground => "Foreground",
            Self::Background => "Background",
            Self::Orphan => "Orphan",
        }
    }
}

/// Retries of a failed sync with exponential backoff.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// How many retries after the first attempt.
    pub limit: u32,
    /// Wait before the first retry. Default 5s.
    pub duration: Duration,
    /// Multiplier of the wait per retry. Default 2.
    pub factor: u32,
    /// Cap on the wait. Default 3m.
    pub max_duration: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            limit: 0,
            duration: Duration::from_secs(5),
            factor: 2,
            max_duration: Duration::from_secs(180),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = u64::from(self.factor.max(1)).saturating_pow(attempt.saturating_sub(1));
        let millis = (self.duration.as_millis() as u64).saturating_mul(factor);
        Duration::from_millis(millis).min(self.max_duration)
    }
}

/// Everything that shapes one sync.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// Delete tracked objects that are no longer rendered.
    pub prune: bool,
    /// Every write is a `dryRun=All`; nothing changes, nothing is waited for.
    pub dry_run: bool,
    /// Take fields other managers own (server-side apply `force`). Default off.
    pub force: bool,
    /// `CreateNamespace=true`: create the destination namespace if missing.
    pub create_namespace: bool,
    /// `PruneLast=true`: prune after every phase and wave.
    pub prune_last: bool,
    /// `ApplyOutOfSyncOnly=true`: skip objects that are already synced.
    pub apply_out_of_sync_only: bool,
    /// `Replace=true`: replace (PUT) instead of apply.
    pub replace: bool,
    /// `ServerSideApply=true` (default): apply with field manager `kiln`;
    /// `false` creates or merge-patches.
    pub server_side_apply: bool,
    /// `Validate=false`: the server ignores unknown fields instead of refusing them.
    pub validate: bool,
    /// `PrunePropagationPolicy=foreground|background|orphan`.
    pub prune_propagation: PrunePropagation,
    /// `FailOnSharedResource=true`: fail on objects another application tracks.
    pub fail_on_shared_resource: bool,
    /// Retries of a failed sync.
    pub retry: RetryPolicy,
    /// How long to wait for a wave to become healthy before the next, and
    /// for hooks to finish. Default 5 minutes.
    pub health_timeout: Duration,
    /// How often health is polled while waiting. Default 1s.
    pub poll_interval: Duration,
    /// The field manager. Default `kiln`.
    pub manager: String,
}

impl Default for SyncOptions {
    fn default() -> Self {
        Self {
            prune: false,
            dry_run: false,
            force: false,
            create_namespace: false,
            prune_last: false,
            apply_out_of_sync_only: false,
            replace: false,
            server_side_apply: true,
            validate: true,
            prune_propagation: PrunePropagation::default(),
            fail_on_shared_resource: false,
            retry: RetryPolicy::default(),
            health_timeout: Duration::from_secs(300),
            poll_interval: Duration::from_secs(1),
            manager: "kiln".into(),
        }
    }
}

/// A sync option that is not understood.
#[derive(Debug, thiserror::Error)]
#[error("sync option {option:?}: {message}")]
pub struct OptionError {
    /// The option as given.
    pub option: String,
    /// What is wrong with it.
    pub message: String,
}

impl SyncOptions {
    /// Applies Argo CD-style options (`CreateNamespace=true`, …).
    pub fn set(&mut self, option: &str) -> Result<(), OptionError> {
        let fail = |message: &str| OptionError {
            option: option.to_owned(),
            message: message.to_owned(),
        };
        let (name, value) = option
            .split_once('=')
            .ok_or_else(|| fail("expected Name=value"))?;
        let flag = || match value {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(fail("expected true or false")),
        };
        match name {
            "CreateNamespace" => self.create_namespace = flag()?,
            "PruneLast" => self.prune_last = flag()?,
            "ApplyOutOfSyncOnly" => self.apply_out_of_sync_only = flag()?,
            "Replace" => self.replace = flag()?,
            "ServerSideApply" => self.server_side_apply = flag()?,
            "Validate" => self.validate = flag()?,
            "FailOnSharedResource" => self.fail_on_shared_resource = flag()?,
            "Prune" => self.prune = flag()?,
            "PrunePropagationPolicy" => {
                self.prune_propagation = match value.to_ascii_lowercase().as_str() {
                    "foreground" => PrunePropagation::Foreground,
                    "background" => PrunePropagation::Background,
                    "orphan" => PrunePropagation::Orphan,
                    _ => return Err(fail("expected foreground, background or orphan")),
                }
            }
            _ => {
                return Err(fail(
                    "unknown option (known: CreateNamespace, PruneLast, ApplyOutOfSyncOnly, Replace, ServerSideApply, Validate, PrunePropagationPolicy, FailOnSharedResource)",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argo_spellings_and_backoff() {
        let mut options = SyncOptions::default();
        for option in [
            "CreateNamespace=true",
            "PruneLast=true",
            "ServerSideApply=false",
            "PrunePropagationPolicy=background",
        ] {
            options.set(option).unwrap();
        }
        assert!(options.create_namespace && options.prune_last && !options.server_side_apply);
        assert_eq!(options.prune_propagation, PrunePropagation::Background);
        assert!(options.set("CreateNamespace=yes").is_err());
        assert!(
            options
                .set("Bogus=true")
                .unwrap_err()
                .to_string()
                .contains("Bogus")
        );
        let retry = RetryPolicy {
            limit: 5,
            duration: Duration::from_secs(1),
            factor: 2,
            max_duration: Duration::from_secs(5),
        };
        let waits: Vec<u64> = (1..=5).map(|n| retry.backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 5, 5]);
    }
}
