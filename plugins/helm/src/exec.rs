//! Go `text/template` execution: walking trees with dot and variables,
//! under step, output and depth budgets.

use std::fmt;
use std::rc::Rc;

use crate::funcs;
use crate::parse::{
    Arg, BranchKind, Cmd, Func, FuncKind, List, Node, Number, Parsed, Pipe, Pos, Trees,
};
use crate::value::Value;

/// Budgets that stop a hostile chart. Defaults are far above what real
/// charts use (the largest public charts take well under a million steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Template steps (actions, loop iterations, function calls) in one
    /// render. Default [`Limits::DEFAULT_STEPS`].
    pub max_steps: u64,
    /// Bytes of template output (all templates, `include` results and
    /// strings functions build) in one render. Default
    /// [`Limits::DEFAULT_OUTPUT`].
    pub max_output: usize,
    /// Nesting of `template`/`include`/`tpl` calls. Default
    /// [`Limits::DEFAULT_DEPTH`].
    pub max_depth: usize,
    /// Work units of the expensive random and crypto functions (RSA keys,
    /// scrypt, bcrypt; see [`crate::random`]) in one render. Default
    /// [`Limits::DEFAULT_CRYPTO_WORK`].
    pub max_crypto_work: u64,
}

impl Limits {
    /// Default step budget: 50 million.
    pub const DEFAULT_STEPS: u64 = 50_000_000;
    /// Default output budget: 64 MiB.
    pub const DEFAULT_OUTPUT: usize = 64 << 20;
    /// Default call depth: 100. (Helm allows 1000 `include`s deep; the
    /// sandbox's stack does not, and real charts nest a handful.)
    pub const DEFAULT_DEPTH: usize = 100;
    /// Default crypto work: [`crate::random::DEFAULT_CRYPTO_WORK`].
    pub const DEFAULT_CRYPTO_WORK: u64 = crate::random::DEFAULT_CRYPTO_WORK;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: Self::DEFAULT_STEPS,
            max_output: Self::DEFAULT_OUTPUT,
            max_depth: Self::DEFAULT_DEPTH,
            max_crypto_work: Self::DEFAULT_CRYPTO_WORK,
        }
    }
}

/// A template that fails while running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// Go's execution error: `template: NAME:LINE:COL: executing "NAME" at
    /// <...>: MESSAGE`.
    #[error("template: {name}:{line}:{col}: executing \"{name}\" at <{context}>: {message}")]
    Go {
        /// Template name.
        name: String,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The action, as written (shortened).
        context: String,
        /// What went wrong.
        message: String,
    },
    /// `fail` / `required`, as Helm words them.
    #[error("execution error at ({name}:{line}:{col}): {message}")]
    Helm {
        /// Template name.
        name: String,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The chart's message.
        message: String,
    },
    /// A budget ran out.
    #[error("{name}:{line}: {what} (a limit against hostile charts)")]
    Limit {
        /// Template name.
        name: String,
        /// Line.
        line: usize,
        /// Which budget, and its value.
        what: String,
    },
    /// A template that does not parse (from `tpl`).
    #[error(transparent)]
    Parse(#[from] crate::parse::ParseError),
    /// No such template.
    #[error("template: no template {0:?} associated with template \"gotpl\"")]
    NoTemplate(String),
}

/// What a function call reports: a message (Go wraps it with `error
/// calling NAME:`), a Helm-worded failure, or a budget.
#[derive(Debug)]
pub enum FnError {
    /// A plain error.
    Msg(String),
    /// `fail`/`required`: printed without Go's wrapping.
    Helm(String),
    /// An already-located error (from a nested template).
    Nested(ExecError),
}

impl From<String> for FnError {
    fn from(s: String) -> Self {
        FnError::Msg(s)
    }
}

impl From<&str> for FnError {
    fn from(s: &str) -> Self {
        FnError::Msg(s.to_owned())
    }
}

impl From<ExecError> for FnError {
    fn from(e: ExecError) -> Self {
        FnError::Nested(e)
    }
}

enum Flow {
    Normal,
    Break,
    Continue,
}

/// Templates a `tpl` call adds while its text runs: Go runs the text in a
/// clone of the template set with the text's templates added; the clone
/// is this layer over the set (nothing copied).
struct Layer {
    /// The name the text was parsed as (its main tree's name): Helm's
    /// `gotpl`.
    name: Rc<str>,
    /// The text's templates.
    parsed: Rc<Parsed>,
    /// The template whose `tpl` call (directly, or through `tpl` texts)
    /// brought the text: the random functions' call sites in the text are
    /// counted as its, as they were when texts ran under its name.
    site_name: Rc<str>,
}

impl Layer {
    /// Template `name` of this layer, and whether it is the text itself.
    fn get(&self, name: &str) -> Option<(Rc<str>, Rc<List>, bool)> {
        if *self.name == *name {
            return Some((self.name.clone(), self.parsed.main.clone(), true));
        }
        self.parsed
            .defined
            .get_key_value(name)
            .map(|(n, l)| (n.clone(), l.clone(), false))
    }
}

/// The templates by name, found by one hash and one word-wise comparison
/// (every `include` and `template` looks its template up; chart template
/// names share long prefixes, which a sorted map compares a byte at a time
/// inside WebAssembly): each name with its shared name and tree.
type TemplateIndex = crate::textmap::TextMap<Rc<str>, (Rc<str>, Rc<List>)>;

fn template_index(trees: &Trees) -> TemplateIndex {
    let mut index = TemplateIndex::with_capacity(trees.len());
    for (name, tree) in trees {
        index.insert(name.clone(), (name.clone(), tree.clone()));
    }
    index
}

/// Shared state of one render: templates, budgets, the random seed.
pub struct Runtime {
    /// Every template of the chart and its subcharts.
    pub trees: Rc<Trees>,
    /// [`Runtime::trees`] by name.
    index: TemplateIndex,
    /// Budgets.
    pub limits: Limits,
    /// Steps taken.
    pub steps: u64,
    /// Output bytes produced.
    pub output: usize,
    /// Current call depth.
    pub depth: usize,
    /// The random functions' keys and call counts ([`crate::random`]).
    pub random: crate::random::Randomness,
    /// The render's clock ([`crate::render::Options::now`]).
    pub now: chrono::DateTime<chrono::Utc>,
    /// The templates of the running `tpl` calls, innermost last.
    layers: Vec<Layer>,
    /// The variables of every running template: each template's scope is
    /// the part above its [`State::vars_base`].
    vars: Vec<Var>,
    /// The output of every running template: each template appends from
    /// its start; `include` takes its part off the end.
    out: String,
    /// `$`, the variable every template starts with.
    dollar: Rc<str>,
    /// `gotpl`, the name `tpl` gives a text.
    gotpl: Rc<str>,
    /// The texts `tpl` parsed.
    tpl_cache: crate::tplcache::TplCache,
    /// The values `fromYaml` read.
    pub yaml_cache: crate::yamlcache::YamlCache,
    /// Emptied argument vectors of finished calls ([`Runtime::arg_vec`]).
    arg_vecs: Vec<Vec<Value>>,
    /// The texts `include` gave ([`crate::incmemo`]).
    pub memo: crate::incmemo::IncludeMemo,
    /// The deepest [`Runtime::depth`] reached since the running
    /// memoizable `include` started.
    peak_depth: usize,
    /// Go's `missingkey=error`: a field of a map that has no such key is
    /// an error (`map has no entry for key`), not nil. Helm never sets
    /// it; Argo CD's ApplicationSet templates may.
    pub missing_key_error: bool,
}

/// Most argument vectors kept for reuse (one per nesting level of calls
/// in arguments is what a template uses).
/// The name Helm's `tpl` parses a text as (its engine's root template).
pub const TPL_NAME: &str = "gotpl";

