//! `configMapGenerator` and `secretGenerator`, and kustomize's content hash.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::Failure;
use crate::fs::{self, Files};
use crate::kustomization::{Generator, GeneratorOptions};
use crate::restrict::LoadRestrictor;

/// ConfigMap or Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratedKind {
    /// `configMapGenerator`.
    ConfigMap,
    /// `secretGenerator`.
    Secret,
}

impl GeneratedKind {
    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            GeneratedKind::ConfigMap => "ConfigMap",
            GeneratedKind::Secret => "Secret",
        }
    }
}

/// A generated object, before the layer's transformations.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The object.
    pub object: Value,
    /// Whether its name gets the content hash suffix.
    pub hashed: bool,
    /// What it does to an object of the same id already in the build.
    pub behavior: Behavior,
}

/// A generator's `behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// `create` (the default): a new object; one with its id already in
    /// the build is an error.
    Create,
    /// `merge`: its data, labels and annotations merged into the object
    /// with its id.
    Merge,
    /// `replace`: its data replaces the object's.
    Replace,
}

impl Behavior {
    /// Reads a `behavior` value as kustomize does: a value other than
    /// `merge` or `replace` (unset, `create`, or anything else, `add`
    /// included) behaves like `create`.
    pub fn parse(value: Option<&str>) -> Behavior {
        match value {
            Some("merge") => Behavior::Merge,
            Some("replace") => Behavior::Replace,
            _ => Behavior::Create,
        }
    }

    /// The name kustomize's messages use.
    pub fn name(self) -> &'static str {
        match self {
            Behavior::Create => "create",
            Behavior::Merge => "merge",
            Behavior::Replace => "replace",
        }
    }
}

/// Generates one object. `dir` is the kustomization's directory, `file` the
/// kustomization (for messages), `global` its `generatorOptions`.
pub fn generate(
    files: &dyn Files,
    dir: &str,
    file: &str,
    kind: GeneratedKind,
    generator: &Generator,
    global: Option<&GeneratorOptions>,
    restrictor: LoadRestrictor,
) -> Result<Generated, Failure> {
    let what = format!("{} {:?}", kind.name(), generator.name);
    let fail = |message: String| Failure::new(file, format!("{what}: {message}"));
    let mut data: BTreeMap<String, Entry> = BTreeMap::new();
    let mut put = |key: String, value: Entry| -> Result<(), Failure> {
        if key.is_empty() {
            return Err(fail("an entry has an empty key".into()));
        }
        // One key space for `data` and `binaryData`, as in kustomize.
        if data.insert(key.clone(), value).is_some() {
            return Err(fail(format!("key {key:?} is defined twice")));
        }
        Ok(())
    };
    for literal in &generator.literals {
        let (key, value) = literal
            .split_once('=')
            .ok_or_else(|| fail(format!("literal {literal:?} is not KEY=VALUE")))?;
        put(key.to_owned(), Entry::Text(unquote(value).to_owned()))?;
    }
    let full = |path: &str| -> Result<String, Failure> {
        let full = fs::join(dir, path)
            .ok_or_else(|| fail(format!("{path:?} climbs above the repository root")))?;
        restrictor.check(dir, file, &what, path, &full)?;
        Ok(full)
    };
    for entry in &generator.files {
        let (key, path) = match entry.split_once('=') {
            Some((key, path)) => (key.to_owned(), path),
            None => (
                entry.rsplit('/').next().unwrap_or(entry).to_owned(),
                entry.as_str(),
            ),
        };
        let bytes = files
            .read_bytes(&full(path)?)
            .map_err(|e| fail(format!("cannot read {path:?}: {e}")))?;
        put(key, Entry::from_bytes(bytes))?;
    }
    for env in generator.envs.iter().chain(&generator.env) {
        let text = files
            .read(&full(env)?)
            .map_err(|e| fail(format!("cannot read {env:?}: {e}")))?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once('=').ok_or_else(|| {
                fail(format!(
                    "{env}:{}: {line:?} is not KEY=VALUE (values from the environment are not available in the sandbox)",
                    number + 1
                ))
            })?;
            put(key.to_owned(), Entry::Text(value.to_owned()))?;
        }
    }

    let mut options = GeneratorOptions::default();
    for layer in global.into_iter().chain(generator.options.as_ref()) {
        options.labels.extend(layer.labels.clone());
        options.annotations.extend(layer.annotations.clone());
        // Disabled by either: kustomize ORs the two.
        if layer.disable_name_suffix_hash == Some(true) {
            options.disable_name_suffix_hash = Some(true);
        }
        if layer.immutable.is_some() {
            options.immutable = layer.immutable;
        }
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), generator.name.clone().into());
    if let Some(namespace) = &generator.namespace {
        metadata.insert("namespace".into(), namespace.clone().into());
    }
    if !options.labels.is_empty() {
        metadata.insert("labels".into(), json!(options.labels));
    }
    if !options.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(options.annotations));
    }
    let mut object = json!({"apiVersion": "v1", "kind": kind.name(), "metadata": metadata});
    match kind {
        GeneratedKind::ConfigMap => {
            // Text goes to `data`, anything else to `binaryData` (base64).
            let mut text = BTreeMap::new();
            let mut binary = BTreeMap::new();
            for (key, value) in data {
                match value {
                    Entry::Text(value) => text.insert(key, value),
                    Entry::Binary(bytes) => binary.insert(key, encode(&bytes)),
                };
            }
            if !binary.is_empty() {
                object["binaryData"] = json!(binary);
            }
            if !text.is_empty() {
                object["data"] = json!(text);
            }
        }
        GeneratedKind::Secret => {
            let encoded: BTreeMap<String, String> = data
                .into_iter()
                .map(|(k, v)| (k, encode(v.bytes())))
                .collect();
            // kustomize writes a Secret's `data` even when it is empty.
            object["data"] = json!(encoded);
            object["type"] = generator
                .type_
                .clone()
                .unwrap_or_else(|| "Opaque".into())
                .into();
        }
    }
    if options.immutable == Some(true) {
        object["immutable"] = true.into();
    }
    let behavior = Behavior::parse(generator.behavior.as_deref());
    Ok(Generated {
        object,
        hashed: options.disable_name_suffix_hash != Some(true),
        behavior,
    })
}

