//! Project rules, enforced before anything is rendered or applied: which
//! repositories, destinations, kinds and plugins an application may use,
//! and which policies it gets whether it wants them or not.

use crate::api::{AppProjectSpec, Application, GroupKind, PolicyUse};
use crate::glob::matches;
use crate::manifest::ObjectKey;
use crate::source::git::{RepoUrl, pattern_key};

/// The name of the catalog Plugin that renders Helm charts: a chart
/// source, or a Git path with a `spec.source.helm` block and no plugins,
/// renders with it; with plugins, the block maps onto the step naming it.
pub const HELM_PLUGIN: &str = "helm";

/// A rule an application broke; the message names the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("project {project}: {message}")]
pub struct Violation {
    /// The project.
    pub project: String,
    /// Which rule, and what broke it.
    pub message: String,
}

/// The project that allows everything (Argo CD's `default`), used when no
/// AppProject named `default` exists.
pub fn permissive() -> AppProjectSpec {
    let any = GroupKind {
        group: "*".into(),
        kind: "*".into(),
    };
    AppProjectSpec {
        source_repos: vec!["*".into()],
        destinations: vec![crate::api::ProjectDestination {
            server: Some("*".into()),
            name: Some("*".into()),
            namespace: Some("*".into()),
        }],
        cluster_resource_whitelist: vec![any],
        // Argo CD's default project may do anything, App-of-Apps included;
        // an AppProject named `default` replaces this one.
        allow_controller_namespace: true,
        ..AppProjectSpec::default()
    }
}

/// Whether `text` can be a name or namespace in an API path: not empty,
/// no `/` or `%`, not `.` or `..`, no control characters (what the API
/// server's path-segment rule refuses).
fn path_segment(text: &str) -> bool {
    !text.is_empty()
        && text != "."
        && text != ".."
        && !text.contains(['/', '%', '?', '#'])
        && !text.chars().any(char::is_control)
}

/// Whether `text` is an RFC 1123 label, what a namespace's name must be.
fn dns_label(text: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&text.len())
        && text.chars().all(|c| alnum(c) || c == '-')
        && text.starts_with(alnum)
        && text.ends_with(alnum)
}

fn kind_listed(list: &[GroupKind], key: &ObjectKey) -> bool {
    list.iter()
        .any(|gk| matches(&gk.group, &key.group) && matches(&gk.kind, &key.kind))
}

/// Where a rendered object would be written: the resolved destination
/// cluster, and the namespace the controller itself lives in.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// The destination cluster's server URL.
    pub server: &'a str,
    /// The destination cluster's name.
    pub name: &'a str,
    /// The controller's namespace (Applications, AppProjects, Plugins and
    /// credentials live there).
    pub controller_namespace: &'a str,
}

/// A project, checked against.
#[derive(Clone, Debug)]
pub struct Project {
    name: String,
    spec: AppProjectSpec,
}

impl Project {
    /// A project by name and spec.
    pub fn new(name: impl Into<String>, spec: AppProjectSpec) -> Self {
        Self {
            name: name.into(),
            spec,
        }
    }

    fn violation(&self, message: String) -> Violation {
        Violation {
            project: self.name.clone(),
            message,
        }
    }

