//! Text for people: an error with every cause, and text bounded for the
//! places it is stored (an Application's status, events, logs).

use std::error::Error;

/// The longest condition or event message Kiln stores, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// `error` and every cause below it in plain words, joined with `: `: what
/// a person reads in an error line or a condition. A cause whose text the
/// message above already contains (errors that print their source
/// themselves) is not repeated; a message that is a foreign type's debug
/// dump (`Custom { kind: Other, … }`, `Message { message: "…" }`, an API
/// server's `Status { … }`) is replaced by its words or left out, the
/// causes below it saying the same in words.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(current) = next {
        next = current.source();
        let Some(part) = plain(current) else { continue };
        if parts.iter().any(|p| p.contains(&part)) {
            continue;
        }
        // A cause that repeats the message above it and says more (an
        // error that prints its source itself, wrapped in a context of
        // the same words) replaces it.
        match parts.last_mut() {
            Some(last) if part.contains(last.as_str()) => *last = part,
            _ => parts.push(part),
        }
    }
    let mut text = if parts.is_empty() {
        // Nothing but debug dumps: better them than nothing.
        error.to_string()
    } else {
        parts.join(": ")
    };
    // The root cause in words, unless the chain says it already.
    if let Some(cause) = cause(error)
        && !cause.said_in(&text.to_lowercase())
    {
        text.push_str(" (");
        text.push_str(cause.words());
        text.push(')');
    }
    audit(&text);
    text
}

/// What went wrong at the bottom of an error chain, in the classes a
/// person acts on (Git, Helm repositories, registries, the cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// A file, object or reference that does not exist.
    NotFound,
    /// Nothing listens at the address.
    Refused,
    /// The host name does not resolve.
    Dns,
    /// The TLS handshake failed (an untrusted or invalid certificate).
    Tls,
    /// The credentials were refused (401).
    Authentication,
    /// The credentials are not allowed to (403, a file's mode).
    Permission,
    /// No answer in time.
    Timeout,
}

impl Cause {
    /// The cause in plain words.
    pub fn words(self) -> &'static str {
        match self {
            Cause::NotFound => "not found",
            Cause::Refused => "connection refused: nothing listens at that address",
            Cause::Dns => "DNS: the host name does not resolve",
            Cause::Tls => "TLS: the server's certificate is not trusted or not valid",
            Cause::Authentication => "authentication failed: check the credentials",
            Cause::Permission => "permission denied",
            Cause::Timeout => "timed out",
        }
    }

    /// Whether a (lower-case) message already says this cause.
    fn said_in(self, lower: &str) -> bool {
        let any = |words: &[&str]| words.iter().any(|w| lower.contains(w));
        match self {
            Cause::NotFound => any(&["not found", "no such file", "does not exist"]),
            Cause::Refused => any(&["refused"]),
            Cause::Dns => any(&["dns", "does not resolve"]),
            Cause::Tls => any(&["tls"]),
            Cause::Authentication => any(&["authenticat", "unauthorized"]),
            Cause::Permission => any(&["permission denied", "forbidden"]),
            Cause::Timeout => any(&["timed out", "timeout", "deadline"]),
        }
    }
}

