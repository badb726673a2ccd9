//! Compiling expressions under [`Limits`] and evaluating them under a cost
//! budget.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};
use cel::{Context, Env, ExecutionError, Value};

use crate::library;
use crate::limits::Limits;

/// The function the compiler wraps around every comprehension's range to
/// count its elements against the cost budget.
const COST_FUNCTION: &str = "__kiln_cost";

/// The function the compiler wraps around every argument (and receiver) of
/// a function call, `+` and `in`, to count the size of the values it is
/// given against the cost budget before the call allocates its result.
const SIZE_FUNCTION: &str = "__kiln_size";

/// The function the compiler wraps around the receiver of `replace`, with
/// its arguments, to count the largest string the replacement can build.
const REPLACE_FUNCTION: &str = "__kiln_replace";

/// The function `has(a.b.c)` is compiled into: `__kiln_has(a, 'b', 'c')`,
/// false when any field along the chain is missing or its parent is not a
/// map (`null` included), as in cel-go, where a presence test never errors
/// on what it tests.
const HAS_FUNCTION: &str = "__kiln_has";

/// Bytes of string (or bytes) per unit of cost, as in the Kubernetes cost
/// model (string operations cost 0.1 per byte): with the default budget an
/// evaluation may hand about 10 MB of strings to functions and operators.
pub const BYTES_PER_COST: u64 = 10;

/// Why an expression is refused at compile time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Longer than [`Limits::max_expression_bytes`].
    #[error("the expression is {len} bytes long, more than the limit of {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Does not parse (or is nested deeper than [`Limits::max_nesting`]).
    #[error("the expression does not compile: {0}")]
    Syntax(String),
    /// Brackets or unary operators nested deeper than [`Limits::max_nesting`].
    #[error("the expression nests {depth} levels deep, more than the limit of {max}")]
    TooDeep {
        /// Its nesting.
        depth: usize,
        /// The limit.
        max: u16,
    },
    /// More operators than [`Limits::max_operators`].
    #[error("the expression has {count} operators, more than the limit of {max}")]
    TooManyOperators {
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More nodes than [`Limits::max_nodes`].
    #[error("the expression has more than {max} nodes after macro expansion")]
    TooManyNodes {
        /// The limit.
        max: usize,
    },
    /// Calls a Kubernetes CEL function this environment does not provide.
    #[error(
        "the expression uses `{name}` ({library}), which Kiln's CEL environment does not provide"
    )]
    MissingLibrary {
        /// The function.
        name: String,
        /// The library it belongs to.
        library: &'static str,
    },
    /// Calls a function that exists nowhere.
    #[error("the expression calls the unknown function `{0}`")]
    UnknownFunction(String),
    /// Reads a variable that is not declared (`authorizer`, a typo).
    #[error("the expression uses the variable `{0}`, which is not available here")]
    UnknownVariable(String),
}

/// The words every cost-budget error carries (also through the messages of
/// callers that wrap it), so that callers can fail closed on it.
pub const COST_EXCEEDED: &str = "exceeded its cost budget";

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The expression went over [`Limits::cost_budget`].
    #[error("the expression exceeded its cost budget of {0}")]
    CostExceeded(u64),
    /// A runtime error of the expression (no such key, bad type, ...).
    #[error("{0}")]
    Execution(String),
}

/// A compiled, instrumented expression.
#[derive(Debug, Clone)]
pub struct Compiled {
    source: String,
    expr: Arc<IdedExpr>,
}

impl Compiled {
    /// The source it was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The fields selected on the variable `root` (e.g. the names `x` of
    /// `variables.x`, `variables.?x`, `variables[?'x']`), for lazy
    /// evaluation of what an expression reads.
    pub fn fields_of(&self, root: &str) -> BTreeSet<String> {
        use cel::common::ast::operators::{OPT_INDEX, OPT_SELECT};
        let mut out = BTreeSet::new();
        walk(&self.expr, &mut |e| match &e.expr {
            Expr::Select(select) if matches!(&select.operand.expr, Expr::Ident(name) if name == root) =>
            {
                out.insert(select.field.clone());
            }
            Expr::Call(call) if call.func_name == OPT_SELECT || call.func_name == OPT_INDEX => {
                if let [base, field] = &call.args[..]
                    && matches!(&base.expr, Expr::Ident(name) if name == root)
                    && let Expr::Literal(LiteralValue::String(field)) = &field.expr
                {
                    out.insert(field.to_string());
                }
            }
            Expr::Call(call) if call.func_name == HAS_FUNCTION => {
                if let [base, first, ..] = &call.args[..]
                    && matches!(&base.expr, Expr::Ident(name) if name == root)
                    && let Expr::Literal(LiteralValue::String(field)) = &first.expr
                {
                    out.insert(field.to_string());
                }
            }
            _ => {}
        });
        out
    }
}