const MAX_FREE_ARG_VECS: usize = 64;
/// Largest argument vector kept for reuse (a `dict` or `list` call with
/// thousands of arguments gives its memory back).
const MAX_RECYCLED_ARGS: usize = 64;

impl Runtime {
    /// A runtime over `trees`.
    pub fn new(trees: Trees, limits: Limits) -> Self {
        Runtime {
            index: template_index(&trees),
            trees: Rc::new(trees),
            limits,
            steps: 0,
            output: 0,
            depth: 0,
            random: crate::random::Randomness::default(),
            now: chrono::DateTime::UNIX_EPOCH,
            layers: Vec::new(),
            vars: Vec::new(),
            out: String::new(),
            dollar: Rc::from("$"),
            gotpl: Rc::from(TPL_NAME),
            tpl_cache: crate::tplcache::TplCache::default(),
            yaml_cache: crate::yamlcache::YamlCache::default(),
            arg_vecs: Vec::new(),
            memo: crate::incmemo::IncludeMemo::default(),
            peak_depth: 0,
            missing_key_error: false,
        }
    }

    /// Executes template `name` with `dot`, returning its text.
    pub fn execute(&mut self, name: &str, dot: Value) -> Result<String, ExecError> {
        let Some((name, tree)) = self.tree(name) else {
            return Err(ExecError::NoTemplate(name.to_owned()));
        };
        self.vars.clear();
        self.out.clear();
        let mut st = State::enter(self, name, dot.clone());
        let r = st.walk_list(&dot, &tree);
        st.leave();
        r?;
        Ok(std::mem::take(&mut self.out))
    }

    /// Template `name` (its shared name and tree) as the running
    /// templates see it: the innermost `tpl` text's first.
    fn tree(&self, name: &str) -> Option<(Rc<str>, Rc<List>)> {
        // A `tpl` text runs as itself (Helm parses it as "gotpl", a name no
        // template holds); a template it defines with an empty body yields
        // to an older one of the name, as Go keeps a template rather than
        // replace it with an empty one.
        let mut empty = None;
        for layer in self.layers.iter().rev() {
            if let Some((n, l, main)) = layer.get(name) {
                if main || !crate::parse::is_empty_tree(&l) {
                    return Some((n, l));
                }
                empty.get_or_insert((n, l));
            }
        }
        self.index.get(name).cloned().or(empty)
    }

    /// Charges `bytes` of produced text against the output budget.
    pub fn charge_output(&mut self, bytes: usize, pos: &Pos) -> Result<(), ExecError> {
        self.charge(bytes, &pos.name, pos.line)
    }

    /// [`Runtime::charge_output`] for text at `line` of template `name`.
    fn charge(&mut self, bytes: usize, name: &str, line: usize) -> Result<(), ExecError> {
        self.output += bytes;
        if self.output > self.limits.max_output {
            return Err(ExecError::Limit {
                name: name.to_owned(),
                line,
                what: format!("output exceeds {} bytes", self.limits.max_output),
            });
        }
        Ok(())
    }

    fn step(&mut self, pos: &Pos) -> Result<(), ExecError> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return Err(ExecError::Limit {
                name: pos.name.to_string(),
                line: pos.line,
                what: format!("more than {} template steps", self.limits.max_steps),
            });
        }
        Ok(())
    }

    /// An empty vector for a call's arguments, reused from an earlier call
    /// when one is free.
    fn arg_vec(&mut self) -> Vec<Value> {
        self.arg_vecs.pop().unwrap_or_default()
    }

    /// Takes back a call's argument vector (emptied) for the next call,
    /// keeping at most [`MAX_FREE_ARG_VECS`] small ones.
    fn recycle_arg_vec(&mut self, mut values: Vec<Value>) {
        values.clear();
        if self.arg_vecs.len() < MAX_FREE_ARG_VECS && values.capacity() <= MAX_RECYCLED_ARGS {
            self.arg_vecs.push(values);
        }
    }

    /// The parse of `tpl` text `text` as template `name`, from the cache
    /// when it was parsed before.
    fn parse_tpl(&mut self, name: &Rc<str>, text: &str) -> Result<Rc<Parsed>, ExecError> {
        if let Some(parsed) = self.tpl_cache.get(name, text) {
            return Ok(parsed);
        }
        let parsed = Rc::new(crate::parse::parse_text(name, text, &funcs::exists)?);
        self.tpl_cache.insert(name, text, parsed.clone());
        Ok(parsed)
    }
}

/// A template variable.
#[derive(Debug)]
struct Var {
    name: Rc<str>,
    value: Value,
    /// Whether `range` bound it to an item. Go tells two nils apart: an
    /// item (or a map's entry) that is nil is a nil interface, and a field
    /// of it is an error (`nil pointer evaluating interface {}.x`); a
    /// pipeline that gives nil gives no value at all (Go's invalid
    /// `reflect.Value`), and every field of that is no value, without an
    /// error. A variable `:=` or `=` binds, and a template's nil data (its
    /// dot and `$`), are the second kind.
    item: bool,
}

impl Var {
    fn bound(name: Rc<str>, value: Value) -> Self {
        Var {
            name,
            value,
            item: false,
        }
    }

    fn item(name: Rc<str>, value: Value) -> Self {
        Var {
            name,
            value,
            item: true,
        }
    }
}

/// Execution of one template body.
pub struct State<'r> {
    /// The render's runtime.
    pub rt: &'r mut Runtime,
    /// Where this template's variables start in [`Runtime::vars`].
    vars_base: usize,
    /// Name of the template being executed.
    pub name: Rc<str>,
    /// Whether the dot is an item `range` bound (see [`Var::item`]): true
    /// inside a range body until a template call or another range.
    dot_is_item: bool,
}

impl<'r> State<'r> {
    /// Starts template `name` with `dot`: a scope of its own holding `$`.
    fn enter(rt: &'r mut Runtime, name: Rc<str>, dot: Value) -> Self {
        let vars_base = rt.vars.len();
        let dollar = rt.dollar.clone();
        rt.vars.push(Var::bound(dollar, dot));
        State {
            rt,
            vars_base,
            name,
            dot_is_item: false,
        }
    }

    /// Ends the template: its variables are dropped.
    fn leave(&mut self) {
        self.rt.vars.truncate(self.vars_base);
    }
}

