//! Go `text/template/parse`: items into trees, one per template name
//! (`define`/`block` bodies are their own trees).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::lex::{Item, Tok, lex};

/// A template that does not parse, worded as Go words it
/// (`template: NAME:LINE: MESSAGE`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template: {name}:{line}: {message}")]
pub struct ParseError {
    /// The template's name.
    pub name: String,
    /// 1-based line.
    pub line: usize,
    /// Go's message.
    pub message: String,
}

impl ParseError {
    /// An error at `line` of template `name`.
    pub fn new(name: &str, line: usize, message: impl Into<String>) -> Self {
        ParseError {
            name: name.to_owned(),
            line,
            message: message.into(),
        }
    }
}

/// Where a node is: template name, line and column, for error messages.
#[derive(Debug, Clone)]
pub struct Pos {
    /// Template name.
    pub name: Rc<str>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (byte).
    pub col: usize,
}

/// A sequence of nodes.
pub type List = Vec<Node>;

/// A node of a template tree.
#[derive(Debug, Clone)]
pub enum Node {
    /// Text, printed as is.
    Text(Rc<str>),
    /// `{{pipeline}}`.
    Action(Pipe),
    /// `{{if}}`, `{{range}}`, `{{with}}` with their else branch.
    Branch {
        /// Which one.
        kind: BranchKind,
        /// The condition / collection.
        pipe: Pipe,
        /// The body.
        list: List,
        /// `{{else}}` (an `else if` is an `if` alone in here).
        else_list: Option<List>,
    },
    /// `{{template "name" pipeline}}`.
    Template {
        /// Where.
        pos: Pos,
        /// Which template.
        name: String,
        /// Its dot.
        pipe: Option<Pipe>,
    },
    /// `{{break}}`.
    Break(Pos),
    /// `{{continue}}`.
    Continue(Pos),
}

/// The three branching actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchKind {
    /// `if`.
    If,
    /// `range`.
    Range,
    /// `with`.
    With,
}

/// A pipeline, with its variable declarations.
#[derive(Debug, Clone)]
pub struct Pipe {
    /// Where.
    pub pos: Pos,
    /// `$x :=` / `$x =` / `$i, $v :=` (shared names: binding one per
    /// loop iteration copies no text).
    pub decl: Vec<Rc<str>>,
    /// `=` rather than `:=`.
    pub is_assign: bool,
    /// The commands, `|`-separated.
    pub cmds: Vec<Cmd>,
}

/// One command of a pipeline.
#[derive(Debug, Clone)]
pub struct Cmd {
    /// Where.
    pub pos: Pos,
    /// Its operands (the first may be a function).
    pub args: Vec<Arg>,
    /// Where each operand is, as Go places its node (and so its errors):
    /// a chain of fields (`.a.b`, `$x.b`, `(p).b`) at its second part.
    pub at: Vec<Pos>,
}

/// An operand.
#[derive(Debug, Clone)]
pub enum Arg {
    /// `.`.
    Dot,
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// A number constant.
    Number(Number),
    /// A string constant.
    Str(Rc<str>),
    /// `.a.b` (fields of dot).
    Field(Vec<String>),
    /// `$x.a.b`.
    Variable(Rc<str>, Vec<String>),
    /// A function, resolved once here (not at every call).
    Ident(Func),
    /// `(pipeline)`, with fields after it: `(pipeline).a.b`.
    Pipe(Box<Pipe>, Vec<String>),
}

/// A function name with how the executor calls it ([`FuncKind`]),
/// resolved when the template is parsed.
#[derive(Debug, Clone)]
pub struct Func {
    /// The name, as written.
    pub name: String,
    /// How it is called.
    pub kind: FuncKind,
    /// Which of the plain functions it is, if it is one
    /// ([`crate::funcs::Builtin`]).
    pub builtin: Option<crate::funcs::Builtin>,
}

impl Func {
    /// The function `name`, classified by [`FuncKind::of`].
    pub fn new(name: String) -> Self {
        let kind = FuncKind::of(&name);
        let builtin = crate::funcs::Builtin::of(&name);
        Func {
            name,
            kind,
            builtin,
        }
    }
}