fn walk(expr: &IdedExpr, f: &mut impl FnMut(&IdedExpr)) {
    f(expr);
    match &expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk(target, f);
            }
            call.args.iter().for_each(|a| walk(a, f));
        }
        Expr::Comprehension(c) => {
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(e, f);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|a| walk(a, f)),
        Expr::Map(map) => map.entries.iter().for_each(|entry| {
            if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                walk(&m.key, f);
                walk(&m.value, f);
            }
        }),
        Expr::Select(select) => walk(&select.operand, f),
        Expr::Struct(s) => s.entries.iter().for_each(|entry| {
            if let cel::common::ast::EntryExpr::StructField(field) = &entry.expr {
                walk(&field.value, f);
            }
        }),
        _ => {}
    }
}

/// `expr` wrapped in a call to `function` (with `extra` arguments after it).
fn wrap(expr: &mut IdedExpr, function: &str, extra: Vec<IdedExpr>, next_id: &mut u64) {
    let inner = std::mem::take(expr);
    *next_id += 1;
    let mut args = vec![inner];
    args.extend(extra);
    *expr = IdedExpr {
        id: *next_id,
        expr: Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args,
        }),
    };
}

/// Whether the values given to this call are counted by size: every
/// function (not the instrumentation's own), and the operators that build
/// or scan values (`+`, `in`); not the logical operators, which must keep
/// their short-circuits, nor comparisons and indexing.
fn counts_sizes(name: &str) -> bool {
    name == "_+_" || name == "@in" || (!is_operator(name) && !name.starts_with("__kiln_"))
}

/// Rewrites the receiver chain of every `orValue` call to optional field
/// and index reads ([`Environment::with_lenient_or_value`]).
fn lenient_or_value(expr: &mut IdedExpr, next_id: &mut u64) {
    for_each_child(expr, &mut |child| lenient_or_value(child, next_id));
    if let Expr::Call(call) = &mut expr.expr
        && call.func_name == "orValue"
        && call.args.len() == 1
        && let Some(target) = &mut call.target
    {
        optional_chain(target, next_id);
    }
}

/// `a.b[c].d` read as `a.?b[?c].?d`; a chain already optional, or
/// anything else, is left as it is.
fn optional_chain(expr: &mut IdedExpr, next_id: &mut u64) {
    let rewritten = match &mut expr.expr {
        Expr::Select(select) if !select.test => {
            optional_chain(&mut select.operand, next_id);
            *next_id += 1;
            let field = IdedExpr {
                id: *next_id,
                expr: Expr::Literal(LiteralValue::String(select.field.clone().into())),
            };
            Some((
                cel::common::ast::operators::OPT_SELECT,
                vec![std::mem::take(&mut *select.operand), field],
            ))
        }
        Expr::Call(call)
            if call.func_name == cel::common::ast::operators::INDEX
                && call.target.is_none()
                && call.args.len() == 2 =>
        {
            optional_chain(&mut call.args[0], next_id);
            Some((
                cel::common::ast::operators::OPT_INDEX,
                std::mem::take(&mut call.args),
            ))
        }
        _ => None,
    };
    if let Some((function, args)) = rewritten {
        expr.expr = Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args,
        });
    }
}

/// Calls `f` on every direct sub-expression of `expr`.
fn for_each_child(expr: &mut IdedExpr, f: &mut dyn FnMut(&mut IdedExpr)) {
    match &mut expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                f(target);
            }
            call.args.iter_mut().for_each(&mut *f);
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                f(e);
            }
        }
        Expr::List(list) => list.elements.iter_mut().for_each(&mut *f),
        Expr::Map(map) => map.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::MapEntry(m) = &mut entry.expr {
                f(&mut m.key);
                f(&mut m.value);
            }
        }),
        Expr::Select(select) => f(&mut select.operand),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::StructField(field) = &mut entry.expr {
                f(&mut field.value);
            }
        }),
        _ => {}
    }
}