    /// Checks the application's source and plugins (the destination is
    /// checked once resolved: [`Project::admit_destination`]).
    pub fn admit(&self, app: &Application) -> Result<(), Violation> {
        if let Some(chart) = app.spec.source.chart.as_deref().filter(|c| !c.is_empty()) {
            let repo = app.spec.source.repo_url.trim();
            match chart.strip_prefix("oci://") {
                // A full reference: its registry path is the repository.
                Some(reference) if repo.is_empty() => {
                    let path = reference
                        .split('@')
                        .next()
                        .unwrap_or(reference)
                        .rsplit_once('/')
                        .map_or(reference, |(path, _)| path);
                    self.admit_oci_repository(&format!("oci://{path}"))?;
                }
                _ if repo.starts_with("oci://") || !repo.contains("://") => {
                    self.admit_oci_repository(repo)?;
                }
                _ => self.admit_chart_repository(repo)?,
            }
        } else {
            self.admit_repository(&app.spec.source.repo_url)?;
        }
        // An Application's own policies may read another repository only
        // if the project lets it use that repository (the project's
        // mandatory policies are trusted as the AppProject is).
        for source in app.spec.policies.iter().filter_map(|p| p.source.as_ref()) {
            self.admit_repository(&source.repo_url)?;
        }
        if !self.spec.plugins.is_empty() {
            // A chart (or a helm block) with no plugins renders with the
            // Plugin `helm`, which the project must allow too.
            let source = &app.spec.source;
            let implicit_helm = (source.helm.is_some()
                || source.chart.as_deref().is_some_and(|c| !c.is_empty()))
                && source.plugins.is_empty();
            let helm = HELM_PLUGIN.to_owned();
            for plugin in source
                .plugins
                .iter()
                .map(|p| &p.name)
                .chain(implicit_helm.then_some(&helm))
                .chain(app.spec.policies.iter().map(|p| &p.name))
            {
                if !self.spec.plugins.iter().any(|p| matches(p, plugin)) {
                    return Err(self.violation(format!(
                        "plugin {plugin:?} is not in its plugins {:?}",
                        self.spec.plugins
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks a repository URL against `sourceRepos`: globs are matched
    /// against the normalized URL ([`RepoUrl::key`]), the one that will be
    /// fetched, so that `..` segments, escapes or spellings cannot carry a
    /// URL past a pattern; a URL that does not parse is refused.
    pub fn admit_repository(&self, raw: &str) -> Result<(), Violation> {
        let url = RepoUrl::parse(raw).map_err(|e| {
            self.violation(format!("{e}: it cannot be checked against sourceRepos"))
        })?;
        let allowed = self
            .spec
            .source_repos
            .iter()
            .any(|pattern| matches(&pattern_key(pattern), url.key()));
        if !allowed {
            return Err(self.violation(format!(
                "repository {raw:?} ({}) is not in sourceRepos {:?}",
                url.key(),
                self.spec.source_repos
            )));
        }
        Ok(())
    }

    /// Checks a Helm repository (or OCI registry path) URL against
    /// `sourceRepos`, as Argo CD does: the repository URL itself
    /// (`https://charts.example.com`, which may have no path) or its
    /// `index.yaml`, both normalized as for Git ([`RepoUrl::key`]).
    fn admit_chart_repository(&self, raw: &str) -> Result<(), Violation> {
        let index = format!("{}/index.yaml", raw.trim_end_matches('/'));
        let url = RepoUrl::parse(&index).map_err(|e| {
            self.violation(format!(
                "chart repository {raw:?}: {e}: it cannot be checked against sourceRepos"
            ))
        })?;
        let repo = url.key().strip_suffix("/index.yaml").unwrap_or(url.key());
        let allowed = self.spec.source_repos.iter().any(|pattern| {
            let pattern = pattern_key(pattern);
            matches(&pattern, url.key()) || matches(&pattern, repo)
        });
        if !allowed {
            return Err(self.violation(format!(
                "chart repository {raw:?} ({repo}) is not in sourceRepos {:?}",
                self.spec.source_repos
            )));
        }
        Ok(())
    }

    /// Checks a chart dependency's repository (as `Chart.yaml` writes it:
    /// an `http(s)://` Helm repository or an `oci://` registry path)
    /// against `sourceRepos`, as the chart's own repository is.
    pub fn admit_dependency_repository(&self, raw: &str) -> Result<(), Violation> {
        if raw.trim_start().starts_with("oci://") {
            self.admit_oci_repository(raw.trim())
        } else {
            self.admit_chart_repository(raw.trim())
        }
    }

    /// Checks an OCI registry path holding charts (`oci://registry/path`, or
    /// Argo CD's `registry/path` without scheme) against `sourceRepos`: a
    /// pattern matches its normalized `oci://` form, or (as Argo CD users
    /// write it) the form without scheme. A path with empty, `.` or `..`
    /// segments, or characters a client would cut at, is refused.
    fn admit_oci_repository(&self, raw: &str) -> Result<(), Violation> {
        let bare = raw
            .strip_prefix("oci://")
            .unwrap_or(raw)
            .trim_end_matches('/');
        let (host, path) = bare.split_once('/').unwrap_or((bare, ""));
        let clean = !host.is_empty()
            && !host.contains(['@', '\\', '?', '#'])
            && (path.is_empty()
                || path
                    .split('/')
                    .all(|segment| path_segment(segment) && !segment.contains(['\\', '@', ':'])));
        if !clean {
            return Err(self.violation(format!(
                "chart registry {raw:?}: not an OCI registry path: it cannot be checked against sourceRepos"
            )));
        }
        let bare = [host.to_ascii_lowercase().as_str(), path]
            .join("/")
            .trim_end_matches('/')
            .to_owned();
        let key = format!("oci://{bare}");
        let allowed =
            self.spec.source_repos.iter().any(|pattern| {
                matches(&pattern_key(pattern), &key) || matches(pattern.trim(), &bare)
            });
        if !allowed {
            return Err(self.violation(format!(
                "chart registry {raw:?} ({key}) is not in sourceRepos {:?}",
                self.spec.source_repos
            )));
        }
        Ok(())
    }

    /// Checks a resolved destination: the cluster's server URL and name
    /// (both known once the destination is resolved, so that naming a
    /// cluster by the other field cannot slip past a rule) and the
    /// namespace.
    pub fn admit_destination(
        &self,
        server: &str,
        name: &str,
        namespace: &str,
    ) -> Result<(), Violation> {
        if !self.destination_allowed(server, name, namespace) {
            return Err(self.violation(format!(
                "destination {server} ({name}) namespace {namespace:?} is not allowed by its destinations"
            )));
        }
        Ok(())
    }

    fn destination_allowed(&self, server: &str, name: &str, namespace: &str) -> bool {
        self.spec.destinations.iter().any(|d| {
            d.server.as_deref().is_none_or(|p| matches(p, server))
                && d.name.as_deref().is_none_or(|p| matches(p, name))
                && d.namespace.as_deref().is_none_or(|p| matches(p, namespace))
        })
    }

    /// Checks one rendered object where it would be written: its kind
    /// (namespaced or cluster-scoped lists) and, for a namespaced object,
    /// its own namespace (`key.namespace`, after the destination namespace
    /// was filled in) against the project's destinations, as Argo CD does.
    /// Writing into the controller's namespace — where Applications,
    /// AppProjects, Plugins and the repository and cluster Secrets live —
    /// is reserved to projects with `allowControllerNamespace`: anything
    /// written there can make applications of any project.
    pub fn admit_object(
        &self,
        key: &ObjectKey,
        namespaced: bool,
        at: &Placement<'_>,
    ) -> Result<(), Violation> {
        let spec = &self.spec;
        let refused = if namespaced {
            kind_listed(&spec.namespace_resource_blacklist, key)
                || (!spec.namespace_resource_whitelist.is_empty()
                    && !kind_listed(&spec.namespace_resource_whitelist, key))
        } else {
            kind_listed(&spec.cluster_resource_blacklist, key)
                || !kind_listed(&spec.cluster_resource_whitelist, key)
        };
        if refused {
            let scope = if namespaced {
                "namespaced"
            } else {
                "cluster-scoped"
            };
            return Err(self.violation(format!(
                "{scope} kind {}/{} of {key} is not allowed",
                key.group, key.kind
            )));
        }
        for part in [Some(key.name.as_str()), key.namespace.as_deref()]
            .into_iter()
            .flatten()
        {
            if !path_segment(part) {
                return Err(self.violation(format!(
                    "{key}: {part:?} is not a valid object name or namespace"
                )));
            }
        }
        // A Namespace is the namespace it names: held to the same rules as
        // what is written into it (adopting `kube-system` or the
        // controller's namespace, then pruning it, would delete it).
        let namespace = if key.group.is_empty() && key.kind == "Namespace" {
            Some(key.name.as_str())
        } else if namespaced {
            key.namespace.as_deref()
        } else {
            return Ok(());
        };
        let Some(namespace) = namespace else {
            return Err(self.violation(format!(
                "{key} is namespaced but names no namespace, and the application's destination names none"
            )));
        };
        if !dns_label(namespace) {
            return Err(self.violation(format!(
                "{key}: {namespace:?} is not a valid namespace (an RFC 1123 label)"
            )));
        }
        if !self.destination_allowed(at.server, at.name, namespace) {
            return Err(self.violation(format!(
                "{key} would be written to namespace {namespace:?} of {} ({}), which its destinations do not allow",
                at.server, at.name
            )));
        }
        if namespace == at.controller_namespace && !spec.allow_controller_namespace {
            return Err(self.violation(format!(
                "{key} would be written to the controller's namespace {namespace:?}; only a project with allowControllerNamespace may write there"
            )));
        }
        Ok(())
    }

    /// The project's mandatory policies.
    pub fn policies(&self) -> &[PolicyUse] {
        &self.spec.policies
    }

    /// Signers every plugin of the project must also have.
    pub fn plugin_verification(&self) -> Option<&crate::trust::VerificationSpec> {
        self.spec.plugin_verification.as_ref()
    }

    /// The project's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn app(repo: &str, namespace: &str, plugins: &[&str]) -> Application {
        serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "metadata": {"name": "a"},
            "spec": {"source": {"repoURL": repo, "plugins": plugins.iter().map(|p| json!({"name": p})).collect::<Vec<_>>()},
                "destination": {"namespace": namespace}}}))
        .unwrap()
    }

    fn team() -> Project {
        Project::new(
            "team",
            serde_json::from_value(json!({"sourceRepos": ["https://git.example.com/team/*"],
                "destinations": [{"namespace": "team-*"}], "plugins": ["values"],
                "namespaceResourceBlacklist": [{"group": "", "kind": "Secret"}],
                "clusterResourceWhitelist": [{"group": "", "kind": "Namespace"}]}))
            .unwrap(),
        )
    }

    fn chart_app(repo: &str, chart: &str) -> Application {
        serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "metadata": {"name": "a"},
            "spec": {"source": {"repoURL": repo, "chart": chart}, "destination": {"namespace": "team-a"}}}))
        .unwrap()
    }