/// How the executor calls a function: the kinds that need more than
/// evaluated arguments and [`crate::funcs::call`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuncKind {
    /// `and` / `or`: arguments evaluated only as far as needed.
    AndOr,
    /// `include` / `tpl`: run a template ([`crate::funcs::call_nested`]).
    Nested,
    /// A random or crypto function: its stream is keyed by the call as
    /// written ([`crate::random`]).
    Random,
    /// Any other function.
    Plain,
}

impl FuncKind {
    /// The kind of function `name`.
    pub fn of(name: &str) -> Self {
        match name {
            "and" | "or" => FuncKind::AndOr,
            "include" | "tpl" => FuncKind::Nested,
            _ if crate::random::exists(name) => FuncKind::Random,
            _ => FuncKind::Plain,
        }
    }
}

/// A numeric constant: an int when written as one, else a float.
#[derive(Debug, Clone, Copy)]
pub enum Number {
    /// Go's `int`.
    Int(i64),
    /// `float64`.
    Float(f64),
}

/// A parsed set of templates by name (the name shared with every
/// execution of the template).
pub type Trees = BTreeMap<Rc<str>, Rc<List>>;

/// What one template text parses into, before it joins a [`Trees`].
#[derive(Debug)]
pub struct Parsed {
    /// The `define`d templates (of two with one name, the later).
    pub defined: Trees,
    /// The main tree.
    pub main: Rc<List>,
    /// Whether the main tree is only whitespace text (Go keeps an earlier
    /// template of the same name then).
    pub main_is_empty: bool,
}

impl Parsed {
    /// Adds the templates to `trees` under Go's rules: `define`d ones
    /// replace earlier ones; the main tree, as `name`, unless it is only
    /// whitespace and `name` is defined already.
    pub fn add_to(&self, name: &str, trees: &mut Trees) {
        for (n, l) in &self.defined {
            trees.insert(n.clone(), l.clone());
        }
        if !(self.main_is_empty && trees.contains_key(name)) {
            trees.insert(Rc::from(name), self.main.clone());
        }
    }
}

/// Parses template `name` (its text `text`) into `trees` (the main tree
/// under `name`, `define`d ones under theirs). `known` tells whether a
/// function exists (Go checks at parse time).
pub fn parse(
    name: &str,
    text: &str,
    trees: &mut Trees,
    known: &dyn Fn(&str) -> bool,
) -> Result<(), ParseError> {
    parse_text(name, text, known)?.add_to(name, trees);
    Ok(())
}

/// Go's `parse.IsEmptyTree`: a body of whitespace only (comments leave no
/// node). Go does not let such a body replace a template of its name.
pub fn is_empty_tree(list: &List) -> bool {
    list.iter()
        .all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()))
}

/// Parses template `name` (its text `text`) on its own: [`parse`] without
/// adding the result to a set.
pub fn parse_text(
    name: &str,
    text: &str,
    known: &dyn Fn(&str) -> bool,
) -> Result<Parsed, ParseError> {
    let items = lex(name, text)?;
    let mut p = Parser {
        name: Rc::from(name),
        items,
        i: 0,
        text,
        vars: vec!["$".to_owned()],
        known,
        defined: Vec::new(),
        loop_depth: 0,
    };
    let (list, end) = p.list()?;
    if let Some(end) = end {
        return Err(p.err_at(end.1, format!("unexpected {}", end.0)));
    }
    let mut defined = Trees::new();
    for (n, l) in p.defined.drain(..) {
        defined.insert(Rc::from(n), Rc::new(l));
    }
    // Go: a template body that is only whitespace does not replace one
    // defined earlier under the same name.
    let main_is_empty = is_empty_tree(&list);
    Ok(Parsed {
        defined,
        main: Rc::new(list),
        main_is_empty,
    })
}

struct Parser<'a> {
    name: Rc<str>,
    items: Vec<Item<'a>>,
    i: usize,
    text: &'a str,
    vars: Vec<String>,
    known: &'a dyn Fn(&str) -> bool,
    defined: Vec<(String, List)>,
    loop_depth: usize,
}