impl State<'_> {
    fn err(&self, pos: &Pos, context: impl fmt::Display, message: impl Into<String>) -> ExecError {
        ExecError::Go {
            name: pos.name.to_string(),
            line: pos.line,
            col: pos.col,
            context: context.to_string(),
            message: message.into(),
        }
    }

    fn write(&mut self, s: &str, pos: &Pos) -> Result<(), ExecError> {
        self.rt.charge_output(s.len(), pos)?;
        self.rt.out.push_str(s);
        Ok(())
    }

    /// Writes template text (an error names the template, line 0).
    fn write_text(&mut self, s: &str) -> Result<(), ExecError> {
        self.rt.charge(s.len(), &self.name, 0)?;
        self.rt.out.push_str(s);
        Ok(())
    }

    /// Writes what an action prints: `<no value>` for nil, else `%v`.
    fn write_value(&mut self, v: &Value, pos: &Pos) -> Result<(), ExecError> {
        if let Value::Str(s) = v {
            return self.write(s, pos);
        }
        // Printed in place, then charged (nothing kept when over budget).
        let start = self.rt.out.len();
        v.write_template(&mut self.rt.out);
        let printed = self.rt.out.len() - start;
        if let Err(e) = self.rt.charge_output(printed, pos) {
            self.rt.out.truncate(start);
            return Err(e);
        }
        Ok(())
    }

    fn walk_list(&mut self, dot: &Value, list: &List) -> Result<Flow, ExecError> {
        for node in list {
            match self.walk(dot, node)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Value, node: &Node) -> Result<Flow, ExecError> {
        match node {
            Node::Text(t) => self.write_text(t)?,
            Node::Action(pipe) => {
                self.rt.step(&pipe.pos)?;
                let v = self.eval_pipe(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.write_value(&v, &pipe.pos)?;
                }
            }
            Node::Branch {
                kind,
                pipe,
                list,
                else_list,
            } => {
                self.rt.step(&pipe.pos)?;
                let mark = self.rt.vars.len();
                let flow = match kind {
                    BranchKind::If | BranchKind::With => {
                        let v = self.eval_pipe(dot, pipe)?;
                        if v.truth() {
                            let inner = if *kind == BranchKind::With {
                                v
                            } else {
                                dot.clone()
                            };
                            self.walk_list(&inner, list)?
                        } else if let Some(e) = else_list {
                            self.walk_list(dot, e)?
                        } else {
                            Flow::Normal
                        }
                    }
                    BranchKind::Range => self.range(dot, pipe, list, else_list.as_ref())?,
                };
                self.rt.vars.truncate(mark);
                return Ok(flow);
            }
            Node::Template { pos, name, pipe } => {
                self.rt.step(pos)?;
                let inner = match pipe {
                    Some(p) => self.eval_pipe(dot, p)?,
                    None => Value::Nil,
                };
                // The output lands in place, after this template's.
                self.run_template(name, inner, pos)?;
            }
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    /// Runs template `name` with `dot` in its own variable scope, its
    /// output appended to this template's (nothing appended on error).
    fn run_template(&mut self, name: &str, dot: Value, pos: &Pos) -> Result<(), ExecError> {
        let (name, tree) = self.resolve(name, pos)?;
        self.run_tree(name, &tree, dot, pos)
    }

    /// Template `name` (its shared name and tree), or Go's error.
    fn resolve(&self, name: &str, pos: &Pos) -> Result<(Rc<str>, Rc<List>), ExecError> {
        self.rt.tree(name).ok_or_else(|| {
            self.err(
                pos,
                format!("template {name:?}"),
                format!("template {name:?} not defined"),
            )
        })
    }

    /// [`State::run_template`] of a resolved template.
    fn run_tree(
        &mut self,
        name: Rc<str>,
        tree: &Rc<List>,
        dot: Value,
        pos: &Pos,
    ) -> Result<(), ExecError> {
        if self.rt.depth >= self.rt.limits.max_depth {
            return Err(ExecError::Limit {
                name: pos.name.to_string(),
                line: pos.line,
                what: format!(
                    "rendering template has a nested reference name: {name}: more than {} nested template calls",
                    self.rt.limits.max_depth
                ),
            });
        }
        self.rt.depth += 1;
        self.rt.peak_depth = self.rt.peak_depth.max(self.rt.depth);
        let start = self.rt.out.len();
        let mut st = State::enter(&mut *self.rt, name, dot.clone());
        let r = st.walk_list(&dot, tree);
        st.leave();
        self.rt.depth -= 1;
        if r.is_err() {
            self.rt.out.truncate(start);
        }
        r.map(|_| ())
    }

    /// Runs template `name` with `dot` in its own variable scope and
    /// returns its text (`include`); the text of an earlier call with the
    /// same template and dot when the memo kept it ([`crate::incmemo`]).
    pub fn call_template(&mut self, name: &str, dot: Value, pos: &Pos) -> Result<Value, ExecError> {
        let (name, tree) = self.resolve(name, pos)?;
        if !self.rt.layers.is_empty() {
            // A `tpl` text's templates are in play: not memoized.
            return self.capture(name, &tree, dot, pos);
        }
        // The chart's templates live as long as the render: their
        // addresses are theirs (templates of `tpl` texts are not memoized).
        let key = (
            Rc::as_ptr(&name) as *const u8 as usize,
            Rc::as_ptr(&tree) as usize,
        );
        let room = self.rt.limits.max_depth.saturating_sub(self.rt.depth);
        if let Some((text, used)) = self.rt.memo.get(key, &dot, room) {
            // The nesting the call would have reached counts for the calls
            // running (a memoizable one keeps it with its text); the
            // `include` that asked has taken its step.
            self.rt.peak_depth = self.rt.peak_depth.max(self.rt.depth + used);
            self.rt.charge_output(text.len(), pos)?;
            return Ok(Value::Str(text));
        }
        let call = self.rt.memo.begin();
        let draws = self.rt.random.draws();
        let outer_peak = std::mem::replace(&mut self.rt.peak_depth, self.rt.depth);
        let result = self.capture(name.clone(), &tree, dot.clone(), pos);
        let used = self.rt.peak_depth - self.rt.depth;
        self.rt.peak_depth = outer_peak.max(self.rt.peak_depth);
        let clean = self.rt.memo.end(&call) && draws == self.rt.random.draws();
        let text = result?;
        if clean && let Value::Str(s) = &text {
            self.rt.memo.keep(key, &dot, call, used, s.clone());
        }
        Ok(text)
    }

    /// Runs a resolved template and returns its text.
    fn capture(
        &mut self,
        name: Rc<str>,
        tree: &Rc<List>,
        dot: Value,
        pos: &Pos,
    ) -> Result<Value, ExecError> {
        let start = self.rt.out.len();
        self.run_tree(name, tree, dot, pos)?;
        let text = Value::str(&self.rt.out[start..]);
        self.rt.out.truncate(start);
        Ok(text)
    }

    /// Helm's `tpl`: `text` parsed as a template named `gotpl` (Helm's
    /// `t.New(parent.Name())`, the parent being its root template), among
    /// the chart's templates (and those it defines, for this call only),
    /// run with `dot` (the text itself, even when it is empty); its text
    /// without `<no value>`. The text does not shadow the running
    /// template: bitnami's `common.tplvalues.render` renders values whose
    /// text includes `common.tplvalues.render` again.
    pub fn call_tpl(&mut self, text: &str, dot: Value, pos: &Pos) -> Result<Value, ExecError> {
        let name = self.rt.gotpl.clone();
        let parsed = self.rt.parse_tpl(&name, text)?;
        let site_name = self.random_site_name();
        self.rt.layers.push(Layer {
            name: name.clone(),
            parsed,
            site_name,
        });
        let result = self.call_template(&name, dot, pos);
        self.rt.layers.pop();
        // Helm drops `<no value>` from what `tpl` returns.
        match result? {
            Value::Str(s) if kiln_bytes::find(&s, "<no value>").is_some() => {
                Ok(Value::str(s.replace("<no value>", "")))
            }
            other => Ok(other),
        }
    }

    fn range(
        &mut self,
        dot: &Value,
        pipe: &Pipe,
        list: &List,
        else_list: Option<&List>,
    ) -> Result<Flow, ExecError> {
        // The declared variables are bound per iteration, not to the value.
        let decl = pipe.decl.as_slice();
        let v = self.eval_cmds(dot, pipe)?;
        let want_keys = decl.len() > 1;
        let items: Vec<(Value, Value)> = match &v {
            Value::Nil => Vec::new(),
            // A list cannot change while it is ranged over: no copy.
            Value::List(l) | Value::Strings(l) => {
                if l.is_empty() {
                    Vec::new()
                } else {
                    return self.range_list(l.clone(), decl, pipe, list);
                }
            }
            Value::Map(m) => m
                .borrow()
                .iter()
                .map(|(k, x)| (key_value(want_keys, k), x.clone()))
                .collect(),
            Value::Files(f) => f
                .entries()
                .iter()
                .map(|(k, x)| {
                    (
                        key_value(want_keys, k),
                        Value::Bytes(Rc::from(x.as_slice())),
                    )
                })
                .collect(),
            Value::ApiVersions(l) => l
                .iter()
                .enumerate()
                .map(|(i, x)| (Value::Int(i as i64), Value::str(x)))
                .collect(),
            Value::Int(n) | Value::Int64(n) => {
                return self.range_count(dot, &v, *n, decl, pipe, list, else_list);
            }
            other => {
                return Err(self.err(
                    &pipe.pos,
                    "range",
                    format!("range can't iterate over {}", other.to_go_string()),
                ));
            }
        };
        if items.is_empty() {
            if let Some(e) = else_list {
                return self.walk_list(dot, e);
            }
            return Ok(Flow::Normal);
        }
        for (k, item) in items {
            if let Flow::Break = self.range_step(k, item, decl, pipe, list)? {
                break;
            }
        }
        Ok(Flow::Normal)
    }

    /// Ranges over the items of a (non-empty) list.
    fn range_list(
        &mut self,
        items: Rc<Vec<Value>>,
        decl: &[Rc<str>],
        pipe: &Pipe,
        list: &List,
    ) -> Result<Flow, ExecError> {
        for (i, item) in items.iter().enumerate() {
            let k = Value::Int(i as i64);
            if let Flow::Break = self.range_step(k, item.clone(), decl, pipe, list)? {
                break;
            }
        }
        Ok(Flow::Normal)
    }

    /// One iteration of a range: a step, the variables bound, the body.
    fn range_step(
        &mut self,
        k: Value,
        item: Value,
        decl: &[Rc<str>],
        pipe: &Pipe,
        list: &List,
    ) -> Result<Flow, ExecError> {
        self.rt.step(&pipe.pos)?;
        let mark = self.rt.vars.len();
        match decl {
            [] => {}
            [v] => self.rt.vars.push(Var::item(v.clone(), item.clone())),
            [key, v, ..] => {
                self.rt.vars.push(Var::item(key.clone(), k));
                self.rt.vars.push(Var::item(v.clone(), item.clone()));
            }
        }
        let outer = std::mem::replace(&mut self.dot_is_item, true);
        let flow = self.walk_list(&item, list);
        self.dot_is_item = outer;
        self.rt.vars.truncate(mark);
        flow
    }

    /// Ranges over `0..n` (Go 1.22's range over an int), lazily: a huge
    /// count is stopped by the step budget.
    #[allow(clippy::too_many_arguments)]
    fn range_count(
        &mut self,
        dot: &Value,
        v: &Value,
        n: i64,
        decl: &[Rc<str>],
        pipe: &Pipe,
        list: &List,
        else_list: Option<&List>,
    ) -> Result<Flow, ExecError> {
        if decl.len() > 1 {
            return Err(self.err(
                &pipe.pos,
                "range",
                format!("can't use {n} to iterate over more than one variable"),
            ));
        }
        let mark = self.rt.vars.len();
        let mut i = 0i64;
        while i < n {
            self.rt.step(&pipe.pos)?;
            let item = if matches!(v, Value::Int(_)) {
                Value::Int(i)
            } else {
                Value::Int64(i)
            };
            if let Some(d) = decl.first() {
                self.rt.vars.push(Var::item(d.clone(), item.clone()));
            }
            let flow = self.walk_list(&item, list)?;
            self.rt.vars.truncate(mark);
            if let Flow::Break = flow {
                break;
            }
            i += 1;
        }
        if n <= 0
            && let Some(e) = else_list
        {
            return self.walk_list(dot, e);
        }
        Ok(Flow::Normal)
    }

    /// Evaluates a pipeline, binding its declared variables.
    pub fn eval_pipe(&mut self, dot: &Value, pipe: &Pipe) -> Result<Value, ExecError> {
        let value = self.eval_cmds(dot, pipe)?;
        self.bind(pipe, &value);
        Ok(value)
    }

    /// Evaluates a pipeline's commands (its variables left unbound).
    fn eval_cmds(&mut self, dot: &Value, pipe: &Pipe) -> Result<Value, ExecError> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_cmd(dot, cmd, value)?);
        }
        Ok(value.unwrap_or_default())
    }

    /// Binds a pipeline's declared variables to `value` (`:=` declares,
    /// `=` assigns the innermost of this template's).
    fn bind(&mut self, pipe: &Pipe, value: &Value) {
        for name in &pipe.decl {
            if pipe.is_assign {
                if let Some(slot) = self.rt.vars[self.vars_base..]
                    .iter_mut()
                    .rev()
                    .find(|v| *v.name == **name)
                {
                    *slot = Var::bound(name.clone(), value.clone());
                }
            } else {
                self.rt.vars.push(Var::bound(name.clone(), value.clone()));
            }
        }
    }

    /// Variable `name` of this template (nil when unbound).
    fn var(&self, name: &str) -> Value {
        self.var_slot(name)
            .map(|v| v.value.clone())
            .unwrap_or_default()
    }

    fn var_slot(&self, name: &str) -> Option<&Var> {
        self.rt.vars[self.vars_base..]
            .iter()
            .rev()
            .find(|v| kiln_bytes::eq(v.name.as_bytes(), name.as_bytes()))
    }

    /// Whether variable `name` holds Go's invalid value (see
    /// [`Var::item`]): its fields are no value, without an error.
    fn var_is_invalid(&self, name: &str) -> bool {
        self.var_slot(name)
            .is_none_or(|v| !v.item && matches!(v.value, Value::Nil))
    }

    /// Whether the dot is Go's invalid value: a nil dot other than an item
    /// `range` bound (a template's nil data).
    fn dot_is_invalid(&self, dot: &Value) -> bool {
        !self.dot_is_item && matches!(dot, Value::Nil)
    }

    fn eval_cmd(
        &mut self,
        dot: &Value,
        cmd: &Cmd,
        last: Option<Value>,
    ) -> Result<Value, ExecError> {
        let first = &cmd.args[0];
        let has_more = cmd.args.len() > 1 || last.is_some();
        match first {
            Arg::Ident(func) => {
                let args = (&cmd.args[1..], &cmd.at[1..]);
                self.call_fn(dot, func, args, last, &cmd.pos, Ctx::Cmd(cmd))
            }
            Arg::Field(_) if self.dot_is_invalid(dot) => Ok(Value::Nil),
            Arg::Field(fields) => {
                let args = self.eval_args(dot, cmd, last)?;
                self.eval_fields(dot.clone(), fields, args, &cmd.at[0], Ctx::Dot(fields))
            }
            Arg::Variable(v, fields) => {
                let base = self.var(v);
                if fields.is_empty() {
                    if has_more {
                        return Err(self.err(
                            &cmd.pos,
                            v,
                            format!("can't give argument to non-function {v}"),
                        ));
                    }
                    return Ok(base);
                }
                if self.var_is_invalid(v) {
                    return Ok(Value::Nil);
                }
                let args = self.eval_args(dot, cmd, last)?;
                self.eval_fields(base, fields, args, &cmd.at[0], Ctx::Var(v, fields))
            }
            Arg::Pipe(p, fields) => {
                let base = self.eval_pipe(dot, p)?;
                if fields.is_empty() {
                    if has_more {
                        return Err(self.err(
                            &cmd.pos,
                            "(...)",
                            "can't give argument to non-function",
                        ));
                    }
                    return Ok(base);
                }
                // A pipeline's nil is Go's invalid value.
                if matches!(base, Value::Nil) {
                    return Ok(Value::Nil);
                }
                let args = self.eval_args(dot, cmd, last)?;
                self.eval_fields(base, fields, args, &cmd.at[0], Ctx::chain_of(p, fields))
            }
            Arg::Nil => Err(self.err(&cmd.pos, "nil", "nil is not a command")),
            other => {
                if has_more {
                    return Err(self.err(
                        &cmd.pos,
                        "",
                        format!("can't give argument to non-function {}", arg_text(other)),
                    ));
                }
                self.eval_arg(dot, other, &cmd.at[0])
            }
        }
    }

    /// The operands of `cmd` after its first, then `last`.
    fn eval_args(
        &mut self,
        dot: &Value,
        cmd: &Cmd,
        last: Option<Value>,
    ) -> Result<Vec<Value>, ExecError> {
        let args = &cmd.args[1..];
        if args.is_empty() {
            // `.a.b` alone: no vector allocated.
            return Ok(last.into_iter().collect());
        }
        let mut out = Vec::with_capacity(args.len() + 1);
        for (a, at) in args.iter().zip(&cmd.at[1..]) {
            out.push(self.eval_arg(dot, a, at)?);
        }
        out.extend(last);
        Ok(out)
    }

    /// The value of an operand at `at` (where its errors are).
    fn eval_arg(&mut self, dot: &Value, arg: &Arg, at: &Pos) -> Result<Value, ExecError> {
        Ok(match arg {
            Arg::Dot => dot.clone(),
            Arg::Nil => Value::Nil,
            Arg::Bool(b) => Value::Bool(*b),
            Arg::Number(Number::Int(i)) => Value::Int(*i),
            Arg::Number(Number::Float(f)) => Value::Float(*f),
            Arg::Str(s) => Value::Str(s.clone()),
            Arg::Field(_) if self.dot_is_invalid(dot) => Value::Nil,
            Arg::Field(fields) => self.fields_of(dot.clone(), fields, at, Ctx::Dot(fields))?,
            Arg::Variable(v, fields) => {
                let base = self.var(v);
                if fields.is_empty() || self.var_is_invalid(v) {
                    base
                } else {
                    self.fields_of(base, fields, at, Ctx::Var(v, fields))?
                }
            }
            Arg::Pipe(p, fields) => {
                let base = self.eval_pipe(dot, p)?;
                // A pipeline's nil is Go's invalid value.
                if fields.is_empty() || matches!(base, Value::Nil) {
                    base
                } else {
                    self.eval_fields(base, fields, Vec::new(), at, Ctx::chain_of(p, fields))?
                }
            }
            Arg::Ident(func) => {
                self.call_fn(dot, func, (&[], &[]), None, at, Ctx::Text(&func.name))?
            }
        })
    }

    /// The fields of `v` as an operand: maps looked up without building
    /// an error position unless one is needed.
    fn fields_of(
        &mut self,
        v: Value,
        fields: &[String],
        at: &Pos,
        ctx: Ctx<'_>,
    ) -> Result<Value, ExecError> {
        if !self.rt.missing_key_error
            && let Some(found) = map_fields(&v, fields)
        {
            return Ok(found);
        }
        self.eval_fields(v, fields, Vec::new(), at, ctx)
    }
    fn eval_fields(
        &mut self,
        mut v: Value,
        fields: &[String],
        args: Vec<Value>,
        pos: &Pos,
        context: Ctx<'_>,
    ) -> Result<Value, ExecError> {
        let n = fields.len();
        let mut args = Some(args);
        for (i, f) in fields.iter().enumerate() {
            let call_args = if i + 1 == n {
                args.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            v = match &v {
                Value::Map(m) => {
                    if !call_args.is_empty() {
                        return Err(self.err(
                            pos,
                            context,
                            format!("{f} is not a method but has arguments"),
                        ));
                    }
                    if self.rt.missing_key_error && m.field(f).is_none() {
                        return Err(self.err(
                            pos,
                            context,
                            format!("map has no entry for key {f:?}"),
                        ));
                    }
                    m.method_or_field(f)
                }
                Value::Files(files) => crate::files::method(files, f, &call_args)
                    .map_err(|m| self.err(pos, context, format!("error calling {f}: {m}")))?,
                Value::Time(t) => {
                    crate::dates::method(t, f, &call_args).map_err(|m| self.err(pos, context, m))?
                }
                Value::Go(o) => o
                    .method(f, &call_args)
                    .map_err(|m| self.err(pos, context, m))?,
                Value::ApiVersions(list) => match f.as_str() {
                    "Has" => {
                        let [Value::Str(s)] = call_args.as_slice() else {
                            return Err(self.err(
                                pos,
                                context,
                                "wrong number of args for Has: want 1",
                            ));
                        };
                        Value::Bool(list.iter().any(|x| **x == **s))
                    }
                    _ => {
                        return Err(self.err(
                            pos,
                            context,
                            format!("can't evaluate field {f} in type common.VersionSet"),
                        ));
                    }
                },
                Value::Nil => {
                    return Err(self.err(
                        pos,
                        context,
                        format!("nil pointer evaluating interface {{}}.{f}"),
                    ));
                }
                other => {
                    return Err(self.err(
                        pos,
                        context,
                        format!("can't evaluate field {f} in type {}", other.type_name()),
                    ));
                }
            };
        }
        Ok(v)
    }

    fn call_fn(
        &mut self,
        dot: &Value,
        func: &Func,
        (args, at): (&[Arg], &[Pos]),
        last: Option<Value>,
        pos: &Pos,
        context: Ctx<'_>,
    ) -> Result<Value, ExecError> {
        self.rt.step(pos)?;
        let name = func.name.as_str();
        if func.kind == FuncKind::AndOr {
            return self.and_or(dot, name, (args, at), last, pos);
        }
        let mut values = self.rt.arg_vec();
        for (a, at) in args.iter().zip(at) {
            values.push(self.eval_arg(dot, a, at)?);
        }
        values.extend(last);
        if let Some(arity) = func.builtin.and_then(funcs::Arity::of)
            && let Err(message) = arity.check(name, values.len())
        {
            self.rt.recycle_arg_vec(values);
            return Err(self.err(pos, context, message));
        }
        if let Some(params) = func.builtin.and_then(funcs::MapParams::of) {
            self.check_map_params(dot, params, args, &values, pos, context)?;
        }
        if let Some(types) = funcs::scalar_params(name) {
            self.check_scalar_params(dot, types, args, &values, pos, context)?;
        }
        let result = match func.kind {
            FuncKind::Nested => funcs::call_nested(self, name, &values, pos),
            FuncKind::Random => {
                // A random call's stream is keyed by the call as written,
                // in the template that holds it (for a `tpl` text, the one
                // that called `tpl`).
                self.rt.random.set_site(context.to_string());
                if *pos.name == *self.rt.gotpl && !self.rt.layers.is_empty() {
                    let site = Pos {
                        name: self.random_site_name(),
                        ..pos.clone()
                    };
                    funcs::call(self, name, &values, &site)
                } else {
                    funcs::call(self, name, &values, pos)
                }
            }
            FuncKind::AndOr | FuncKind::Plain => {
                funcs::call_plain(self, func.builtin, name, &values)
            }
        };
        self.rt.recycle_arg_vec(values);
        match result {
            Ok(v) => {
                if let Value::Str(s) = &v
                    && s.len() > self.rt.limits.max_output
                {
                    return Err(ExecError::Limit {
                        name: pos.name.to_string(),
                        line: pos.line,
                        what: format!(
                            "{name} built a string over {} bytes",
                            self.rt.limits.max_output
                        ),
                    });
                }
                Ok(v)
            }
            Err(FnError::Msg(m)) => {
                Err(self.err(pos, context, format!("error calling {name}: {m}")))
            }
            Err(FnError::Helm(m)) => Err(ExecError::Helm {
                name: pos.name.to_string(),
                line: pos.line,
                col: pos.col,
                message: m,
            }),
            // `fail`/`required` under `include`/`tpl`: Helm names the
            // outermost call's place (the first of Go's error chain).
            Err(FnError::Nested(ExecError::Helm { message, .. })) => Err(ExecError::Helm {
                name: pos.name.to_string(),
                line: pos.line,
                col: pos.col,
                message,
            }),
            Err(FnError::Nested(e)) => Err(e),
        }
    }

    /// Go's check of the arguments given to `map[string]interface{}`
    /// parameters: a map passes, and so does a nil that is no value (as a
    /// nil map); a nil interface, another value or a constant is refused
    /// with Go's words.
    fn check_map_params(
        &self,
        dot: &Value,
        params: funcs::MapParams,
        args: &[Arg],
        values: &[Value],
        pos: &Pos,
        context: Ctx<'_>,
    ) -> Result<(), ExecError> {
        for (i, v) in values.iter().enumerate() {
            if !params.covers(i) {
                continue;
            }
            // None: the value piped in, a pipeline's (never an interface).
            let arg = args.get(i);
            let message = match (v, arg) {
                (Value::Map(_), _) => continue,
                (Value::Nil, Some(a)) if self.is_nil_interface(dot, a) => {
                    "wrong type for value; expected map[string]interface {}; got interface {}"
                        .to_owned()
                }
                (Value::Nil, _) => continue,
                (_, Some(a @ (Arg::Str(_) | Arg::Number(_) | Arg::Bool(_)))) => format!(
                    "can't handle {} for arg of type map[string]interface {{}}",
                    arg_text(a)
                ),
                (other, _) => format!(
                    "wrong type for value; expected map[string]interface {{}}; got {}",
                    other.type_name()
                ),
            };
            return Err(self.err(pos, context, message));
        }
        Ok(())
    }

    /// Go's check of what is given to a `string` or `int` parameter
    /// ([`funcs::scalar_params`]): a `[]byte` is the wrong type (use
    /// `toString`), as is a nil interface (a missing or null field); a
    /// pipeline's nil is no value at all.
    fn check_scalar_params(
        &self,
        dot: &Value,
        types: &[u8],
        args: &[Arg],
        values: &[Value],
        pos: &Pos,
        context: Ctx<'_>,
    ) -> Result<(), ExecError> {
        for (i, (v, ty)) in values.iter().zip(types).enumerate() {
            let want = funcs::scalar_type(*ty);
            if let Value::Bytes(_) = v {
                let message = format!("wrong type for value; expected {want}; got []uint8");
                return Err(self.err(pos, context, message));
            }
            if !matches!(v, Value::Nil) {
                continue;
            }
            // None: the value piped in, a pipeline's.
            let message = match args.get(i) {
                Some(Arg::Nil) => format!("cannot assign nil to {want}"),
                Some(a) if self.is_nil_interface(dot, a) => {
                    format!("wrong type for value; expected {want}; got interface {{}}")
                }
                _ => format!("invalid value; expected {want}"),
            };
            return Err(self.err(pos, context, message));
        }
        Ok(())
    }

    /// Whether `arg`, which gave nil, gave Go's nil interface rather than
    /// no value ([`Var::item`]): a field of a map (missing or nil), or an
    /// item `range` bound.
    fn is_nil_interface(&self, dot: &Value, arg: &Arg) -> bool {
        match arg {
            Arg::Dot => self.dot_is_item,
            Arg::Field(_) => !self.dot_is_invalid(dot),
            Arg::Variable(v, fields) if fields.is_empty() => {
                self.var_slot(v).is_some_and(|slot| slot.item)
            }
            Arg::Variable(v, _) => !self.var_is_invalid(v),
            _ => false,
        }
    }

    /// The name the random functions count this template's call sites
    /// under: its own, or for a `tpl` text the template that called `tpl`.
    fn random_site_name(&self) -> Rc<str> {
        match self.rt.layers.last() {
            Some(layer) if *self.name == *self.rt.gotpl => layer.site_name.clone(),
            _ => self.name.clone(),
        }
    }

    /// `and`/`or`: the arguments evaluated only as far as needed.
    fn and_or(
        &mut self,
        dot: &Value,
        name: &str,
        (args, at): (&[Arg], &[Pos]),
        last: Option<Value>,
        pos: &Pos,
    ) -> Result<Value, ExecError> {
        let want = name == "or";
        let mut v = Value::Nil;
        if args.is_empty() && last.is_none() {
            return Err(self.err(
                pos,
                name,
                format!("wrong number of args for {name}: want at least 1 got 0"),
            ));
        }
        for (a, at) in args.iter().zip(at) {
            v = self.eval_arg(dot, a, at)?;
            if v.truth() == want {
                return Ok(v);
            }
        }
        if let Some(l) = last {
            v = l;
        }
        Ok(v)
    }
}

