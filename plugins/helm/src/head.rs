//! One YAML parse of each rendered document for two readers: Helm's
//! install-order sort (its `kind` and `helm.sh/hook` annotation, read from
//! the document as Helm's `SortManifests` reads it) and the plugin's
//! conversion of the document to JSON (read as `helm template` prints it:
//! followed by a newline).
//!
//! The two texts differ only by that trailing newline, which can change
//! one thing: the last scalar of the document when it is a block scalar
//! (`|`, `>`: its final line break, kept or clipped). So the document is
//! parsed once as printed; the sort takes its `kind` and hook from that
//! parse unless one of them could be such a scalar (a string ending in a
//! line break, or a hook that is not a string), in which case the document
//! is parsed again the sort's way. Any parse failure falls back to the
//! sort's own parse too, so that its error (or success) is exactly the
//! sort's.
//!
//! The parse as printed is [`fast::read`]'s when it is sure of the
//! document (nearly every rendered document: block YAML of one-line
//! scalars), about eight times faster than `serde_yaml`'s and with a
//! fraction of its allocations; `serde_yaml`'s otherwise.

mod fast;

/// What the sort reads of a document, and the document as JSON.
#[derive(Debug)]
pub struct Head {
    /// Its `kind` ("" if absent or not a string).
    pub kind: String,
    /// Its `metadata.annotations["helm.sh/hook"]`, as text.
    pub hook: Option<String>,
    /// The document as `helm template` prints it, as JSON text (written as
    /// `serde_json::Value::to_string` writes it); None when it must be read
    /// again from its text (a YAML tag, a key that is not a string: the
    /// plugin's own conversion decides those).
    pub json: Option<String>,
}

/// Reads `doc` (a rendered document, without its trailing newline): with
/// the [`fast`] reader when it is sure of the document, else with
/// `serde_yaml`.
pub fn read(doc: &str) -> Result<Head, serde_yaml::Error> {
    match fast::read(doc).and_then(from_fast) {
        Some(head) => Ok(head),
        None => read_with_serde_yaml(doc),
    }
}

/// The head of a document the fast reader read, when the sort reads the
/// same from it: None when the kind or the hook could be a block scalar
/// whose final line break the printed newline changes, or when the hook
/// is not a string.
fn from_fast(read: fast::Read) -> Option<Head> {
    // A kind that is not a string (`kind: yes`, a boolean to YAML 1.1):
    // the sort reads it its own way.
    let kind = match &read.kind {
        Some(serde_json::Value::String(kind)) => kind.as_str(),
        None => "",
        Some(_) => return None,
    };
    let hook = match read.hook {
        None => None,
        Some(serde_json::Value::String(s)) if !s.ends_with('\n') => Some(s),
        Some(_) => return None,
    };
    if kind.ends_with('\n') {
        return None;
    }
    Some(Head {
        kind: kind.to_owned(),
        hook,
        json: Some(read.json),
    })
}

/// [`read`] with `serde_yaml` only.
fn read_with_serde_yaml(doc: &str) -> Result<Head, serde_yaml::Error> {
    if let Ok(printed) = lenient(&format!("{doc}\n")) {
        let kind = kind_of(&printed);
        let hook = printed
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get("helm.sh/hook"));
        let exact = !kind.ends_with('\n')
            && match hook {
                None => true,
                Some(serde_yaml::Value::String(s)) => !s.ends_with('\n'),
                Some(_) => false,
            };
        if exact {
            let hook = hook.and_then(serde_yaml::Value::as_str).map(str::to_owned);
            return Ok(Head {
                kind,
                hook,
                json: output_json(&format!("{doc}\n")).ok(),
            });
        }
    }
    let head = lenient(doc)?;
    let hook = head
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get("helm.sh/hook"))
        .map(|h| match h {
            serde_yaml::Value::String(s) => s.clone(),
            other => serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_owned(),
        });
    Ok(Head {
        kind: kind_of(&head),
        hook,
        json: None,
    })
}

