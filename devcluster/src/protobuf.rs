//! The little of Kubernetes' protobuf encoding that `kubectl create
//! namespace|configmap|secret|serviceaccount` and `kubectl auth
//! can-i|whoami` send: those commands post protobuf bodies, and a
//! newcomer's first command should work. Other kinds in protobuf get a 415
//! that says to send JSON.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Protobuf request bodies start with this magic.
const MAGIC: &[u8] = b"k8s\0";

struct Reader<'a> {
    bytes: &'a [u8],
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first().ok_or("truncated varint")?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, String> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                if len > self.bytes.len() {
                    return Err("truncated field".into());
                }
                let (value, rest) = self.bytes.split_at(len);
                self.bytes = rest;
                Field::Bytes(value)
            }
            1 => {
                self.bytes = self.bytes.get(8..).ok_or("truncated fixed64")?;
                Field::Varint(0)
            }
            5 => {
                self.bytes = self.bytes.get(4..).ok_or("truncated fixed32")?;
                Field::Varint(0)
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((key >> 3, field)))
    }
}

fn fields(bytes: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut reader = Reader { bytes };
    let mut out = Vec::new();
    while let Some(field) = reader.next()? {
        out.push(field);
    }
    Ok(out)
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "invalid UTF-8 in a string field".to_owned())
}

/// A `map<string, string>` (or bytes values, base64-encoded as in JSON) entry.
fn map_entry(bytes: &[u8], binary: bool) -> Result<(String, Value), String> {
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    for (number, field) in fields(bytes)? {
        if let Field::Bytes(b) = field {
            match number {
                1 => key = text(b)?,
                2 if binary => value = base64::engine::general_purpose::STANDARD.encode(b).into(),
                2 => value = text(b)?.into(),
                _ => {}
            }
        }
    }
    Ok((key, value))
}

fn insert_map(
    target: &mut Map<String, Value>,
    name: &str,
    bytes: &[u8],
    binary: bool,
) -> Result<(), String> {
    let (key, value) = map_entry(bytes, binary)?;
    target
        .entry(name)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|m| m.insert(key, value));
    Ok(())
}

