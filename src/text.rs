//! Text for people: an error with every cause, and text bounded for the
//! places it is stored (an Application's status, events, logs).

use std::error::Error;
use std::fmt::Write as _;

/// The longest condition or event message Kiln stores, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// `error` and every cause below it, joined with `: `. A cause whose text
/// the message above already contains (errors that print their source
/// themselves) is not repeated.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let part = next.to_string();
        if !part.is_empty() && !text.contains(&part) {
            let _ = write!(text, ": {part}");
        }
        cause = next.source();
    }
    text
}

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

    #[test]
    fn bounded_text_says_what_was_cut() {
        assert_eq!(bounded("short", 100), "short");
        let long = "é".repeat(1000);
        let cut = bounded(&long, 200);
        assert!(cut.len() <= 200 + "… (".len() + 20, "{}", cut.len());
        assert!(cut.ends_with("bytes cut)"), "{cut}");
    }
}
