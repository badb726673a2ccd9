//! The functions templates call: Go's builtins, Sprig's and Helm's.

use std::borrow::Cow;
use std::rc::Rc;

use base64::Engine as _;
use sha2::Digest as _;

use crate::exec::{ExecError, FnError, State};
use crate::gofmt::{quote as go_quote, sprintf};
use crate::goobj::GoObject;
use crate::parse::Pos;
use crate::value::{Map, MapCell, Value};
use crate::{convert, semver};

type R = Result<Value, FnError>;

/// Go's parameter types of the Sprig and Helm functions that take strings (`s`)
/// and ints (`i`): Go converts no `[]byte` (`.Files.GetBytes`; use
/// `toString`) and no nil (a missing or null value) to them, and Helm
/// fails (`wrong type for value; expected string; got interface {}`).
const PARAMETERS: &[(&str, &str)] = &[
    ("sha512sum", "s"),
    ("trimall", "ss"),
    ("regexQuoteMeta", "s"),
    ("mustRegexFind", "ss"),
    ("mustRegexFindAll", "ssi"),
    ("mustRegexReplaceAll", "sss"),
    ("mustRegexReplaceAllLiteral", "sss"),
    ("mustRegexSplit", "ssi"),
    ("mustFromJson", "s"),
    ("fromToml", "s"),
    ("b64enc", "s"),
    ("b64dec", "s"),
    ("b32enc", "s"),
    ("b32dec", "s"),
    ("sha256sum", "s"),
    ("sha1sum", "s"),
    ("adler32sum", "s"),
    ("upper", "s"),
    ("lower", "s"),
    ("title", "s"),
    ("untitle", "s"),
    ("trim", "s"),
    ("trimAll", "ss"),
    ("trimPrefix", "ss"),
    ("trimSuffix", "ss"),
    ("replace", "sss"),
    ("contains", "ss"),
    ("hasPrefix", "ss"),
    ("hasSuffix", "ss"),
    ("indent", "is"),
    ("nindent", "is"),
    ("nospace", "s"),
    ("abbrev", "is"),
    ("abbrevboth", "iis"),
    ("initials", "s"),
    ("camelcase", "s"),
    ("snakecase", "s"),
    ("kebabcase", "s"),
    ("swapcase", "s"),
    ("wrap", "is"),
    ("wrapWith", "iss"),
    ("split", "ss"),
    ("splitList", "ss"),
    ("splitn", "sis"),
    ("regexMatch", "ss"),
    ("mustRegexMatch", "ss"),
    ("regexFind", "ss"),
    ("regexFindAll", "ssi"),
    ("regexReplaceAll", "sss"),
    ("regexReplaceAllLiteral", "sss"),
    ("regexSplit", "ssi"),
    ("fromYaml", "s"),
    ("fromYamlArray", "s"),
    ("fromJson", "s"),
    ("fromJsonArray", "s"),
    ("trunc", "is"),
    ("repeat", "is"),
    ("substr", "iis"),
    ("semver", "s"),
    ("semverCompare", "ss"),
    // Helm's: the text or the template's name.
    ("tpl", "s"),
    ("include", "s"),
];

/// The functions the executor calls itself (not [`Builtin`]s).
const EXECUTOR_NAMES: [&str; 4] = ["and", "or", "include", "tpl"];

/// Whether `name` is a function of Helm's (Go checks names at parse
/// time).
pub fn exists(name: &str) -> bool {
    (Builtin::of(name).is_some() && !ARGO_ONLY.contains(&name))
        || EXECUTOR_NAMES.contains(&name)
        || crate::dates::NAMES.contains(&name)
        || crate::random::exists(name)
}

/// Argo CD's own functions for ApplicationSet templates, not Helm's.
const ARGO_ONLY: [&str; 2] = ["normalize", "slugify"];

/// Helm's functions that are not Sprig's (and Sprig's that Argo CD
/// removes: `env`, `expandenv`; `getHostByName` reaches the network).
const HELM_ONLY: [&str; 14] = [
    "include",
    "tpl",
    "required",
    "lookup",
    "toToml",
    "mustToToml",
    "fromToml",
    "toYamlPretty",
    "mustToYaml",
    "fromJson",
    "fromJSON",
    "fromJsonArray",
    "mustFromJson",
    "getHostByName",
];

/// Whether `name` is a function of Argo CD's ApplicationSet templates:
/// Go's builtins and Sprig's, without `env`, `expandenv` and
/// `getHostByName`, plus `normalize`, `slugify`, `toYaml`, `fromYaml` and
/// `fromYamlArray`.
pub fn exists_in_argo(name: &str) -> bool {
    if ARGO_ONLY.contains(&name) {
        return true;
    }
    !HELM_ONLY.contains(&name) && exists(name)
}

fn arity(name: &str, args: &[Value], want: usize) -> Result<(), FnError> {
    if args.len() != want {
        return Err(FnError::Msg(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )));
    }
    Ok(())
}

/// Sprig's `strval`: strings as they are, everything else as `%v`.
pub fn strval(v: &Value) -> String {
    match v {
        // Not `to_string`: through `Display` and the formatter's padding.
        Value::Str(s) => String::from(&**s),
        Value::Bytes(b) => crate::gostr::from_bytes(b).into_owned(),
        Value::Nil => "<nil>".to_owned(),
        other => other.to_go_string(),
    }
}

/// [`strval`] without a copy when the value is a string already.
fn str_arg(v: &Value) -> Cow<'_, str> {
    match v {
        Value::Str(s) => Cow::Borrowed(s),
        other => Cow::Owned(strval(other)),
    }
}

/// `cast.ToInt64`: numbers truncated, strings parsed (0 when they do not).
pub fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        // `cast` knows months and weekdays (not durations: 0).
        Value::Go(o) if matches!(**o, GoObject::Month(_) | GoObject::Weekday(_)) => {
            o.as_int().unwrap_or_default()
        }
        Value::Str(s) => {
            // cast.ToInt64: no spaces; a zero decimal part dropped.
            let t = s.strip_suffix(".0").unwrap_or(s);
            crate::strvals::parse_go_int(t).unwrap_or(0)
        }
        _ => 0,
    }
}

/// `cast.ToFloat64`.
pub fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Go(o) if matches!(**o, GoObject::Month(_) | GoObject::Weekday(_)) => {
            o.as_int().unwrap_or_default() as f64
        }
        Value::Str(s) => s.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn list_of(v: &Value) -> Result<Vec<Value>, FnError> {
    match v {
        Value::List(l) | Value::Strings(l) => Ok(l.to_vec()),
        Value::Nil => Ok(Vec::new()),
        other => Err(FnError::Msg(format!(
            "Cannot find first on type {}",
            other.type_name()
        ))),
    }
}

fn strings(items: Vec<String>) -> Value {
    Value::Strings(Rc::new(items.into_iter().map(Value::str).collect()))
}

/// A Go integer kind (`time.Month`, `time.Duration`…) as the integer
/// `eq` and `lt` compare; any other value as it is.
fn as_basic(v: &Value) -> Cow<'_, Value> {
    match v {
        Value::Go(o) => o
            .as_int()
            .map_or(Cow::Borrowed(v), |n| Cow::Owned(Value::Int64(n))),
        other => Cow::Borrowed(other),
    }
}

/// Go's `eq` rules for two basic values: `Ok(None)` when incomparable.
fn basic_eq(a: &Value, b: &Value) -> Result<bool, FnError> {
    let (a, b) = (as_basic(a), as_basic(b));
    let (a, b) = (&*a, &*b);
    Ok(match (a, b) {
        (Value::Nil, _) | (_, Value::Nil) => matches!((a, b), (Value::Nil, Value::Nil)),
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Time(x), Value::Time(y)) => x.go_eq(y),
        (Value::List(_) | Value::Strings(_) | Value::Map(_), _)
        | (_, Value::List(_) | Value::Strings(_) | Value::Map(_)) => {
            return Err(FnError::Msg(format!(
                "non-comparable type {}: {}",
                a.to_go_string(),
                a.type_name()
            )));
        }
        _ => {
            return Err(FnError::Msg(format!(
                "incompatible types for comparison: {} and {}",
                a.type_name(),
                b.type_name()
            )));
        }
    })
}

fn compare(a: &Value, b: &Value) -> Result<std::cmp::Ordering, FnError> {
    use std::cmp::Ordering;
    let (a, b) = (as_basic(a), as_basic(b));
    let (a, b) = (&*a, &*b);
    match (a, b) {
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => Ok(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => Ok(x.partial_cmp(y).unwrap_or(Ordering::Equal)),
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::Nil, _) | (_, Value::Nil) => Err("invalid type for comparison".into()),
        (Value::Bool(_), Value::Bool(_)) | (Value::List(_), _) | (Value::Map(_), _) => {
            Err("invalid type for comparison".into())
        }
        _ => Err(format!(
            "incompatible types for comparison: {} and {}",
            a.type_name(),
            b.type_name()
        )
        .into()),
    }
}

fn dict_of<'a>(v: &'a Value, name: &str) -> Result<std::cell::Ref<'a, Map>, FnError> {
    v.as_map().ok_or_else(|| not_a_dict(v, name))
}

/// A `map[string]interface{}` parameter: the map, or `None` for Go's nil
/// map (a nil that is no value, which the executor passes as a nil map;
/// it refuses a nil interface itself, [`MapParams`]).
fn nil_or_dict<'a>(v: &'a Value, name: &str) -> Result<Option<std::cell::Ref<'a, Map>>, FnError> {
    match v {
        Value::Nil => Ok(None),
        v => dict_of(v, name).map(Some),
    }
}

