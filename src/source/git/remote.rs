//! The network side, with gix: ref advertisements and fetches. Everything
//! here is blocking and runs on the blocking pool.

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::handshake::Ref;
use gix::protocol::transport::client::blocking_io::Transport;
use gix::remote::{Direction, fetch::Tags, ref_map};

use super::credentials::Credentials;
use super::known_hosts::{self, HostKeys};
use super::{AdvertisedRef, CommitId, GitError, RefList, RepoUrl};

/// What one network operation needs.
pub(super) struct Options {
    /// How SSH connections check host keys.
    pub host_keys: HostKeys,
    /// Extra HTTPS roots.
    pub tls_roots: Vec<reqwest::Certificate>,
    /// Credentials for this repository, if the provider has some.
    pub credentials: Option<Credentials>,
    /// Connection deadline.
    pub connect_timeout: Duration,
    /// Deadline of any single read/write, and of HTTP requests.
    pub io_timeout: Duration,
    /// Raised when the operation's caller gave up: a fetch stops receiving.
    pub interrupt: crate::interrupt::Interrupt,
}

/// Why an operation failed, before the engine names the repository.
#[derive(Debug)]
pub(super) enum Failure {
    Auth,
    /// The SSH host key is not trusted: why, naming host and fingerprints.
    HostKey(String),
    Timeout,
    /// The local repository is damaged (a truncated pack, ...).
    Corrupt(String),
    Other(String),
}

impl Failure {
    fn from_gix(error: &gix::Error) -> Self {
        // Classified on everything gix says (debug dumps included); told in
        // words (crate::text::chain), never as gix's debug tree.
        let full = format!("{error:#}");
        let message = crate::text::chain(error);
        if matches!(error.dominant_class(), Some(gix::error::Class::Corruption))
            || format!("{error:?}").contains("class: Corruption")
        {
            return Failure::Corrupt(message);
        }
        if error.is_unauthenticated()
            || full.contains("401")
            || full.contains("Permission denied (publickey")
        {
            Failure::Auth
        } else if full.contains("timed out")
            || full.contains("Timeout")
            || full.contains("would block")
        {
            Failure::Timeout
        } else {
            Failure::Other(message)
        }
    }

    pub(super) fn into_error(
        self,
        url: RepoUrl,
        operation: &'static str,
        after: Duration,
    ) -> GitError {
        match self {
            Failure::Auth => GitError::Auth { url },
            Failure::HostKey(detail) => GitError::HostKey { url, detail },
            Failure::Timeout => GitError::Timeout {
                url,
                operation,
                after,
            },
            Failure::Corrupt(message) => GitError::CorruptCache { url, message },
            Failure::Other(message) => GitError::Remote {
                url,
                operation,
                message,
            },
        }
    }
}

impl From<gix::Error> for Failure {
    fn from(error: gix::Error) -> Self {
        Failure::from_gix(&error)
    }
}

/// Nothing from the user's or system's Git configuration or environment.
fn open_options() -> gix::open::Options {
    gix::open::Options::isolated().config_overrides([
        "protocol.version=2",
        // Never let a repository URL make us run a program.
        "protocol.ext.allow=never",
    ])
}

/// Opens an existing bare repository; fails if it is missing or half-made.
pub(super) fn open(path: &Path) -> Result<gix::ThreadSafeRepository, String> {
    if !path.join("HEAD").is_file() {
        return Err("no HEAD".into());
    }
    gix::ThreadSafeRepository::open_opts(path, open_options()).map_err(|e| format!("{e:#}"))
}

/// Whether a cache repository's references can all be read: a fetch that
/// fails on such a repository failed for another reason than the cache.
pub(super) fn is_sound(local: &gix::ThreadSafeRepository) -> bool {
    let repo = local.to_thread_local();
    let Ok(references) = repo.references() else {
        return false;
    };
    let Ok(all) = references.all() else {
        return false;
    };
    all.into_iter().all(|r| r.is_ok())
}

/// Creates an empty bare repository at `path` (which must not exist or be
/// empty).
pub(super) fn init(path: &Path) -> Result<gix::ThreadSafeRepository, String> {
    gix::ThreadSafeRepository::init_opts(
        path,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        open_options(),
    )
    .map_err(|e| format!("{e:#}"))
}

/// The refs Kiln ever resolves against: HEAD, branches and tags. Other refs
/// (`refs/pull/*`, `refs/changes/*`, ...) are never even advertised to us.
const LS_REFS_SPECS: &[&str] = &[
    "HEAD",
    "refs/heads/*:refs/heads/*",
    "refs/tags/*:refs/tags/*",
];

