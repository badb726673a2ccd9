//! Kubernetes objects as they flow through the pipeline, and parsing them
//! from YAML or JSON text.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::interrupt::Interrupt;

pub use kiln_yaml_limits::{ExpansionError, YamlLimits};
use serde::Deserialize as _;
use serde_json::{Map, Value};

/// One Kubernetes object of a rendered set, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    value: Map<String, Value>,
    source: Option<String>,
}

impl Object {
    /// An object from its fields and, for messages, where it came from.
    pub fn new(value: Map<String, Value>, source: Option<String>) -> Self {
        Self { value, source }
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.str_field("apiVersion").unwrap_or_default()
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.str_field("kind").unwrap_or_default()
    }

    /// `metadata.name` (or `metadata.generateName`).
    pub fn name(&self) -> &str {
        self.metadata_str("name")
            .or_else(|| self.metadata_str("generateName"))
            .unwrap_or_default()
    }

    /// `metadata.namespace`, when set.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata_str("namespace")
    }

    /// Where the object came from (a path relative to the source root, or a
    /// name a plugin chose), for messages.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The whole object.
    pub fn value(&self) -> &Map<String, Value> {
        &self.value
    }

    /// The object as compact JSON.
    pub fn to_json(&self) -> String {
        // A `Map<String, Value>` always serializes.
        serde_json::to_string(&self.value).unwrap_or_default()
    }

    /// `Kind/namespace/name` (or `Kind/name`), the way people name objects.
    pub fn display_name(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{}/{ns}/{}", self.kind(), self.name()),
            None => format!("{}/{}", self.kind(), self.name()),
        }
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.value.get(key).and_then(Value::as_str)
    }

    fn metadata_str(&self, key: &str) -> Option<&str> {
        self.value.get("metadata")?.get(key)?.as_str()
    }
}

/// The identity of an object in a cluster: group, kind, namespace, name.
/// Versions are not part of it: one object is served at several versions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct ObjectKey {
    /// API group ("" for the core group).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object (`apiVersion`, `kind`, `metadata`).
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Object(map) => Self::of_map(map),
            _ => Self::of_map(&Map::new()),
        }
    }

    /// [`ObjectKey::of`] the fields of an object.
    pub fn of_map(value: &Map<String, Value>) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let api_version = text(value.get("apiVersion"));
        let metadata = |field: &str| value.get("metadata").and_then(|m| m.get(field));
        Self {
            group: api_version
                .rsplit_once('/')
                .map(|(g, _)| g.to_owned())
                .unwrap_or_default(),
            kind: text(value.get("kind")),
            namespace: metadata("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .map(str::to_owned),
            name: text(metadata("name")),
        }
    }
}

impl fmt::Display for ObjectKey {
    /// `apps/Deployment default/web`, `Namespace team` (core group, cluster-scoped).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        write!(f, "{} ", self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)
    }
}

/// A manifest that is not a valid Kubernetes object, located as precisely
/// as the parser allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The file (or name) the text came from.
    pub file: Option<String>,
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(source), Some(line)) => write!(f, "{source}:{line}: {}", self.message),
            (Some(source), None) => write!(f, "{source}: {}", self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

/// How much one render may parse, over all its texts: every file of a
/// directory render, every manifest one plugin call returns. Without it,
/// many texts each within their own limits (a file is at most 16 MiB, a
/// plugin's output 32 MiB) add up to gigabytes of values: a YAML or JSON
/// text holds up to two nodes per byte, each tens of bytes once parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLimits {
    /// Bytes of text. Default: [`ParseLimits::DEFAULT_BYTES`].
    pub bytes: u64,
    /// Nodes of the values parsed (scalars, sequences, mappings; keys
    /// count; aliases expanded). Default: [`ParseLimits::DEFAULT_NODES`].
    pub nodes: u64,
}

