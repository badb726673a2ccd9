//! What an Application's conditions say: the [`Condition`] types, every
//! [`Reason`] in one table with the condition it belongs to, and [`Stop`],
//! the error that ends a comparison (or a sync) and becomes a condition.
//!
//! The render engine, the render server's protocol and the controller all
//! speak it; nothing branches on the text of a reason (the text is what
//! the status shows, and what the render server sends on the wire).

use std::fmt;

/// The type of an Application condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Condition {
    /// The Application's spec cannot be acted on as written.
    InvalidSpec,
    /// The Application, or what it renders, is outside its project.
    ProjectViolation,
    /// The comparison with the cluster could not be made.
    ComparisonError,
    /// A plugin's signature did not verify as its Plugin requires.
    PluginNotTrusted,
    /// An enforced policy failed the render.
    PolicyBlocked,
    /// The last sync failed.
    SyncError,
    /// An operation asked for could not run.
    OperationError,
    /// A deletion cannot go on (its finalizers stay).
    DeletionError,
    /// A warning: a plugin runs without signature verification.
    InsecurePlugin,
}

impl Condition {
    /// The condition's type as the status shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::InvalidSpec => "InvalidSpec",
            Condition::ProjectViolation => "ProjectViolation",
            Condition::ComparisonError => "ComparisonError",
            Condition::PluginNotTrusted => "PluginNotTrusted",
            Condition::PolicyBlocked => "PolicyBlocked",
            Condition::SyncError => "SyncError",
            Condition::OperationError => "OperationError",
            Condition::DeletionError => "DeletionError",
            Condition::InsecurePlugin => "InsecurePlugin",
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one table of reasons: variant, text, condition type.
macro_rules! reasons {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal => $condition:ident, )*) => {
        /// Why a condition is set: what a person can act on.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Reason {
            $( $(#[$doc])* $variant, )*
        }

        impl Reason {
            /// Every reason, in the table's order.
            pub const ALL: &[Reason] = &[$(Reason::$variant),*];

            /// The reason as the status shows it (and the wire carries it).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $text,)*
                }
            }

            /// The condition type it is recorded under.
            pub fn condition(self) -> Condition {
                match self {
                    $(Reason::$variant => Condition::$condition,)*
                }
            }
        }
    };
}