/// Go's JSON name of what `doc` is when it is neither a mapping nor null
/// (`array`, `string`, `number`, `bool`): what Helm cannot read a
/// document's head from. `json` is the document as JSON when known.
pub fn not_an_object(doc: &str, json: Option<&str>) -> Option<&'static str> {
    let name = |v: &serde_json::Value| match v {
        serde_json::Value::Array(_) => Some("array"),
        serde_json::Value::String(_) => Some("string"),
        serde_json::Value::Number(_) => Some("number"),
        serde_json::Value::Bool(_) => Some("bool"),
        serde_json::Value::Null | serde_json::Value::Object(_) => None,
    };
    match json.map(str::trim_start) {
        Some(j) if j.starts_with('{') || j.starts_with("null") => None,
        Some(j) => serde_json::from_str::<serde_json::Value>(j)
            .ok()
            .as_ref()
            .and_then(name),
        None => lenient(doc)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok())
            .as_ref()
            .and_then(name),
    }
}

/// `text` read as Helm's YAML reader (go-yaml v2) reads it: a key repeated
/// in one mapping keeps its last value (serde_yaml refuses it; the text is
/// then read again through serde_json's map, which keeps the last).
fn lenient(text: &str) -> Result<serde_yaml::Value, serde_yaml::Error> {
    match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Err(e) if e.to_string().contains("duplicate entry") => {
            let last_wins: serde_json::Value = serde_yaml::from_str(text).map_err(|_| e)?;
            serde_yaml::to_value(last_wins)
        }
        other => other,
    }
}

/// The printed document `text` as Helm's install reads it
/// ([`crate::yaml11::read_output`]: YAML 1.1, as go-yaml v2) and Go's JSON
/// encoder writes it. A text that reader refuses but libyaml reads (they
/// differ on a few odd texts) is read as libyaml reads it (YAML 1.2
/// scalars, as before YAML 1.1 was followed); the reader's error when
/// neither reads it.
pub fn output_json(text: &str) -> Result<String, String> {
    let value = match crate::yaml11::read_output(text) {
        Ok(value) => value,
        Err(error) => {
            return lenient(text)
                .ok()
                .and_then(to_json)
                .map(|json| json.to_string())
                .ok_or(error);
        }
    };
    // Strings as written (a template's bytes stay as the plugin carries
    // them, for `json_for_yaml_readers`).
    crate::convert::json_at(&value, 0, false)
        .map(|json| json.to_string())
        .ok_or_else(|| "json: a mapping holds itself".to_owned())
}

