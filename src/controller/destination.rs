//! Destination clusters: the controller's own (`https://kubernetes.default.svc`,
//! named `in-cluster`) and those registered as Secrets labeled
//! `kiln.dev/secret-type: cluster` in the controller's namespace, in the
//! layout Argo CD users know:
//!
//! ```yaml
//! stringData:
//!   name: staging                       # what spec.destination.name says
//!   server: https://staging.example.com # what spec.destination.server says
//!   config: |                           # optional
//!     {"bearerToken": "...", "tlsClientConfig": {"caData": "<base64 PEM>"}}
//! ```
//!
//! `config` may hold `bearerToken`, `username`/`password`, and
//! `tlsClientConfig` with `caData`, `certData`, `keyData` (base64 PEM, as in
//! a kubeconfig), `serverName` and `insecure`. A client is built once per
//! Secret version and reused.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;

use super::secrets::{self, ControllerSecrets, SecretType};
use crate::api::{Destination, IN_CLUSTER};
use crate::cluster::Cluster;

/// The name of the controller's own cluster.
pub const IN_CLUSTER_NAME: &str = "in-cluster";

/// Why a destination cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationError {
    /// Both `server` and `name` are set (which one wins would be a guess).
    #[error("spec.destination sets both server {server:?} and name {name:?}; set one of them")]
    Ambiguous {
        /// The server.
        server: String,
        /// The name.
        name: String,
    },
    /// No registered cluster has that server or name.
    #[error(
        "destination {what} is not registered: no Secret labeled kiln.dev/secret-type=cluster in namespace {namespace} has it"
    )]
    NotRegistered {
        /// `server "…"` or `name "…"`.
        what: String,
        /// Where cluster Secrets are read.
        namespace: String,
    },
    /// A cluster Secret is unusable.
    #[error("cluster Secret {secret}: {message}")]
    Invalid {
        /// The Secret's name.
        secret: String,
        /// What is wrong (never a value).
        message: String,
    },
}

/// A resolved destination.
#[derive(Clone, Debug)]
pub struct Target {
    /// The cluster's API server URL.
    pub server: String,
    /// The cluster's name.
    pub name: String,
    /// The cluster.
    pub cluster: Arc<Cluster>,
}