/// A range key of a map or `.Files`: the key as a value when a variable
/// takes it, else nil (no string built for a loop that ignores it).
fn key_value(wanted: bool, key: &str) -> Value {
    if wanted { Value::str(key) } else { Value::Nil }
}

/// The fields of `v` when every step is a map lookup (a missing key is
/// nil, as in [`State::eval_fields`]); `None` when a step is not a map
/// and the general path must answer (or word the error).
fn map_fields(v: &Value, fields: &[String]) -> Option<Value> {
    let (first, rest) = fields.split_first()?;
    let Value::Map(m) = v else {
        return None;
    };
    let mut cur = m.method_or_field(first);
    for f in rest {
        let next = match &cur {
            Value::Map(m) => m.method_or_field(f),
            _ => return None,
        };
        cur = next;
    }
    Some(cur)
}

/// The action an error names (Go's `<...>`), formatted only when an error
/// needs it: formatting it for every step cost a tenth of a render.
#[derive(Clone, Copy)]
enum Ctx<'a> {
    /// A command, as written.
    Cmd(&'a Cmd),
    /// Fields of dot: `.a.b`.
    Dot(&'a [String]),
    /// Fields of a variable: `$v.a.b`.
    Var(&'a str, &'a [String]),
    /// Text as it is.
    Text(&'a str),
    /// An operand, as written.
    Arg(&'a Arg),
}

impl<'a> Ctx<'a> {
    /// The fields of a pipeline's value (`(p).a.b`) as Go names them: by
    /// the last operand it evaluated in the pipeline.
    fn chain_of(pipe: &'a Pipe, fields: &'a [String]) -> Self {
        match pipe.cmds.last().and_then(|c| c.args.last()) {
            Some(last) => Ctx::Arg(last),
            None => Ctx::Dot(fields),
        }
    }
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ctx::Cmd(cmd) => cmd.fmt(f),
            Ctx::Dot(fields) => write!(f, ".{}", fields.join(".")),
            Ctx::Var(v, fields) => write!(f, "{v}.{}", fields.join(".")),
            Ctx::Text(text) => f.write_str(text),
            Ctx::Arg(arg) => arg.fmt(f),
        }
    }
}

fn arg_text(a: &Arg) -> String {
    match a {
        Arg::Dot => ".".into(),
        Arg::Bool(b) => b.to_string(),
        Arg::Number(Number::Int(i)) => i.to_string(),
        Arg::Number(Number::Float(f)) => f.to_string(),
        Arg::Str(s) => format!("{s:?}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Map;

    /// Runs template `main` of `templates` (name and text pairs) with a
    /// dot holding `m` = {b: 2, a: 1} and `l` = [x, y, z].
    fn run(templates: &[(&str, &str)], main: &str) -> (Result<String, ExecError>, Runtime) {
        let mut trees = Trees::new();
        // Both dialects' functions: Helm's and Argo CD's.
        let known = |name: &str| funcs::exists(name) || funcs::exists_in_argo(name);
        for (name, text) in templates {
            crate::parse::parse(name, text, &mut trees, &known).expect("parses");
        }
        let mut m = Map::new();
        m.insert("b".into(), Value::Int(2));
        m.insert("a".into(), Value::Int(1));
        let mut dot = Map::new();
        dot.insert("m".into(), Value::map(m));
        dot.insert(
            "l".into(),
            Value::list(vec![Value::str("x"), Value::str("y"), Value::str("z")]),
        );
        let mut rt = Runtime::new(trees, Limits::default());
        let out = rt.execute(main, Value::map(dot));
        (out, rt)
    }

    /// Every function, given any number of arguments (none to four) of
    /// any kind, answers with a value or an error: none panics (a panic
    /// would abort the sandboxed render with no error to show). Go checks
    /// the count before it calls: `wrong number of args for get: want 2
    /// got 0`.
    #[test]
    fn no_function_panics_whatever_its_arguments() {
        let names = funcs::Builtin::NAMES
            .iter()
            .chain(crate::dates::NAMES)
            .chain(crate::random::NAMES)
            .chain(crate::crypto::NAMES)
            .chain(["include", "tpl", "and", "or"].iter());
        let args = [
            "",
            " nil",
            " .m",
            " .l",
            " \"a\"",
            " 1",
            " 1.5",
            " true",
            " (list)",
            " (now)",
            " .m .m",
            " \"a\" .m",
            " .m \"a\"",
            " \"a\" \"b\"",
            " 1 2",
            " .l 1",
            " 1 .l",
            " \"a\" \"b\" \"c\"",
            " .m \"a\" 1",
            " 1 2 3 4",
            " \"a\" 1 .l .m",
            " .m .m .m",
            " .l .l .l",
            " .m \"a\" .m",
            " 0",
            " -1",
            " 1 0",
            " 0 0",
            " -1 -1",
            " 1.5 0",
            " -9223372036854775808 -1",
            " 9223372036854775807 1",
            " 0 \"a\"",
            " -1 \"a\"",
            " 1 -1 \"abc\"",
            " \"a\" -1",
            " \"a\" 0",
            " 0 \"a\" \"b\"",
            " -1 0 1",
            " 0 10 0",
            " 1 1 -1",
            " \"\" \"\" -1",
            " \"a\" \"b\" -1",
            " -1 .l",
            " 0 .l",
        ];
        let mut panics = Vec::new();
        for name in names {
            if matches!(*name, "fail" | "required") {
                continue;
            }
            for a in args {
                let text = format!("{{{{ {name}{a} }}}}");
                let result = std::panic::catch_unwind(|| {
                    let _ = run(&[("t", &text)], "t");
                });
                if result.is_err() {
                    panics.push(text);
                }
            }
        }
        assert!(panics.is_empty(), "these panic: {panics:#?}");
    }

    /// Every declared function has its family (`funcs::call_builtin`
    /// dispatches by family, and a function in none would only fail when
    /// a chart calls it).
    #[test]
    fn every_declared_function_is_implemented() {
        let mut missing = Vec::new();
        for name in funcs::Builtin::NAMES {
            if matches!(*name, "fail" | "required") {
                continue;
            }
            for args in ["", " \"a\"", " 1 2", " .m \"a\" 1"] {
                let text = format!("{{{{ {name}{args} }}}}");
                if let Err(e) = run(&[("t", &text)], "t").0
                    && e.to_string().contains("has no implementation")
                {
                    missing.push(*name);
                }
            }
        }
        assert!(missing.is_empty(), "no family implements {missing:?}");
    }

    fn ok(templates: &[(&str, &str)], main: &str) -> String {
        run(templates, main).0.expect("runs")
    }

    /// [`run`] under `limits`.
    fn run_limited(
        templates: &[(&str, &str)],
        main: &str,
        limits: Limits,
    ) -> Result<String, ExecError> {
        let mut trees = Trees::new();
        for (name, text) in templates {
            crate::parse::parse(name, text, &mut trees, &funcs::exists).expect("parses");
        }
        Runtime::new(trees, limits).execute(main, Value::map(Map::new()))
    }

    #[test]
    fn include_texts_are_reused_for_an_equal_dot_until_a_map_it_reads_changes() {
        let show = ("show", "{{ .x.y }}");
        let t = "{{ $d := dict \"x\" (dict \"y\" 1) }}{{ include \"show\" $d }}{{ include \"show\" $d }}\
                 {{ $e := dict \"x\" $d.x }}{{ include \"show\" $e }}\
                 {{ $_ := set $d.x \"y\" 2 }}{{ include \"show\" $d }}{{ include \"show\" $e }}\
                 {{ $_ := set $d \"x\" (dict \"y\" 3) }}{{ include \"show\" $d }}";
        let (out, rt) = run(&[show, ("t", t)], "t");
        assert_eq!(out.expect("runs"), "111223");
        // The second and third calls, and the fifth.
        assert_eq!(rt.memo.hits(), 3);
    }

    #[test]
    fn a_template_that_changes_what_it_reads_runs_at_every_include() {
        let bump = ("bump", "{{ $_ := set . \"n\" (add1 .n) }}{{ .n }}");
        let t = "{{ $c := dict \"n\" 0 }}{{ include \"bump\" $c }}{{ include \"bump\" $c }}{{ include \"bump\" $c }}";
        assert_eq!(ok(&[bump, ("t", t)], "t"), "123");
        // Changing a map it made itself (after it started) is no change
        // to what it reads; changing the caller's map after a call that
        // read it is.
        let inner = (
            "inner",
            "{{ $m := dict \"k\" .k }}{{ $_ := set $m \"k\" (print $m.k \"!\") }}{{ $m.k }}",
        );
        let outer = (
            "outer",
            "{{ $m := dict \"k\" \"a\" }}{{ include \"inner\" $m }}{{ $_ := set $m \"k\" \"b\" }}{{ include \"inner\" $m }}",
        );
        let t = "{{ include \"outer\" . }} {{ include \"outer\" . }}";
        let (out, rt) = run(&[inner, outer, ("t", t)], "t");
        assert_eq!(out.expect("runs"), "a!b! a!b!");
        assert_eq!(rt.memo.hits(), 1, "the second outer call");
    }

    #[test]
    fn includes_that_draw_random_numbers_or_run_in_tpl_are_not_reused() {
        let r = ("r", "{{ randAlphaNum 12 }}");
        let t = "{{ include \"r\" . }} {{ include \"r\" . }}";
        let out = ok(&[r, ("t", t)], "t");
        let (a, b) = out.split_once(' ').expect("two");
        assert_ne!(a, b);
        // A `tpl` text's own template of a name wins inside it, also in
        // the chart templates it includes: `a` kept outside is not reused
        // inside.
        let x = ("x", "C");
        let a = ("a", "{{ include \"x\" . }}");
        let t = "{{ include \"a\" . }}{{ tpl \"{{ define \\\"x\\\" }}T{{ end }}{{ include \\\"a\\\" . }}\" . }}{{ include \"a\" . }}";
        assert_eq!(ok(&[x, a, ("t", t)], "t"), "CTC");
    }

    #[test]
    fn a_reused_include_keeps_the_nesting_limit() {
        let templates = [
            ("leaf", "L"),
            ("d1", "{{ include \"leaf\" . }}"),
            ("d2", "{{ include \"d1\" . }}"),
            ("t", "{{ include \"leaf\" . }}{{ include \"d2\" . }}"),
        ];
        let limits = |max_depth| Limits {
            max_depth,
            ..Limits::default()
        };
        assert_eq!(run_limited(&templates, "t", limits(3)).expect("fits"), "LL");
        // `leaf` was kept at depth 1; at depth 3 it is past the limit of 2,
        // as it would be if it ran.
        let err = run_limited(&templates, "t", limits(2)).expect_err("too deep");
        assert!(err.to_string().contains("nested template calls"), "{err}");
        // Nor does a call that reuses a text hide the nesting from the
        // calls around it: `d1` reuses `leaf` and is kept as two levels
        // deep, not one (from the review).
        let templates = [
            ("leaf", "L"),
            ("d1", "{{ include \"leaf\" . }}"),
            ("d2", "{{ include \"d1\" . }}"),
            (
                "t",
                "{{ include \"leaf\" . }}{{ include \"d1\" . }}{{ include \"d2\" . }}",
            ),
        ];
        let err = run_limited(&templates, "t", limits(2)).expect_err("too deep");
        assert!(err.to_string().contains("nested template calls"), "{err}");
        // A chain of reused texts: `down(i)` reuses `down(i-1)`; past the
        // limit the render fails as it does without the memo.
        let down = (
            "down",
            "{{ if . }}{{ include \"down\" (sub . 1) }}{{ else }}x{{ end }}",
        );
        let t = (
            "t",
            "{{ range $i := until 20 }}{{ include \"down\" $i }}{{ end }}",
        );
        let err = run_limited(&[down, t], "t", limits(10)).expect_err("too deep");
        assert!(err.to_string().contains("nested template calls"), "{err}");
        assert_eq!(
            run_limited(&[down, t], "t", limits(21)).expect("fits"),
            "x".repeat(20)
        );
    }

    #[test]
    fn merging_maps_that_hold_themselves_fails_instead_of_recursing_for_ever() {
        let t = "{{ $a := dict }}{{ $_ := set $a \"x\" $a }}{{ $b := dict }}{{ $_ := set $b \"x\" $b }}\
                 {{ $_ := merge $a $b }}";
        let err = run(&[("t", t)], "t").0.expect_err("cyclic");
        assert!(
            err.to_string().contains("merge: maps nested more than"),
            "{err}"
        );
        // A map merged into itself is itself.
        let t = "{{ $a := dict \"k\" (dict \"n\" 1) }}{{ $_ := merge $a $a }}{{ toJson $a }}";
        assert_eq!(ok(&[("t", t)], "t"), r#"{"k":{"n":1}}"#);
    }

    #[test]
    fn range_binds_keys_and_values_per_iteration() {
        let t = "{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}\
                 {{ range $i, $v := .l }}{{ $i }}{{ $v }}{{ if eq $v \"y\" }}{{ break }}{{ end }}{{ end }}\
                 {{ range .l }}{{ . }}{{ end }}{{ range $v := .m }}{{ $v }}{{ end }}\
                 {{ range .none }}x{{ else }}empty{{ end }}{{ range 3 }}{{ . }}{{ end }}";
        assert_eq!(ok(&[("t", t)], "t"), "a=1;b=2;0x1yxyz12empty012");
    }

    #[test]
    fn assignment_reaches_the_variable_of_the_enclosing_scope() {
        let t = "{{ $s := \"\" }}{{ range $k, $v := .m }}{{ $s = print $s $k }}{{ end }}{{ $s }}\
                 {{ with .m }}{{ $s = \"w\" }}{{ end }}{{ $s }}";
        assert_eq!(ok(&[("t", t)], "t"), "abw");
    }

    #[test]
    fn included_templates_have_their_own_dollar_and_output() {
        let t = "{{ define \"d\" }}[{{ $.a }}{{ $x := 5 }}{{ $x }}]{{ end }}\
                 {{ $x := 1 }}{{ include \"d\" (dict \"a\" \"in\") | upper }}{{ template \"d\" (dict \"a\" \"t\") }}{{ $x }}{{ len $.l }}";
        assert_eq!(ok(&[("t", t)], "t"), "[IN5][t5]13");
    }

    #[test]
    fn templates_a_tpl_text_defines_exist_only_during_that_call() {
        let t = "{{ define \"x\" }}chart{{ end }}\
                 {{ tpl \"{{ define \\\"x\\\" }}tpl{{ end }}{{ include \\\"x\\\" . }}\" . }}/{{ include \"x\" . }}\
                 {{ tpl \"{{ define \\\"y\\\" }}y{{ end }}{{ include \\\"y\\\" . }}\" . }}";
        assert_eq!(ok(&[("t", t)], "t"), "tpl/charty");
        let (out, _) = run(
            &[(
                "t",
                "{{ tpl \"{{ define \\\"y\\\" }}y{{ end }}-\" . }}{{ include \"y\" . }}",
            )],
            "t",
        );
        let e = out.expect_err("y is gone after the tpl call").to_string();
        assert!(e.contains("no template \"y\""), "{e}");
    }

    #[test]
    fn a_repeated_tpl_text_is_parsed_once_and_runs_the_same() {
        let t = "{{ range .l }}{{ tpl \"<{{ . }}{{ $.m.a }}>\" (dict \"m\" $.m) }}{{ end }}\
                 {{ tpl \"{{ .m.b }}\" . }}{{ tpl \"{{ .m.b }}\" . }}";
        let (out, rt) = run(&[("t", t)], "t");
        assert_eq!(
            out.expect("runs"),
            "<map[m:map[a:1 b:2]]1><map[m:map[a:1 b:2]]1><map[m:map[a:1 b:2]]1>22"
        );
        assert_eq!(rt.tpl_cache.len(), 2);
        assert!(rt.layers.is_empty() && rt.vars.is_empty());
    }

    #[test]
    fn tpl_parse_errors_are_go_s() {
        let (out, _) = run(&[("t", "{{ tpl \"{{ nosuch }}\" . }}")], "t");
        let e = out.expect_err("parse error").to_string();
        // Helm: `cannot parse template "{{ nosuch }}": template: gotpl:1: ...`.
        assert_eq!(e, "template: gotpl:1: function \"nosuch\" not defined");
    }

    /// Helm v4.2.3 parses a `tpl` text as a new template
    /// named "gotpl" (`t.New(parent.Name())`, parent being the engine's root
    /// "gotpl", which has no tree), so an empty, blank, comment-only or
    /// define-only text runs as itself: `tpl ""` is "", `tpl "  "` is "  ".
    /// (Kiln used to keep the running template of the text's name and run
    /// it again until the depth limit.) Checked against Helm v4.2.3 (helm_template.py):
    /// c1: "" c2: "  " c3: "" c4: "" c5: "< >".
    #[test]
    fn tpl_of_an_empty_or_blank_text_is_that_text() {
        let t = "[{{ tpl \"\" . }}][{{ tpl \"  \" . }}][{{ tpl \"{{/* c */}}\" . }}]\
                 [{{ tpl \"{{ define \\\"z\\\" }}z{{ end }}\" . }}]";
        assert_eq!(ok(&[("t", t)], "t"), "[][  ][][]");
        let h =
            "{{ define \"h\" }}<{{ tpl \"\" . }}{{ tpl \" \" . }}>{{ end }}{{ include \"h\" . }}";
        assert_eq!(ok(&[("t", h)], "t"), "< >");
    }

    /// Go's `associate` keeps an existing template rather
    /// than replace it with an empty one (`parse.IsEmptyTree`: only blanks
    /// and comments), also in the clone `tpl` parses into. Helm v4.2.3 gives
    /// "[chart][chart][chart]" (Kiln's layer used to shadow the chart's "x"
    /// with the text's empty define: "[][ ][]").
    #[test]
    fn an_empty_define_in_a_tpl_text_keeps_the_chart_template() {
        let t = "{{ define \"x\" }}chart{{ end }}\
                 {{ tpl \"{{ define \\\"x\\\" }}{{ end }}[{{ include \\\"x\\\" . }}]\" . }}\
                 {{ tpl \"{{ define \\\"x\\\" }} {{ end }}[{{ include \\\"x\\\" . }}]\" . }}\
                 {{ tpl \"{{ define \\\"x\\\" }}{{/* c */}}{{ end }}[{{ template \\\"x\\\" . }}]\" . }}";
        assert_eq!(ok(&[("t", t)], "t"), "[chart][chart][chart]");
    }

    /// Helm's
    /// `tpl` returns `strings.ReplaceAll(buf.String(), "<no value>", "")`,
    /// so what a pipeline sees of it has no `<no value>`. Helm v4.2.3:
    /// `tpl "<no value>" . | len` is 0, `tpl "{{ .nope }}" . | len` is 0,
    /// `tpl "{{ .nope }}" . | default "fb"` is "fb" (Kiln gave 10, 10 and
    /// "<no value>", dropped only from the final output).
    #[test]
    fn tpl_output_drops_no_value_as_helm_does() {
        let t = "{{ tpl \"<no value>\" . | len }}|{{ tpl \"{{ .nope }}\" . | len }}|\
                 {{ tpl \"{{ .nope }}\" . | default \"fb\" }}";
        assert_eq!(ok(&[("t", t)], "t"), "0|0|fb");
    }
}
