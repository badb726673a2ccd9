//! SSH host keys: a configured list (OpenSSH `known_hosts` lines, as Argo
//! CD's `ssh_known_hosts`) checked strictly, or trust on first use recorded
//! in a file. When a connection fails, the keys the host presents are
//! compared with the expected ones, so that the error names the host and
//! the fingerprints instead of a closed connection.

use std::fmt;

/// Where the configured SSH known hosts come from (the controller reads a
/// ConfigMap; the CLI a file). Asked on every SSH connection, so a change
/// applies to the next one.
pub trait KnownHostsSource: Send + Sync + fmt::Debug {
    /// OpenSSH `known_hosts` text, or `None` when no list is configured
    /// (then hosts are trusted on first use).
    fn known_hosts(&self) -> Option<String>;
}

/// A fixed list of known hosts.
#[derive(Clone, Debug)]
pub struct StaticKnownHosts(pub String);

impl KnownHostsSource for StaticKnownHosts {
    fn known_hosts(&self) -> Option<String> {
        Some(self.0.clone())
    }
}
