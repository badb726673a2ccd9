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