/// The root cause of `error`: the deepest error in its chain that Kiln can
/// class (an I/O error's kind, an API server's status code, the words of
/// gix, reqwest, hyper and rustls errors).
pub fn cause(error: &(dyn Error + 'static)) -> Option<Cause> {
    let mut found = None;
    let mut next = Some(error);
    while let Some(current) = next {
        next = current.source();
        if let Some(cause) = class_of(current) {
            found = Some(cause);
        }
    }
    found
}

/// One error's class, if its kind, code or words say one.
fn class_of(error: &(dyn Error + 'static)) -> Option<Cause> {
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        match io.kind() {
            std::io::ErrorKind::NotFound => return Some(Cause::NotFound),
            std::io::ErrorKind::ConnectionRefused => return Some(Cause::Refused),
            std::io::ErrorKind::TimedOut => return Some(Cause::Timeout),
            std::io::ErrorKind::PermissionDenied => return Some(Cause::Permission),
            _ => {}
        }
    }
    if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>() {
        match status.code {
            401 => return Some(Cause::Authentication),
            403 => return Some(Cause::Permission),
            404 => return Some(Cause::NotFound),
            _ => {}
        }
    }
    let text = error.to_string().to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if any(&[
        "failed to lookup address",
        "name or service not known",
        "temporary failure in name resolution",
        "no address associated with hostname",
        "nodename nor servname",
        "dns error",
        "could not resolve host",
    ]) {
        Some(Cause::Dns)
    } else if any(&["connection refused"]) {
        Some(Cause::Refused)
    } else if any(&[
        "invalid peer certificate",
        "unknownissuer",
        "certificate verify failed",
        "invalidcertificate",
        "bad certificate",
        "self-signed certificate",
        "self signed certificate",
        "certificate has expired",
    ]) {
        Some(Cause::Tls)
    } else if any(&["timed out", "deadline has elapsed"]) {
        Some(Cause::Timeout)
    } else if any(&[
        "401 unauthorized",
        "authentication failed",
        "authentication required",
    ]) {
        Some(Cause::Authentication)
    } else if any(&["permission denied", "403 forbidden"]) {
        Some(Cause::Permission)
    } else {
        None
    }
}

/// Appends `text` to the file `KILN_ERROR_AUDIT` names, if it is set:
/// `scripts/test` collects every error the test suite produces this way
/// and fails on a foreign type's debug dump in any of them.
fn audit(text: &str) {
    static FILE: std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>> =
        std::sync::OnceLock::new();
    if cfg!(test) {
        // This module's own tests feed it dumps on purpose.
        return;
    }
    let file = FILE.get_or_init(|| {
        let path = std::env::var_os("KILN_ERROR_AUDIT")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(std::sync::Mutex::new)
    });
    if let Some(file) = file
        && let Ok(mut file) = file.lock()
    {
        use std::io::Write as _;
        // One line per error (a multi-line one joined), written at once.
        let _ = file.write_all(format!("{}\n", text.replace('\n', "\\n")).as_bytes());
    }
}

/// One error's own message in words, or `None` when it says nothing its
/// causes do not say better.
fn plain(error: &(dyn Error + 'static)) -> Option<String> {
    // An API server's Status is said by the kube::Error above it; as a
    // source of its own it would say it again (with its reason).
    if error.is::<kube::core::Status>() || error.is::<Box<kube::core::Status>>() {
        return None;
    }
    if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>() {
        // As kubectl says it: the server's message, else its reason.
        let words = if status.message.is_empty() {
            format!("{} ({})", status.reason, status.code)
        } else {
            status.message.clone()
        };
        return Some(words);
    }
    let text = error.to_string();
    let text = text.trim();
    // gix's `Message { message: "…" }` and a quoted string's debug form.
    let unescape = |inner: &str| inner.replace("\\\"", "\"").replace("\\\\", "\\");
    let text = match MESSAGE_DEBUG.captures(text).and_then(|c| c.get(1)) {
        Some(inner) => unescape(inner.as_str()),
        // A string's debug form, quotes around and none unescaped inside
        // (`"a" and "b"` is a message of its own).
        None => match QUOTED.captures(text).and_then(|c| c.get(1)) {
            Some(inner) if !UNESCAPED_QUOTE.is_match(inner.as_str()) => unescape(inner.as_str()),
            _ => text.to_owned(),
        },
    };
    // kube's and hyper's jargon for a failed connection.
    let text = text
        .replace("ServiceError: ", "")
        .replace("client error (Connect): ", "cannot connect: ");
    if text.is_empty() || NOISE.is_match(&text) {
        return None;
    }
    if DEBUG_DUMP.is_match(&text) {
        // A dump may still carry the words (`Os { code: 2, kind: NotFound,
        // message: "No such file or directory" }`): keep them.
        return DUMPED_MESSAGE
            .captures(&text)
            .and_then(|c| c.get(1))
            .map(|m| unescape(m.as_str()));
    }
    Some(text)
}

/// A `"` not preceded by a backslash.
static UNESCAPED_QUOTE: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r#"(^|[^\\])""#).expect("a valid pattern"));

/// The innermost `message: "…"` of a debug dump.
static DUMPED_MESSAGE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"message: "((?:[^"\\]|\\.)*)" \}+\)*$"#).expect("a valid pattern")
});

/// `Message { message: "…" }` (gix's plain messages, debug-printed).
static MESSAGE_DEBUG: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"^(?s)Message \{ message: "(.*)" \}$"#).expect("a valid pattern")
});

/// A string's debug form: `"…"`.
static QUOTED: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r#"^(?s)"(.*)"$"#).expect("a valid pattern"));

/// A type's debug dump: a (path of a) type name followed by `(` or `{`,
/// such as `Io(Custom { kind: Other, … })` or
/// `hyper_util::client::legacy::Error(Connect, …)`.
static DEBUG_DUMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*\s*[({]")
        .expect("a valid pattern")
});

/// Wrappers that only say an error happened: `I/O error (Other)`.
static NOISE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^(I/O error|error sending request|client error) ?(\([A-Za-z]*\))?$")
        .expect("a valid pattern")
});