/// How a list ended: the keyword (`{{end}}`, `{{else}}`) and its line.
type End = (&'static str, usize);

impl<'a> Parser<'a> {
    fn err_at(&self, line: usize, msg: impl Into<String>) -> ParseError {
        ParseError::new(&self.name, line, msg)
    }

    fn peek(&self) -> &Tok<'a> {
        &self.items[self.i.min(self.items.len() - 1)].tok
    }

    fn line(&self) -> usize {
        self.items[self.i.min(self.items.len() - 1)].line
    }

    fn pos(&self) -> Pos {
        let item = &self.items[self.i.min(self.items.len() - 1)];
        let before = &self.text[..item.pos.min(self.text.len())];
        let col = item.pos - kiln_bytes::rposition(before.as_bytes(), b'\n').map_or(0, |i| i + 1);
        Pos {
            name: self.name.clone(),
            line: item.line,
            col,
        }
    }

    fn next(&mut self) -> Tok<'a> {
        let t = self.peek().clone();
        if self.i < self.items.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn skip_space(&mut self) {
        while *self.peek() == Tok::Space {
            self.next();
        }
    }

    /// The next non-space item.
    fn next_non_space(&mut self) -> Tok<'a> {
        self.skip_space();
        self.next()
    }

    fn expect_right(&mut self, context: &str) -> Result<(), ParseError> {
        let line = self.line();
        match self.next_non_space() {
            Tok::Right => Ok(()),
            other => Err(self.err_at(
                line,
                format!("unexpected {} in {context}", describe(&other)),
            )),
        }
    }

    /// Parses nodes until EOF (None) or `{{end}}`/`{{else ...` (Some).
    fn list(&mut self) -> Result<(List, Option<End>), ParseError> {
        let mut out = Vec::new();
        loop {
            match self.next() {
                Tok::Eof => return Ok((out, None)),
                Tok::Text(t) => out.push(Node::Text(Rc::from(t))),
                Tok::Left => {
                    self.skip_space();
                    let line = self.line();
                    if let Tok::Ident(word) = self.peek().clone() {
                        match word {
                            "end" => {
                                self.next();
                                self.expect_right("end")?;
                                return Ok((out, Some(("{{end}}", line))));
                            }
                            "else" => {
                                self.next();
                                // `else` ends the list; the caller reads what follows.
                                return Ok((out, Some(("{{else}}", line))));
                            }
                            "if" | "range" | "with" => {
                                self.next();
                                let kind = match word {
                                    "if" => BranchKind::If,
                                    "range" => BranchKind::Range,
                                    _ => BranchKind::With,
                                };
                                out.push(self.branch(kind, line)?);
                                continue;
                            }
                            "define" => {
                                self.next();
                                self.define(line, false)?;
                                continue;
                            }
                            "block" => {
                                self.next();
                                out.push(self.define(line, true)?);
                                continue;
                            }
                            "template" => {
                                self.next();
                                out.push(self.template(line)?);
                                continue;
                            }
                            "break" | "continue" => {
                                let pos = self.pos();
                                self.next();
                                if self.loop_depth == 0 {
                                    return Err(self.err_at(
                                        line,
                                        format!("{{{{{word}}}}} outside {{{{range}}}}"),
                                    ));
                                }
                                self.expect_right(word)?;
                                out.push(if word == "break" {
                                    Node::Break(pos)
                                } else {
                                    Node::Continue(pos)
                                });
                                continue;
                            }
                            _ => {}
                        }
                    }
                    let pipe = self.pipeline("command", true)?;
                    out.push(Node::Action(pipe));
                }
                other => {
                    return Err(
                        self.err_at(self.line(), format!("unexpected {}", describe(&other)))
                    );
                }
            }
        }
    }

    fn branch(&mut self, kind: BranchKind, _line: usize) -> Result<Node, ParseError> {
        let context = match kind {
            BranchKind::If => "if",
            BranchKind::Range => "range",
            BranchKind::With => "with",
        };
        let saved = self.vars.len();
        let pipe = self.pipeline(context, kind == BranchKind::Range)?;
        if kind == BranchKind::Range {
            self.loop_depth += 1;
        }
        let (list, end) = self.list()?;
        if kind == BranchKind::Range {
            self.loop_depth -= 1;
        }
        let else_list = match end {
            None => return Err(self.err_at(self.line(), "unexpected EOF")),
            Some(("{{end}}", _)) => None,
            Some((_, else_line)) => {
                // `{{else}}`, `{{else if ...}}`, `{{else with ...}}`.
                self.skip_space();
                match self.peek().clone() {
                    Tok::Ident(w)
                        if (w == "if" && kind == BranchKind::If)
                            || (w == "with" && kind == BranchKind::With) =>
                    {
                        self.next();
                        let inner_line = self.line();
                        let nested = self.branch(kind, inner_line)?;
                        Some(vec![nested])
                    }
                    Tok::Right => {
                        self.next();
                        let (else_body, end) = self.list()?;
                        match end {
                            Some(("{{end}}", _)) => Some(else_body),
                            Some((e, l)) => {
                                return Err(self.err_at(l, format!("expected end; found {e}")));
                            }
                            None => return Err(self.err_at(self.line(), "unexpected EOF")),
                        }
                    }
                    other => {
                        return Err(self.err_at(
                            else_line,
                            format!("unexpected {} in else", describe(&other)),
                        ));
                    }
                }
            }
        };
        self.vars.truncate(saved);
        Ok(Node::Branch {
            kind,
            pipe,
            list,
            else_list,
        })
    }

    fn string_arg(&mut self, context: &str) -> Result<String, ParseError> {
        let line = self.line();
        match self.next_non_space() {
            Tok::Str(s) => Ok(s.into_owned()),
            other => Err(self.err_at(
                line,
                format!("unexpected {} in {context}", describe(&other)),
            )),
        }
    }

    fn define(&mut self, _line: usize, block: bool) -> Result<Node, ParseError> {
        let context = if block {
            "block clause"
        } else {
            "define clause"
        };
        let pos = self.pos();
        let name = self.string_arg(context)?;
        let pipe = if block {
            self.skip_space();
            Some(self.pipeline(context, false)?)
        } else {
            self.expect_right(context)?;
            None
        };
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_owned()]);
        let saved_loop = std::mem::replace(&mut self.loop_depth, 0);
        let (body, end) = self.list()?;
        self.vars = saved_vars;
        self.loop_depth = saved_loop;
        match end {
            Some(("{{end}}", _)) => {}
            Some((e, l)) => return Err(self.err_at(l, format!("unexpected {e}"))),
            None => return Err(self.err_at(self.line(), "unexpected EOF")),
        }
        self.defined.push((name.clone(), body));
        Ok(Node::Template { pos, name, pipe })
    }

    fn template(&mut self, _line: usize) -> Result<Node, ParseError> {
        let pos = self.pos();
        let name = self.string_arg("template clause")?;
        self.skip_space();
        let pipe = if *self.peek() == Tok::Right {
            self.next();
            None
        } else {
            Some(self.pipeline("template clause", false)?)
        };
        Ok(Node::Template { pos, name, pipe })
    }

    /// A pipeline up to its closing `}}` (or `)` when nested).
    fn pipeline(&mut self, context: &str, allow_two: bool) -> Result<Pipe, ParseError> {
        self.skip_space();
        let pos = self.pos();
        let mut decl: Vec<Rc<str>> = Vec::new();
        let mut is_assign = false;
        // Declarations: `$x :=`, `$x =`, `$i, $v :=`.
        if let Tok::Variable(_) = self.peek() {
            let save = self.i;
            let mut names = Vec::new();
            while let Tok::Variable(v) = self.peek().clone() {
                self.next();
                self.skip_space();
                match self.peek().clone() {
                    Tok::Declare | Tok::Assign => {
                        is_assign = *self.peek() == Tok::Assign;
                        self.next();
                        names.push(v);
                        decl = names.iter().map(|n| Rc::from(*n)).collect();
                        break;
                    }
                    Tok::Comma if allow_two && names.is_empty() => {
                        self.next();
                        self.skip_space();
                        names.push(v);
                    }
                    _ => {
                        break;
                    }
                }
            }
            if decl.is_empty() {
                self.i = save;
            } else if is_assign {
                for v in &decl {
                    if !self.vars.iter().any(|known| **known == **v) {
                        return Err(self.err_at(pos.line, format!("undefined variable \"{v}\"")));
                    }
                }
            } else {
                self.vars.extend(decl.iter().map(|v| v.to_string()));
            }
        }
        let mut cmds = Vec::new();
        loop {
            self.skip_space();
            match self.peek().clone() {
                Tok::Right => {
                    self.next();
                    break;
                }
                Tok::RParen => {
                    break;
                }
                Tok::Pipe if !cmds.is_empty() => {
                    self.next();
                    // As in Go, a pipe may end the pipeline: `{{ x | }}`.
                    self.skip_space();
                    match self.peek() {
                        Tok::Right => {
                            self.next();
                            break;
                        }
                        Tok::RParen => break,
                        _ => {}
                    }
                }
                _ => {}
            }
            let cmd = self.command()?;
            cmds.push(cmd);
            match self.peek() {
                Tok::Pipe | Tok::Right | Tok::RParen | Tok::Space => {}
                other => {
                    return Err(self.err_at(
                        self.line(),
                        format!("unexpected {} in operand", describe(other)),
                    ));
                }
            }
        }
        if cmds.is_empty() {
            return Err(self.err_at(pos.line, format!("missing value for {context}")));
        }
        Ok(Pipe {
            pos,
            decl,
            is_assign,
            cmds,
        })
    }

    fn command(&mut self) -> Result<Cmd, ParseError> {
        let pos = self.pos();
        let mut args = Vec::new();
        let mut at = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Tok::Right | Tok::RParen | Tok::Pipe | Tok::Eof => break,
                _ => {}
            }
            let (arg, arg_at) = self.operand()?;
            args.push(arg);
            at.push(arg_at);
            match self.peek() {
                Tok::Space | Tok::Right | Tok::RParen | Tok::Pipe => {}
                other => {
                    return Err(self.err_at(
                        self.line(),
                        format!("unexpected {} in operand", describe(other)),
                    ));
                }
            }
        }
        if args.is_empty() {
            return Err(self.err_at(pos.line, "empty command"));
        }
        Ok(Cmd { pos, args, at })
    }

    fn fields(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Tok::Field(f) = self.peek().clone() {
            self.next();
            out.push(f.to_owned());
        }
        out
    }

    /// An operand and where Go places it, and so its errors: where it
    /// starts; for a chain of fields (`.a.b`, `$x.b`), where its second part
    /// starts (Go's `newChain` takes the position of the token after the
    /// first); for the fields of a pipeline (`(p).b`), where the last
    /// operand Go evaluated in it is (Go's executor names the node it last
    /// visited).
    fn operand(&mut self) -> Result<(Arg, Pos), ParseError> {
        let start = self.pos();
        let (arg, chain) = self.term(&start)?;
        let at = match &arg {
            Arg::Pipe(p, fields) if !fields.is_empty() => p
                .cmds
                .last()
                .and_then(|c| c.at.last())
                .cloned()
                .unwrap_or(start),
            _ => chain.unwrap_or(start),
        };
        Ok((arg, at))
    }

    /// The fields after a term, and where they start if there are any.
    fn chain(&mut self) -> (Vec<String>, Option<Pos>) {
        let at = matches!(self.peek(), Tok::Field(_)).then(|| self.pos());
        (self.fields(), at)
    }

    /// An operand starting at `start`, and where its chain of fields starts
    /// if it has one (the fields of a pipeline are placed by
    /// [`Parser::operand`]).
    fn term(&mut self, start: &Pos) -> Result<(Arg, Option<Pos>), ParseError> {
        let line = self.line();
        let arg = match self.next() {
            Tok::Dot => Arg::Dot,
            Tok::Nil => Arg::Nil,
            Tok::Bool(b) => Arg::Bool(b),
            Tok::Str(s) => Arg::Str(Rc::from(&*s)),
            Tok::Number(n) => Arg::Number(
                number(&n).ok_or_else(|| self.err_at(line, format!("bad number syntax: {n:?}")))?,
            ),
            Tok::Field(f) => {
                let (more, at) = self.chain();
                let mut fs = vec![f.to_owned()];
                fs.extend(more);
                return Ok((Arg::Field(fs), at));
            }
            Tok::Variable(v) => {
                if !self.vars.iter().any(|known| known == v) {
                    return Err(self.err_at(line, format!("undefined variable \"{v}\"")));
                }
                let (fs, at) = self.chain();
                return Ok((Arg::Variable(Rc::from(v), fs), at));
            }
            Tok::Ident(name) => {
                if !(self.known)(name) {
                    return Err(self.err_at(line, format!("function \"{name}\" not defined")));
                }
                let func = Arg::Ident(Func::new(name.to_owned()));
                if let Tok::Field(_) = self.peek() {
                    // `merge.Values.a` (a missing space, in bitnami's
                    // grafana-loki): Go parses a chain, the function
                    // called without arguments and the fields of what it
                    // gives, which fails only if it runs.
                    let call = Pipe {
                        pos: start.clone(),
                        decl: Vec::new(),
                        is_assign: false,
                        cmds: vec![Cmd {
                            pos: start.clone(),
                            args: vec![func],
                            at: vec![start.clone()],
                        }],
                    };
                    return Ok((Arg::Pipe(Box::new(call), self.fields()), None));
                }
                func
            }
            Tok::LParen => {
                let pipe = self.pipeline("parenthesized pipeline", false)?;
                match self.next() {
                    Tok::RParen => {}
                    _ => return Err(self.err_at(line, "unclosed left paren")),
                }
                return Ok((Arg::Pipe(Box::new(pipe), self.fields()), None));
            }
            other => {
                return Err(
                    self.err_at(line, format!("unexpected {} in operand", describe(&other)))
                );
            }
        };
        if let Tok::Field(_) = self.peek() {
            return Err(self.err_at(line, "unexpected . after term"));
        }
        Ok((arg, None))
    }
}

