//! Errors worded as Helm v4.2.3 words them (expected strings taken from
//! Helm's engine through the oracle harness): parse errors with the
//! template's name and line, execution errors with Go's context.

use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render};

fn error_of(name: &str, template: &str) -> String {
    let dir = std::env::temp_dir().join(format!("kiln-helm-errors-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: pe\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("templates/t.yaml"), format!("{template}\n")).unwrap();
    let result = render(&DirSource(dir.clone()), ".", &Options::default());
    std::fs::remove_dir_all(&dir).unwrap();
    result.expect_err("the template must fail").to_string()
}

#[test]
fn parse_errors_name_the_template_and_line() {
    for (name, template, want) in [
        (
            "eof",
            "{{ if .x }}a",
            "parse error at (pe/templates/t.yaml:2): unexpected EOF",
        ),
        (
            "end",
            "{{ end }}",
            "parse error at (pe/templates/t.yaml:1): unexpected {{end}}",
        ),
        (
            "else",
            "{{ else }}",
            "parse error at (pe/templates/t.yaml:1): unexpected {{else}}",
        ),
        (
            "var",
            "{{ $x }}",
            "parse error at (pe/templates/t.yaml:1): undefined variable \"$x\"",
        ),
        (
            "scope",
            "{{ range $i, $v := .x }}{{ end }}{{ $i }}",
            "parse error at (pe/templates/t.yaml:1): undefined variable \"$i\"",
        ),
        (
            "quote",
            "{{ \"abc }}",
            "parse error at (pe/templates/t.yaml:1): unterminated quoted string",
        ),
        (
            "paren",
            "{{ (1 }}",
            "parse error at (pe/templates/t.yaml:1): unclosed left paren",
        ),
        (
            "break",
            "{{ define \"a\" }}{{ end }}{{ break }}",
            "parse error at (pe/templates/t.yaml:1): {{break}} outside {{range}}",
        ),
    ] {
        assert_eq!(error_of(name, template), want, "{template}");
    }
}

#[test]
fn execution_errors_carry_go_context() {
    for (name, template, want) in [
        (
            "index",
            "{{ index .Values \"a\" 1 }}",
            "template: pe/templates/t.yaml:1:3: executing \"pe/templates/t.yaml\" at <index .Values \"a\" 1>: error calling index: index of nil pointer",
        ),
        (
            "len",
            "{{ len 3 }}",
            "template: pe/templates/t.yaml:1:3: executing \"pe/templates/t.yaml\" at <len 3>: error calling len: len of type int",
        ),
        (
            "lt",
            "{{ lt 1 \"a\" }}",
            "template: pe/templates/t.yaml:1:3: executing \"pe/templates/t.yaml\" at <lt 1 \"a\">: error calling lt: incompatible types for comparison: int and string",
        ),
    ] {
        assert_eq!(error_of(name, template), want, "{template}");
    }
}

/// Renders a chart made of `files` (path, text) with `opts`.
fn render_files(
    name: &str,
    files: &[(&str, &str)],
    opts: &Options,
) -> Result<Vec<kiln_helm::Document>, String> {
    let dir = std::env::temp_dir().join(format!("kiln-helm-checks-{name}-{}", std::process::id()));
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let result = render(&DirSource(dir.clone()), ".", opts).map_err(|e| e.to_string());
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

const CM: (&str, &str) = (
    "templates/cm.yaml",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
);

#[test]
fn a_kube_version_outside_the_charts_constraint_is_refused_in_helms_words() {
    let chart = (
        "Chart.yaml",
        "apiVersion: v2\nname: k\nversion: 0.1.0\nkubeVersion: \"~1.28.0\"\n",
    );
    let e = render_files(
        "kube",
        &[chart, CM],
        &Options {
            kube_version: Some("1.29.1".into()),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e,
        "chart requires kubeVersion: ~1.28.0 which is incompatible with Kubernetes v1.29.1"
    );
    let ok = render_files(
        "kube-ok",
        &[chart, CM],
        &Options {
            kube_version: Some("v1.28.9".into()),
            ..Options::default()
        },
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn schema_violations_are_reported_per_chart_nested_under_their_keyword() {
    let e = render_files(
        "schema",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: s\nversion: 0.1.0\n"),
            ("values.yaml", "size: 1234567\nmode: x\n"),
            (
                "values.schema.json",
                r#"{"properties": {"size": {"maximum": 1000.5}, "mode": {"anyOf": [{"const": "a"}, {"type": "integer"}]}}}"#,
            ),
            CM,
        ],
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "values don't meet the specifications of the schema(s) in the following chart(s):\n\
         s:\n\
         - at '/mode': 'anyOf' failed\n  \
         - at '/mode': value must be 'a'\n  \
         - at '/mode': got string, want integer\n\
         - at '/size': maximum: got 1.234567×10⁰⁶, want 1,000.5\n"
    );
}

#[test]
fn a_schema_referencing_another_document_is_refused() {
    let e = render_files(
        "schema-ref",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: s\nversion: 0.1.0\n"),
            (
                "values.schema.json",
                r#"{"properties": {"a": {"$ref": "https://example.com/defs.json"}}}"#,
            ),
            CM,
        ],
        &Options::default(),
    )
    .unwrap_err();
    assert!(e.starts_with("values.schema.json: "), "{e}");
    assert!(e.contains("may only reference its own definitions"), "{e}");
}

#[test]
fn a_schema_that_is_not_json_is_refused_naming_it() {
    let e = render_files(
        "schema-json",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: s\nversion: 0.1.0\n"),
            ("values.schema.json", "{not json"),
            CM,
        ],
        &Options::default(),
    )
    .unwrap_err();
    assert!(e.starts_with("values.schema.json: "), "{e}");
}
