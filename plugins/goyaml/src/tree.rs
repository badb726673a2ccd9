//! What the emitter walks: any tree of maps, lists and scalars, given
//! node by node through [`Tree`], so that a caller prints its own values
//! without first building a `serde_json::Value` of them.

use std::convert::Infallible;

/// One node of a [`Tree`], as the emitter sees it.
pub enum Node<'a, T> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer, printed in decimal.
    Int(i64),
    /// An integer above `i64::MAX`, printed in decimal.
    Uint(u64),
    /// A float, printed in Go's shortest `%g` form (integral floats are the
    /// tree's to give as [`Node::Int`], as a JSON round trip does).
    Float(f64),
    /// A string (quoted, folded or a literal block as go-yaml chooses).
    Str(&'a str),
    /// A sequence (`[]` when empty).
    List(&'a [T]),
    /// A mapping's entries in the tree's own order (the emitter sorts them
    /// in go-yaml's key order; `{}` when empty).
    Map(&'a mut dyn Iterator<Item = (&'a str, &'a T)>),
}

/// A tree the emitter can print: each node says what it is, through a
/// callback so that it may lend data it holds behind a guard (a
/// `RefCell`) or builds on the spot (a number's text).
pub trait Tree: Sized {
    /// Why a node cannot be printed: the emitter stops at the first, and
    /// gives no text.
    type Error;

    /// Calls `f` with this node, which sits `depth` levels below the root
    /// (0 for the root); an error instead when the node cannot be printed.
    fn with_node<R>(
        &self,
        depth: usize,
        f: impl FnOnce(Node<'_, Self>) -> R,
    ) -> Result<R, Self::Error>;
}

impl Tree for serde_json::Value {
    type Error = Infallible;

    fn with_node<R>(
        &self,
        _depth: usize,
        f: impl FnOnce(Node<'_, Self>) -> R,
    ) -> Result<R, Infallible> {
        use serde_json::Value;
        Ok(match self {
            Value::Null => f(Node::Null),
            Value::Bool(b) => f(Node::Bool(*b)),
            Value::Number(n) => f(if let Some(i) = n.as_i64() {
                Node::Int(i)
            } else if let Some(u) = n.as_u64() {
                Node::Uint(u)
            } else {
                Node::Float(n.as_f64().unwrap_or_default())
            }),
            Value::String(s) => f(Node::Str(s)),
            Value::Array(list) => f(Node::List(list)),
            Value::Object(map) => f(Node::Map(
                &mut map.iter().map(|(key, value)| (key.as_str(), value)),
            )),
        })
    }
}
