//! SSH host keys: a configured list (OpenSSH `known_hosts` lines, as Argo
//! CD's `ssh_known_hosts`) checked strictly, or trust on first use recorded
//! in a file. When a connection fails, the keys the host presents are
//! compared with the expected ones, so that the error names the host and
//! the fingerprints instead of a closed connection.

use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

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

/// How one connection checks the host key.
#[derive(Clone, Debug)]
pub(super) enum HostKeys {
    /// Unknown hosts are recorded in this file on first use; a host whose
    /// key changed is refused.
    FirstUse(PathBuf),
    /// Only these `known_hosts` lines; an unknown host is refused.
    Configured(String),
}

/// One public key: its type and its base64 blob.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostKey {
    kind: String,
    blob: String,
}

impl HostKey {
    /// `SHA256:…` as OpenSSH prints it.
    fn fingerprint(&self) -> String {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.blob)
            .unwrap_or_else(|_| self.blob.as_bytes().to_vec());
        let digest = Sha256::digest(bytes);
        format!(
            "{} SHA256:{}",
            self.kind,
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
        )
    }
}

/// The name a host has in `known_hosts`: `host`, or `[host]:port` when the
/// port is not 22.
pub(super) fn host_entry_name(host: &str, port: Option<u16>) -> String {
    match port {
        Some(port) if port != 22 => format!("[{host}]:{port}"),
        _ => host.to_owned(),
    }
}

/// The keys `text` lists for `name` (plain or wildcard host patterns;
/// hashed names, `@cert-authority` and `@revoked` lines are not compared).
fn keys_for(text: &str, name: &str) -> Vec<HostKey> {
    let mut keys = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('@') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(hosts), Some(kind), Some(blob)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let mut matched = false;
        for pattern in hosts.split(',') {
            let (negated, pattern) = match pattern.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, pattern),
            };
            if host_matches(pattern, name) {
                if negated {
                    matched = false;
                    break;
                }
                matched = true;
            }
        }
        if matched {
            keys.push(HostKey {
                kind: kind.to_owned(),
                blob: blob.to_owned(),
            });
        }
    }
    keys
}

fn host_matches(pattern: &str, name: &str) -> bool {
    if pattern.starts_with('|') {
        return false;
    }
    if !pattern.contains(['*', '?']) {
        return pattern.eq_ignore_ascii_case(name);
    }
    crate::glob::Glob::wildcard_ignoring_case(pattern).is_ok_and(|glob| glob.is_match(name))
}

/// Why a host's key is not trusted, when that is why a connection failed:
/// asks the host for its keys (`ssh-keyscan`) and compares them with
/// those `known_hosts` lists for it. `None` when a presented key is known
/// (the failure was something else) or the host cannot be asked.
pub(super) fn untrusted(
    known_hosts: &str,
    host: &str,
    port: Option<u16>,
    timeout: Duration,
) -> Option<String> {
    let name = host_entry_name(host, port);
    let output = Command::new("ssh-keyscan")
        .arg("-T")
        .arg(timeout.as_secs().max(1).to_string())
        .arg("-p")
        .arg(port.unwrap_or(22).to_string())
        .arg("--")
        .arg(host)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let presented: Vec<HostKey> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            Some(HostKey {
                kind: fields.next()?.to_owned(),
                blob: fields.next()?.to_owned(),
            })
        })
        .collect();
    if presented.is_empty() {
        return None;
    }
    let expected = keys_for(known_hosts, &name);
    if presented.iter().any(|key| expected.contains(key)) {
        return None;
    }
    let list = |keys: &[HostKey]| {
        keys.iter()
            .map(HostKey::fingerprint)
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(if expected.is_empty() {
        format!(
            "host {name} is not in the known hosts; it presents {}",
            list(&presented)
        )
    } else {
        format!(
            "host {name} presents {}, which is not its known key ({})",
            list(&presented),
            list(&expected)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    #[test]
    fn entries_are_found_by_name_pattern_and_port() {
        let text = format!(
            "# comment\n\
             github.com ssh-ed25519 {KEY}\n\
             [git.corp]:2222,10.0.0.1 ssh-ed25519 {KEY} corp\n\
             *.example.com,!bad.example.com ssh-rsa {KEY}\n\
             @revoked * ssh-ed25519 {KEY}\n\
             |1|salt|hash ssh-ed25519 {KEY}\n"
        );
        let kinds = |name: &str| {
            keys_for(&text, name)
                .into_iter()
                .map(|k| k.kind)
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds("github.com"), ["ssh-ed25519"]);
        assert_eq!(
            kinds(&host_entry_name("git.corp", Some(2222))),
            ["ssh-ed25519"]
        );
        assert!(kinds("git.corp").is_empty());
        assert_eq!(kinds("a.example.com"), ["ssh-rsa"]);
        assert!(kinds("bad.example.com").is_empty());
        assert!(kinds("elsewhere").is_empty());
    }

    #[test]
    fn fingerprints_are_those_openssh_prints() {
        let key = HostKey {
            kind: "ssh-ed25519".into(),
            blob: KEY.into(),
        };
        // `ssh-keygen -lf` of GitHub's ed25519 key.
        assert_eq!(
            key.fingerprint(),
            "ssh-ed25519 SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"
        );
    }
}
