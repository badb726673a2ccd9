//! A dev cluster started in-process on a random port, with a `kube::Client`
//! for it.

use kiln_devcluster::{Config, DevCluster};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// A running dev cluster and a client of it.
pub struct Cluster {
    /// The server.
    pub server: DevCluster,
    /// A client configured from the server's own kubeconfig.
    pub client: kube::Client,
}

impl Cluster {
    /// Starts a cluster with default settings.
    pub async fn start() -> Self {
        Self::with(Config::default()).await
    }

    /// Starts a cluster with `config`.
    pub async fn with(config: Config) -> Self {
        let server = DevCluster::start(config)
            .await
            .expect("the dev cluster starts");
        let client = client_for(&server).await;
        Self { server, client }
    }

    /// Starts a cluster with `config` that serves Kiln's CRDs and the
    /// PolicyReport CRDs of deploy/policy-reports/, and holds the
    /// namespaces `namespaces` (what the controller's tests start from).
    pub async fn with_kiln(config: Config, namespaces: &[&str]) -> Self {
        Self::with_kiln_crds(config, namespaces, true).await
    }

    /// [`Cluster::with_kiln`], saying whether the cluster serves the
    /// wgpolicyk8s.io PolicyReport CRDs.
    pub async fn with_kiln_crds(config: Config, namespaces: &[&str], policy_reports: bool) -> Self {
        let cluster = Self::with(config).await;
        let mut crds: Vec<String> = kiln::api::crds()
            .into_iter()
            .map(|(_, yaml)| yaml)
            .collect();
        if policy_reports {
            crds.extend(policy_report_crds());
        }
        for yaml in crds {
            cluster
                .apply(
                    "customresourcedefinitions",
                    serde_yaml::from_str(&yaml).unwrap(),
                    "kiln",
                    false,
                )
                .await
                .unwrap();
        }
        for ns in namespaces {
            cluster
                .apply(
                    "namespaces",
                    serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    "test",
                    false,
                )
                .await
                .unwrap();
        }
        cluster
    }

    /// A dynamic API for `apiVersion`/`kind` (plural `plural`), in `namespace`
    /// or cluster-wide.
    pub fn api(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Server-side applies `object` (JSON) as `manager`.
    pub async fn apply(
        &self,
        plural: &str,
        object: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, kube::Error> {
        let api_version = object["apiVersion"].as_str().unwrap().to_owned();
        let kind = object["kind"].as_str().unwrap().to_owned();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
        let api = self.api(&api_version, &kind, plural, namespace.as_deref());
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let applied = api.patch(&name, &params, &Patch::Apply(&object)).await?;
        Ok(serde_json::to_value(applied).unwrap())
    }

    /// Registers the catalog Plugin `helm` (`plugins/dist/helm.wasm`,
    /// unsigned: the controller must allow file plugins).
    pub async fn register_helm_plugin(&self) {
        self.apply(
            "plugins",
            serde_json::json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "helm", "namespace": "kiln"},
                "spec": {"kind": "renderer", "ref": super::component("helm").display().to_string(),
                    "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    }

    /// Applies an automated Application (prune, self-heal) `name` in
    /// namespace `kiln`, of `project`, from `source`, into namespace
    /// `guestbook`.
    pub async fn automated_app(&self, name: &str, project: &str, source: Value) {
        self.apply(
            "applications",
            serde_json::json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
                "metadata": {"name": name, "namespace": "kiln"},
                "spec": {"project": project, "source": source,
                    "destination": {"namespace": "guestbook"},
                    "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    }

    /// Reads an object as JSON.
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, kube::Error> {
        let object = self
            .api(api_version, kind, plural, namespace)
            .get(name)
            .await?;
        Ok(serde_json::to_value(object).unwrap())
    }
}

/// The PolicyReport and ClusterPolicyReport CRDs Kiln ships
/// (deploy/policy-reports/).
pub fn policy_report_crds() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/policy-reports");
    ["policyreports", "clusterpolicyreports"]
        .iter()
        .map(|name| {
            let file = dir.join(format!("{name}.wgpolicyk8s.io.yaml"));
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        })
        .collect()
}

/// A `kube::Client` built from the server's kubeconfig, as users would.
pub async fn client_for(server: &DevCluster) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).expect("the kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the kubeconfig is usable");
    kube::Client::try_from(config).expect("a client")
}

/// The HTTP status code of an API error.
pub fn code(error: &kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other}"),
    }
}

/// The message of an API error.
pub fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => panic!("expected an API error, got {other}"),
    }
}

/// The managers recorded on an object, as `(manager, operation)` pairs.
pub fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_owned(),
                        e["operation"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `fieldsV1` of one manager's entry.
pub fn fields_of(object: &Value, manager: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

/// The `status` of Application `name` in the `kiln` namespace; null when
/// it has none or does not exist yet (App-of-Apps children).
pub async fn app_status(cluster: &Cluster, name: &str) -> Value {
    cluster
        .get(
            "kiln.dev/v1alpha1",
            "Application",
            "applications",
            Some("kiln"),
            name,
        )
        .await
        .map(|app| app["status"].clone())
        .unwrap_or_default()
}