/// Wraps every comprehension range in a call to [`COST_FUNCTION`] and the
/// arguments of calls in [`SIZE_FUNCTION`] (see [`counts_sizes`]).
fn instrument(expr: &mut IdedExpr, next_id: &mut u64) {
    if let Expr::Select(select) = &expr.expr
        && select.test
    {
        let mut fields = vec![select.field.clone()];
        let mut base = (*select.operand).clone();
        while let Expr::Select(inner) = &base.expr {
            if inner.test {
                break;
            }
            fields.push(inner.field.clone());
            base = (*inner.operand).clone();
        }
        fields.reverse();
        instrument(&mut base, next_id);
        let mut args = vec![base];
        for field in fields {
            *next_id += 1;
            args.push(IdedExpr {
                id: *next_id,
                expr: Expr::Literal(LiteralValue::String(field.into())),
            });
        }
        *next_id += 1;
        *expr = IdedExpr {
            id: *next_id,
            expr: Expr::Call(CallExpr {
                func_name: HAS_FUNCTION.to_owned(),
                target: None,
                args,
            }),
        };
        return;
    }
    match &mut expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                instrument(target, next_id);
            }
            call.args.iter_mut().for_each(|a| instrument(a, next_id));
            if counts_sizes(&call.func_name) {
                for arg in call.args.iter_mut() {
                    wrap(arg, SIZE_FUNCTION, Vec::new(), next_id);
                }
                if let Some(target) = &mut call.target {
                    let namespace = matches!(&target.expr, Expr::Ident(name) if is_namespace(name));
                    if !namespace {
                        if call.func_name == "replace" {
                            wrap(target, REPLACE_FUNCTION, call.args.clone(), next_id);
                        } else {
                            wrap(target, SIZE_FUNCTION, Vec::new(), next_id);
                        }
                    }
                }
            }
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                instrument(e, next_id);
            }
            instrument(&mut c.iter_range, next_id);
            let range = std::mem::take(&mut c.iter_range);
            *next_id += 1;
            c.iter_range = IdedExpr {
                id: *next_id,
                expr: Expr::Call(CallExpr {
                    func_name: COST_FUNCTION.to_owned(),
                    target: None,
                    args: vec![range],
                }),
            };
        }
        Expr::List(list) => list
            .elements
            .iter_mut()
            .for_each(|a| instrument(a, next_id)),
        Expr::Map(map) => map.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::MapEntry(m) = &mut entry.expr {
                instrument(&mut m.key, next_id);
                instrument(&mut m.value, next_id);
            }
        }),
        Expr::Select(select) => instrument(&mut select.operand, next_id),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::StructField(field) = &mut entry.expr {
                instrument(&mut field.value, next_id);
            }
        }),
        _ => {}
    }
}

/// The functions an expression calls and the free variables it reads that
/// were not declared, in the order written.
#[derive(Default)]
struct References {
    functions: BTreeSet<String>,
    unknown_variables: Vec<String>,
}

/// Whether `name` is a namespace of functions (`sets.contains`).
fn is_namespace(name: &str) -> bool {
    library::PROVIDED_FUNCTIONS
        .iter()
        .chain(library::MISSING_FUNCTIONS.iter().map(|(n, _)| n))
        .any(|f| f.split_once('.').is_some_and(|(ns, _)| ns == name))
}