impl ParseLimits {
    /// 64 MiB of manifests per render (twice a plugin's default output).
    pub const DEFAULT_BYTES: u64 = 64 << 20;
    /// 4,000,000 nodes per render: about 300 MiB of values at most, some 60
    /// MiB of ordinary YAML.
    pub const DEFAULT_NODES: u64 = 4_000_000;
}

impl Default for ParseLimits {
    fn default() -> Self {
        Self {
            bytes: Self::DEFAULT_BYTES,
            nodes: Self::DEFAULT_NODES,
        }
    }
}

/// Why a parse ended early: its render was given up.
const STOPPED: &str = "stopped: the render was given up (its deadline passed)";

/// What is left of one render's [`ParseLimits`]; shared by its texts (and
/// threads).
#[derive(Debug)]
pub struct ParseBudget {
    limits: ParseLimits,
    bytes: AtomicU64,
    nodes: AtomicU64,
    interrupt: Interrupt,
}

impl ParseBudget {
    /// A full budget.
    pub fn new(limits: ParseLimits) -> Self {
        Self {
            limits,
            bytes: AtomicU64::new(limits.bytes),
            nodes: AtomicU64::new(limits.nodes),
            interrupt: Interrupt::new(),
        }
    }

    /// The same, stopping at the next text or document once `interrupt` is
    /// raised (the render was given up).
    pub fn with_interrupt(mut self, interrupt: Interrupt) -> Self {
        self.interrupt = interrupt;
        self
    }

    /// An error naming `file` if the render was given up.
    pub fn check_interrupt(&self, file: Option<&str>) -> Result<(), ManifestError> {
        if self.interrupt.is_raised() {
            return Err(ManifestError {
                file: file.map(str::to_owned),
                line: None,
                message: STOPPED.into(),
            });
        }
        Ok(())
    }

    /// The limits it started from.
    pub fn limits(&self) -> ParseLimits {
        self.limits
    }

    fn take(left: &AtomicU64, amount: u64) -> bool {
        left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(amount)
        })
        .is_ok()
    }

    fn nodes_left(&self) -> u64 {
        self.nodes.load(Ordering::Relaxed)
    }
}

/// Parses every document of a YAML (or JSON: JSON is YAML) text into
/// objects, in order. Empty documents are skipped; `List` kinds (anything
/// whose kind ends in `List` and that has `items`) are flattened into their
/// items. Every object must be a mapping with `apiVersion`, `kind` and
/// `metadata.name` (or `generateName`). A text whose aliases expand beyond
/// [`YamlLimits::default`] is refused before it is parsed, and so is one
/// beyond [`ParseLimits::default`].
pub fn parse(text: &str, source: Option<&str>) -> Result<Vec<Object>, ManifestError> {
    parse_within(text, source, &ParseBudget::new(ParseLimits::default()))
}

/// [`parse`], charging the text's bytes and its values' nodes to `budget`
/// (one render's): refused, naming the file, when either runs out. The
/// nodes are bounded before anything is parsed: a text that could hold more
/// than are left is counted first (streaming, holding nothing).
pub fn parse_within(
    text: &str,
    source: Option<&str>,
    budget: &ParseBudget,
) -> Result<Vec<Object>, ManifestError> {
    let error = |line: Option<usize>, message: String| ManifestError {
        file: source.map(str::to_owned),
        line,
        message,
    };
    let limits = budget.limits();
    budget.check_interrupt(source)?;
    if !ParseBudget::take(&budget.bytes, text.len() as u64) {
        return Err(error(
            None,
            format!(
                "the render's manifests pass {} bytes, the most one render may read",
                limits.bytes
            ),
        ));
    }
    let out_of_nodes = || {
        error(
            None,
            format!(
                "the render's manifests hold more than {} nodes, the most one render may parse",
                limits.nodes
            ),
        )
    };
    let left = budget.nodes_left();
    let objects = parse_text(text, source, left, &budget.interrupt, &error)
        .map_err(|e| e.unwrap_or_else(out_of_nodes))?;
    let nodes: u64 = objects.iter().map(|o| nodes_of_map(&o.value)).sum();
    if !ParseBudget::take(&budget.nodes, nodes) {
        return Err(out_of_nodes());
    }
    Ok(objects)
}