/// How many arguments a function takes, as Go counts them before it calls
/// it (`wrong number of args for get: want 2 got 0`), for the functions
/// whose bodies read their arguments by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    /// A variadic function: at least this many.
    AtLeast(usize),
}

impl Arity {
    /// Sprig's signature of `builtin`, if it is one of these.
    pub fn of(builtin: Builtin) -> Option<Arity> {
        use Builtin as B;
        Some(match builtin {
            B::Add1 | B::Add1f | B::Ceil | B::Floor | B::Int | B::Int64 | B::Float64 => {
                Arity::Exactly(1)
            }
            B::Compact | B::MustCompact | B::DeepCopy | B::MustDeepCopy | B::First => {
                Arity::Exactly(1)
            }
            B::MustFirst | B::Last | B::MustLast | B::Rest | B::MustRest | B::Initial => {
                Arity::Exactly(1)
            }
            B::MustInitial | B::Uniq | B::MustUniq | B::Reverse | B::MustReverse => {
                Arity::Exactly(1)
            }
            B::SortAlpha | B::ToStrings | B::Until | B::KindOf | B::TypeOf | B::Values => {
                Arity::Exactly(1)
            }
            B::Abbrev | B::Chunk | B::MustChunk | B::DeepEqual | B::Div | B::Mod | B::Sub => {
                Arity::Exactly(2)
            }
            B::Has | B::MustHas | B::KindIs | B::TypeIs | B::TypeIsLike | B::Get => {
                Arity::Exactly(2)
            }
            B::HasKey | B::Unset | B::Prepend | B::MustPrepend | B::Wrap => Arity::Exactly(2),
            B::Abbrevboth | B::RegexFindAll | B::MustRegexFindAll | B::RegexSplit => {
                Arity::Exactly(3)
            }
            B::MustRegexSplit | B::Plural | B::Splitn | B::UntilStep | B::WrapWith => {
                Arity::Exactly(3)
            }
            B::Divf | B::Subf | B::Merge | B::MustMerge | B::MergeOverwrite => Arity::AtLeast(1),
            B::MustMergeOverwrite | B::Pick | B::Omit | B::Pluck | B::Without => Arity::AtLeast(1),
            B::MustWithout => Arity::AtLeast(1),
            B::Round => Arity::AtLeast(2),
            _ => return None,
        })
    }

    /// Go's error for `got` arguments to `name`, if they do not fit.
    pub fn check(self, name: &str, got: usize) -> Result<(), String> {
        match self {
            Arity::Exactly(want) if got != want => Err(format!(
                "wrong number of args for {name}: want {want} got {got}"
            )),
            Arity::AtLeast(want) if got < want => Err(format!(
                "wrong number of args for {name}: want at least {want} got {got}"
            )),
            _ => Ok(()),
        }
    }
}

/// Which parameters of a function are Go's `map[string]interface{}`: the
/// executor checks its arguments for them as Go's does (a nil that is no
/// value becomes a nil map, a nil interface or another type is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapParams {
    /// The first (`get`, `hasKey`, `pick`, ...).
    First,
    /// Every one (`keys`, the `merge` family).
    All,
    /// All but the first (`pluck`).
    AfterFirst,
}

impl MapParams {
    /// The map parameters of `builtin`, if it has any.
    pub fn of(builtin: Builtin) -> Option<MapParams> {
        Some(match builtin {
            Builtin::Get
            | Builtin::Set
            | Builtin::Unset
            | Builtin::HasKey
            | Builtin::Values
            | Builtin::Pick
            | Builtin::Omit
            | Builtin::UrlJoin => MapParams::First,
            Builtin::Keys
            | Builtin::Merge
            | Builtin::MustMerge
            | Builtin::MergeOverwrite
            | Builtin::MustMergeOverwrite => MapParams::All,
            Builtin::Pluck => MapParams::AfterFirst,
            _ => return None,
        })
    }

    /// Whether argument `i` is one of them.
    pub fn covers(self, i: usize) -> bool {
        match self {
            MapParams::First => i == 0,
            MapParams::All => true,
            MapParams::AfterFirst => i > 0,
        }
    }
}

/// `toYaml`: the text of an equal value from the memo when kept (a chart
/// writes `toYaml` of the same defaults, or of a new `omit` of them, for
/// every object), else written and kept ([`crate::incmemo`]).
fn to_yaml(st: &mut State<'_>, v: &Value) -> Value {
    use crate::incmemo::TO_YAML;
    if let Some((text, _)) = st.rt.memo.get(TO_YAML, v, 0) {
        return Value::Str(text);
    }
    let call = st.rt.memo.begin();
    let text: Rc<str> = Rc::from(convert::to_yaml(v).trim_end_matches('\n'));
    if st.rt.memo.end(&call) {
        st.rt.memo.keep(TO_YAML, v, call, 0, text.clone());
    }
    Value::Str(text)
}

/// `name`'s error for `v`, which is not a dict.
fn not_a_dict(v: &Value, name: &str) -> FnError {
    FnError::Msg(format!("{name}: expected a dict, got {}", v.type_name()))
}

/// Declares [`Builtin`] and its names.
macro_rules! builtins {
    ($($variant:ident = $name:literal,)*) => {
        /// A function of [`call_builtin`] (every function but the random
        /// and crypto ones, `include`, `tpl`, `and`, `or` and the date
        /// functions), resolved from its name once, when the template is
        /// parsed: a call then dispatches on a number, not on its name
        /// compared with two hundred others.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Builtin {
            $(
                #[doc = concat!("`", $name, "`.")]
                $variant,
            )*
        }

        impl Builtin {
            /// Every name, in the order declared.
            #[cfg(test)]
            pub(crate) const NAMES: &[&str] = &[$($name,)*];

            /// The function named `name`, if it is one of these.
            pub fn of(name: &str) -> Option<Builtin> {
                Some(match name {
                    $($name => Builtin::$variant,)*
                    _ => return None,
                })
            }
        }
    };
}

builtins! {
    Not = "not",
    Len = "len",
    Index = "index",
    Slice = "slice",
    MustSlice = "mustSlice",
    Print = "print",
    Println = "println",
    Printf = "printf",
    Eq = "eq",
    Ne = "ne",
    Lt = "lt",
    Le = "le",
    Gt = "gt",
    Ge = "ge",
    Html = "html",
    Js = "js",
    Urlquery = "urlquery",
    Call = "call",
    Required = "required",
    Fail = "fail",
    ToYaml = "toYaml",
    MustToYaml = "mustToYaml",
    ToYamlPretty = "toYamlPretty",
    FromYaml = "fromYaml",
    FromYamlArray = "fromYamlArray",
    ToJson = "toJson",
    MustToJson = "mustToJson",
    FromJson = "fromJson",
    FromJSON = "fromJSON",
    FromJsonArray = "fromJsonArray",
    ToToml = "toToml",
    MustToToml = "mustToToml",
    FromToml = "fromToml",
    ToPrettyJson = "toPrettyJson",
    MustToPrettyJson = "mustToPrettyJson",
    ToRawJson = "toRawJson",
    MustToRawJson = "mustToRawJson",
    MustFromJson = "mustFromJson",
    GetHostByName = "getHostByName",
    Lookup = "lookup",
    Trim = "trim",
    TrimAll = "trimAll",
    Trimall = "trimall",
    Hello = "hello",
    RegexQuoteMeta = "regexQuoteMeta",
    TrimPrefix = "trimPrefix",
    TrimSuffix = "trimSuffix",
    Upper = "upper",
    Lower = "lower",
    Title = "title",
    Untitle = "untitle",
    Quote = "quote",
    Squote = "squote",
    Replace = "replace",
    Contains = "contains",
    HasPrefix = "hasPrefix",
    HasSuffix = "hasSuffix",
    Trunc = "trunc",
    Indent = "indent",
    Nindent = "nindent",
    Join = "join",
    Split = "split",
    Splitn = "splitn",
    SplitList = "splitList",
    RegexMatch = "regexMatch",
    MustRegexMatch = "mustRegexMatch",
    RegexReplaceAll = "regexReplaceAll",
    MustRegexReplaceAll = "mustRegexReplaceAll",
    RegexReplaceAllLiteral = "regexReplaceAllLiteral",
    MustRegexReplaceAllLiteral = "mustRegexReplaceAllLiteral",
    RegexFind = "regexFind",
    MustRegexFind = "mustRegexFind",
    RegexFindAll = "regexFindAll",
    MustRegexFindAll = "mustRegexFindAll",
    RegexSplit = "regexSplit",
    MustRegexSplit = "mustRegexSplit",
    B64enc = "b64enc",
    B64dec = "b64dec",
    B32dec = "b32dec",
    B32enc = "b32enc",
    Sha256sum = "sha256sum",
    Adler32sum = "adler32sum",
    Repeat = "repeat",
    Substr = "substr",
    Nospace = "nospace",
    Abbrev = "abbrev",
    Abbrevboth = "abbrevboth",
    Initials = "initials",
    Cat = "cat",
    Snakecase = "snakecase",
    Kebabcase = "kebabcase",
    Camelcase = "camelcase",
    Swapcase = "swapcase",
    Plural = "plural",
    Wrap = "wrap",
    WrapWith = "wrapWith",
    ToString = "toString",
    ToStrings = "toStrings",
    Atoi = "atoi",
    Int = "int",
    Int64 = "int64",
    Float64 = "float64",
    ToDecimal = "toDecimal",
    Shuffle = "shuffle",
    Default = "default",
    Empty = "empty",
    Coalesce = "coalesce",
    All = "all",
    Any = "any",
    Ternary = "ternary",
    List = "list",
    Tuple = "tuple",
    Append = "append",
    MustAppend = "mustAppend",
    Prepend = "prepend",
    MustPrepend = "mustPrepend",
    First = "first",
    MustFirst = "mustFirst",
    Last = "last",
    MustLast = "mustLast",
    Rest = "rest",
    MustRest = "mustRest",
    Initial = "initial",
    MustInitial = "mustInitial",
    Uniq = "uniq",
    MustUniq = "mustUniq",
    Has = "has",
    MustHas = "mustHas",
    Without = "without",
    MustWithout = "mustWithout",
    Compact = "compact",
    MustCompact = "mustCompact",
    Concat = "concat",
    Reverse = "reverse",
    MustReverse = "mustReverse",
    SortAlpha = "sortAlpha",
    Until = "until",
    UntilStep = "untilStep",
    Seq = "seq",
    Chunk = "chunk",
    MustChunk = "mustChunk",
    Dict = "dict",
    Get = "get",
    Set = "set",
    Unset = "unset",
    HasKey = "hasKey",
    Keys = "keys",
    Values = "values",
    Merge = "merge",
    MustMerge = "mustMerge",
    MergeOverwrite = "mergeOverwrite",
    MustMergeOverwrite = "mustMergeOverwrite",
    DeepCopy = "deepCopy",
    MustDeepCopy = "mustDeepCopy",
    Pick = "pick",
    Omit = "omit",
    Pluck = "pluck",
    Dig = "dig",
    Add = "add",
    Add1f = "add1f",
    Add1 = "add1",
    Sub = "sub",
    Mul = "mul",
    Div = "div",
    Mod = "mod",
    Max = "max",
    Biggest = "biggest",
    Min = "min",
    Addf = "addf",
    Subf = "subf",
    Mulf = "mulf",
    Divf = "divf",
    Maxf = "maxf",
    Minf = "minf",
    Floor = "floor",
    Ceil = "ceil",
    Round = "round",
    KindOf = "kindOf",
    KindIs = "kindIs",
    TypeOf = "typeOf",
    TypeIs = "typeIs",
    TypeIsLike = "typeIsLike",
    DeepEqual = "deepEqual",
    SemverCompare = "semverCompare",
    Semver = "semver",
    Base = "base",
    OsBase = "osBase",
    Dir = "dir",
    OsDir = "osDir",
    Ext = "ext",
    OsExt = "osExt",
    Clean = "clean",
    OsClean = "osClean",
    IsAbs = "isAbs",
    OsIsAbs = "osIsAbs",
    UrlParse = "urlParse",
    UrlJoin = "urlJoin",
    Normalize = "normalize",
    Slugify = "slugify",
}