/// `git ls-remote`: the remote's HEAD, branches and tags, without objects.
/// `scratch` is any repository: a lookup writes nothing to it.
pub(super) fn ls_refs(
    scratch: &gix::ThreadSafeRepository,
    url: &RepoUrl,
    options: &Options,
) -> Result<RefList, Failure> {
    let repo = scratch.to_thread_local();
    let remote = repo
        .remote_at(url.as_str())?
        .with_fetch_tags(Tags::None)
        .with_refspecs(LS_REFS_SPECS.iter().copied(), Direction::Fetch)?;
    let (connection, _files) = connect(&remote, url, options)?;
    let (map, _handshake) = connection
        .ref_map(gix::progress::Discard, ref_map::Options::default())
        .map_err(|e| explain(Failure::from(e), url, options))?;
    let mut refs = BTreeMap::new();
    for advertised in &map.remote_refs {
        let (name, advertised) = match advertised {
            Ref::Direct {
                full_ref_name,
                object,
            } => (full_ref_name, (object, None)),
            Ref::Peeled {
                full_ref_name,
                tag,
                object,
            } => (full_ref_name, (tag, Some(object))),
            Ref::Symbolic {
                full_ref_name,
                tag,
                object,
                ..
            } => match tag {
                Some(tag) => (full_ref_name, (tag, Some(object))),
                None => (full_ref_name, (object, None)),
            },
            Ref::Unborn { .. } => continue,
        };
        let Ok(name) = String::from_utf8(name.to_vec()) else {
            continue;
        };
        // Servers speaking protocol v0/v1 send every ref: filter here too.
        if name != "HEAD" && !name.starts_with("refs/heads/") && !name.starts_with("refs/tags/") {
            continue;
        }
        let (Some(target), peeled) = (
            CommitId::from_gix(advertised.0),
            advertised.1.and_then(|p| CommitId::from_gix(p)),
        ) else {
            continue;
        };
        refs.insert(name, AdvertisedRef { target, peeled });
    }
    Ok(RefList { refs })
}

/// Fetches HEAD, every branch and tag (into `refs/kiln/...`), plus `commit`
/// by id if no advertised ref points at it: one fetch brings whatever any
/// Application of this repository may need next.
pub(super) fn fetch(
    local: &gix::ThreadSafeRepository,
    url: &RepoUrl,
    options: &Options,
    commit: CommitId,
    shallow: bool,
) -> Result<(), Failure> {
    let repo = local.to_thread_local();
    let specs = [
        "+HEAD:refs/kiln/HEAD".to_owned(),
        "+refs/heads/*:refs/kiln/heads/*".to_owned(),
        "+refs/tags/*:refs/kiln/tags/*".to_owned(),
        format!("+{commit}:refs/kiln/commits/{commit}"),
    ];
    let remote = repo
        .remote_at(url.as_str())?
        .with_fetch_tags(Tags::None)
        .with_refspecs(specs.iter().map(String::as_str), Direction::Fetch)?;
    let (connection, _files) = connect(&remote, url, options)?;
    let mut prepare = connection
        .prepare_fetch(gix::progress::Discard, ref_map::Options::default())
        .map_err(|e| explain(Failure::from(e), url, options))?;
    if shallow {
        prepare = prepare.with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(
            1.try_into().expect("1 is not 0"),
        ));
    }
    prepare.receive(gix::progress::Discard, options.interrupt.flag())?;
    Ok(())
}

type Connection<'a, 'repo> = gix::remote::Connection<'a, 'a, 'repo, Box<dyn Transport + Send>>;

/// A failed SSH handshake, explained when the host key is why: ssh itself
/// only closes the connection (its message goes to our stderr).
fn explain(failure: Failure, url: &RepoUrl, options: &Options) -> Failure {
    if url.scheme() != "ssh" || matches!(failure, Failure::Auth) {
        return failure;
    }
    let known = match &options.host_keys {
        HostKeys::Configured(text) => text.clone(),
        HostKeys::FirstUse(store) => std::fs::read_to_string(store).unwrap_or_default(),
    };
    let Ok(parsed) = gix::Url::from_bytes(url.as_str().into()) else {
        return failure;
    };
    let host = parsed.host().unwrap_or_default();
    if matches!(options.host_keys, HostKeys::FirstUse(_)) && known.trim().is_empty() {
        // Nothing recorded yet: the first use records whatever is presented.
        return failure;
    }
    match known_hosts::untrusted(&known, host, parsed.port, options.connect_timeout) {
        Some(detail) => Failure::HostKey(detail),
        None => failure,
    }
}