/// The objects of `text`, holding at most `nodes` nodes: `Err(None)` when
/// it holds more.
fn parse_text(
    text: &str,
    source: Option<&str>,
    nodes: u64,
    interrupt: &Interrupt,
    error: &dyn Fn(Option<usize>, String) -> ManifestError,
) -> Result<Vec<Object>, Option<ManifestError>> {
    let mut objects = Vec::new();
    // One JSON object, what most renderers return: the JSON parser reads
    // it several times faster than the YAML one, to the same value, and
    // JSON has no aliases to bound. Any text it refuses (not JSON, several
    // documents, too deep) is read as YAML below, with the YAML reader's
    // errors. A text that could hold more nodes than are left is counted
    // first, as it streams by.
    if text.trim_start().starts_with('{') {
        let within = kiln_yaml_limits::most_nodes_without_aliases(text.len()) <= nodes
            || !matches!(
                kiln_yaml_limits::count_nodes(&mut serde_json::Deserializer::from_str(text), nodes),
                Ok(None)
            );
        if !within {
            return Err(None);
        }
        if let Ok(map) = serde_json::from_str::<Map<String, Value>>(text) {
            flatten(map, source, 1, &mut objects).map_err(|m| Some(error(None, m)))?;
            return Ok(objects);
        }
    }
    let limits = YamlLimits {
        max_nodes: YamlLimits::default().max_nodes.min(nodes),
        ..YamlLimits::default()
    };
    match kiln_yaml_limits::check(text, &limits) {
        Ok(()) => {}
        // What ran out is the render's budget, not the text's own.
        Err(e)
            if matches!(
                e.excess,
                kiln_yaml_limits::Excess::Nodes | kiln_yaml_limits::Excess::Aliases
            ) && e.limit < YamlLimits::default().budget(text.len()) =>
        {
            return Err(None);
        }
        Err(e) => return Err(Some(error(e.line, e.to_string()))),
    }
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        if interrupt.is_raised() {
            return Err(Some(error(None, STOPPED.into())));
        }
        let value = Value::deserialize(document).map_err(|e| {
            Some(error(
                e.location().map(|l| l.line()),
                format!("invalid YAML: {}", strip_location(&e.to_string())),
            ))
        })?;
        let document = index + 1;
        match value {
            Value::Null => {}
            Value::Object(map) => {
                flatten(map, source, document, &mut objects).map_err(|m| Some(error(None, m)))?
            }
            other => {
                return Err(Some(error(
                    None,
                    format!(
                        "document {document} is a {}, not a Kubernetes object",
                        type_name(&other)
                    ),
                )));
            }
        }
    }
    Ok(objects)
}

/// The nodes of a mapping as [`kiln_yaml_limits`] counts them (itself, and
/// each key and value), iteratively: no depth exhausts the stack.
fn nodes_of_map(map: &Map<String, Value>) -> u64 {
    fn entries<'a>(map: &'a Map<String, Value>, stack: &mut Vec<&'a Value>) -> u64 {
        stack.extend(map.values());
        map.len() as u64
    }
    let mut stack = Vec::new();
    let mut count = 1 + entries(map, &mut stack);
    while let Some(value) = stack.pop() {
        count += 1;
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => count += entries(map, &mut stack),
            _ => {}
        }
    }
    count
}