/// Calls function `name` with evaluated `args`.
pub fn call(st: &mut State<'_>, name: &str, args: &[Value], pos: &Pos) -> R {
    // Random and crypto functions (seeded by the call's site).
    if let Some(result) = crate::random::call(st, name, args, pos) {
        return result;
    }
    call_builtin(st, Builtin::of(name), name, args)
}

/// [`call`] for a function known not to be a random or crypto one
/// ([`crate::parse::FuncKind::Plain`]): the same answer, without looking
/// the name up among those.
pub fn call_plain(st: &mut State<'_>, builtin: Option<Builtin>, name: &str, args: &[Value]) -> R {
    call_builtin(st, builtin, name, args)
}

/// Go's parameter types of `name` if it is one of [`PARAMETERS`]: a byte
/// per parameter, `s` a `string`, `i` an `int`.
pub fn scalar_params(name: &str) -> Option<&'static [u8]> {
    PARAMETERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, types)| types.as_bytes())
}

/// Go's name of a [`scalar_params`] type.
pub fn scalar_type(ty: u8) -> &'static str {
    if ty == b's' { "string" } else { "int" }
}

/// The functions other than the random and crypto ones, by family: each
/// family answers `Ok(None)` for a function not its own.
fn call_builtin(st: &mut State<'_>, builtin: Option<Builtin>, name: &str, a: &[Value]) -> R {
    let Some(builtin) = builtin else {
        if crate::dates::NAMES.contains(&name) {
            return crate::dates::call(name, a, &st.rt.now);
        }
        return Err(format!("function {name:?} not defined").into());
    };
    type Family = fn(&mut State<'_>, Builtin, &str, &[Value]) -> Result<Option<Value>, FnError>;
    const FAMILIES: [Family; 9] = [
        go_builtins,
        helm_functions,
        sprig_strings,
        sprig_flow,
        sprig_lists,
        sprig_dicts,
        sprig_math,
        types_semver_paths,
        argo_functions,
    ];
    for family in FAMILIES {
        if let Some(value) = family(st, builtin, name, a)? {
            return Ok(value);
        }
    }
    Err(format!("function {name:?} is declared but has no implementation (a bug)").into())
}

/// Go's template builtins: `not`, `len`, `index`, `slice`, `print`, the comparisons…
fn go_builtins(
    _st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    Ok(Some(match builtin {
        Builtin::Not => {
            arity(name, a, 1)?;
            Value::Bool(!a[0].truth())
        }
        Builtin::Len => {
            arity(name, a, 1)?;
            Value::Int(match &a[0] {
                // Go counts bytes.
                Value::Str(s) => crate::gostr::to_bytes(s).len(),
                Value::Bytes(b) => b.len(),
                Value::List(l) | Value::Strings(l) => l.len(),
                Value::Map(m) => m.borrow().len(),
                Value::Files(f) => f.entries().len(),
                Value::Nil => return Err("len of nil pointer".into()),
                other => return Err(format!("len of type {}", other.type_name()).into()),
            } as i64)
        }
        Builtin::Index => {
            if a.is_empty() {
                return Err("wrong number of args for index: want at least 1 got 0".into());
            }
            let mut v = a[0].clone();
            for key in &a[1..] {
                v = match (&v, key) {
                    (Value::Map(m), Value::Str(k)) => m.field(k).unwrap_or_default(),
                    (Value::Map(_), other) => {
                        return Err(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        )
                        .into());
                    }
                    (Value::List(l) | Value::Strings(l), k) => {
                        let Some(i) = k.as_int() else {
                            return Err(format!(
                                "cannot index slice/array with type {}",
                                k.type_name()
                            )
                            .into());
                        };
                        if i < 0 || i as usize >= l.len() {
                            return Err(format!("index out of range: {i}").into());
                        }
                        l[i as usize].clone()
                    }
                    (Value::Nil, _) => return Err("index of nil pointer".into()),
                    (other, _) => {
                        return Err(
                            format!("can't index item of type {}", other.type_name()).into()
                        );
                    }
                };
            }
            v
        }
        Builtin::Slice | Builtin::MustSlice => {
            if a.is_empty() {
                return Err("wrong number of args for slice: want at least 1 got 0".into());
            }
            let idx: Vec<i64> = a[1..].iter().map(|x| x.as_int().unwrap_or(-1)).collect();
            match &a[0] {
                Value::List(l) | Value::Strings(l) => {
                    let lo = idx.first().copied().unwrap_or(0);
                    let hi = idx.get(1).copied().unwrap_or(l.len() as i64);
                    if lo < 0 || hi < lo || hi as usize > l.len() {
                        return Err(format!("index out of range: {hi}").into());
                    }
                    Value::list(l[lo as usize..hi as usize].to_vec())
                }
                // Sprig's `slice` replaces Go's: lists only.
                other => {
                    return Err(format!(
                        "list should be type of slice or array but {}",
                        other.type_name()
                    )
                    .into());
                }
            }
        }
        Builtin::Print => Value::str(go_sprint(a)),
        Builtin::Println => {
            let parts: Vec<String> = a.iter().map(Value::to_go_string).collect();
            Value::str(parts.join(" ") + "\n")
        }
        Builtin::Printf => {
            if a.is_empty() {
                return Err("wrong number of args for printf: want at least 1 got 0".into());
            }
            let Value::Str(f) = &a[0] else {
                return Err(format!(
                    "wrong type for value; expected string; got {}",
                    a[0].type_name()
                )
                .into());
            };
            Value::str(sprintf(f, &a[1..]))
        }
        Builtin::Eq => {
            if a.len() < 2 {
                return Err("missing argument for comparison".into());
            }
            let mut any = false;
            for b in &a[1..] {
                if basic_eq(&a[0], b)? {
                    any = true;
                    break;
                }
            }
            Value::Bool(any)
        }
        Builtin::Ne => {
            arity(name, a, 2)?;
            Value::Bool(!basic_eq(&a[0], &a[1])?)
        }
        Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => {
            arity(name, a, 2)?;
            let o = compare(&a[0], &a[1])?;
            Value::Bool(match name {
                "lt" => o.is_lt(),
                "le" => o.is_le(),
                "gt" => o.is_gt(),
                _ => o.is_ge(),
            })
        }
        // Go's evalArgs: one string argument as it is, else fmt.Sprint.
        Builtin::Html => Value::str(crate::goescape::html(&go_sprint(a))),
        Builtin::Js => Value::str(crate::goescape::js(&go_sprint(a))),
        Builtin::Urlquery => Value::str(crate::goescape::query(&go_sprint(a))),
        Builtin::Call => {
            return Err("call is not supported: no function values in Helm charts".into());
        }
        _ => return Ok(None),
    }))
}