/// A connection with timeouts and credentials from Kiln only: never from a
/// credential helper, the environment or the user's configuration. The
/// files of an SSH connection (key, known hosts) are returned with it and
/// must outlive it.
fn connect<'a, 'repo>(
    remote: &'a gix::Remote<'repo>,
    url: &RepoUrl,
    options: &Options,
) -> Result<(Connection<'a, 'repo>, Vec<tempfile::NamedTempFile>), Failure> {
    let mut files = Vec::new();
    let connection = match url.scheme() {
        "git" => remote.to_connection_with_transport(git_transport(url, options)?),
        "ssh" => {
            let (transport, ssh_files) = ssh_transport(url, options)?;
            files = ssh_files;
            remote.to_connection_with_transport(transport)
        }
        _ => remote.connect(Direction::Fetch)?,
    };
    let connection = if matches!(url.scheme(), "http" | "https") {
        connection.with_transport_options(http_options(options))
    } else {
        connection
    };
    let basic = match &options.credentials {
        // Basic credentials travel over TLS only, or to a loopback address
        // (tests, local trials).
        Some(Credentials::Basic { username, password })
            if url.scheme() == "https" || is_loopback_http(url) =>
        {
            Some((username.clone(), password.expose().to_owned()))
        }
        _ => None,
    };
    let origin = origin_of(url.as_str());
    let connection =
        connection.with_credentials(move |action| {
            use gix::credentials::helper::Action;
            match action {
                // Credentials go to the repository's own scheme, host and
                // port only: never to where a redirect points.
                Action::Get(context) if !same_origin(&origin, &context) => {
                    tracing::warn!("a Git server redirected elsewhere; credentials withheld");
                    Ok(None)
                }
                Action::Get(context) => Ok(basic.clone().map(|(username, password)| {
                    gix::credentials::protocol::Outcome {
                        identity: gix::sec::identity::Account {
                            username,
                            password,
                            oauth_refresh_token: None,
                        },
                        next: context.into(),
                    }
                })),
                Action::Store(_) | Action::Erase(_) => Ok(None),
            }
        });
    Ok((connection, files))
}

/// `(scheme, host, port)` of a URL, ports defaulted.
fn origin_of(url: &str) -> Option<(String, String, u16)> {
    let parsed = gix::Url::from_bytes(url.as_bytes().into()).ok()?;
    let scheme = parsed.scheme.as_str().to_ascii_lowercase();
    let port = parsed.port_or_default()?;
    Some((scheme, parsed.host()?.to_ascii_lowercase(), port))
}

/// Whether a credential request is for the repository's own origin. A
/// request that names no URL or host is taken as the original one (gix asks
/// for the URL it was given).
fn same_origin(
    origin: &Option<(String, String, u16)>,
    context: &gix::credentials::protocol::Context,
) -> bool {
    let asked = match (&context.url, &context.protocol, &context.host) {
        (Some(url), _, _) => origin_of(&url.to_string()),
        (None, Some(protocol), Some(host)) => origin_of(&format!("{protocol}://{host}/")),
        _ => return true,
    };
    asked.is_some() && asked == *origin
}

/// ssh with nothing from the user's configuration or agent: the key Kiln
/// was given (if any), batch mode, timeouts, and host keys checked either
/// strictly against the configured known hosts, or on first use against
/// Kiln's own known-hosts file (new hosts recorded, changed keys refused).
fn ssh_transport(
    url: &RepoUrl,
    options: &Options,
) -> Result<(Box<dyn Transport + Send>, Vec<tempfile::NamedTempFile>), Failure> {
    use gix::protocol::transport::{Protocol, client::blocking_io::ssh};
    use std::io::Write as _;
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    // Owner-only (NamedTempFile creates files 0600), removed on drop.
    let temp_file = |what: &str, text: &str| {
        let fail = |e: std::io::Error| Failure::Other(format!("ssh {what} file: {e}"));
        let mut file = tempfile::NamedTempFile::new().map_err(fail)?;
        file.write_all(text.as_bytes()).map_err(fail)?;
        if !text.ends_with('\n') {
            file.write_all(b"\n").map_err(fail)?;
        }
        Ok::<_, Failure>(file)
    };
    let mut files = Vec::new();
    let host_keys = match &options.host_keys {
        HostKeys::FirstUse(store) => format!(
            "-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={}",
            quote(store)
        ),
        HostKeys::Configured(text) => {
            let file = temp_file("known hosts", text)?;
            let option = format!(
                "-o StrictHostKeyChecking=yes -o UpdateHostKeys=no -o UserKnownHostsFile={}",
                quote(file.path())
            );
            files.push(file);
            option
        }
    };
    let mut command = format!(
        "ssh -F /dev/null -o BatchMode=yes -o IdentityAgent=none {host_keys} \
         -o GlobalKnownHostsFile=/dev/null -o ConnectTimeout={} -o ServerAliveInterval=15 \
         -o ServerAliveCountMax=4",
        options.connect_timeout.as_secs().max(1),
    );
    if let Some(Credentials::SshKey { private_key }) = &options.credentials {
        let file = temp_file("key", private_key.expose())?;
        command.push_str(&format!(" -o IdentitiesOnly=yes -i {}", quote(file.path())));
        files.push(file);
    }
    let parsed = gix::Url::from_bytes(url.as_str().into())?;
    let connect_options = ssh::connect::Options {
        command: Some(command.into()),
        disallow_shell: false,
        kind: Some(ssh::ProgramKind::Ssh),
    };
    let transport = ssh::connect(parsed, Protocol::V2, connect_options, false)
        .map_err(|e| Failure::Other(e.to_string()))?;
    Ok((Box::new(transport), files))
}