impl References {
    fn collect(&mut self, expr: &IdedExpr, bound: &mut Vec<String>, declared: &[&str]) {
        match &expr.expr {
            Expr::Ident(name)
                if !bound.iter().any(|b| b == name) && !declared.contains(&name.as_str()) =>
            {
                self.unknown_variables.push(name.clone());
            }
            Expr::Call(call) => {
                let namespaced = match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(ns),
                        ..
                    }) if !bound.iter().any(|b| b == ns)
                        && !declared.contains(&ns.as_str())
                        && is_namespace(ns) =>
                    {
                        Some(format!("{ns}.{}", call.func_name))
                    }
                    _ => None,
                };
                match namespaced {
                    Some(name) => {
                        self.functions.insert(name);
                    }
                    None => {
                        self.functions.insert(call.func_name.clone());
                        if let Some(target) = &call.target {
                            self.collect(target, bound, declared);
                        }
                    }
                }
                for arg in &call.args {
                    self.collect(arg, bound, declared);
                }
            }
            Expr::Comprehension(c) => {
                self.collect(&c.iter_range, bound, declared);
                self.collect(&c.accu_init, bound, declared);
                let before = bound.len();
                bound.push(c.accu_var.clone());
                self.collect(&c.result, bound, declared);
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                self.collect(&c.loop_cond, bound, declared);
                self.collect(&c.loop_step, bound, declared);
                bound.truncate(before);
            }
            Expr::List(list) => {
                for e in &list.elements {
                    self.collect(e, bound, declared);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        self.collect(&m.key, bound, declared);
                        self.collect(&m.value, bound, declared);
                    }
                }
            }
            Expr::Select(select) => self.collect(&select.operand, bound, declared),
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                        self.collect(&f.value, bound, declared);
                    }
                }
            }
            _ => {}
        }
    }
}

fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name.starts_with('!') || name.starts_with('-')
}

/// The Kubernetes CEL environment: compiles expressions and evaluates them.
#[derive(Clone)]
pub struct Environment {
    env: Arc<Env>,
    /// The function table every evaluation reads (the Kubernetes libraries
    /// and the cost meters), built once: an evaluation is a scope of its
    /// own on top of it, not a copy.
    functions: Arc<Context<'static, 'static>>,
    limits: Limits,
    optional_types: bool,
    lenient_or_value: bool,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for Environment {
    fn default() -> Self {
        Environment::new(Limits::default())
    }
}

impl Environment {
    /// An environment with these limits.
    pub fn new(limits: Limits) -> Self {
        let env = Arc::new(library::environment(false));
        Environment {
            functions: Arc::new(functions(&env)),
            env,
            limits,
            optional_types: false,
            lenient_or_value: false,
        }
    }

    /// An environment with these limits and CEL's optional types
    /// (`a.?b`, `m[?k]`, `optional.of`, `orValue`, `hasValue`…), as
    /// Kyverno's CEL policies use them; without them (the default) those
    /// are refused by name.
    pub fn with_optional_types(limits: Limits) -> Self {
        let env = Arc::new(library::environment(true));
        Environment {
            functions: Arc::new(functions(&env)),
            env,
            limits,
            optional_types: true,
            lenient_or_value: false,
        }
    }

