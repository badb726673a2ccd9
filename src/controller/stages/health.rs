//! Health: every rendered object's live state assessed, and the
//! Application's health their aggregate.

use std::collections::HashMap;

use serde_json::Value;

use super::super::live::LiveWatches;
use super::compare::Comparison;
use crate::api::{ApplicationStatus, HealthInfo, ResourceStatus};
use crate::health::{self, Health};
use crate::manifest::ObjectKey;

/// Assesses the health of every resource in `status` and of the whole.
/// Live objects come from the watches' caches, or from what a sync just
/// wrote (`written`), and from the API server only when neither has them.
pub async fn assess(
    status: &mut ApplicationStatus,
    cmp: &Comparison,
    live: &LiveWatches,
    mut written: HashMap<ObjectKey, Value>,
) {
    let mut healths = Vec::new();
    for resource in &mut status.resources {
        let object = cmp.objects.iter().find(|o| {
            let key = ObjectKey::of(o);
            key.kind == resource.kind && key.name == resource.name && key.group == resource.group
        });
        let Some(object) = object else { continue };
        let health = of(resource, object, cmp, live, &mut written).await;
        resource.health = Some(health.to_string());
        healths.push(health);
    }
    status.health = Some(HealthInfo {
        status: health::aggregate(healths).to_string(),
        message: None,
    });
}

/// The health of one resource rendered as `object`.
async fn of(
    resource: &ResourceStatus,
    object: &Value,
    cmp: &Comparison,
    live: &LiveWatches,
    written: &mut HashMap<ObjectKey, Value>,
) -> Health {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let cluster = &cmp.target.cluster;
    let Ok(resolved) = cluster.resolve(api_version, &resource.kind).await else {
        return Health::Missing;
    };
    // The status's namespace is the one applied (the rendered object may
    // name none).
    let key = ObjectKey {
        namespace: resource.namespace.clone(),
        ..ObjectKey::of(object)
    };
    let cached = match live.get(&cmp.target.server, &resolved, &key).await {
        Some(live) => Some(live),
        None => written.remove(&key),
    };
    let live = match cached {
        Some(live) => Ok(Some(live)),
        None => cluster
            .api(&resolved, resource.namespace.as_deref())
            .get_opt(&resource.name)
            .await
            .map(|o| o.map(|o| serde_json::to_value(o).unwrap_or_default())),
    };
    match live {
        Ok(Some(live)) => health::assess(&live).status,
        Ok(None) => Health::Missing,
        Err(_) => Health::Unknown,
    }
}