/// A generated entry's value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// UTF-8 text: a ConfigMap's `data`.
    Text(String),
    /// Anything else (a `.tar.gz`, an image): a ConfigMap's `binaryData`.
    Binary(Vec<u8>),
}

impl Entry {
    /// A file's content, classified as kustomize does: text when it is
    /// valid UTF-8.
    fn from_bytes(bytes: Vec<u8>) -> Entry {
        match String::from_utf8(bytes) {
            Ok(text) => Entry::Text(text),
            Err(e) => Entry::Binary(e.into_bytes()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Entry::Text(text) => text.as_bytes(),
            Entry::Binary(bytes) => bytes,
        }
    }
}

/// Base64 as kustomize writes Secret data and ConfigMap `binaryData`:
/// lines of 70 characters, each ending with a newline, once the encoding is
/// that long.
fn encode(value: &[u8]) -> String {
    const LINE: usize = 70;
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    if encoded.len() < LINE {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + encoded.len() / LINE + 1);
    for chunk in encoded.as_bytes().chunks(LINE) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// `"value"` and `'value'` lose their quotes, as in kustomize.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// kustomize's content hash of a generated ConfigMap or Secret: SHA-256 of
/// Go's JSON encoding of `{data, kind, name: ""}` (plus `binaryData`, or
/// `type` for Secrets), its first ten hex digits with `0 1 3 a e` mapped to
/// `g h k m t` so that the suffix never looks like a number or a word.
pub fn hash(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default();
    let mut encoded = Map::new();
    encoded.insert("kind".into(), kind.into());
    encoded.insert("name".into(), "".into());
    // A ConfigMap without `data` hashes its data as the empty string.
    let missing = if kind == "Secret" {
        Value::Null
    } else {
        Value::from("")
    };
    encoded.insert(
        "data".into(),
        object.get("data").cloned().unwrap_or(missing),
    );
    if kind == "Secret" {
        encoded.insert(
            "type".into(),
            object.get("type").cloned().unwrap_or(Value::Null),
        );
    } else if let Some(binary) = object
        .get("binaryData")
        .filter(|b| b.as_object().is_some_and(|m| !m.is_empty()))
    {
        encoded.insert("binaryData".into(), binary.clone());
    }
    let text = go_json(&Value::Object(encoded));
    let digest = hex(&Sha256::digest(text.as_bytes()));
    digest[..10]
        .chars()
        .map(|c| match c {
            '0' => 'g',
            '1' => 'h',
            '3' => 'k',
            'a' => 'm',
            'e' => 't',
            other => other,
        })
        .collect()
}

/// JSON as Go's `encoding/json` writes it: sorted keys, and `<`, `>`, `&`,
/// U+2028, U+2029 escaped.
fn go_json(value: &Value) -> String {
    // serde_json's Map is ordered by key here (no `preserve_order`).
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_kustomize() {
        // Figures from `kubectl kustomize` (v5.5).
        let cm = json!({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}});
        assert_eq!(hash(&cm), "4h2mbtbbt6");
        let cm = json!({"kind": "ConfigMap", "metadata": {"name": "app-config"},
            "data": {"color": "blue", "size": "<10>&"}});
        assert_eq!(hash(&cm), "bbf7248mmf");
    }

    #[test]
    fn empty_generated_objects_hash_as_kustomize() {
        // `kubectl kustomize` (v5.5): a ConfigMap without data, a Secret
        // with `data: {}`.
        let cm = json!({"kind": "ConfigMap", "metadata": {"name": "empty"}});
        assert_eq!(hash(&cm), "6ct58987ht");
        let secret = json!({"kind": "Secret", "metadata": {"name": "emptys"},
            "data": {}, "type": "Opaque"});
        assert_eq!(hash(&secret), "46f8b28mk5");
    }

    /// Files with arbitrary bytes ([`fs::MemoryFiles`] holds text only).
    struct ByteFiles(BTreeMap<String, Vec<u8>>);

    impl Files for ByteFiles {
        fn read(&self, path: &str) -> Result<String, String> {
            String::from_utf8(self.read_bytes(path)?).map_err(|e| format!("{path}: {e}"))
        }

        fn read_bytes(&self, path: &str) -> Result<Vec<u8>, String> {
            self.0
                .get(path)
                .cloned()
                .ok_or_else(|| format!("{path}: no such file"))
        }

        fn kind(&self, path: &str) -> Option<fs::Kind> {
            self.0.contains_key(path).then_some(fs::Kind::File)
        }
    }

    const GZIP: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x00\x01";

    fn binary_files() -> ByteFiles {
        let long: Vec<u8> = (176..=255u8).rev().chain([0x00, 0xff]).collect();
        ByteFiles(BTreeMap::from([
            ("k/bundle.tar.gz".to_owned(), GZIP.to_vec()),
            ("k/long.bin".to_owned(), long),
            ("k/notes.txt".to_owned(), b"plain text\n".to_vec()),
        ]))
    }

    fn generator(name: &str, files: &[&str], literals: &[&str]) -> Generator {
        Generator {
            name: name.into(),
            files: files.iter().map(|f| (*f).to_owned()).collect(),
            literals: literals.iter().map(|l| (*l).to_owned()).collect(),
            ..Generator::default()
        }
    }

    #[test]
    fn non_utf8_files_become_binary_data_as_in_kustomize() {
        // Figures from `kubectl kustomize` (v5.5) on the same bytes
        // (tests/kustomize/76-binary-generator-files/base).
        let files = binary_files();
        let cm = |g: &Generator| {
            generate(
                &files,
                "k",
                "k/kustomization.yaml",
                GeneratedKind::ConfigMap,
                g,
                None,
                LoadRestrictor::default(),
            )
            .unwrap()
            .object
        };
        let only = cm(&generator("only-binary", &["bundle.tar.gz"], &[]));
        assert_eq!(
            only["binaryData"],
            json!({"bundle.tar.gz": "H4sIAAAAAAAA/wAB"})
        );
        assert_eq!(only.get("data"), None);
        assert_eq!(hash(&only), "tkmdb787c5");

        let assets = cm(&generator(
            "assets",
            &["bundle.tar.gz", "renamed.bin=long.bin", "notes.txt"],
            &["mode=fast"],
        ));
        assert_eq!(
            assets["binaryData"]["renamed.bin"],
            "//79/Pv6+fj39vX08/Lx8O/u7ezr6uno5+bl5OPi4eDf3t3c29rZ2NfW1dTT0tHQz87NzM\n\
             vKycjHxsXEw8LBwL++vby7urm4t7a1tLOysbAA/w==\n"
        );
        assert_eq!(
            assets["data"],
            json!({"mode": "fast", "notes.txt": "plain text\n"})
        );
        assert_eq!(hash(&assets), "2ccfkb94fh");

        let secret = generate(
            &files,
            "k",
            "k/kustomization.yaml",
            GeneratedKind::Secret,
            &generator("keys", &["bundle.tar.gz"], &[]),
            None,
            LoadRestrictor::default(),
        )
        .unwrap()
        .object;
        assert_eq!(secret["data"], json!({"bundle.tar.gz": "H4sIAAAAAAAA/wAB"}));
        assert_eq!(secret.get("binaryData"), None);
    }

    #[test]
    fn a_key_in_data_and_binary_data_is_defined_twice() {
        let g = generator("dup", &["notes.txt=bundle.tar.gz"], &["notes.txt=x"]);
        let e = generate(
            &binary_files(),
            "k",
            "k/kustomization.yaml",
            GeneratedKind::ConfigMap,
            &g,
            None,
            LoadRestrictor::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("defined twice"), "{e}");
    }

    #[test]
    fn behaviors_other_than_merge_and_replace_create() {
        assert_eq!(Behavior::parse(Some("merge")), Behavior::Merge);
        assert_eq!(Behavior::parse(Some("replace")), Behavior::Replace);
        for value in [None, Some("create"), Some("add"), Some(""), Some("Merge")] {
            assert_eq!(Behavior::parse(value), Behavior::Create, "{value:?}");
        }
    }
}