fn is_loopback_http(url: &RepoUrl) -> bool {
    url.scheme() == "http"
        && ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|prefix| {
                url.key()
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with([':', '/']))
            })
}

/// HTTP(S) through reqwest with Kiln's timeouts and no proxy taken from the
/// environment.
fn http_options(options: &Options) -> Box<dyn std::any::Any> {
    use gix::protocol::transport::client::blocking_io::http;
    let (connect, io) = (options.connect_timeout, options.io_timeout);
    let roots = options.tls_roots.clone();
    let backend = http::reqwest::Options {
        configure_client: Some(Box::new(move |builder| {
            Ok(builder
                .connect_timeout(connect)
                .timeout(io)
                .no_proxy()
                .tls_certs_merge(roots.clone()))
        })),
        configure_request: None,
    };
    let options = http::Options {
        backend: Some(Arc::new(Mutex::new(backend))),
        ..Default::default()
    };
    Box::new(options)
}

/// git:// with a connect timeout and read/write timeouts on the socket, so a
/// server that accepts and then hangs cannot hold us forever.
fn git_transport(url: &RepoUrl, options: &Options) -> Result<Box<dyn Transport + Send>, Failure> {
    use gix::protocol::transport::{Protocol, client::git};
    let parsed = gix::Url::from_bytes(url.as_str().into())?;
    let host = parsed.host().unwrap_or_default().to_owned();
    let port = parsed.port;
    let address = (host.as_str(), port.unwrap_or(9418))
        .to_socket_addrs()
        .map_err(|e| Failure::Other(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| Failure::Other(format!("{host} has no address")))?;
    let stream =
        TcpStream::connect_timeout(&address, options.connect_timeout).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Failure::Timeout,
                _ => Failure::Other(format!("cannot connect to {address}: {e}")),
            }
        })?;
    let io = |e: std::io::Error| Failure::Other(e.to_string());
    stream
        .set_read_timeout(Some(options.io_timeout))
        .map_err(io)?;
    stream
        .set_write_timeout(Some(options.io_timeout))
        .map_err(io)?;
    let read = stream.try_clone().map_err(io)?;
    let connection = git::blocking_io::Connection::new(
        read,
        stream,
        Protocol::V2,
        parsed.path.clone(),
        Some((host, port)),
        git::ConnectMode::Daemon,
        false,
    );
    Ok(Box::new(connection))
}

#[cfg(test)]
mod origin_tests {
    use super::*;

    #[test]
    fn credentials_go_to_the_repository_origin_only() {
        let origin = origin_of("https://git.corp.example/team/app.git");
        let asked = |url: &str| gix::credentials::protocol::Context {
            url: Some(url.into()),
            ..Default::default()
        };
        assert!(same_origin(
            &origin,
            &asked("https://git.corp.example/team/app.git/info/refs")
        ));
        assert!(same_origin(
            &origin,
            &asked("https://GIT.corp.example:443/other")
        ));
        for elsewhere in [
            "https://git.corp.example.evil.com/team/app.git",
            "http://git.corp.example/team/app.git",
            "https://git.corp.example:8443/team/app.git",
            "https://evil.example/",
        ] {
            assert!(!same_origin(&origin, &asked(elsewhere)), "{elsewhere}");
        }
        let by_host = gix::credentials::protocol::Context {
            protocol: Some("https".into()),
            host: Some("evil.example".into()),
            ..Default::default()
        };
        assert!(!same_origin(&origin, &by_host));
    }
}