fn flatten(
    map: Map<String, Value>,
    source: Option<&str>,
    document: usize,
    out: &mut Vec<Object>,
) -> Result<(), String> {
    let is_list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && map.get("items").is_some_and(Value::is_array);
    if is_list {
        let Some(Value::Array(items)) = map.get("items") else {
            unreachable!("checked above")
        };
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Object(item) => flatten(item.clone(), source, document, out)?,
                other => {
                    return Err(format!(
                        "document {document}: items[{i}] is a {}, not an object",
                        type_name(other)
                    ));
                }
            }
        }
        return Ok(());
    }
    let object = Object {
        value: map,
        source: source.map(str::to_owned),
    };
    let missing = if object.str_field("apiVersion").is_none_or(str::is_empty) {
        Some("apiVersion")
    } else if object.str_field("kind").is_none_or(str::is_empty) {
        Some("kind")
    } else if object.name().is_empty() {
        Some("metadata.name")
    } else {
        None
    };
    if let Some(field) = missing {
        return Err(format!("document {document}: object has no `{field}`"));
    }
    out.push(object);
    Ok(())
}

/// Checks that a YAML text from outside (a file, a plugin's output, a
/// request body, a settings file) expands its aliases no further than
/// [`YamlLimits::default`] allows for its size: every such text goes
/// through this before it is parsed (docs/security.md, "YAML parsing
/// limits").
pub fn check_yaml(text: &str) -> Result<(), ExpansionError> {
    kiln_yaml_limits::check(text, &YamlLimits::default())
}