    /// Kyverno's `orValue`: on a field or index chain that is not optional
    /// (`container.volumeMounts.orValue([])`), the chain's value when it is
    /// there and the default when it is not, as Kyverno's CEL environment
    /// keeps cel-go 0.27's behaviour (standard CEL refuses `orValue` on a
    /// value that is not optional). Each `.f` and `[i]` of the receiver
    /// chain is read as `.?f` and `[?i]`.
    pub fn with_lenient_or_value(mut self) -> Self {
        self.lenient_or_value = true;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Compiles `source`; `variables` are the only top-level names it may
    /// read (besides those its macros bind).
    pub fn compile(&self, source: &str, variables: &[&str]) -> Result<Compiled, CompileError> {
        if source.len() > self.limits.max_expression_bytes {
            return Err(CompileError::TooLong {
                len: source.len(),
                max: self.limits.max_expression_bytes,
            });
        }
        let shape = lexical::shape(source);
        if shape.nesting > usize::from(self.limits.max_nesting) {
            return Err(CompileError::TooDeep {
                depth: shape.nesting,
                max: self.limits.max_nesting,
            });
        }
        if shape.operators > self.limits.max_operators {
            return Err(CompileError::TooManyOperators {
                count: shape.operators,
                max: self.limits.max_operators,
            });
        }
        let mut expr = self
            .env
            .parser()
            .max_recursion_depth(self.limits.max_nesting)
            .parse(source)
            .map_err(|e| CompileError::Syntax(e.to_string()))?;
        let mut nodes = 0usize;
        walk(&expr, &mut |_| nodes += 1);
        if nodes > self.limits.max_nodes {
            return Err(CompileError::TooManyNodes {
                max: self.limits.max_nodes,
            });
        }
        let mut refs = References::default();
        refs.collect(&expr, &mut Vec::new(), variables);
        for (name, lib) in library::MISSING_FUNCTIONS {
            let provided = self.optional_types && *lib == library::OPTIONAL_TYPES;
            if refs.functions.contains(*name) && !provided {
                return Err(CompileError::MissingLibrary {
                    name: (*name).to_owned(),
                    library: lib,
                });
            }
        }
        let provided = |name: &str| {
            library::PROVIDED_FUNCTIONS.contains(&name)
                || (self.optional_types && library::OPTIONAL_FUNCTIONS.contains(&name))
        };
        if let Some(name) = refs
            .functions
            .iter()
            .find(|n| !is_operator(n) && !provided(n.as_str()))
        {
            return Err(CompileError::UnknownFunction(name.clone()));
        }
        if let Some(name) = refs.unknown_variables.first() {
            return Err(CompileError::UnknownVariable(name.clone()));
        }
        let mut next_id = u64::MAX / 2;
        if self.lenient_or_value {
            lenient_or_value(&mut expr, &mut next_id);
        }
        instrument(&mut expr, &mut next_id);
        Ok(Compiled {
            source: source.to_owned(),
            expr: Arc::new(expr),
        })
    }

    /// Starts an evaluation scope with its own cost budget; variables are
    /// added to it, then expressions evaluated in it.
    pub fn evaluation(&self) -> Evaluation<'_> {
        Evaluation::new(self)
    }
}

/// `has(base.f1.f2…)`: whether every field is present along the chain.
fn has_fields(
    cel::extractors::Arguments(args): cel::extractors::Arguments,
) -> Result<Value, ExecutionError> {
    let Some((base, fields)) = args.split_first() else {
        return Err(ExecutionError::function_error(HAS_FUNCTION, "no operand"));
    };
    let mut current = base.clone();
    for field in fields {
        let Value::String(field) = field else {
            return Err(ExecutionError::function_error(HAS_FUNCTION, "bad field"));
        };
        let Value::Map(map) = &current else {
            return Ok(Value::Bool(false));
        };
        let key = cel::objects::Key::String(field.clone());
        match map.map.get(&key) {
            Some(value) => current = value.clone(),
            None => return Ok(Value::Bool(false)),
        }
    }
    Ok(Value::Bool(true))
}

/// Adds `cost` to the counter; an error once the budget is spent.
fn charge(counter: &AtomicU64, budget: u64, cost: u64) -> Result<(), ExecutionError> {
    let total = counter
        .fetch_add(cost, Ordering::Relaxed)
        .saturating_add(cost);
    if total > budget {
        return Err(ExecutionError::function_error(
            SIZE_FUNCTION,
            "cost budget exceeded",
        ));
    }
    Ok(())
}

/// What handing `value` to a function costs: 1, plus its bytes (strings)
/// over [`BYTES_PER_COST`], or its elements (lists, maps) and the bytes of
/// the strings directly in a list.
fn size_cost(value: &Value) -> u64 {
    let bytes = |n: usize| n as u64 / BYTES_PER_COST;
    1 + match value {
        Value::String(s) => bytes(s.len()),
        Value::Bytes(b) => bytes(b.len()),
        Value::List(items) => {
            items.len() as u64
                + items
                    .iter()
                    .map(|item| match item {
                        Value::String(s) => bytes(s.len()),
                        Value::Bytes(b) => bytes(b.len()),
                        _ => 0,
                    })
                    .sum::<u64>()
        }
        Value::Map(map) => map.map.len() as u64,
        _ => 0,
    }
}

/// The cost meter of the evaluation running on this thread: the cost
/// functions live in the environment's shared function table, and read the
/// meter [`Evaluation::eval`] sets for as long as it evaluates.
#[derive(Clone)]
struct Meter {
    spent: Arc<AtomicU64>,
    budget: u64,
}

thread_local! {
    static METER: std::cell::RefCell<Option<Meter>> = const { std::cell::RefCell::new(None) };
}

/// Charges `cost` to the running evaluation's meter.
fn charge_running(cost: u64) -> Result<(), ExecutionError> {
    METER.with(|meter| match &*meter.borrow() {
        Some(meter) => charge(&meter.spent, meter.budget, cost),
        // Functions run only inside `Evaluation::eval`, which sets it: a
        // call outside one is refused rather than left unmetered.
        None => Err(ExecutionError::function_error(
            SIZE_FUNCTION,
            "evaluated outside a metered evaluation",
        )),
    })
}

/// The function table of an environment: the Kubernetes libraries, the
/// presence test and the cost meters (which charge the running evaluation).
fn functions(env: &Arc<Env>) -> Context<'static, 'static> {
    let mut context = Context::with_env(env.clone());
    // Neither can fail: the names are not declared by the Env.
    library::add_functions(&mut context).expect("library functions are new names");
    context
        .add_function(
            COST_FUNCTION,
            move |range: Value| -> Result<Value, ExecutionError> {
                let size = match &range {
                    Value::List(l) => l.len() as u64,
                    Value::Map(m) => m.map.len() as u64,
                    _ => 1,
                };
                charge_running(size + 1).map_err(|_| {
                    ExecutionError::function_error(COST_FUNCTION, "cost budget exceeded")
                })?;
                Ok(range)
            },
        )
        .expect("the cost function is a new name");
    context
        .add_function(HAS_FUNCTION, has_fields)
        .expect("the presence test is a new name");
    context
        .add_function(
            SIZE_FUNCTION,
            move |value: Value| -> Result<Value, ExecutionError> {
                charge_running(size_cost(&value))?;
                Ok(value)
            },
        )
        .expect("the size function is a new name");
    context
        .add_function(
            REPLACE_FUNCTION,
            move |target: Value, old: Value, new: Value| -> Result<Value, ExecutionError> {
                let len = |v: &Value| match v {
                    Value::String(s) => s.len() as u64,
                    _ => 0,
                };
                let (text, old_len, new_len) = (len(&target), len(&old), len(&new));
                // At most one replacement per occurrence of `old`, or per
                // position when `old` is empty.
                let occurrences = text.checked_div(old_len).unwrap_or(text + 1);
                let largest = text.saturating_add(occurrences.saturating_mul(new_len));
                charge_running(largest / BYTES_PER_COST + 1)?;
                Ok(target)
            },
        )
        .expect("the replace guard is a new name");
    context
}

/// One evaluation scope: variables and a cost counter shared by every
/// expression evaluated in it, over the environment's function table.
pub struct Evaluation<'e> {
    context: Context<'e, 'static>,
    spent: Arc<AtomicU64>,
    budget: u64,
}