/// Go's reading of a number constant: an int when it is one (`0x10`,
/// `'a'`, `1_000`), else a float (`1.5`, `1e3`, `1.0`).
fn number(text: &str) -> Option<Number> {
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    let (neg, body) = match clean.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    let lower = body.to_ascii_lowercase();
    // The magnitude is read wider than an int, so that `-9223372036854775808`
    // (Go's smallest int) is an int too.
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i128::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|c| c.is_ascii_digit())
    {
        i128::from_str_radix(&lower[1..], 8).ok()
    } else if lower.bytes().all(|c| c.is_ascii_digit()) {
        lower.parse::<i128>().ok()
    } else {
        None
    };
    if let Some(i) = int.and_then(|i| i64::try_from(if neg { -i } else { i }).ok()) {
        return Some(Number::Int(i));
    }
    let f: f64 = match lower.strip_prefix("0x") {
        Some(hex) => hex_float(hex)?,
        None => body.parse().ok()?,
    };
    Some(Number::Float(if neg { -f } else { f }))
}

/// A hexadecimal float's value from its digits after `0x` (`1p60`,
/// `1.8p1`, `fp-2`: Go's syntax, the binary exponent required), `_` gone.
fn hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = text.split_once('p')?;
    let exponent: i32 = exponent.parse().ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in whole.chars().chain(fraction.chars()) {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let scale = exponent.checked_sub(i32::try_from(fraction.len()).ok()?.checked_mul(4)?)?;
    Some(value * 2f64.powi(scale))
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Text(_) => "text".into(),
        Tok::Left => "<{{>".into(),
        Tok::Right => "<}}>".into(),
        Tok::Space => "space".into(),
        Tok::Field(f) => format!("<.{f}>"),
        Tok::Variable(v) => format!("<{v}>"),
        Tok::Ident(i) => format!("<{i}>"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Number(n) => format!("<{n}>"),
        Tok::Bool(b) => format!("<{b}>"),
        Tok::Nil => "<nil>".into(),
        Tok::Dot => "<.>".into(),
        Tok::Pipe => "<|>".into(),
        Tok::LParen => "<(>".into(),
        Tok::RParen => "<)>".into(),
        Tok::Declare => "<:=>".into(),
        Tok::Assign => "<=>".into(),
        Tok::Comma => "<,>".into(),
        Tok::Eof => "EOF".into(),
    }
}

impl std::fmt::Display for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.decl.is_empty() {
            write!(
                f,
                "{} {} ",
                self.decl.join(", "),
                if self.is_assign { "=" } else { ":=" }
            )?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Dot => f.write_str("."),
            Arg::Nil => f.write_str("nil"),
            Arg::Bool(b) => write!(f, "{b}"),
            Arg::Number(Number::Int(i)) => write!(f, "{i}"),
            Arg::Number(Number::Float(x)) => f.write_str(&crate::value::format_float_g(*x)),
            Arg::Str(s) => f.write_str(&crate::gofmt::quote(s)),
            Arg::Field(fields) => write!(f, ".{}", fields.join(".")),
            Arg::Variable(v, fields) => {
                f.write_str(v)?;
                for x in fields {
                    write!(f, ".{x}")?;
                }
                Ok(())
            }
            Arg::Ident(func) => f.write_str(&func.name),
            Arg::Pipe(p, fields) => {
                write!(f, "({p})")?;
                for x in fields {
                    write!(f, ".{x}")?;
                }
                Ok(())
            }
        }
    }
}
