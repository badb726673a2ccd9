//! Errors of loading and calling plugins. Every variant names the plugin.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::manifest::ManifestError;
use crate::source::Escape;

/// A plugin could not be loaded or a call to it failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The component file could not be read.
    #[error("plugin {plugin}: cannot read {}", path.display())]
    Read {
        /// The plugin.
        plugin: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a usable component.
    #[error("plugin {plugin}: {reason}")]
    NotAComponent {
        /// The plugin.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// The component implements another world or an incompatible version of
    /// the contract, or imports something the host does not provide.
    #[error("plugin {plugin}: contract mismatch: {detail}")]
    ContractMismatch {
        /// The plugin.
        plugin: String,
        /// What does not match.
        detail: String,
    },
    /// wasmtime could not compile or link the component.
    #[error("plugin {plugin}: cannot compile: {message}")]
    Compile {
        /// The plugin.
        plugin: String,
        /// wasmtime's message chain.
        message: String,
    },
    /// The limits asked for exceed what the host was configured for.
    #[error("plugin {plugin}: {detail}")]
    InvalidLimits {
        /// The plugin.
        plugin: String,
        /// What is wrong.
        detail: String,
    },
    /// The call ran past its CPU deadline.
    #[error("plugin {plugin}: timed out after {timeout:?}")]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The call was given up by its caller (the render's
    /// [interrupt](crate::interrupt::Interrupt) was raised: its deadline
    /// passed or the controller went away), and the guest stopped.
    #[error("plugin {plugin}: stopped: the render was given up")]
    Interrupted {
        /// The plugin.
        plugin: String,
    },
    /// The plugin tried to grow its memory past the limit.
    #[error("plugin {plugin}: out of memory (limit {limit} bytes)")]
    OutOfMemory {
        /// The plugin.
        plugin: String,
        /// The memory limit.
        limit: u64,
    },
    /// The plugin's call stack overflowed.
    #[error("plugin {plugin}: stack overflow")]
    StackOverflow {
        /// The plugin.
        plugin: String,
    },
    /// The plugin trapped: a panic, an abort, an invalid memory access...
    #[error("plugin {plugin}: trapped: {trap}{}", stderr.as_ref().map(|s| format!(" (plugin stderr: {s})")).unwrap_or_default())]
    Trap {
        /// The plugin.
        plugin: String,
        /// The trap, as wasmtime describes it.
        trap: String,
        /// The end of what the plugin wrote to stderr (a panic message).
        stderr: Option<String>,
    },
    /// The plugin returned more bytes of manifests than allowed.
    #[error("plugin {plugin}: output of {size} bytes exceeds the {limit}-byte limit")]
    OutputTooLarge {
        /// The plugin.
        plugin: String,
        /// Bytes returned.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The plugin returned something that is not a valid Kubernetes object.
    #[error("plugin {plugin}: invalid output: {error}")]
    InvalidOutput {
        /// The plugin.
        plugin: String,
        /// What is wrong, and where.
        error: ManifestError,
    },
    /// The plugin tried to read outside the source tree.
    #[error("plugin {plugin}: access denied: {path}: {escape}")]
    AccessDenied {
        /// The plugin.
        plugin: String,
        /// The path it asked for.
        path: String,
        /// How it tried to leave the tree.
        escape: Escape,
    },
    /// The plugin ran and reported a failure of its own.
    #[error("plugin {plugin}: {failure}")]
    Failed {
        /// The plugin.
        plugin: String,
        /// What it reported.
        failure: GuestFailure,
    },
    /// A policy refused its settings.
    #[error("plugin {plugin}: invalid settings: {message}")]
    InvalidSettings {
        /// The plugin.
        plugin: String,
        /// What the policy said.
        message: String,
    },
    /// Any other host-side failure while running the plugin.
    #[error("plugin {plugin}: {message}")]
    Host {
        /// The plugin.
        plugin: String,
        /// What went wrong.
        message: String,
    },
}

impl PluginError {
    /// The plugin the error is about.
    pub fn plugin(&self) -> &str {
        match self {
            PluginError::Read { plugin, .. }
            | PluginError::NotAComponent { plugin, .. }
            | PluginError::ContractMismatch { plugin, .. }
            | PluginError::Compile { plugin, .. }
            | PluginError::InvalidLimits { plugin, .. }
            | PluginError::Timeout { plugin, .. }
            | PluginError::Interrupted { plugin }
            | PluginError::OutOfMemory { plugin, .. }
            | PluginError::StackOverflow { plugin }
            | PluginError::Trap { plugin, .. }
            | PluginError::OutputTooLarge { plugin, .. }
            | PluginError::InvalidOutput { plugin, .. }
            | PluginError::AccessDenied { plugin, .. }
            | PluginError::Failed { plugin, .. }
            | PluginError::InvalidSettings { plugin, .. }
            | PluginError::Host { plugin, .. } => plugin,
        }
    }
}

/// A failure a plugin reported through its WIT `result`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuestFailure {
    /// A renderer's parameters are wrong.
    InvalidParameters(String),
    /// An input file is wrong.
    InvalidInput {
        /// The file, relative to the source root.
        file: Option<String>,
        /// 1-based line.
        line: Option<u32>,
        /// What is wrong.
        message: String,
    },
    /// Anything else (including a policy's review error).
    Other(String),
}

impl fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuestFailure::InvalidParameters(m) => write!(f, "invalid parameters: {m}"),
            GuestFailure::InvalidInput {
                file,
                line,
                message,
            } => match (file, line) {
                (Some(file), Some(line)) => write!(f, "{file}:{line}: {message}"),
                (Some(file), None) => write!(f, "{file}: {message}"),
                _ => write!(f, "invalid input: {message}"),
            },
            GuestFailure::Other(m) => f.write_str(m),
        }
    }
}

/// A `Result` with [`PluginError`].
pub type Result<T, E = PluginError> = std::result::Result<T, E>;