impl<'e> Evaluation<'e> {
    fn new(environment: &'e Environment) -> Self {
        Evaluation {
            context: environment.functions.new_inner_scope(),
            spent: Arc::new(AtomicU64::new(0)),
            budget: environment.limits.cost_budget,
        }
    }

    /// Binds a top-level variable.
    pub fn set(&mut self, name: &str, value: Value) {
        self.context.add_variable_from_value(name.to_owned(), value);
    }

    /// Cost spent so far.
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Evaluates a compiled expression in this scope.
    pub fn eval(&self, compiled: &Compiled) -> Result<Value, EvalError> {
        let meter = Meter {
            spent: self.spent.clone(),
            budget: self.budget,
        };
        let outer = METER.with(|running| running.replace(Some(meter)));
        let result = Value::resolve(&compiled.expr, &self.context);
        METER.with(|running| running.replace(outer));
        if self.spent() > self.budget {
            return Err(EvalError::CostExceeded(self.budget));
        }
        result.map_err(|e| match e {
            // The Kubernetes libraries' errors are the API server's
            // messages, without the interpreter's prefix.
            ExecutionError::FunctionError { function, message }
                if library::PROVIDED_FUNCTIONS[library::KUBERNETES_LIBRARIES_FROM..]
                    .contains(&function.as_str()) =>
            {
                EvalError::Execution(message)
            }
            e => EvalError::Execution(e.to_string()),
        })
    }
}

mod lexical;

#[cfg(test)]
mod tests;