/// Resolves `spec.destination` to a cluster.
pub struct Destinations {
    local: Arc<Cluster>,
    namespace: String,
    secrets: ControllerSecrets,
    client_options: crate::cluster::requests::ClientOptions,
    // Secret name → (resourceVersion, cluster).
    clients: Mutex<HashMap<String, (String, Arc<Cluster>)>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClusterConfig {
    bearer_token: Option<String>,
    username: Option<String>,
    password: Option<String>,
    #[serde(default)]
    tls_client_config: TlsClientConfig,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TlsClientConfig {
    #[serde(default)]
    insecure: bool,
    ca_data: Option<String>,
    cert_data: Option<String>,
    key_data: Option<String>,
    server_name: Option<String>,
}

impl Destinations {
    /// Destinations: `local` for the controller's own cluster, the cluster
    /// Secrets of `namespace` for the rest, whose clients are paced and
    /// counted as `client_options` say.
    pub fn new(
        local: Arc<Cluster>,
        namespace: &str,
        secrets: ControllerSecrets,
        client_options: crate::cluster::requests::ClientOptions,
    ) -> Self {
        Self {
            local,
            namespace: namespace.to_owned(),
            secrets,
            client_options,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The controller's own cluster.
    pub fn local(&self) -> Target {
        Target {
            server: IN_CLUSTER.into(),
            name: IN_CLUSTER_NAME.into(),
            cluster: self.local.clone(),
        }
    }

    /// Resolves a destination; neither server nor name means the
    /// controller's own cluster.
    pub async fn resolve(&self, destination: &Destination) -> Result<Target, DestinationError> {
        let server = destination.server.as_deref().filter(|s| !s.is_empty());
        let name = destination.name.as_deref().filter(|s| !s.is_empty());
        match (server, name) {
            (Some(server), Some(name)) => Err(DestinationError::Ambiguous {
                server: server.into(),
                name: name.into(),
            }),
            (None, None) => Ok(self.local()),
            (Some(server), None) if server.trim_end_matches('/') == IN_CLUSTER => Ok(self.local()),
            (None, Some(IN_CLUSTER_NAME)) => Ok(self.local()),
            (server, name) => {
                let wanted = |s: &k8s_openapi::api::core::v1::Secret| match (server, name) {
                    (Some(server), _) => secrets::value(s, "server")
                        .is_some_and(|v| v.trim_end_matches('/') == server.trim_end_matches('/')),
                    (_, Some(name)) => secrets::value(s, "name").as_deref() == Some(name),
                    _ => false,
                };
                let secret = self
                    .secrets
                    .of_type(SecretType::Cluster)
                    .into_iter()
                    .find(|s| wanted(s))
                    .ok_or_else(|| DestinationError::NotRegistered {
                        what: match (server, name) {
                            (Some(server), _) => format!("server {server:?}"),
                            (_, name) => format!("name {:?}", name.unwrap_or_default()),
                        },
                        namespace: self.namespace.clone(),
                    })?;
                self.connect(&secret).await
            }
        }
    }

    async fn connect(
        &self,
        secret: &k8s_openapi::api::core::v1::Secret,
    ) -> Result<Target, DestinationError> {
        let secret_name = secrets::name(secret).to_owned();
        let invalid = |message: String| DestinationError::Invalid {
            secret: secret_name.clone(),
            message,
        };
        let server = secrets::value(secret, "server")
            .ok_or_else(|| invalid("has no `server` key".into()))?;
        let name = secrets::value(secret, "name").unwrap_or_else(|| server.clone());
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let mut clients = self.clients.lock().await;
        if let Some((seen, cluster)) = clients.get(&secret_name)
            && *seen == version
        {
            return Ok(Target {
                server,
                name,
                cluster: cluster.clone(),
            });
        }
        let config: ClusterConfig = match secrets::value(secret, "config") {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| invalid(format!("`config` is not valid JSON: {e}")))?,
            None => ClusterConfig::default(),
        };
        // A kubeconfig in memory: kube's own code then handles every way of
        // authenticating and trusting a server.
        let tls = &config.tls_client_config;
        let mut cluster = json!({"server": server});
        if let Some(ca) = &tls.ca_data {
            cluster["certificate-authority-data"] = ca.clone().into();
        }
        if tls.insecure {
            cluster["insecure-skip-tls-verify"] = true.into();
        }
        if let Some(server_name) = &tls.server_name {
            cluster["tls-server-name"] = server_name.clone().into();
        }
        let mut user = json!({});
        if let Some(token) = &config.bearer_token {
            user["token"] = token.clone().into();
        }
        if let Some(username) = &config.username {
            user["username"] = username.clone().into();
        }
        if let Some(password) = &config.password {
            user["password"] = password.clone().into();
        }
        if let Some(cert) = &tls.cert_data {
            user["client-certificate-data"] = cert.clone().into();
        }
        if let Some(key) = &tls.key_data {
            user["client-key-data"] = key.clone().into();
        }
        let kubeconfig = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "destination", "cluster": cluster}],
            "users": [{"name": "destination", "user": user}],
            "contexts": [{"name": "destination", "context": {"cluster": "destination", "user": "destination"}}],
            "current-context": "destination",
        });
        let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(kubeconfig)
            .map_err(|e| invalid(format!("`config` is not usable: {e}")))?;
        let client_config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            // kube's messages name fields, not values.
            .map_err(|e| invalid(format!("`config` is not usable: {e}")))?;
        let client = crate::cluster::requests::client(client_config, &self.client_options)
            .map_err(|e| invalid(format!("cannot build a client: {e}")))?;
        let cluster = Arc::new(Cluster::new(client));
        clients.insert(secret_name, (version, cluster.clone()));
        Ok(Target {
            server,
            name,
            cluster,
        })
    }
}