fn kind_of(doc: &serde_yaml::Value) -> String {
    doc.get("kind")
        .and_then(serde_yaml::Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The value as reading the same text into a `serde_json::Value` gives
/// it (the same events through the same deserializer), or None where the
/// two could differ: a tagged value, a key that is not a string (JSON
/// reads its text).
fn to_json(value: serde_yaml::Value) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    use serde_yaml::Value as Y;
    Some(match value {
        Y::Null => J::Null,
        Y::Bool(b) => J::Bool(b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                J::from(u)
            } else if let Some(i) = n.as_i64() {
                J::from(i)
            } else {
                // serde_json reads a NaN or an infinity as null.
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(J::Null, J::Number)
            }
        }
        Y::String(s) => J::String(s),
        Y::Sequence(items) => J::Array(items.into_iter().map(to_json).collect::<Option<_>>()?),
        Y::Mapping(map) => J::Object(
            map.into_iter()
                .map(|(k, v)| match k {
                    Y::String(k) => Some((k, to_json(v)?)),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        Y::Tagged(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of the full reader (Helm's install's reading).
    fn direct(doc: &str) -> Option<serde_json::Value> {
        output_json(&format!("{doc}\n"))
            .ok()
            .map(|json| serde_json::from_str(&json).unwrap())
    }

    #[test]
    fn the_json_is_what_reading_the_printed_text_gives() {
        for doc in [
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"1\"\n  y: 1\n  z: -3\n  f: 1.5\n  g: 2.0\n  nan: .nan\n  inf: -.inf\n  b: true\n  n: ~\n  l: [1, a, {b: c}]",
            "kind: ConfigMap\ndata:\n  script: |\n    echo hi",
            "kind: ConfigMap\ndata:\n  script: |+\n    echo hi\n",
            "kind: ConfigMap\ndata:\n  script: >\n    folded\n    text",
            "anchors: &a {x: 1}\nuse: *a",
            "",
            "# only a comment",
            "- a\n- b",
            "plain scalar",
        ] {
            let head = read(doc).unwrap();
            let json = head.json.map(|j| serde_json::from_str(&j).unwrap());
            assert_eq!(json, direct(doc), "{doc:?}");
        }
    }

    #[test]
    fn plain_scalars_are_read_as_helm_s_install_reads_them_yaml_1_1() {
        let head = read(
            "kind: Pod\nmode: 0755\nflag: on\nno: n\nbig: 1_000\nhex: 0x1F\nf: 2.0\nhalf: 0.5\nq: \"0755\"",
        )
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&head.json.unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "Pod", "mode": 493, "flag": true, "false": false,
                "big": 1000, "hex": 31, "f": 2, "half": 0.5, "q": "0755"})
        );
    }

    #[test]
    fn keys_that_are_not_strings_are_named_as_go_names_them() {
        for (doc, want) in [
            (
                "kind: Foo\n1: one",
                serde_json::json!({"kind": "Foo", "1": "one"}),
            ),
            (
                "kind: Foo\ntrue: yes",
                serde_json::json!({"kind": "Foo", "true": true}),
            ),
        ] {
            let json: serde_json::Value =
                serde_json::from_str(&read(doc).unwrap().json.unwrap()).unwrap();
            assert_eq!(json, want, "{doc:?}");
        }
    }

    #[test]
    fn the_sort_reads_a_block_scalar_at_the_end_without_the_printed_newline() {
        // Printed, the kind would be "Secret\n"; Helm's sort reads "Secret".
        let head = read("metadata:\n  name: a\nkind: |\n  Secret").unwrap();
        assert_eq!(head.kind, "Secret");
        let head =
            read("kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: >\n      pre-install")
                .unwrap();
        assert_eq!(head.hook.as_deref(), Some("pre-install"));
        assert_eq!(head.kind, "Job");
        // A hook that is not a string is printed as YAML, as before.
        let head = read("kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: [a, b]").unwrap();
        assert_eq!(head.hook.as_deref(), Some("- a\n- b"));
    }

    #[test]
    fn a_key_repeated_in_a_mapping_keeps_its_last_value_as_in_helm() {
        let head =
            read("kind: ConfigMap\nmetadata:\n  labels:\n    app: one\n    app: two").unwrap();
        assert_eq!(head.kind, "ConfigMap");
        let json: serde_json::Value = serde_json::from_str(&head.json.unwrap()).unwrap();
        assert_eq!(json["metadata"]["labels"]["app"], "two");
        // A repeated kind: the last is the one sorted.
        assert_eq!(
            read("kind: Secret\nkind: ConfigMap").unwrap().kind,
            "ConfigMap"
        );
    }

    #[test]
    fn a_document_the_sort_cannot_read_fails_with_the_sorts_error() {
        for doc in [
            "a: [",
            "kind: Foo\n  bad: indent",
            "big: 123456789012345678901234567890",
        ] {
            let ours = read(doc).unwrap_err().to_string();
            let sorts = serde_yaml::from_str::<serde_yaml::Value>(doc)
                .unwrap_err()
                .to_string();
            assert_eq!(ours, sorts, "{doc:?}");
        }
    }
}
