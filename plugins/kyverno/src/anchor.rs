//! Anchors of pattern keys: `(key)` conditional, `<(key)` global, `X(key)`
//! negation, `=(key)` equality, `^(key)` existence, `+(key)` add-if-absent
//! (mutation only: a plain key to validation).

/// What an anchor asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `(key)`: if the key is there and matches, the siblings apply;
    /// otherwise the rule does not apply here (skip).
    Condition,
    /// `<(key)`: like a condition, for the whole rule.
    Global,
    /// `X(key)`: the key must be absent.
    Negation,
    /// `=(key)`: if the key is there, it must match.
    Equality,
    /// `^(key)`: some element of the list must match.
    Existence,
    /// `+(key)`: mutation's add-if-absent.
    AddIfNotPresent,
}

/// An anchored key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor<'a> {
    /// The anchor.
    pub kind: Kind,
    /// The key it is on.
    pub key: &'a str,
}

/// The anchor of a pattern key, if it is one: `MODIFIER?(KEY)` with a
/// non-empty key, surrounding spaces ignored.
pub fn parse(text: &str) -> Option<Anchor<'_>> {
    let text = text.trim();
    let inner = text.strip_suffix(')')?;
    let (kind, rest) = match inner.as_bytes().first()? {
        b'(' => (Kind::Condition, &inner[1..]),
        b'<' => (Kind::Global, inner[1..].strip_prefix('(')?),
        b'X' => (Kind::Negation, inner[1..].strip_prefix('(')?),
        b'=' => (Kind::Equality, inner[1..].strip_prefix('(')?),
        b'^' => (Kind::Existence, inner[1..].strip_prefix('(')?),
        b'+' => (Kind::AddIfNotPresent, inner[1..].strip_prefix('(')?),
        _ => return None,
    };
    (!rest.is_empty()).then_some(Anchor { kind, key: rest })
}

/// The key without its anchor.
pub fn key_of(text: &str) -> &str {
    parse(text).map_or(text, |anchor| anchor.key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_read_from_keys() {
        assert_eq!(
            parse("(name)"),
            Some(Anchor {
                kind: Kind::Condition,
                key: "name"
            })
        );
        assert_eq!(
            parse("<(image)"),
            Some(Anchor {
                kind: Kind::Global,
                key: "image"
            })
        );
        assert_eq!(parse("X(hostPath)").unwrap().kind, Kind::Negation);
        assert_eq!(parse("=(securityContext)").unwrap().kind, Kind::Equality);
        assert_eq!(parse("^(containers)").unwrap().kind, Kind::Existence);
        assert_eq!(parse(" (a.b) ").unwrap().key, "a.b");
        assert_eq!(parse("()"), None);
        assert_eq!(parse("name"), None);
        assert_eq!(parse("Y(name)"), None);
        assert_eq!(key_of("=(x)"), "x");
    }
}