    #[test]
    fn oci_chart_registries_are_checked_against_source_repos_in_either_form() {
        let project = Project::new(
            "charts",
            serde_json::from_value(json!({"sourceRepos": [
                "oci://registry.example.com/team/*", "127.0.0.1:5000/charts",
                "https://charts.example.com"],
                "destinations": [{"namespace": "*"}]}))
            .unwrap(),
        );
        for (repo, chart) in [
            ("oci://registry.example.com/team/charts", "web"),
            ("Registry.example.com/team/charts/", "web"),
            ("127.0.0.1:5000/charts", "web"),
            ("oci://127.0.0.1:5000/charts", "web"),
            ("", "oci://registry.example.com/team/charts/web:1.2.0"),
            ("", "oci://registry.example.com/team/charts/web@sha256:00"),
            ("https://charts.example.com", "web"),
        ] {
            let admitted = project.admit(&chart_app(repo, chart));
            assert!(admitted.is_ok(), "{repo} {chart}: {admitted:?}");
        }
        for (repo, chart) in [
            ("oci://registry.example.com/other/charts", "web"),
            ("registry.example.com.evil/team/charts", "web"),
            ("registry.example.com/team/../../other", "web"),
            ("registry.example.com/team/charts?x=/", "web"),
            ("127.0.0.1:5001/charts", "web"),
            ("", "oci://registry.example.com/other/web:1.2.0"),
            ("https://charts.example.com.evil", "web"),
        ] {
            let refused = project.admit(&chart_app(repo, chart)).unwrap_err();
            assert!(
                refused.to_string().contains("sourceRepos"),
                "{repo} {chart}: {refused}"
            );
        }
    }