reasons! {
    // InvalidSpec: the spec as written.
    /// The repository URL does not parse.
    InvalidRepoUrl = "InvalidRepoURL" => InvalidSpec,
    /// A repository on the controller's filesystem, not allowed.
    FileRepositoryNotAllowed = "FileRepositoryNotAllowed" => InvalidSpec,
    /// A Plugin naming a file, not allowed.
    FilePluginNotAllowed = "FilePluginNotAllowed" => InvalidSpec,
    /// `spec.source.helm` names no helm step of the chain.
    HelmPluginNotInChain = "HelmPluginNotInChain" => InvalidSpec,
    /// `spec.source.chart` is wrong.
    InvalidChartSource = "InvalidChartSource" => InvalidSpec,
    /// `spec.source.helm` is wrong.
    InvalidHelmSource = "InvalidHelmSource" => InvalidSpec,
    /// An `ignoreDifferences` entry is wrong.
    InvalidIgnoreDifferences = "InvalidIgnoreDifferences" => InvalidSpec,
    /// The operation annotation is wrong.
    InvalidOperation = "InvalidOperation" => InvalidSpec,
    /// A Plugin's limits are wrong.
    InvalidPluginLimits = "InvalidPluginLimits" => InvalidSpec,
    /// A Plugin's reference is wrong.
    InvalidPluginReference = "InvalidPluginReference" => InvalidSpec,
    /// A Plugin's verification block is wrong.
    InvalidPluginVerification = "InvalidPluginVerification" => InvalidSpec,
    /// A project's policy source is wrong.
    InvalidPolicySource = "InvalidPolicySource" => InvalidSpec,
    /// A registry Secret is wrong.
    InvalidRegistrySecret = "InvalidRegistrySecret" => InvalidSpec,
    /// The sync policy's retry is wrong.
    InvalidRetry = "InvalidRetry" => InvalidSpec,
    /// A sync option is wrong.
    InvalidSyncOption = "InvalidSyncOption" => InvalidSpec,
    /// The destination is wrong.
    InvalidDestination = "InvalidDestination" => InvalidSpec,
    /// The destination names a cluster not registered.
    UnknownDestination = "UnknownDestination" => InvalidSpec,
    /// A Plugin of another kind than the chain needs.
    PluginKindMismatch = "PluginKindMismatch" => InvalidSpec,
    /// No Plugin of that name.
    PluginNotFound = "PluginNotFound" => InvalidSpec,
    /// No AppProject of that name.
    ProjectNotFound = "ProjectNotFound" => InvalidSpec,

    // ProjectViolation: outside the project.
    /// The source or destination is not the project's.
    SourceOrDestinationNotAllowed = "SourceOrDestinationNotAllowed" => ProjectViolation,
    /// A rendered object is not allowed by the project.
    ResourceNotAllowed = "ResourceNotAllowed" => ProjectViolation,
    /// A chart dependency's repository is not the project's.
    DependencyRepositoryNotPermitted = "DependencyRepositoryNotPermitted" => ProjectViolation,

    // ComparisonError: the comparison could not be made.
    /// The Git repository could not be read.
    SourceUnavailable = "SourceUnavailable" => ComparisonError,
    /// The render failed.
    RenderFailed = "RenderFailed" => ComparisonError,
    /// The render request is wrong (a render server's answer).
    InvalidRenderRequest = "InvalidRenderRequest" => ComparisonError,
    /// A render ran past the render server's deadline.
    RenderDeadlineExceeded = "RenderDeadlineExceeded" => ComparisonError,
    /// A render is larger than the protocol allows.
    RenderTooLarge = "RenderTooLarge" => ComparisonError,
    /// The render server could not be reached.
    RenderServerUnavailable = "RenderServerUnavailable" => ComparisonError,
    /// The render server answered something the controller cannot use.
    RenderServerFailed = "RenderServerFailed" => ComparisonError,
    /// A chart's dependency repositories must be granted first (the
    /// controller grants them and asks again).
    DependencyRepositoriesNeeded = "DependencyRepositoriesNeeded" => ComparisonError,
    /// A chart dependency names too many repositories.
    TooManyDependencyRepositories = "TooManyDependencyRepositories" => ComparisonError,
    /// Granting dependency repositories did not settle.
    TooManyDependencyRounds = "TooManyDependencyRounds" => ComparisonError,
    /// A chart could not be fetched.
    ChartUnavailable = "ChartUnavailable" => ComparisonError,
    /// The chart cache could not be used.
    ChartCacheUnavailable = "ChartCacheUnavailable" => ComparisonError,
    /// The destination's capabilities could not be read.
    ClusterCapabilitiesUnavailable = "ClusterCapabilitiesUnavailable" => ComparisonError,
    /// The destination's discovery failed.
    DiscoveryFailed = "DiscoveryFailed" => ComparisonError,
    /// The diff failed.
    DiffFailed = "DiffFailed" => ComparisonError,
    /// A plugin could not be fetched.
    PluginFetchFailed = "PluginFetchFailed" => ComparisonError,
    /// A plugin could not be loaded.
    PluginLoadFailed = "PluginLoadFailed" => ComparisonError,
    /// The plugin store could not be used.
    PluginStoreUnavailable = "PluginStoreUnavailable" => ComparisonError,
    /// A plugin's file could not be read.
    PluginUnreadable = "PluginUnreadable" => ComparisonError,
    /// The AppProject could not be read.
    ProjectUnreadable = "ProjectUnreadable" => ComparisonError,
    /// The random-seed key could not be read.
    RandomSeedUnavailable = "RandomSeedUnavailable" => ComparisonError,
    /// The Sigstore trusted root could not be read.
    TrustedRootUnavailable = "TrustedRootUnavailable" => ComparisonError,

    // PluginNotTrusted.
    /// A Plugin without verification, refused.
    InsecurePluginRefused = "InsecurePluginRefused" => PluginNotTrusted,
    /// A plugin's signature did not verify.
    SignatureVerificationFailed = "SignatureVerificationFailed" => PluginNotTrusted,
    /// A Plugin says nothing of how to verify it.
    VerificationNotConfigured = "VerificationNotConfigured" => PluginNotTrusted,

    // PolicyBlocked.
    /// An enforced policy failed.
    EnforcedPolicyFailed = "EnforcedPolicyFailed" => PolicyBlocked,

    // SyncError.
    /// A sync failed.
    SyncFailed = "SyncFailed" => SyncError,
    /// A sync was terminated.
    SyncTerminated = "SyncTerminated" => SyncError,

    // OperationError.
    /// A rollback asked of an automated Application.
    AutomatedSyncEnabled = "AutomatedSyncEnabled" => OperationError,

    // DeletionError.
    /// An enforced policy failed the deletion hooks' render.
    DeletionPolicyBlocked = "PolicyBlocked" => DeletionError,
    /// The deletion hooks are wrong.
    DeletionHookInvalid = "DeletionHookInvalid" => DeletionError,
    /// A PreDelete hook failed.
    PreDeleteHookFailed = "PreDeleteHookFailed" => DeletionError,
    /// A PostDelete hook failed.
    PostDeleteHookFailed = "PostDeleteHookFailed" => DeletionError,

    // InsecurePlugin (a warning).
    /// A plugin runs without signature verification.
    VerificationDisabled = "VerificationDisabled" => InsecurePlugin,
}

