//! The bounds every CEL expression is compiled and evaluated under.

/// Default for [`Limits::max_expression_bytes`]: 10 KiB of source.
pub const DEFAULT_MAX_EXPRESSION_BYTES: usize = 10 * 1024;
/// Default for [`Limits::max_nesting`]: parser recursion depth.
pub const DEFAULT_MAX_NESTING: u16 = 16;
/// Default for [`Limits::max_operators`]: operator tokens in one expression
/// (a chain of binary operators nests the parse tree one level each, and the
/// parser recurses once per level).
pub const DEFAULT_MAX_OPERATORS: usize = 64;
/// Default for [`Limits::max_nodes`]: nodes of one expression after macro
/// expansion.
pub const DEFAULT_MAX_NODES: usize = 2_000;
/// Default for [`Limits::cost_budget`]: the Kubernetes API server's
/// per-expression runtime cost limit (`PerCallLimit`), counted here as
/// comprehension iterations plus calls.
pub const DEFAULT_COST_BUDGET: u64 = 1_000_000;
/// Default for [`Limits::max_value_depth`]: nesting of a JSON document
/// converted into a CEL value.
pub const DEFAULT_MAX_VALUE_DEPTH: usize = 128;

/// Bounds for compiling and evaluating CEL; every field has a documented
/// default ([`Limits::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted expression source, in bytes
    /// ([`DEFAULT_MAX_EXPRESSION_BYTES`]).
    pub max_expression_bytes: usize,
    /// Deepest accepted nesting of the parse tree ([`DEFAULT_MAX_NESTING`]).
    pub max_nesting: u16,
    /// Most operator tokens in one expression ([`DEFAULT_MAX_OPERATORS`]).
    pub max_operators: usize,
    /// Most nodes in one compiled expression ([`DEFAULT_MAX_NODES`]).
    pub max_nodes: usize,
    /// Runtime cost budget of one evaluation ([`DEFAULT_COST_BUDGET`]).
    pub cost_budget: u64,
    /// Deepest JSON nesting converted into a CEL value
    /// ([`DEFAULT_MAX_VALUE_DEPTH`]).
    pub max_value_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression_bytes: DEFAULT_MAX_EXPRESSION_BYTES,
            max_nesting: DEFAULT_MAX_NESTING,
            max_operators: DEFAULT_MAX_OPERATORS,
            max_nodes: DEFAULT_MAX_NODES,
            cost_budget: DEFAULT_COST_BUDGET,
            max_value_depth: DEFAULT_MAX_VALUE_DEPTH,
        }
    }
}
