//! The plugin catalog: `Plugin` resources to verified, compiled plugins.
//!
//! For each use: read the Plugin resource → fetch its reference (file,
//! `https://` with a pin, `oci://`; registry credentials from the
//! controller's `registry` Secrets) → find the signatures stored beside it →
//! verify them against the Plugin's `verify` (and the project's
//! `pluginVerification`) → compile. Verification happens before the first
//! compile and is cached by component digest and requirement; a plugin
//! without `verify` does not run. Mutable references (tags, unpinned files)
//! are resolved again every [`CatalogConfig::resolve_interval`];
//! when one now names another component, that component is verified anew
//! before it runs.
//!
//! [`CatalogConfig::resolve_interval`]: crate::render::engine::CatalogConfig::resolve_interval

use std::collections::BTreeMap;
use std::path::Path;

use super::context::Context;
use super::project::Project;
use super::secrets::{self, SecretType};
use crate::api::PluginKind;
use crate::artifact::RegistryCredentials;
use crate::condition::{Reason, Stop};
use crate::plugin::{Limits, World};
use crate::render::engine::catalog::{MAX_PLUGIN_TIMEOUT, registry_credentials};
use crate::render::remote::PluginDescription;

/// The `.dockerconfigjson` texts of the controller's `registry` Secrets,
/// with the Secret each came from.
fn registry_configs(ctx: &Context) -> Vec<(String, String)> {
    ctx.secrets
        .of_type(SecretType::Registry)
        .iter()
        .filter_map(|secret| {
            secrets::value(secret, ".dockerconfigjson")
                .map(|json| (secrets::name(secret).to_owned(), json))
        })
        .collect()
}

/// The `.dockerconfigjson` texts of the controller's `registry` Secrets
/// (sent to a render server with each request).
pub(super) fn registry_secrets(ctx: &Context) -> Vec<String> {
    registry_configs(ctx)
        .into_iter()
        .map(|(_, json)| json)
        .collect()
}

/// The controller's registry credentials, checked (a malformed Secret is
/// a condition, even when a render server does the fetching).
pub(super) fn controller_registry_credentials(ctx: &Context) -> Result<RegistryCredentials, Stop> {
    let configs = registry_configs(ctx);
    registry_credentials(configs.iter().map(|(n, j)| (n.as_str(), j.as_str())))
}

/// A Plugin resource read and checked: what a renderer needs to fetch,
/// verify and compile it.
pub struct Described {
    /// Reference, world, verifications and limits.
    pub description: PluginDescription,
    /// The Plugin resource's default parameters or settings.
    pub defaults: BTreeMap<String, String>,
    /// Runs unverified (`verify.insecure: true`).
    pub insecure: bool,
}

/// Reads the Plugin resource `name` and checks it against its use (world)
/// and the project's verification rules. Touches no registry and no
/// plugin code: the controller does this even when a render server runs
/// the plugins.
pub(super) async fn describe(
    ctx: &Context,
    project: &Project,
    name: &str,
    world: World,
) -> Result<Described, Stop> {
    let resource = ctx
        .plugins
        .get_opt(name)
        .await
        .map_err(|e| Stop::new(Reason::PluginUnreadable, crate::text::chain(&e)))?
        .ok_or_else(|| {
            Stop::new(
                Reason::PluginNotFound,
                format!(
                    "plugin {name:?} is not in the catalog (no Plugin {name} in namespace {})",
                    ctx.config.namespace
                ),
            )
        })?;
    let spec = &resource.spec;
    let expected = match world {
        World::Renderer => PluginKind::Renderer,
        _ => PluginKind::Policy,
    };
    if spec.kind != expected {
        return Err(Stop::new(
            Reason::PluginKindMismatch,
            format!(
                "plugin {name:?} is a {:?}, used as a {expected:?}",
                spec.kind
            ),
        ));
    }
    let own_spec = spec.verify.clone().ok_or_else(|| {
        Stop::new(Reason::VerificationNotConfigured,
            format!(
                "plugin {name:?} has no spec.verify: every plugin must name who signs it (or say `insecure: true`, for development only)"
            ),
        )
    })?;
    let own = own_spec.requirement(Path::new("/")).map_err(|e| {
        Stop::new(
            Reason::InvalidPluginVerification,
            format!("plugin {name:?}: spec.verify: {e}"),
        )
    })?;
    let mut verify = vec![own_spec];
    if let Some(extra_spec) = project.plugin_verification() {
        let extra = extra_spec.requirement(Path::new("/")).map_err(|e| {
            Stop::new(
                Reason::InvalidPluginVerification,
                format!("project {:?}: spec.pluginVerification: {e}", project.name()),
            )
        })?;
        if own.insecure && !extra.insecure {
            return Err(Stop::new(
                Reason::InsecurePluginRefused,
                format!(
                    "plugin {name:?} is marked insecure, and project {:?} requires its plugins to be signed (spec.pluginVerification)",
                    project.name()
                ),
            ));
        }
        verify.push(extra_spec.clone());
    }
    let limits = plugin_limits(ctx.host.config().default_limits, name, spec.limits.as_ref())?;
    Ok(Described {
        description: PluginDescription {
            name: name.to_owned(),
            reference: spec.reference.clone(),
            world,
            verify,
            limits: limits.into(),
        },
        defaults: spec.defaults.clone(),
        insecure: own.insecure,
    })
}

fn plugin_limits(
    defaults: Limits,
    name: &str,
    limits: Option<&crate::api::PluginLimits>,
) -> Result<Limits, Stop> {
    let mut out = defaults;
    let Some(limits) = limits else { return Ok(out) };
    let bad = |field: &str, text: &str| {
        Stop::new(
            Reason::InvalidPluginLimits,
            format!("plugin {name:?}: limits.{field} {text:?} is invalid"),
        )
    };
    if let Some(text) = &limits.memory {
        out.memory = crate::units::parse_size(text).map_err(|_| bad("memory", text))?;
    }
    if let Some(text) = &limits.timeout {
        out.timeout = crate::units::parse_duration(text).map_err(|_| bad("timeout", text))?;
        if out.timeout > MAX_PLUGIN_TIMEOUT {
            return Err(bad("timeout", text));
        }
    }
    if let Some(text) = &limits.output_size {
        out.output = crate::units::parse_size(text).map_err(|_| bad("outputSize", text))?;
    }
    Ok(out)
}