/// serde_yaml appends "at line L column C" to its messages; the line is
/// reported separately.
fn strip_location(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// Writes objects as one multi-document YAML stream, as `kubectl` and
/// `kustomize build` print YAML (go-yaml v2's emitter, [`kiln_goyaml`]): a
/// string is quoted whenever a YAML 1.1 reader — `kubectl apply -f`, every
/// Go tool — would read the plain text as something else (`"yes"`, `"on"`,
/// `"017"`, `"2024-01-01"`), so the text means what the objects mean.
pub fn to_yaml_stream(objects: &[Object]) -> String {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&kiln_goyaml::document(&Value::Object(object.value.clone())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_object_reads_as_its_yaml_reading() {
        let texts = [
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"z":"1","a":"2"}},"data":{"x":"\u00e9\n\t\"\\/","n":1,"f":1.5,"e":1e3,"neg":-7,"t":true,"nil":null,"l":[1,"a",{"b":[]}]}}"#,
            "  {\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"b\", \"namespace\": \"n\"}}]}\n",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"1","k":"2"}}"#,
        ];
        for text in texts {
            let json = parse(text, Some("x.json")).unwrap();
            // A leading document marker sends the same text to the YAML reader.
            let yaml = parse(&format!("---\n{text}"), Some("x.json")).unwrap();
            assert_eq!(json, yaml, "{text}");
        }
    }

    #[test]
    fn a_json_escape_of_a_character_beyond_the_bmp_is_read() {
        // Valid JSON (a surrogate pair) that the YAML reader refuses.
        let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"\ud83d\ude00"}}"#;
        let objects = parse(text, None).unwrap();
        assert_eq!(objects[0].value()["data"]["x"], "\u{1f600}");
    }

    #[test]
    fn a_json_object_the_json_reader_refuses_gets_the_yaml_readers_error() {
        let cases = [
            // Not an object of Kubernetes: the same message either way.
            r#"{"kind":"ConfigMap"}"#.to_owned(),
            // Too deep for the JSON reader's recursion limit.
            format!("{}{}", "{\"a\":".repeat(200), "}".repeat(200)),
            // Two documents.
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\n[]"
                .to_owned(),
        ];
        for text in cases {
            // (The document marker moves the YAML reader's lines by one.)
            let ours = parse(&text, Some("x.json")).unwrap_err().message;
            let yaml = parse(&format!("---\n{text}"), Some("x.json"))
                .unwrap_err()
                .message;
            assert_eq!(ours, yaml);
        }
    }

    #[test]
    fn multi_document_and_lists() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b, namespace: n}}\n";
        let objects = parse(text, Some("x.yaml")).unwrap();
        let names: Vec<_> = objects.iter().map(Object::display_name).collect();
        assert_eq!(names, ["ConfigMap/a", "Secret/n/b"]);
        assert_eq!(objects[1].source(), Some("x.yaml"));
    }

    #[test]
    fn printed_strings_keep_their_meaning_for_yaml_1_1_readers() {
        // kubectl and every Go tool read YAML 1.1: a plain `yes` is a
        // boolean there, `017` the number 15, `1_000` a thousand,
        // `2024-01-01` a timestamp. Strings like these must come out quoted.
        let forms = [
            "y",
            "Y",
            "yes",
            "NO",
            "on",
            "Off",
            "~",
            "null",
            "017",
            "0x1F",
            "1_000",
            "1e3",
            "190:20:30",
            ".inf",
            "2024-01-01",
            "2024-01-01T10:00:00Z",
        ];
        let data: Map<String, Value> = forms
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("k{i}"), Value::String((*f).to_owned())))
            .collect();
        let object = Object::new(
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "annotations": {"patched": "yes"}},
                "data": data,
            })
            .as_object()
            .unwrap()
            .clone(),
            None,
        );
        let text = to_yaml_stream(std::slice::from_ref(&object));
        for (i, form) in forms.iter().enumerate() {
            assert!(
                text.contains(&format!("  k{i}: \"{form}\"\n")),
                "{form:?} is not double-quoted in:\n{text}"
            );
        }
        assert!(text.contains("    patched: \"yes\"\n"), "{text}");
        // What was printed reads back as the same object.
        assert_eq!(parse(&text, None).unwrap()[0].value(), object.value());
    }

    #[test]
    fn broken_yaml_names_file_and_line() {
        let err = parse(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [a\n",
            Some("apps/web/cm.yaml"),
        )
        .unwrap_err();
        assert_eq!(err.file.as_deref(), Some("apps/web/cm.yaml"));
        assert_eq!(err.line, Some(5), "{err}");
        assert!(
            err.to_string()
                .starts_with("apps/web/cm.yaml:5: invalid YAML"),
            "{err}"
        );
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_is_parsed() {
        // One anchor of 3000 items referenced 3000 times: 9 million values
        // from 15 KB.
        let items = vec!["1"; 3000].join(",");
        let refs = vec!["*a"; 3000].join(",");
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\na: &a [{items}]\nb: [{refs}]\n"
        );
        // Not `unwrap_err`: it would print 9 million values.
        let Err(err) = parse(&text, Some("apps/web/bomb.yaml")) else {
            panic!("the bomb was parsed");
        };
        let limit = YamlLimits::default().budget(text.len());
        assert_eq!(
            err.to_string(),
            format!(
                "apps/web/bomb.yaml:4: YAML aliases expand to more than {limit} nodes, \
                 the limit for {} bytes of YAML (an alias bomb?)",
                text.len()
            )
        );
        // The same bomb as one flow mapping: it starts like the JSON a
        // renderer returns, is not JSON, and is bounded as YAML.
        let flow = format!(
            "{{apiVersion: v1, kind: ConfigMap, metadata: {{name: x}}, a: &a [{items}], b: [{refs}]}}"
        );
        let Err(err) = parse(&flow, Some("bomb.json")) else {
            panic!("the flow bomb was parsed");
        };
        assert!(err.to_string().contains("an alias bomb?"), "{err}");
        // JSON holds no aliases: a `*` in its strings is text.
        let json = r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"*a"},"rules":[{"verbs":["*"]}]}"#;
        assert_eq!(
            parse(json, None).unwrap()[0].value()["rules"][0]["verbs"][0],
            "*"
        );
        let few = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: &l {a: b}, annotations: *l}\n";
        assert_eq!(
            parse(few, None).unwrap()[0].value()["metadata"]["annotations"]["a"],
            "b"
        );
    }

    #[test]
    fn objects_need_identity() {
        let err = parse("apiVersion: v1\nkind: ConfigMap\n", None).unwrap_err();
        assert!(err.message.contains("metadata.name"), "{err}");
        let err = parse("- a\n- b\n", None).unwrap_err();
        assert!(err.message.contains("is a list"), "{err}");
    }
}