/// Helm's own functions: `toYaml`, `fromYaml`, `required`, `lookup`…
fn helm_functions(
    st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    let s = |i: usize| a.get(i).map(str_arg).unwrap_or_default();
    Ok(Some(match builtin {
        Builtin::Required => {
            arity(name, a, 2)?;
            match &a[1] {
                Value::Nil => return Err(FnError::Helm(s(0).into_owned())),
                Value::Str(x) if x.is_empty() => return Err(FnError::Helm(s(0).into_owned())),
                v => v.clone(),
            }
        }
        Builtin::Fail => return Err(FnError::Helm(s(0).into_owned())),
        Builtin::ToYaml | Builtin::MustToYaml | Builtin::ToYamlPretty => {
            arity(name, a, 1)?;
            to_yaml(st, &a[0])
        }
        Builtin::FromYaml => match st.rt.yaml_cache.read(&s(0)) {
            Ok(v @ Value::Map(_)) => v,
            Ok(Value::Nil) => Value::map(Map::new()),
            Ok(_) => error_map(
                "error unmarshaling JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            Err(e) => error_map(&e),
        },
        Builtin::FromYamlArray => match st.rt.yaml_cache.read(&s(0)) {
            Ok(v @ Value::List(_)) => v,
            Ok(Value::Nil) => Value::list(Vec::new()),
            Ok(_) => Value::list(vec![Value::str(
                "error unmarshaling JSON: json: cannot unmarshal object into Go value of type []interface {}",
            )]),
            Err(e) => Value::list(vec![Value::str(e)]),
        },
        Builtin::ToJson => {
            arity(name, a, 1)?;
            Value::str(convert::to_json(&a[0]))
        }
        // Sprig's `must` forms fail with the encoder's error.
        Builtin::MustToJson | Builtin::MustToPrettyJson | Builtin::MustToRawJson => {
            arity(name, a, 1)?;
            let style = match builtin {
                Builtin::MustToPrettyJson => convert::JsonStyle::Indented,
                Builtin::MustToRawJson => convert::JsonStyle::Raw,
                _ => convert::JsonStyle::Compact,
            };
            Value::str(convert::try_to_json_styled(&a[0], style).map_err(FnError::Msg)?)
        }
        Builtin::FromJson | Builtin::FromJSON => {
            match serde_json::from_str::<serde_json::Value>(&s(0)) {
                Ok(v @ serde_json::Value::Object(_)) => convert::from_json(&v),
                Ok(_) => error_map(
                    "json: cannot unmarshal into Go value of type map[string]interface {}",
                ),
                Err(e) => error_map(&e.to_string()),
            }
        }
        Builtin::FromJsonArray => match serde_json::from_str::<serde_json::Value>(&s(0)) {
            Ok(v @ serde_json::Value::Array(_)) => convert::from_json(&v),
            Ok(_) => Value::list(vec![Value::str(
                "json: cannot unmarshal into Go value of type []interface {}",
            )]),
            Err(e) => Value::list(vec![Value::str(e.to_string())]),
        },
        Builtin::ToToml | Builtin::MustToToml => {
            Value::str(convert::to_toml(&a.first().cloned().unwrap_or_default()))
        }
        // Helm's: the error as the map's `Error` key.
        Builtin::FromToml => match convert::from_toml(&s(0)) {
            Ok(v) => v,
            Err(e) => error_map(&e),
        },
        Builtin::ToPrettyJson => {
            arity(name, a, 1)?;
            Value::str(convert::to_json_styled(&a[0], convert::JsonStyle::Indented))
        }
        Builtin::ToRawJson => {
            arity(name, a, 1)?;
            Value::str(convert::to_json_styled(&a[0], convert::JsonStyle::Raw))
        }
        // Sprig's (Helm replaces `fromJson`, not this one): any JSON value,
        // an error when it is not JSON.
        Builtin::MustFromJson => match serde_json::from_str::<serde_json::Value>(&s(0)) {
            Ok(v) => convert::from_json(&v),
            Err(e) => return Err(FnError::Msg(e.to_string())),
        },
        // DNS is off in `helm template` (Helm's `--enable-dns` unset): "".
        Builtin::GetHostByName => Value::str(""),
        Builtin::Lookup => Value::map(Map::new()),
        _ => return Ok(None),
    }))
}

/// Sprig's string functions.
fn sprig_strings(
    st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    let s = |i: usize| a.get(i).map(str_arg).unwrap_or_default();
    Ok(Some(match builtin {
        Builtin::Trim => Value::str(s(0).trim_matches(is_go_space)),
        Builtin::TrimAll | Builtin::Trimall => Value::str(s(1).trim_matches(|c| s(0).contains(c))),
        Builtin::Hello => Value::str("Hello!"),
        Builtin::RegexQuoteMeta => Value::str(go_quote_meta(&s(0))),
        Builtin::TrimPrefix => {
            let t = s(1);
            Value::str(t.strip_prefix(&*s(0)).unwrap_or(&t))
        }
        Builtin::TrimSuffix => {
            let t = s(1);
            Value::str(t.strip_suffix(&*s(0)).unwrap_or(&t))
        }
        // Go maps runes: each byte that is not UTF-8 becomes U+FFFD.
        Builtin::Upper => Value::str(
            crate::gostr::lossy(&s(0))
                .chars()
                .map(go_upper_rune)
                .collect::<String>(),
        ),
        Builtin::Lower => Value::str(
            crate::gostr::lossy(&s(0))
                .chars()
                .map(go_lower_rune)
                .collect::<String>(),
        ),
        Builtin::Title => Value::str(title(&s(0))),
        Builtin::Untitle => Value::str(untitle(&s(0))),
        Builtin::Quote | Builtin::Squote => {
            let q = name == "quote";
            let parts: Vec<String> = a
                .iter()
                .filter(|v| !matches!(v, Value::Nil))
                .map(|v| {
                    if q {
                        go_quote(&str_arg(v))
                    } else {
                        format!("'{}'", str_arg(v))
                    }
                })
                .collect();
            Value::str(parts.join(" "))
        }
        Builtin::Replace => {
            arity(name, a, 3)?;
            Value::str(s(2).replace(&*s(0), &s(1)))
        }
        Builtin::Contains => Value::Bool(kiln_bytes::find(&s(1), &s(0)).is_some()),
        Builtin::HasPrefix => Value::Bool(s(1).starts_with(&*s(0))),
        Builtin::HasSuffix => Value::Bool(s(1).ends_with(&*s(0))),
        Builtin::Trunc => {
            arity(name, a, 2)?;
            // Go slices the string's bytes (a character cut in two leaves
            // bytes that are not UTF-8).
            let n = to_i64(&a[0]);
            let t = s(1);
            let bytes = crate::gostr::to_bytes(&t);
            let len = bytes.len() as i64;
            let kept = if n < 0 {
                &bytes[(len + n).max(0) as usize..]
            } else {
                &bytes[..n.min(len) as usize]
            };
            Value::str(crate::gostr::from_bytes(kept))
        }
        Builtin::Indent | Builtin::Nindent => {
            arity(name, a, 2)?;
            let width = to_i64(&a[0]).clamp(0, 10_000) as usize;
            Value::str(indent(&s(1), width, name == "nindent"))
        }
        Builtin::Join => {
            arity(name, a, 2)?;
            Value::str(str_slice(&a[1]).join(&s(0)))
        }
        Builtin::Split => {
            let mut m = Map::new();
            for (i, p) in s(1).split(&*s(0)).enumerate() {
                m.insert(format!("_{i}"), Value::str(p));
            }
            Value::map(m)
        }
        Builtin::Splitn => {
            let n = to_i64(&a[1]).max(0) as usize;
            let mut m = Map::new();
            for (i, p) in s(2).splitn(n, &*s(0)).enumerate() {
                m.insert(format!("_{i}"), Value::str(p));
            }
            Value::map(m)
        }
        Builtin::SplitList => strings(s(1).split(&*s(0)).map(str::to_owned).collect()),
        // Sprig's `regexMatch` drops the error: an invalid pattern matches
        // nothing. The others panic (Helm: an error naming the pattern).
        Builtin::RegexMatch => Value::Bool(regex(&s(0)).is_ok_and(|re| re.regex().is_match(&s(1)))),
        Builtin::MustRegexMatch => Value::Bool(regex(&s(0))?.regex().is_match(&s(1))),
        Builtin::RegexReplaceAll
        | Builtin::MustRegexReplaceAll
        | Builtin::RegexReplaceAllLiteral
        | Builtin::MustRegexReplaceAllLiteral => {
            let re = regex(&s(0))?;
            let (text, template) = (s(1), s(2));
            let literal = matches!(
                builtin,
                Builtin::RegexReplaceAllLiteral | Builtin::MustRegexReplaceAllLiteral
            );
            let budget = st.rt.limits.max_output;
            let mut out = String::with_capacity(text.len().min(budget));
            let mut last = 0;
            for caps in re.regex().captures_iter(&text) {
                let Some(m) = caps.get(0) else { continue };
                out.push_str(&text[last..m.start()]);
                if literal {
                    out.push_str(&template);
                } else {
                    re.expand(&mut out, &template, &caps);
                }
                last = m.end();
                // Checked as it grows: an empty pattern matches between
                // every two characters.
                if out.len() > budget {
                    return Err(format!(
                        "{name} built a string over the output budget of {budget} bytes"
                    )
                    .into());
                }
            }
            out.push_str(&text[last..]);
            Value::str(out)
        }
        Builtin::RegexFind | Builtin::MustRegexFind => {
            Value::str(regex(&s(0))?.regex().find(&s(1)).map_or("", |m| m.as_str()))
        }
        Builtin::RegexFindAll | Builtin::MustRegexFindAll => {
            let n = to_i64(&a[2]);
            let re = regex(&s(0))?;
            let text = s(1);
            let all: Vec<String> = re
                .regex()
                .find_iter(&text)
                .map(|m| m.as_str().to_owned())
                .collect();
            // Go's FindAllString: nil without a match (and for n == 0).
            if all.is_empty() || n == 0 {
                Value::nil_strings()
            } else {
                strings(if n < 0 {
                    all
                } else {
                    all.into_iter().take(n as usize).collect()
                })
            }
        }
        Builtin::RegexSplit | Builtin::MustRegexSplit => {
            let re = regex(&s(0))?;
            match to_i64(&a[2]) {
                // Go's nil []string (`toJson` prints null).
                0 => Value::nil_strings(),
                n => strings(go_regex_split(re.regex(), s(0).is_empty(), &s(1), n)),
            }
        }
        // The bytes of Go strings, including those that are not UTF-8.
        Builtin::B64enc => Value::str(
            base64::engine::general_purpose::STANDARD.encode(crate::gostr::to_bytes(&s(0))),
        ),
        Builtin::B64dec => match base64::engine::general_purpose::STANDARD.decode(&*s(0)) {
            Ok(b) => Value::str(crate::gostr::from_bytes(&b)),
            Err(e) => Value::str(format!(
                "illegal base64 data at input byte {}",
                base64_error_offset(&e, s(0).len())
            )),
        },
        Builtin::B32dec => match base32_decode(&crate::gostr::to_bytes(&s(0))) {
            Ok(b) => Value::str(crate::gostr::from_bytes(&b)),
            Err(at) => Value::str(format!("illegal base32 data at input byte {at}")),
        },
        Builtin::B32enc => Value::str(base32(&crate::gostr::to_bytes(&s(0)))),
        Builtin::Sha256sum => Value::str(hex(&sha2::Sha256::digest(crate::gostr::to_bytes(&s(0))))),
        Builtin::Adler32sum => Value::str(adler32(&crate::gostr::to_bytes(&s(0))).to_string()),
        Builtin::Repeat => {
            arity(name, a, 2)?;
            let n = to_i64(&a[0]).max(0) as usize;
            let t = s(1);
            if t.len().saturating_mul(n) > st.rt.limits.max_output {
                return Err(format!(
                    "repeat would build {} bytes, over the output budget of {}",
                    t.len().saturating_mul(n),
                    st.rt.limits.max_output
                )
                .into());
            }
            Value::str(t.repeat(n))
        }
        Builtin::Substr => {
            arity(name, a, 3)?;
            let t = s(2);
            let (start, end) = (to_i64(&a[0]), to_i64(&a[1]));
            let len = t.len() as i64;
            let start = if start < 0 { 0 } else { start.min(len) };
            let end = if end < 0 || end > len { len } else { end };
            Value::str(t.get(start as usize..end.max(start) as usize).unwrap_or(""))
        }
        Builtin::Nospace => Value::str(
            s(0).chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>(),
        ),
        Builtin::Abbrev => {
            let width = to_i64(&a[0]);
            let t = s(1);
            Value::str(if width < 4 {
                t.into_owned()
            } else {
                abbreviate(&t, 0, width).unwrap_or_default()
            })
        }
        Builtin::Abbrevboth => {
            let (left, right) = (to_i64(&a[0]), to_i64(&a[1]));
            let t = s(2);
            Value::str(if right < 4 || left > 0 && right < 7 {
                t.into_owned()
            } else {
                abbreviate(&t, left, right).unwrap_or_default()
            })
        }
        Builtin::Initials => Value::str(
            s(0).split_whitespace()
                .filter_map(|w| w.chars().next())
                .collect::<String>(),
        ),
        Builtin::Cat => {
            let parts: Vec<String> = a
                .iter()
                .filter(|v| !matches!(v, Value::Nil))
                .map(strval)
                .collect();
            Value::str(parts.join(" "))
        }
        Builtin::Snakecase => Value::str(crate::xcase::to_lower_case(&s(0), '_')),
        Builtin::Kebabcase => Value::str(crate::xcase::to_lower_case(&s(0), '-')),
        Builtin::Camelcase => Value::str(crate::xcase::to_camel_case(&s(0))),
        Builtin::Swapcase => Value::str(
            s(0).chars()
                .map(|c| {
                    if c.is_uppercase()
                        || matches!(c, '\u{1C5}' | '\u{1C8}' | '\u{1CB}' | '\u{1F2}')
                    {
                        go_lower_rune(c)
                    } else if c.is_lowercase() {
                        go_upper_rune(c)
                    } else {
                        c
                    }
                })
                .collect::<String>(),
        ),
        Builtin::Plural => Value::str(if to_i64(&a[2]) == 1 { s(0) } else { s(1) }),
        Builtin::Wrap => Value::str(word_wrap(&s(1), to_i64(&a[0]), "", false)),
        Builtin::WrapWith => Value::str(word_wrap(&s(2), to_i64(&a[0]), &s(1), true)),
        Builtin::ToString => Value::str(s(0)),
        Builtin::ToStrings => strings(str_slice(&a[0])),
        // strconv.Atoi: no spaces, no base prefix.
        Builtin::Atoi => Value::Int(s(0).parse().unwrap_or(0)),
        Builtin::Int => Value::Int(to_i64(&a[0])),
        Builtin::Int64 => Value::Int64(to_i64(&a[0])),
        Builtin::Float64 => Value::Float(to_f64(&a[0])),
        Builtin::ToDecimal => Value::Int64(i64::from_str_radix(&s(0), 8).unwrap_or(0)),
        Builtin::Shuffle => Value::str(s(0)),
        _ => return Ok(None),
    }))
}

/// Sprig's defaults and flow: `default`, `empty`, `coalesce`, `ternary`…
fn sprig_flow(
    _st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    Ok(Some(match builtin {
        Builtin::Default => {
            if a.is_empty() {
                return Err("wrong number of args for default: want at least 1 got 0".into());
            }
            match a.get(1) {
                Some(v) if !empty(v) => v.clone(),
                _ => a[0].clone(),
            }
        }
        Builtin::Empty => Value::Bool(a.first().is_none_or(empty)),
        Builtin::Coalesce => a.iter().find(|v| !empty(v)).cloned().unwrap_or_default(),
        Builtin::All => Value::Bool(a.iter().all(|v| !empty(v))),
        Builtin::Any => Value::Bool(a.iter().any(|v| !empty(v))),
        Builtin::Ternary => {
            arity(name, a, 3)?;
            if a[2].truth() {
                a[0].clone()
            } else {
                a[1].clone()
            }
        }
        _ => return Ok(None),
    }))
}

/// Sprig's list functions.
fn sprig_lists(
    st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    Ok(Some(match builtin {
        Builtin::List | Builtin::Tuple => Value::list(a.to_vec()),
        Builtin::Append | Builtin::MustAppend => {
            arity(name, a, 2)?;
            let mut l =
                list_of(&a[0]).map_err(|_| format!("Cannot push on type {}", a[0].type_name()))?;
            l.push(a[1].clone());
            Value::list(l)
        }
        Builtin::Prepend | Builtin::MustPrepend => {
            let mut l = list_of(&a[0])?;
            l.insert(0, a[1].clone());
            Value::list(l)
        }
        Builtin::First | Builtin::MustFirst => list_of(&a[0])?.first().cloned().unwrap_or_default(),
        Builtin::Last | Builtin::MustLast => list_of(&a[0])?.last().cloned().unwrap_or_default(),
        Builtin::Rest | Builtin::MustRest => {
            Value::list(list_of(&a[0])?.into_iter().skip(1).collect())
        }
        Builtin::Initial | Builtin::MustInitial => {
            let mut l = list_of(&a[0])?;
            l.pop();
            Value::list(l)
        }
        Builtin::Uniq | Builtin::MustUniq => {
            let mut out: Vec<Value> = Vec::new();
            for v in list_of(&a[0])? {
                if !out.iter().any(|x| deep_equal(x, &v)) {
                    out.push(v);
                }
            }
            Value::list(out)
        }
        Builtin::Has | Builtin::MustHas => {
            Value::Bool(list_of(&a[1])?.iter().any(|x| deep_equal(x, &a[0])))
        }
        Builtin::Without | Builtin::MustWithout => {
            let l = list_of(&a[0])?;
            Value::list(
                l.into_iter()
                    .filter(|x| !a[1..].iter().any(|y| deep_equal(x, y)))
                    .collect(),
            )
        }
        Builtin::Compact | Builtin::MustCompact => {
            Value::list(list_of(&a[0])?.into_iter().filter(|v| !empty(v)).collect())
        }
        Builtin::Concat => {
            let mut out = Vec::new();
            for l in a {
                out.extend(list_of(l)?);
            }
            Value::list(out)
        }
        Builtin::Reverse | Builtin::MustReverse => {
            Value::list(list_of(&a[0])?.into_iter().rev().collect())
        }
        Builtin::SortAlpha => {
            let mut l: Vec<String> = list_of(&a[0])?.iter().map(strval).collect();
            l.sort();
            strings(l)
        }
        Builtin::Until => {
            let n = to_i64(&a[0]);
            budget_range(st, n.unsigned_abs())?;
            Value::list(if n >= 0 {
                (0..n).map(Value::Int).collect()
            } else {
                (n + 1..=0).rev().map(Value::Int).collect()
            })
        }
        Builtin::UntilStep => {
            let (start, stop, step) = (to_i64(&a[0]), to_i64(&a[1]), to_i64(&a[2]));
            let mut out = Vec::new();
            if step != 0 {
                let mut i = start;
                while (step > 0 && i < stop) || (step < 0 && i > stop) {
                    budget_range(st, 1)?;
                    out.push(Value::Int(i));
                    i += step;
                }
            }
            Value::list(out)
        }
        Builtin::Seq => {
            let nums: Vec<i64> = a.iter().map(to_i64).collect();
            let (start, step, end) = match nums.as_slice() {
                [e] => (1, 1, *e),
                [s, e] => (*s, if s <= e { 1 } else { -1 }, *e),
                [s, st2, e] => (*s, *st2, *e),
                _ => return Err("seq takes 1 to 3 arguments".into()),
            };
            let mut out = Vec::new();
            if step != 0 {
                let mut i = start;
                while (step > 0 && i <= end) || (step < 0 && i >= end) {
                    budget_range(st, 1)?;
                    out.push(i.to_string());
                    i += step;
                }
            }
            Value::str(out.join(" "))
        }
        Builtin::Chunk | Builtin::MustChunk => {
            let size = to_i64(&a[0]).max(1) as usize;
            Value::list(
                list_of(&a[1])?
                    .chunks(size)
                    .map(|c| Value::list(c.to_vec()))
                    .collect(),
            )
        }
        _ => return Ok(None),
    }))
}

/// Sprig's dict functions.
fn sprig_dicts(
    st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    let s = |i: usize| a.get(i).map(str_arg).unwrap_or_default();
    Ok(Some(match builtin {
        Builtin::Dict => {
            let mut m = Map::new();
            for pair in a.chunks(2) {
                m.insert(strval(&pair[0]), pair.get(1).cloned().unwrap_or_default());
            }
            Value::map(m)
        }
        Builtin::Get => nil_or_dict(&a[0], name)?
            .and_then(|m| m.get(&*s(1)).cloned())
            .unwrap_or_else(|| Value::str("")),
        Builtin::Set => {
            arity(name, a, 3)?;
            if nil_or_dict(&a[0], name)?.is_none() {
                // Go's runtime error, recovered by the executor.
                return Err("assignment to entry in nil map".into());
            }
            if let Value::Map(m) = &a[0] {
                // The key first: it may be the map itself, printed.
                let key = s(1).into_owned();
                st.rt.memo.changed(m.born());
                m.borrow_mut().insert(key, a[2].clone());
            }
            a[0].clone()
        }
        Builtin::Unset => {
            if nil_or_dict(&a[0], name)?.is_none() {
                // Deleting from a nil map does nothing; it prints `map[]`.
                return Ok(Some(Value::map(Map::new())));
            }
            if let Value::Map(m) = &a[0] {
                let key = s(1).into_owned();
                st.rt.memo.changed(m.born());
                m.borrow_mut().remove(&key);
            }
            a[0].clone()
        }
        Builtin::HasKey => match &a[0] {
            // Not `dict_of`: asking a template dot for a key is not
            // reading it whole (`MapCell::contains_key`).
            Value::Map(m) => Value::Bool(m.contains_key(&s(1))),
            Value::Nil => Value::Bool(false),
            other => return Err(not_a_dict(other, name)),
        },
        Builtin::Keys => {
            let mut k = Vec::new();
            for d in a {
                if let Some(d) = nil_or_dict(d, name)? {
                    k.extend(d.keys().cloned());
                }
            }
            strings(k)
        }
        Builtin::Values => Value::list(
            nil_or_dict(&a[0], name)?
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default(),
        ),
        Builtin::Merge
        | Builtin::MustMerge
        | Builtin::MergeOverwrite
        | Builtin::MustMergeOverwrite => {
            let overwrite = name.ends_with("Overwrite");
            for d in a {
                nil_or_dict(d, name)?;
            }
            // Sprig merges into its first argument (a Go map, shared), and
            // mergo into its nested maps, in place; one source after the
            // other (a source sees what the ones before it wrote). Into a
            // nil map, mergo merges into a new one.
            let dst = match &a[0] {
                Value::Nil => Value::map(Map::new()),
                dst => dst.clone(),
            };
            if let Value::Map(dst) = &dst {
                for src in &a[1..] {
                    // Read before written: a source may be the
                    // destination, or hold it.
                    let Some(src) = nil_or_dict(src, name)?.map(|m| m.clone()) else {
                        continue;
                    };
                    merge_into(dst, &src, overwrite, &mut st.rt.memo, 0)
                        .map_err(|e| FnError::Msg(format!("{name}: {e}")))?;
                }
            }
            dst
        }
        Builtin::DeepCopy | Builtin::MustDeepCopy => a[0].deep_copy(),
        Builtin::Pick | Builtin::Omit if matches!(a.first(), Some(Value::Nil)) => {
            Value::map(Map::new())
        }
        Builtin::Pick => {
            let m = dict_of(&a[0], name)?;
            let keys: Vec<String> = a[1..].iter().map(strval).collect();
            Value::map(
                m.iter()
                    .filter(|(k, _)| keys.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        }
        Builtin::Omit => {
            let m = dict_of(&a[0], name)?;
            let keys: Vec<String> = a[1..].iter().map(strval).collect();
            Value::map(
                m.iter()
                    .filter(|(k, _)| !keys.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        }
        Builtin::Pluck => {
            let key = s(0);
            Value::list(
                a[1..]
                    .iter()
                    .filter_map(|d| d.as_map()?.get(&*key).cloned())
                    .collect(),
            )
        }
        Builtin::Dig => {
            if a.len() < 3 {
                return Err("dig needs at least three arguments".into());
            }
            let dict = &a[a.len() - 1];
            let default = &a[a.len() - 2];
            let mut cur = dict.clone();
            for k in &a[..a.len() - 2] {
                let next = cur.as_map().and_then(|m| m.get(&strval(k)).cloned());
                match next {
                    Some(v) => cur = v,
                    None => return Ok(Some(default.clone())),
                }
            }
            cur
        }
        _ => return Ok(None),
    }))
}

/// Sprig's math (int64, as Sprig's cast does).
fn sprig_math(
    _st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    Ok(Some(match builtin {
        Builtin::Add => Value::Int64(a.iter().map(to_i64).fold(0i64, i64::wrapping_add)),
        Builtin::Add1f => Value::Float(to_f64(&a[0]) + 1.0),
        Builtin::Add1 => Value::Int64(to_i64(&a[0]).wrapping_add(1)),
        Builtin::Sub => Value::Int64(to_i64(&a[0]).wrapping_sub(to_i64(&a[1]))),
        Builtin::Mul => Value::Int64(a.iter().map(to_i64).fold(1i64, i64::wrapping_mul)),
        Builtin::Div | Builtin::Mod => {
            let d = to_i64(&a[1]);
            if d == 0 {
                return Err("runtime error: integer divide by zero".into());
            }
            Value::Int64(if name == "div" {
                to_i64(&a[0]).wrapping_div(d)
            } else {
                to_i64(&a[0]).wrapping_rem(d)
            })
        }
        Builtin::Max | Builtin::Biggest => Value::Int64(a.iter().map(to_i64).max().unwrap_or(0)),
        Builtin::Min => Value::Int64(a.iter().map(to_i64).min().unwrap_or(0)),
        Builtin::Addf => Value::Float(a.iter().map(to_f64).sum()),
        Builtin::Subf => Value::Float(a[1..].iter().map(to_f64).fold(to_f64(&a[0]), |x, y| x - y)),
        Builtin::Mulf => Value::Float(a.iter().map(to_f64).product()),
        Builtin::Divf => Value::Float(a[1..].iter().map(to_f64).fold(to_f64(&a[0]), |x, y| x / y)),
        Builtin::Maxf => Value::Float(a.iter().map(to_f64).fold(f64::MIN, f64::max)),
        Builtin::Minf => Value::Float(a.iter().map(to_f64).fold(f64::MAX, f64::min)),
        Builtin::Floor => Value::Float(to_f64(&a[0]).floor()),
        Builtin::Ceil => Value::Float(to_f64(&a[0]).ceil()),
        Builtin::Round => {
            let p = a.get(1).map_or(0, to_i64) as i32;
            let m = 10f64.powi(p);
            Value::Float((to_f64(&a[0]) * m).round() / m)
        }
        _ => return Ok(None),
    }))
}

/// Type checks and conversions, semver, paths and URLs.
/// Argo CD's ApplicationSet functions: `normalize` (its `SanitizeName`)
/// and `slugify` (`[MAX [SMART]] TEXT`: lower case, runs of other
/// characters than `a-z`, `0-9` one `-`, at most MAX bytes (default 50),
/// cut at a `-` when SMART, default true).
fn argo_functions(
    _st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    Ok(Some(match builtin {
        Builtin::Normalize => {
            arity(name, a, 1)?;
            let lowered = str_arg(&a[0]).to_lowercase();
            let mut out: String = lowered
                .chars()
                .map(|c| {
                    if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            out.truncate(253);
            Value::str(out.trim_matches(['-', '.']))
        }
        Builtin::Slugify => {
            let (max, smart, text) = match a {
                [text] => (50, true, str_arg(text)),
                [max, text] => (to_i64(max), true, str_arg(text)),
                [max, smart, text] => (to_i64(max), smart.truth(), str_arg(text)),
                _ => {
                    return Err(format!(
                        "wrong number of args for {name}: want 1 to 3 got {}",
                        a.len()
                    )
                    .into());
                }
            };
            let mut slug = String::new();
            for c in text.to_lowercase().chars() {
                if c.is_ascii_lowercase() || c.is_ascii_digit() {
                    slug.push(c);
                } else if !slug.ends_with('-') {
                    slug.push('-');
                }
            }
            let mut slug = slug.trim_matches('-').to_owned();
            let max = usize::try_from(max).unwrap_or(0);
            if max > 0 && slug.len() > max {
                let cut = if smart {
                    slug[..=max.min(slug.len() - 1)]
                        .rfind('-')
                        .filter(|&i| i > 0)
                        .unwrap_or(max)
                } else {
                    max
                };
                slug.truncate(cut.min(max));
                slug = slug.trim_matches('-').to_owned();
            }
            Value::str(slug)
        }
        _ => return Ok(None),
    }))
}

fn types_semver_paths(
    _st: &mut State<'_>,
    builtin: Builtin,
    name: &str,
    a: &[Value],
) -> Result<Option<Value>, FnError> {
    let s = |i: usize| a.get(i).map(str_arg).unwrap_or_default();
    Ok(Some(match builtin {
        Builtin::KindOf => Value::str(a[0].kind_name()),
        Builtin::KindIs => Value::Bool(s(0) == a[1].kind_name()),
        Builtin::TypeOf => Value::str(a[0].type_name()),
        Builtin::TypeIs => Value::Bool(s(0) == a[1].type_name()),
        Builtin::TypeIsLike => {
            Value::Bool(s(0) == a[1].type_name() || s(0) == format!("*{}", a[1].type_name()))
        }
        Builtin::DeepEqual => Value::Bool(deep_equal(&a[0], &a[1])),

        // ---- semver
        Builtin::SemverCompare => {
            arity(name, a, 2)?;
            Value::Bool(semver::matches(&s(0), &s(1)).map_err(FnError::Msg)?)
        }
        Builtin::Semver => {
            arity(name, a, 1)?;
            let text = s(0);
            crate::goobj::GoObject::Semver {
                version: semver::new_version(&text).map_err(FnError::Msg)?,
                original: text.into_owned(),
                pointer: true,
            }
            .value()
        }

        // ---- dates: `now` is the render's clock (crate::dates).

        // ---- paths
        // Go's `path`, and `path/filepath` on Linux (the same).
        Builtin::Base | Builtin::OsBase => Value::str(crate::gopath::base(&s(0))),
        Builtin::Dir | Builtin::OsDir => Value::str(crate::gopath::dir(&s(0))),
        Builtin::Ext | Builtin::OsExt => Value::str(crate::gopath::ext(&s(0))),
        Builtin::Clean | Builtin::OsClean => Value::str(crate::gopath::clean(&s(0))),
        Builtin::IsAbs | Builtin::OsIsAbs => Value::Bool(crate::gopath::is_abs(&s(0))),
        Builtin::UrlParse => {
            arity(name, a, 1)?;
            let Value::Str(url) = &a[0] else {
                return Err(format!(
                    "wrong type for value; expected string; got {}",
                    a[0].type_name()
                )
                .into());
            };
            crate::urls::url_parse(url)?
        }
        Builtin::UrlJoin => {
            arity(name, a, 1)?;
            match nil_or_dict(&a[0], name)? {
                Some(parts) => crate::urls::url_join(&parts)?,
                None => crate::urls::url_join(&Map::new())?,
            }
        }
        _ => return Ok(None),
    }))
}

fn budget_range(st: &mut State<'_>, n: u64) -> Result<(), FnError> {
    st.rt.steps = st.rt.steps.saturating_add(n);
    if st.rt.steps > st.rt.limits.max_steps {
        return Err(format!(
            "more than {} template steps (a limit against hostile charts)",
            st.rt.limits.max_steps
        )
        .into());
    }
    Ok(())
}

fn include_error(name: &str) -> impl Fn(ExecError) -> FnError + '_ {
    move |e| match e {
        ExecError::Go { message, .. }
            if message.starts_with(&format!("template {name:?} not defined")) =>
        {
            FnError::Msg(format!(
                "template: no template {name:?} associated with template \"gotpl\""
            ))
        }
        other => FnError::Nested(other),
    }
}

/// `include` and `tpl`, kept out of [`call`] so that template recursion
/// does not carry its large stack frame.
pub fn call_nested(st: &mut State<'_>, name: &str, a: &[Value], pos: &Pos) -> R {
    if a.len() != 2 {
        return Err(format!("wrong number of args for {name}: want 2 got {}", a.len()).into());
    }
    if name == "tpl" {
        // Helm's `tpl`: the text parsed as a template among the chart's,
        // run with `dot`.
        return Ok(st.call_tpl(&strval(&a[0]), a[1].clone(), pos)?);
    }
    let Value::Str(n) = &a[0] else {
        return Err("include: the template name must be a string".into());
    };
    st.call_template(n, a[1].clone(), pos)
        .map_err(include_error(n))
}

/// Sprig's `indent` (`nindent`: a newline first): `width` spaces before
/// the text and after each of its newlines.
fn indent(text: &str, width: usize, newline_first: bool) -> String {
    const SPACES: &str = "                                ";
    let lines = kiln_bytes::count(text.as_bytes(), b'\n') + 1;
    let mut out = String::with_capacity(text.len() + lines * width + 1);
    if newline_first {
        out.push('\n');
    }
    // Lines found eight bytes a step (`str::split` goes through `memchr`,
    // four bytes a step inside WebAssembly).
    for (i, line) in kiln_bytes::split_lines(text).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut pad = width;
        while pad > 0 {
            let step = pad.min(SPACES.len());
            out.push_str(&SPACES[..step]);
            pad -= step;
        }
        out.push_str(line);
    }
    out
}

fn error_map(msg: &str) -> Value {
    let mut m = Map::new();
    m.insert("Error".into(), Value::str(msg));
    Value::map(m)
}

/// Go's `fmt.Sprint`: spaces only between operands that are not strings.
fn go_sprint(a: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in a.iter().enumerate() {
        if i > 0 && !matches!(v, Value::Str(_)) && !matches!(a[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        out.push_str(&v.to_go_string());
    }
    out
}

/// Sprig's `empty`.
pub fn empty(v: &Value) -> bool {
    !v.truth()
}

/// `reflect.DeepEqual` on template values.
pub fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) | (Value::Int64(x), Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Go(x), Value::Go(y)) => {
            x.type_name() == y.type_name() && x.go_string() == y.go_string()
        }
        (Value::Time(x), Value::Time(y)) => x.deep_eq(y),
        (Value::List(x), Value::List(y)) | (Value::Strings(x), Value::Strings(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| deep_equal(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => false,
    }
}

/// Nesting of maps `merge` follows at most (a map that holds itself
/// would have it recurse for ever; Go's runs out of stack).
const MAX_MERGE_DEPTH: usize = 100;

/// mergo's `Merge` of `src` into `dst`, in place as in Go, key by key:
/// - a nil source value is skipped, or with `overwrite` written;
/// - a map in both is merged into `dst`'s map itself (every holder of
///   that map sees it), and `dst` keeps it unless it is still empty
///   (then it takes the source's map);
/// - otherwise, with `overwrite` the source value is written, and without
///   it only where `dst` lacks the key or holds an empty value.
///
/// A written value is the source's own (shared, as Go shares maps). Each
/// map written is reported to the `include` memo.
fn merge_into(
    dst: &Rc<MapCell>,
    src: &Map,
    overwrite: bool,
    memo: &mut crate::incmemo::IncludeMemo,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_MERGE_DEPTH {
        return Err(format!("maps nested more than {MAX_MERGE_DEPTH} deep"));
    }
    for (k, v) in src {
        let existing = crate::value::lookup(&dst.borrow(), k).cloned();
        let write = match (existing, v) {
            (_, Value::Nil) => overwrite,
            (Some(Value::Map(d)), Value::Map(s)) => {
                if !Rc::ptr_eq(&d, s) {
                    // Read before written: `s` may hold `d`.
                    let s = s.borrow().clone();
                    merge_into(&d, &s, overwrite, memo, depth + 1)?;
                }
                d.borrow().is_empty()
            }
            (Some(existing), _) => overwrite || empty(&existing),
            (None, _) => true,
        };
        if write {
            memo.changed(dst.born());
            dst.borrow_mut().insert(k.clone(), v.clone());
        }
    }
    Ok(())
}

fn is_go_space(c: char) -> bool {
    c.is_whitespace()
}

/// Go's `strings.Title`: the first rune after a separator title-cased
/// (ASCII letters, digits and `_` are not separators; beyond ASCII,
/// letters and digits are not, spaces are, the rest are not).
fn title(s: &str) -> String {
    let separator = |c: char| {
        if c.is_ascii() {
            !(c.is_ascii_alphanumeric() || c == '_')
        } else if c.is_alphabetic() || c.is_numeric() {
            false
        } else {
            c.is_whitespace()
        }
    };
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let out = if separator(prev) { go_title_rune(c) } else { c };
            prev = c;
            out
        })
        .collect()
}

/// Go's `unicode.ToUpper` (simple case mapping: one rune for one rune; a
/// rune whose upper case is several stays).
pub fn go_upper_rune(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `unicode.ToLower` (simple case mapping).
pub fn go_lower_rune(c: char) -> char {
    if c == '\u{130}' {
        return 'i';
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Go's `unicode.ToTitle`: upper case, except the digraphs that have a
/// title case of their own.
pub fn go_title_rune(c: char) -> char {
    match c {
        '\u{1C4}'..='\u{1C6}' => '\u{1C5}',
        '\u{1C7}'..='\u{1C9}' => '\u{1C8}',
        '\u{1CA}'..='\u{1CC}' => '\u{1CB}',
        '\u{1F1}'..='\u{1F3}' => '\u{1F2}',
        c => go_upper_rune(c),
    }
}

/// Sprig's `strslice`: a list's items as strings, nils left out; another
/// value as one string; nil as none.
fn str_slice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) | Value::Strings(l) => l
            .iter()
            .filter(|x| !matches!(x, Value::Nil))
            .map(strval)
            .collect(),
        Value::Nil => Vec::new(),
        other => vec![strval(other)],
    }
}

/// Where Go's base64 decoder reports the first error.
fn base64_error_offset(error: &base64::DecodeError, len: usize) -> usize {
    match error {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            *at
        }
        // Go reports the start of the incomplete quantum.
        base64::DecodeError::InvalidLength(_) => len / 4 * 4,
        base64::DecodeError::InvalidPadding => len,
    }
}

fn untitle(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace();
    }
    out
}

/// goutils' `AbbreviateFull` (Sprig's `abbrev`, `abbrevboth`), on bytes as
/// Go slices strings: `None` where it returns an error (width too small).
fn abbreviate(text: &str, offset: i64, width: i64) -> Option<String> {
    let b = crate::gostr::to_bytes(text);
    let len = b.len() as i64;
    if b.is_empty() {
        return Some(String::new());
    }
    if width < 4 {
        return None;
    }
    if len <= width {
        return Some(text.to_owned());
    }
    let mut offset = offset.min(len);
    if len - offset < width - 3 {
        offset = len - (width - 3);
    }
    let cut =
        |from: i64, to: i64| crate::gostr::from_bytes(&b[from as usize..to as usize]).into_owned();
    if offset <= 4 {
        return Some(format!("{}...", cut(0, width - 3)));
    }
    if width < 7 {
        return None;
    }
    if offset + width - 3 < len {
        let rest = cut(offset, len);
        return Some(format!("...{}", abbreviate(&rest, 0, width - 3)?));
    }
    Some(format!("...{}", cut(len - (width - 3), len)))
}

/// goutils' `WrapCustom` (Sprig's `wrap`, `wrapWith`): breaks at the last
/// space within `width` bytes; a longer word is cut (`wrap_long`) or left
/// whole; spaces starting a line are dropped.
fn word_wrap(text: &str, width: i64, newline: &str, wrap_long: bool) -> String {
    let b = crate::gostr::to_bytes(text);
    if b.is_empty() {
        return String::new();
    }
    let newline = if newline.is_empty() {
        b"\n".to_vec()
    } else {
        crate::gostr::to_bytes(newline).into_owned()
    };
    let width = width.max(1) as usize;
    let mut out: Vec<u8> = Vec::with_capacity(b.len() + b.len() / width * newline.len());
    let mut offset = 0;
    while b.len() - offset > width {
        if b[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = width + offset + 1;
        if let Some(space) = b[offset..end].iter().rposition(|&c| c == b' ') {
            out.extend_from_slice(&b[offset..offset + space]);
            out.extend_from_slice(&newline);
            offset += space + 1;
        } else if wrap_long {
            out.extend_from_slice(&b[offset..offset + width]);
            out.extend_from_slice(&newline);
            offset += width;
        } else {
            let end = width + offset;
            match b[end..].iter().position(|&c| c == b' ') {
                None => {
                    out.extend_from_slice(&b[offset..]);
                    offset = b.len();
                }
                Some(i) => {
                    out.extend_from_slice(&b[offset..end + i]);
                    out.extend_from_slice(&newline);
                    offset = end + i + 1;
                }
            }
        }
    }
    out.extend_from_slice(&b[offset..]);
    crate::gostr::from_bytes(&out).into_owned()
}

/// Go's `Regexp.Split(s, n)`: at most `n` pieces (all when `n < 0`, none
/// when `n == 0`); an empty match at the start splits nothing off.
fn go_regex_split(re: &regex::Regex, empty_pattern: bool, text: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    // Go asks whether the pattern as written is empty (`(?U)` is not).
    if !empty_pattern && text.is_empty() {
        return vec![String::new()];
    }
    let mut out = Vec::new();
    let (mut begin, mut end) = (0, 0);
    for m in re.find_iter(text) {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = m.start();
        if m.end() != 0 {
            out.push(text[begin..end].to_owned());
        }
        begin = m.end();
    }
    if end != text.len() {
        out.push(text[begin..].to_owned());
    }
    out
}

/// A pattern in Go's syntax, compiled ([`crate::goregex`]: read as Go
/// reads it).
///
/// The last [`REGEX_CACHE`] patterns of at most [`REGEX_CACHE_PATTERN`]
/// bytes are kept compiled: a chart calls `regexMatch` with one pattern in
/// a loop (a compile costs tens of microseconds, a match one).
fn regex(pattern: &str) -> Result<Rc<crate::goregex::GoRegex>, FnError> {
    thread_local! {
        static COMPILED: std::cell::RefCell<Vec<(String, Rc<crate::goregex::GoRegex>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let cached = COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        let i = c.iter().position(|(p, _)| p == pattern)?;
        let hit = c.remove(i);
        let re = hit.1.clone();
        c.insert(0, hit);
        Some(re)
    });
    if let Some(re) = cached {
        return Ok(re);
    }
    let re = Rc::new(crate::goregex::GoRegex::new(pattern).map_err(FnError::Msg)?);
    if pattern.len() <= REGEX_CACHE_PATTERN {
        COMPILED.with(|c| {
            let mut c = c.borrow_mut();
            c.truncate(REGEX_CACHE - 1);
            c.insert(0, (pattern.to_owned(), re.clone()));
        });
    }
    Ok(re)
}

/// How many compiled patterns [`regex`] keeps.
const REGEX_CACHE: usize = 8;
/// The longest pattern [`regex`] keeps compiled, in bytes.
const REGEX_CACHE_PATTERN: usize = 1024;

fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for &x in b {
        s.push(char::from(DIGITS[usize::from(x >> 4)]));
        s.push(char::from(DIGITS[usize::from(x & 0xf)]));
    }
    s
}

fn base32(data: &[u8]) -> String {
    const ALPHA: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(ALPHA[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Go's `base32.StdEncoding.DecodeString`: padded blocks of eight
/// (newlines skipped); `Err` is the offset of the first illegal byte.
fn base32_decode(text: &[u8]) -> Result<Vec<u8>, usize> {
    let symbols: Vec<(usize, u8)> = text
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, c)| *c != b'\r' && *c != b'\n')
        .collect();
    let mut out = Vec::with_capacity(symbols.len() * 5 / 8);
    for block in symbols.chunks(8) {
        if block.len() < 8 {
            // An illegal byte first, else the incomplete block's start.
            let illegal = block
                .iter()
                .find(|(_, c)| !matches!(c, b'A'..=b'Z' | b'2'..=b'7' | b'='));
            return Err(illegal.map_or(block[0].0, |(at, _)| *at));
        }
        let mut bits = 0u64;
        let mut data = 0;
        for (i, &(at, c)) in block.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'2'..=b'7' => c - b'2' + 26,
                b'=' if i >= 2 && block[i..].iter().all(|(_, c)| *c == b'=') => break,
                _ => return Err(at),
            };
            bits = (bits << 5) | u64::from(v);
            data += 1;
        }
        let bytes = match data {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => return Err(block[data].0),
        };
        bits <<= 5 * (8 - data);
        for i in 0..bytes {
            out.push((bits >> (32 - 8 * i)) as u8);
        }
        if data < 8 {
            // Padding ends the data.
            break;
        }
    }
    Ok(out)
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Go's `regexp.QuoteMeta`: a backslash before each of `\.+*?()|[]{}^$`.
fn go_quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sprig's formula, as this crate wrote it before [`indent`].
    fn indent_by_replace(text: &str, width: usize, newline_first: bool) -> String {
        let pad = " ".repeat(width);
        let body = format!("{pad}{}", text.replace('\n', &format!("\n{pad}")));
        if newline_first {
            format!("\n{body}")
        } else {
            body
        }
    }

    /// Each builtin is found by its name, and the names the executor
    /// calls itself are not builtins.
    #[test]
    fn builtins_are_found_by_their_names() {
        for name in Builtin::NAMES {
            let builtin = Builtin::of(name).unwrap();
            assert!(format!("{builtin:?}").eq_ignore_ascii_case(name), "{name}");
            assert!(exists(name) || exists_in_argo(name), "{name}");
        }
        // Each dialect has its own.
        assert!(exists_in_argo("normalize") && !exists("normalize"));
        assert!(exists("include") && !exists_in_argo("include"));
        assert!(exists("toYaml") && exists_in_argo("toYaml") && exists_in_argo("dict"));
        assert!(!exists_in_argo("getHostByName") && !exists_in_argo("lookup"));
        for name in EXECUTOR_NAMES {
            assert!(Builtin::of(name).is_none() && exists(name), "{name}");
        }
        assert!(!exists("nosuch") && !exists("Dict"));
    }

    #[test]
    fn argo_s_normalize_and_slugify() {
        let run = |text: &str| {
            let mut trees = crate::parse::Trees::new();
            crate::parse::parse("", text, &mut trees, &exists_in_argo).unwrap();
            let mut rt = crate::exec::Runtime::new(trees, crate::exec::Limits::default());
            rt.execute("", Value::Nil).unwrap()
        };
        assert_eq!(run("{{ normalize \"My_App.V2-\" }}"), "my-app.v2");
        assert_eq!(
            run("{{ slugify \"Hello, World! Über\" }}"),
            "hello-world-ber"
        );
        assert_eq!(run("{{ slugify 11 \"hello-wonderful-world\" }}"), "hello");
        assert_eq!(
            run("{{ slugify 11 false \"hello-wonderful-world\" }}"),
            "hello-wonde"
        );
    }

    #[test]
    fn indent_is_sprig_s_pad_and_replace() {
        let texts = [
            "",
            "a",
            "\n",
            "\n\n",
            "a\nb",
            "a\r\nb\n",
            "ünï\ncödé\n\n",
            "\u{FFFD}\n\t x",
        ];
        for text in texts {
            for width in [0, 1, 4, 17] {
                for first in [false, true] {
                    assert_eq!(
                        indent(text, width, first),
                        indent_by_replace(text, width, first),
                        "{text:?} {width} {first}"
                    );
                }
            }
        }
    }
}