    #[test]
    fn repositories_destinations_and_plugins() {
        let project = team();
        assert!(
            project
                .admit(&app(
                    "https://git.example.com/team/apps",
                    "team-a",
                    &["values"]
                ))
                .is_ok()
        );
        let error = project
            .admit(&app("https://evil.example.com/x", "team-a", &[]))
            .unwrap_err();
        assert!(error.to_string().contains("sourceRepos"), "{error}");
        assert!(
            project
                .admit_destination(crate::api::IN_CLUSTER, "in-cluster", "team-a")
                .is_ok()
        );
        let error = project
            .admit_destination(crate::api::IN_CLUSTER, "in-cluster", "kube-system")
            .unwrap_err();
        assert!(error.to_string().contains("\"kube-system\""), "{error}");
        let error = project
            .admit(&app(
                "https://git.example.com/team/apps",
                "team-a",
                &["kustomize"],
            ))
            .unwrap_err();
        assert!(error.to_string().contains("\"kustomize\""), "{error}");
        assert!(
            permissive_project()
                .admit(&app("anything", "anywhere", &["x"]))
                .is_ok()
        );
    }

    fn permissive_project() -> Project {
        Project::new("default", permissive())
    }

    #[test]
    fn destinations_are_checked_by_server_and_name() {
        let project = Project::new(
            "prod",
            serde_json::from_value(json!({"sourceRepos": ["*"],
                "destinations": [{"server": "https://prod-*.example.com", "namespace": "*"},
                    {"name": "staging", "namespace": "web"}]}))
            .unwrap(),
        );
        assert!(
            project
                .admit_destination("https://prod-eu.example.com", "eu", "x")
                .is_ok()
        );
        assert!(
            project
                .admit_destination("https://10.0.0.1", "staging", "web")
                .is_ok()
        );
        assert!(
            project
                .admit_destination("https://10.0.0.1", "staging", "db")
                .is_err()
        );
        // A cluster named by name is still checked by its server, and back.
        assert!(
            project
                .admit_destination(crate::api::IN_CLUSTER, "in-cluster", "x")
                .is_err()
        );
    }