impl Reason {
    /// The reason whose text is `text`, if the table has one (a render
    /// server's answer).
    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == text)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a comparison (or a sync) stopped: recorded as a condition of the
/// Application with a reason a person can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The reason (its [`Reason::condition`] is the condition's type).
    pub reason: Reason,
    /// What happened, naming the file, object or plugin.
    pub message: String,
    /// A chart's dependency repositories a render server was not granted
    /// (reason [`Reason::DependencyRepositoriesNeeded`]); empty otherwise.
    pub repositories_needed: Vec<crate::source::helm::NeededRepository>,
}

impl Stop {
    /// A stop. The message is bounded ([`crate::text::MAX_MESSAGE`]): it is
    /// stored in the Application's status.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: crate::text::bounded(&message.into(), crate::text::MAX_MESSAGE),
            repositories_needed: Vec::new(),
        }
    }

    /// The condition type it is recorded under.
    pub fn condition(&self) -> Condition {
        self.reason.condition()
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.condition(),
            self.reason,
            self.message
        )
    }
}

impl std::error::Error for Stop {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_reads_back_from_its_text_and_no_text_is_used_twice() {
        let mut seen = std::collections::HashSet::new();
        for reason in Reason::ALL {
            assert!(seen.insert(reason.as_str()), "{reason} twice");
            assert_eq!(Reason::parse(reason.as_str()), Some(*reason));
        }
        assert_eq!(Reason::parse("NoSuchReason"), None);
    }

    #[test]
    fn a_stop_shows_its_condition_reason_and_message() {
        let stop = Stop::new(Reason::InvalidRepoUrl, "x".repeat(10_000));
        assert_eq!(stop.condition(), Condition::InvalidSpec);
        assert!(
            stop.to_string()
                .starts_with("InvalidSpec (InvalidRepoURL): xxx")
        );
        assert!(stop.message.len() <= crate::text::MAX_MESSAGE + 100);
    }
}
