//! `spec.source.chart` as a render request carries it, decided at the
//! edge, where the controller's Secrets are: Argo CD's OCI form without
//! `oci://` (a repository Secret with `type: helm` and `enableOCI: "true"`)
//! read as OCI, and the credentials of that chart's own repository, never
//! another's. Whoever renders (this process or a render server) fetches.

use super::secrets::ControllerSecrets;
use crate::render::remote::{ChartSourceRef, WireCredentials};
use crate::source::git::{CredentialProvider as _, Credentials};
use crate::source::helm::fetch::index_key;
use crate::source::helm::{ChartError, ChartRef};

/// The chart `chart` of `repo_url` (an Application's `spec.source`), at
/// `version`, with its repository's credentials: a Helm repository's from
/// the repository Secrets covering its `index.yaml` (as in-process fetches
/// look them up); an OCI registry path's from the Secret naming that path.
/// Only basic credentials are sent (a chart repository takes no SSH key).
pub fn chart_source(
    secrets: &ControllerSecrets,
    repo_url: &str,
    chart: &str,
    version: &str,
) -> Result<(ChartRef, ChartSourceRef), ChartError> {
    let repo = repo_url.trim();
    let enable_oci = !repo.is_empty()
        && !repo.contains("://")
        && secrets.helm_repository(repo).is_some_and(|r| r.enable_oci);
    let reference = ChartRef::of_application(repo, chart, version, enable_oci)?;
    let credentials = match &reference {
        ChartRef::Repo { repo, .. } => {
            index_key(repo).and_then(|key| secrets.repo_credentials().credentials(&key))
        }
        ChartRef::Oci { repository, .. } => {
            // The registry path holding the chart, as Secrets name it.
            let path = repository.rsplit_once('/').map_or("", |(path, _)| path);
            secrets.helm_repository(path).and_then(|r| r.credentials)
        }
    };
    let credentials = credentials.and_then(|c| match c {
        c @ Credentials::Basic { .. } => Some(WireCredentials::from(c)),
        _ => None,
    });
    let source = ChartSourceRef {
        chart: chart.to_owned(),
        oci: enable_oci,
        credentials,
        // Dependency repositories are granted once the render server
        // names them (`super::chart_access::grant`).
        dependency_repositories: Some(Vec::new()),
    };
    Ok((reference, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::secrets::{SecretType, labeled};

    fn secrets() -> ControllerSecrets {
        ControllerSecrets::fixed([
            labeled(
                "charts-x",
                SecretType::Repository,
                &[
                    ("url", "https://x.example.com/charts"),
                    ("type", "helm"),
                    ("username", "x"),
                    ("password", "x-secret"),
                ],
            ),
            labeled(
                "oci",
                SecretType::Repository,
                &[
                    ("url", "registry.example.com/charts"),
                    ("type", "helm"),
                    ("enableOCI", "true"),
                    ("username", "puller"),
                    ("password", "oci-secret"),
                ],
            ),
            labeled(
                "git",
                SecretType::Repository,
                &[("url", "registry.example.com/git"), ("password", "git")],
            ),
        ])
    }

    fn password(source: &ChartSourceRef) -> Option<&str> {
        match &source.credentials {
            Some(WireCredentials::Basic { password, .. }) => Some(&password.0),
            _ => None,
        }
    }

    #[test]
    fn argo_cds_oci_form_is_read_as_oci_when_its_secret_says_so() {
        let secrets = secrets();
        let (reference, source) =
            chart_source(&secrets, "registry.example.com/charts", "web", "1.2.*").unwrap();
        assert_eq!(
            reference,
            ChartRef::Oci {
                repository: "registry.example.com/charts/web".into(),
                version: "1.2.*".into(),
            }
        );
        assert!(source.oci);
        assert_eq!(password(&source), Some("oci-secret"));
        // The same with the scheme written.
        let (reference, source) = chart_source(
            &secrets,
            "oci://registry.example.com/charts",
            "web",
            "1.2.*",
        )
        .unwrap();
        assert_eq!(reference.registry(), Some("registry.example.com"));
        assert!(!source.oci, "nothing to tell: the URL says it");
        assert_eq!(password(&source), Some("oci-secret"));
        // A full oci:// chart reference finds its registry path's Secret.
        let (_, source) = chart_source(
            &secrets,
            "",
            "oci://registry.example.com/charts/web:1.2.0",
            "",
        )
        .unwrap();
        assert_eq!(password(&source), Some("oci-secret"));
    }

    #[test]
    fn a_scheme_less_url_without_enable_oci_is_refused_with_a_hint() {
        let secrets = secrets();
        let error = chart_source(&secrets, "registry.example.com/git", "web", "")
            .unwrap_err()
            .to_string();
        assert!(error.contains("enableOCI"), "{error}");
        let error = chart_source(&secrets, "elsewhere.example.com/charts", "web", "")
            .unwrap_err()
            .to_string();
        assert!(error.contains("oci://"), "{error}");
    }

    #[test]
    fn only_the_charts_own_repository_credentials_are_chosen() {
        let secrets = secrets();
        let (_, source) =
            chart_source(&secrets, "https://x.example.com/charts/", "web", "").unwrap();
        assert_eq!(password(&source), Some("x-secret"));
        for other in [
            "https://y.example.com/charts",
            "https://x.example.com.evil/charts",
            "https://x.example.com/charts-other",
            "http://x.example.com:8080/charts",
        ] {
            let (_, source) = chart_source(&secrets, other, "web", "").unwrap();
            assert_eq!(source.credentials, None, "{other}");
        }
        // An OCI registry path with no Secret gets none either (not the
        // Helm repository's of the same host).
        let (_, source) = chart_source(&secrets, "oci://x.example.com/charts", "web", "").unwrap();
        assert_eq!(source.credentials, None);
    }
}
