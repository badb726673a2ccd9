//! Leader election with a `coordination.k8s.io/v1` Lease, so that two
//! controller replicas never both act: one holds the lease and renews it;
//! the others wait until it expires. Every update carries the lease's
//! `resourceVersion`, so two candidates cannot both win a race.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// Timings of the election. Defaults: a 15 s lease renewed every 5 s,
/// candidates retrying every 2 s.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// This candidate's identity (pod name, or host and process id).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub duration: Duration,
    /// How often the holder renews.
    pub renew_every: Duration,
    /// How often a candidate tries to acquire.
    pub retry_every: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            name: "kiln-controller".into(),
            identity: format!(
                "{}-{}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "kiln".into()),
                std::process::id()
            ),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
        }
    }
}

fn micro_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// True when the lease's holder has not renewed within its duration.
fn expired(spec: &Value) -> bool {
    expired_for(spec).is_some()
}

/// How long ago the lease stopped being valid; `None` while it is (a lease
/// that never was renewed expired long ago).
fn expired_for(spec: &Value) -> Option<Duration> {
    let Some(renewed) = spec
        .get("renewTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return Some(Duration::MAX);
    };
    let seconds = spec
        .get("leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(15);
    let over = jiff::Timestamp::now().as_second() - (renewed.as_second() + seconds);
    (over > 0).then(|| Duration::from_secs(over.unsigned_abs()))
}

/// The annotation a shard's preferred replica puts on a Lease another
/// replica took over, asking for it back.
pub const CLAIM_ANNOTATION: &str = "kiln.dev/claimed-by";

/// What a Lease says, read without changing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// Who holds it.
    pub holder: String,
    /// How long ago it stopped being valid (`None`: still valid).
    pub expired_for: Option<Duration>,
    /// Who claims it back ([`CLAIM_ANNOTATION`]).
    pub claimed_by: Option<String>,
    /// Its resourceVersion.
    pub resource_version: Option<String>,
}

/// One candidate.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
}

impl Elector {
    /// A candidate for the lease in `namespace`.
    pub fn new(client: kube::Client, namespace: &str, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            config,
        }
    }

    fn lease(
        &self,
        resource_version: Option<String>,
        transitions: i64,
        acquired: Option<String>,
    ) -> Result<Lease, kube::Error> {
        let now = micro_now();
        let value = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.config.name, "resourceVersion": resource_version},
            "spec": {
                "holderIdentity": self.config.identity,
                "leaseDurationSeconds": self.config.duration.as_secs(),
                "acquireTime": acquired.unwrap_or_else(|| now.clone()),
                "renewTime": now,
                "leaseTransitions": transitions,
            }
        });
        serde_json::from_value(value).map_err(kube::Error::SerdeError)
    }

    /// One attempt: true when this candidate holds the lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let params = PostParams::default();
        let Some(current) = self.api.get_opt(&self.config.name).await? else {
            return match self.api.create(&params, &self.lease(None, 0, None)?).await {
                Ok(_) => Ok(true),
                // Someone else created it first.
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = serde_json::to_value(&current.spec).unwrap_or_default();
        let holder = spec
            .get("holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mine = holder == self.config.identity;
        if !mine && !expired(&spec) {
            return Ok(false);
        }
        let transitions = spec
            .get("leaseTransitions")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + i64::from(!mine);
        let acquired = mine
            .then(|| {
                spec.get("acquireTime")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .flatten();
        let lease = self.lease(
            current.metadata.resource_version.clone(),
            transitions,
            acquired,
        )?;
        match self.api.replace(&self.config.name, &params, &lease).await {
            Ok(_) => Ok(true),
            // Another candidate updated it in between.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The Lease as it is now; `None` when there is none.
    pub async fn peek(&self) -> Result<Option<LeaseView>, kube::Error> {
        let Some(current) = self.api.get_opt(&self.config.name).await? else {
            return Ok(None);
        };
        let spec = serde_json::to_value(&current.spec).unwrap_or_default();
        Ok(Some(LeaseView {
            holder: spec
                .get("holderIdentity")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            expired_for: expired_for(&spec),
            claimed_by: current
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLAIM_ANNOTATION))
                .cloned(),
            resource_version: current.metadata.resource_version.clone(),
        }))
    }

    /// Asks the holder to hand the lease back: marks it claimed by this
    /// candidate (the holder releases it at its next renewal). True when
    /// the mark was written.
    pub async fn claim(&self) -> Result<bool, kube::Error> {
        let Some(mut current) = self.api.get_opt(&self.config.name).await? else {
            return Ok(false);
        };
        current
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(CLAIM_ANNOTATION.into(), self.config.identity.clone());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up at once (deletes it, if it is still the version
    /// this candidate last saw), so the next candidate need not wait for it
    /// to expire.
    pub async fn release(&self, resource_version: Option<String>) -> Result<(), kube::Error> {
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version,
                uid: None,
            }),
            ..Default::default()
        };
        match self.api.delete(&self.config.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Waits until this candidate holds the lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became the leader");
                    return;
                }
                Ok(false) => {
                    tracing::debug!(lease = %self.config.name, "another replica leads; waiting")
                }
                Err(e) => tracing::warn!(error = %e, "cannot read or write the lease"),
            }
            tokio::time::sleep(self.config.retry_every).await;
        }
    }

    /// Renews the lease until it is lost (another holder, or no successful
    /// renewal within the lease's duration); returns then.
    pub async fn hold(&self) {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.renew_every).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!(lease = %self.config.name, "lost the lease to another replica");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the lease");
                    if last_renewal.elapsed() >= self.config.duration {
                        tracing::warn!(lease = %self.config.name, "the lease expired");
                        return;
                    }
                }
            }
        }
    }
}