    const AT: Placement<'static> = Placement {
        server: crate::api::IN_CLUSTER,
        name: "in-cluster",
        controller_namespace: "kiln",
    };

    fn key(group: &str, kind: &str, namespace: Option<&str>) -> ObjectKey {
        ObjectKey {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: "x".into(),
        }
    }

    #[test]
    fn kinds() {
        let project = team();
        let ns = Some("team-a");
        assert!(
            project
                .admit_object(&key("", "ConfigMap", ns), true, &AT)
                .is_ok()
        );
        assert!(
            project
                .admit_object(&key("", "Secret", ns), true, &AT)
                .is_err()
        );
        assert!(
            project
                .admit_object(
                    &ObjectKey {
                        name: "team-x".into(),
                        ..key("", "Namespace", None)
                    },
                    false,
                    &AT
                )
                .is_ok()
        );
        let error = project
            .admit_object(
                &key("rbac.authorization.k8s.io", "ClusterRole", None),
                false,
                &AT,
            )
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("cluster-scoped kind rbac.authorization.k8s.io/ClusterRole"),
            "{error}"
        );
        assert!(
            permissive_project()
                .admit_object(
                    &key("rbac.authorization.k8s.io", "ClusterRole", None),
                    false,
                    &AT
                )
                .is_ok()
        );
    }

    #[test]
    fn each_object_is_held_to_the_destinations_by_its_own_namespace() {
        let project = team();
        let error = project
            .admit_object(&key("", "ConfigMap", Some("kube-system")), true, &AT)
            .unwrap_err();
        assert!(
            error.to_string().contains("namespace \"kube-system\""),
            "{error}"
        );
        let error = project
            .admit_object(&key("", "ConfigMap", None), true, &AT)
            .unwrap_err();
        assert!(error.to_string().contains("names no namespace"), "{error}");
        // Another cluster than the destinations allow.
        let project = Project::new(
            "edge",
            serde_json::from_value(json!({"sourceRepos": ["*"],
                "destinations": [{"server": "https://edge.example.com", "namespace": "*"}]}))
            .unwrap(),
        );
        assert!(
            project
                .admit_object(&key("", "ConfigMap", Some("web")), true, &AT)
                .is_err()
        );
    }

    #[test]
    fn a_namespace_object_is_held_to_the_rules_of_the_namespace_it_names() {
        let project = team();
        let namespace = |name: &str| ObjectKey {
            group: String::new(),
            kind: "Namespace".into(),
            namespace: None,
            name: name.into(),
        };
        assert!(
            project
                .admit_object(&namespace("team-a"), false, &AT)
                .is_ok()
        );
        for name in ["kube-system", "kiln"] {
            let error = project
                .admit_object(&namespace(name), false, &AT)
                .unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn names_that_are_not_path_segments_are_refused() {
        let project = Project::new("default", permissive());
        // Real names pass: RBAC names with `:`, dotted names.
        for name in ["system:controller:x", "v1.apps.example", "a_b"] {
            let object = ObjectKey {
                name: name.into(),
                ..key("", "ConfigMap", Some("team-a"))
            };
            assert!(project.admit_object(&object, true, &AT).is_ok(), "{name}");
        }
        for (namespace, name) in [
            (Some("team-a/../kiln"), "x"),
            (Some("team-a"), "../x"),
            (Some("team-a"), "x%2f"),
            (Some(".."), "x"),
            (Some("kiln#"), "x"),
            (Some("team-a?x"), "x"),
            (Some("Team-A"), "x"),
            (Some("team-a"), "x?y"),
        ] {
            let object = ObjectKey {
                name: name.into(),
                ..key("", "ConfigMap", namespace)
            };
            assert!(
                project.admit_object(&object, true, &AT).is_err(),
                "{object}"
            );
        }
    }

    #[test]
    fn the_controller_namespace_needs_explicit_permission() {
        let wide_open = |allow: bool| {
            Project::new(
                "wide",
                serde_json::from_value(json!({"sourceRepos": ["*"],
                    "destinations": [{"namespace": "*"}],
                    "allowControllerNamespace": allow}))
                .unwrap(),
            )
        };
        for (group, kind) in [
            ("kiln.dev", "Application"),
            ("kiln.dev", "AppProject"),
            ("kiln.dev", "Plugin"),
            ("", "Secret"),
        ] {
            let object = key(group, kind, Some("kiln"));
            let error = wide_open(false)
                .admit_object(&object, true, &AT)
                .unwrap_err();
            assert!(
                error.to_string().contains("allowControllerNamespace"),
                "{error}"
            );
            assert!(wide_open(true).admit_object(&object, true, &AT).is_ok());
            assert!(
                permissive_project()
                    .admit_object(&object, true, &AT)
                    .is_ok()
            );
        }
    }

    #[test]
    fn source_repos_match_the_normalized_url() {
        let project = team();
        let admitted = |repo: &str| project.admit(&app(repo, "team-a", &[])).is_ok();
        for escape in [
            "https://git.example.com/team/../evil/repo",
            "https://git.example.com/team/%2e%2e/evil/repo",
            "https://git.example.com/team/..%2fevil/repo",
            "https://git.example.com/team\\..\\..\\evil/repo",
        ] {
            assert!(!admitted(escape), "{escape}");
        }
        // Spellings of an allowed repository are allowed.
        for spelling in [
            "HTTPS://Git.Example.com:443/team/apps.git/",
            "https://git.example.com/team/apps",
        ] {
            assert!(admitted(spelling), "{spelling}");
        }
        // An unparseable URL is refused by name.
        let error = project
            .admit(&app("https://git.example.com:99999/team/x", "team-a", &[]))
            .unwrap_err();
        assert!(error.to_string().contains("repository URL"), "{error}");
    }
}