fn object_meta(bytes: &[u8]) -> Result<Value, String> {
    let mut meta = Map::new();
    for (number, field) in fields(bytes)? {
        let Field::Bytes(b) = field else { continue };
        match number {
            1 => {
                meta.insert("name".into(), text(b)?.into());
            }
            2 => {
                meta.insert("generateName".into(), text(b)?.into());
            }
            3 => {
                meta.insert("namespace".into(), text(b)?.into());
            }
            11 => insert_map(&mut meta, "labels", b, false)?,
            12 => insert_map(&mut meta, "annotations", b, false)?,
            14 => {
                let finalizer = Value::String(text(b)?);
                if let Some(list) = meta
                    .entry("finalizers")
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    list.push(finalizer);
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(meta))
}

/// The reviews `kubectl auth can-i|whoami` and client-go's typed clients
/// post in protobuf.
const REVIEWS: [&str; 6] = [
    "SelfSubjectAccessReview",
    "SubjectAccessReview",
    "LocalSubjectAccessReview",
    "SelfSubjectRulesReview",
    "SelfSubjectReview",
    "TokenReview",
];

/// The string fields of a message, by field number, as JSON fields (a
/// repeated field becomes a list).
fn strings(bytes: &[u8], names: &[(u64, &str, bool)]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (number, field) in fields(bytes)? {
        let Field::Bytes(b) = field else { continue };
        if let Some(&(_, name, repeated)) = names.iter().find(|(n, _, _)| *n == number) {
            let value = Value::String(text(b)?);
            if repeated {
                if let Some(list) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    list.push(value);
                }
            } else {
                out.insert(name.into(), value);
            }
        }
    }
    Ok(out)
}

/// The `spec` of an access or token review (authorization.k8s.io/v1 and
/// authentication.k8s.io/v1 `generated.proto`).
fn review_spec(kind: &str, bytes: &[u8]) -> Result<Value, String> {
    const RESOURCE: [(u64, &str, bool); 7] = [
        (1, "namespace", false),
        (2, "verb", false),
        (3, "group", false),
        (4, "version", false),
        (5, "resource", false),
        (6, "subresource", false),
        (7, "name", false),
    ];
    const NON_RESOURCE: [(u64, &str, bool); 2] = [(1, "path", false), (2, "verb", false)];
    let spec = match kind {
        "TokenReview" => strings(bytes, &[(1, "token", false), (2, "audiences", true)])?,
        "SelfSubjectRulesReview" => strings(bytes, &[(1, "namespace", false)])?,
        "SelfSubjectReview" => Map::new(),
        _ => {
            let mut spec = strings(
                bytes,
                &[(3, "user", false), (4, "groups", true), (6, "uid", false)],
            )?;
            for (number, field) in fields(bytes)? {
                match (number, field) {
                    (1, Field::Bytes(b)) => {
                        spec.insert("resourceAttributes".into(), strings(b, &RESOURCE)?.into());
                    }
                    (2, Field::Bytes(b)) => {
                        spec.insert(
                            "nonResourceAttributes".into(),
                            strings(b, &NON_RESOURCE)?.into(),
                        );
                    }
                    _ => {}
                }
            }
            spec
        }
    };
    Ok(Value::Object(spec))
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or("not a Kubernetes protobuf body (no k8s\\0 magic)")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (number, field) in fields(unknown)? {
        match (number, field) {
            (1, Field::Bytes(type_meta)) => {
                for (n, f) in fields(type_meta)? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => api_version = text(b)?,
                        (2, Field::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), api_version.clone().into());
    object.insert("kind".into(), kind.clone().into());
    for (number, field) in fields(raw)? {
        match (kind.as_str(), number, field) {
            (_, 1, Field::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            ("Namespace", 2, Field::Bytes(spec)) => {
                let mut finalizers = Vec::new();
                for (n, f) in fields(spec)? {
                    if let (1, Field::Bytes(b)) = (n, f) {
                        finalizers.push(Value::String(text(b)?));
                    }
                }
                if !finalizers.is_empty() {
                    object.insert("spec".into(), json!({"finalizers": finalizers}));
                }
            }
            ("ConfigMap", 2, Field::Bytes(b)) => insert_map(&mut object, "data", b, false)?,
            ("ConfigMap", 3, Field::Bytes(b)) => insert_map(&mut object, "binaryData", b, true)?,
            ("ConfigMap", 4, Field::Varint(v)) => {
                object.insert("immutable".into(), (v != 0).into());
            }
            ("Secret", 2, Field::Bytes(b)) => insert_map(&mut object, "data", b, true)?,
            ("Secret", 3, Field::Bytes(b)) => {
                object.insert("type".into(), text(b)?.into());
            }
            ("Secret", 4, Field::Bytes(b)) => insert_map(&mut object, "stringData", b, false)?,
            ("Secret", 5, Field::Varint(v)) => {
                object.insert("immutable".into(), (v != 0).into());
            }
            ("ServiceAccount", 3, Field::Bytes(b)) => {
                let (name, _) = map_entry(b, false)?;
                if let Some(list) = object
                    .entry("imagePullSecrets")
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    list.push(json!({"name": name}));
                }
            }
            ("ServiceAccount", 4, Field::Varint(v)) => {
                object.insert("automountServiceAccountToken".into(), (v != 0).into());
            }
            (kind, 2, Field::Bytes(spec)) if REVIEWS.contains(&kind) => {
                object.insert("spec".into(), review_spec(kind, spec)?);
            }
            ("Namespace" | "ConfigMap" | "Secret" | "ServiceAccount", _, _) => {}
            (kind, _, _) if REVIEWS.contains(&kind) => {}
            _ => {
                return Err(format!(
                    "protobuf bodies are decoded for Namespace, ConfigMap, Secret, ServiceAccount and the access and token reviews only, not {kind} ({api_version}); send JSON or YAML (kubectl create -f, kubectl apply)"
                ));
            }
        }
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_configmap_as_kubectl_create_sends_it() {
        let meta = [
            field(1, b"settings"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let entry = [field(1, b"color"), field(2, b"blue")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"color": "blue"}})
        );
        let deployment = [
            MAGIC.to_vec(),
            field(1, &[field(1, b"apps/v1"), field(2, b"Deployment")].concat()),
            field(2, &field(2, b"x")),
        ]
        .concat();
        assert!(decode(&deployment).unwrap_err().contains("send JSON"));
        let attributes = [
            field(2, b"create"),
            field(3, b"apps"),
            field(5, b"deployments"),
        ]
        .concat();
        let review = [
            MAGIC.to_vec(),
            field(
                1,
                &[
                    field(1, b"authorization.k8s.io/v1"),
                    field(2, b"SelfSubjectAccessReview"),
                ]
                .concat(),
            ),
            field(2, &field(2, &field(1, &attributes))),
        ]
        .concat();
        assert_eq!(
            decode(&review).unwrap()["spec"],
            json!({"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments"}})
        );
        assert!(decode(b"{}").is_err());
    }
}
