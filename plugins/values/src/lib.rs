//! # `values`: a values-substitution renderer
//!
//! Renders a directory of plain Kubernetes YAML in which scalars may hold
//! placeholders, filled from a values file and from the Application's
//! parameters, like a very small Helm without logic:
//!
//! ```yaml
//! spec:
//!   replicas: "{{ .Values.replicas | default 1 }}"   # stays a number
//!   template:
//!     spec:
//!       containers:
//!         - image: "nginx:{{ .Values.image.tag }}"   # interpolated text
//! metadata:
//!   labels:
//!     app.kubernetes.io/instance: "{{ .App.Name }}"
//! ```
//!
//! A scalar that is exactly one placeholder takes the value's own type (a
//! number stays a number, a mapping is inserted as a mapping); a placeholder
//! inside longer text is interpolated and must name a scalar. A placeholder
//! naming nothing is an error naming the file and the placeholder, unless it
//! has a `default`.
//!
//! Parameters:
//! - `values-file` (repeatable): values files relative to the Application's
//!   path, merged in order (later wins). Default: `values.yaml` if present.
//! - any other key, e.g. `image.tag=1.27`: sets that value (like
//!   `helm --set`), after the files; the value is parsed as a YAML scalar.
//!
//! Every `*.yaml`, `*.yml` and `*.json` under the Application's path, except
//! the values files, is a template, rendered in path order. Manifests from a
//! previous plugin in the chain are rendered too, before the files.

pub mod engine;

#[cfg(target_arch = "wasm32")]
mod plugin;