/// `text` cut to at most `max` bytes (on a character boundary), saying how
/// much was cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let note_room = 40.min(max);
    let mut cut = max - note_room;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..cut], text.len() - cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("directory renderer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("plugin x: {0}")]
    struct Inline(#[source] std::io::Error);

    #[test]
    fn chains_keep_every_cause_once() {
        let error = Outer(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "apps: no such file or directory",
        ));
        assert_eq!(
            chain(&error),
            "directory renderer: apps: no such file or directory"
        );
        let error = Inline(std::io::Error::other("boom"));
        assert_eq!(chain(&error), "plugin x: boom");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0:?}")]
    struct Dumped(String, #[source] std::io::Error);

    #[test]
    fn debug_dumps_give_way_to_words() {
        // What gix and reqwest put in a chain for an unresolvable host.
        let error = Dumped(
            "Io(Custom { kind: Other, error: reqwest::Error { kind: Request } })".into(),
            std::io::Error::other(
                "failed to lookup address information: Name or service not known",
            ),
        );
        assert_eq!(
            chain(&error),
            "failed to lookup address information: Name or service not known \
             (DNS: the host name does not resolve)"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("Message {{ message: \"Could not retrieve metadata of \\\"/x/.git\\\"\" }}")]
        struct Message(#[source] std::io::Error);
        let error = Message(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(
            chain(&error),
            "Could not retrieve metadata of \"/x/.git\": entity not found"
        );
        // Wrappers that only say an error happened go; plain messages
        // with parentheses stay.
        let error = Outer(std::io::Error::other("client error (Connect)"));
        assert_eq!(chain(&error), "directory renderer");
        let error = Inline(std::io::Error::other("timed out (30s)"));
        assert_eq!(chain(&error), "plugin x: timed out (30s)");
        // A dump with no cause behind it keeps its words.
        let error = Inline(std::io::Error::other(
            "Os { code: 2, kind: NotFound, message: \"No such file or directory\" }",
        ));
        assert_eq!(
            chain(&error),
            "plugin x: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }"
        );
        let error = Outer(std::io::Error::other(
            "Os { code: 2, kind: NotFound, message: \"No such file or directory\" }",
        ));
        assert_eq!(
            chain(&error),
            "directory renderer: No such file or directory"
        );
        // A message in quotes of its own is not unquoted.
        let error = Outer(std::io::Error::other("\"a\" and \"b\""));
        assert_eq!(chain(&error), "directory renderer: \"a\" and \"b\"");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot discover the cluster's API")]
    struct Context(#[source] Discover);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot discover the cluster's API: ServiceError: {0}")]
    struct Discover(#[source] std::io::Error);

    #[test]
    fn a_context_repeated_by_its_cause_is_said_once() {
        let error = Context(Discover(std::io::Error::other(
            "client error (Connect): tcp connect error: Connection refused (os error 111)",
        )));
        assert_eq!(
            chain(&error),
            "cannot discover the cluster's API: cannot connect: tcp connect error: \
             Connection refused (os error 111)"
        );
        // As kube prints it, alone: in words.
        let error = Outer(std::io::Error::other(
            "ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)",
        ));
        assert_eq!(
            chain(&error),
            "directory renderer: cannot connect: tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn an_api_server_status_is_its_message() {
        let status =
            kube::core::Status::failure("applications.kiln.dev \"nope\" not found", "NotFound")
                .with_code(404);
        let error = kube::Error::Api(Box::new(status));
        assert_eq!(chain(&error), "applications.kiln.dev \"nope\" not found");
    }

    #[test]
    fn the_root_cause_is_said_in_words_once() {
        // DNS, as reqwest and gix leave it at the bottom of a chain.
        let error = Outer(std::io::Error::other(
            "dns error: failed to lookup address information: Name or service not known",
        ));
        assert_eq!(cause(&error), Some(Cause::Dns));
        assert_eq!(
            chain(&error),
            "directory renderer: dns error: failed to lookup address information: \
             Name or service not known"
        );
        let error = Outer(std::io::Error::other(
            "failed to lookup address information: Name or service not known",
        ));
        assert!(chain(&error).ends_with("(DNS: the host name does not resolve)"));
        // Already said: not repeated.
        let error = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause(&error), Some(Cause::Refused));
        assert_eq!(chain(&error), "directory renderer: connection refused");
        // An I/O error's kind, an API server's code.
        let error = Outer(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer",
        ));
        assert_eq!(chain(&error), "directory renderer: no answer (timed out)");
        let status = kube::core::Status::failure("Unauthorized", "Unauthorized").with_code(401);
        let error = kube::Error::Api(Box::new(status));
        assert_eq!(cause(&error), Some(Cause::Authentication));
        assert_eq!(chain(&error), "Unauthorized");
        let status = kube::core::Status::failure("no", "Forbidden").with_code(403);
        assert_eq!(
            chain(&kube::Error::Api(Box::new(status))),
            "no (permission denied)"
        );
        // TLS, as rustls says it.
        let error = Inline(std::io::Error::other(
            "invalid peer certificate: UnknownIssuer",
        ));
        assert_eq!(
            chain(&error),
            "plugin x: invalid peer certificate: UnknownIssuer \
             (TLS: the server's certificate is not trusted or not valid)"
        );
        // The deepest class wins: gix's handshake over a DNS failure.
        let error = Context(Discover(std::io::Error::other(
            "failed to lookup address information: Name or service not known",
        )));
        assert_eq!(cause(&error), Some(Cause::Dns));
        // Nothing to class: nothing added.
        assert_eq!(
            chain(&Inline(std::io::Error::other("boom"))),
            "plugin x: boom"
        );
    }

    #[test]
    fn bounded_text_says_what_was_cut() {
        assert_eq!(bounded("short", 100), "short");
        let long = "é".repeat(1000);
        let cut = bounded(&long, 200);
        assert!(cut.len() <= 200 + "… (".len() + 20, "{}", cut.len());
        assert!(cut.ends_with("bytes cut)"), "{cut}");
    }
}
