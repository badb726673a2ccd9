//! Hostile charts: each is stopped by its budget with an error naming the
//! template and line, instead of running forever or exhausting memory.

use std::path::Path;

use kiln_helm::chart::DirSource;
use kiln_helm::exec::Limits;
use kiln_helm::{Options, render};

fn chart(dir: &Path, template: &str) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: hostile\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("templates/t.yaml"), template).unwrap();
}

fn render_err(name: &str, template: &str, limits: Limits) -> String {
    let dir = std::env::temp_dir().join(format!("kiln-helm-limits-{name}-{}", std::process::id()));
    chart(&dir, template);
    let opts = Options {
        limits,
        ..Options::default()
    };
    let result = render(&DirSource(dir.clone()), ".", &opts);
    std::fs::remove_dir_all(&dir).unwrap();
    result
        .expect_err("the hostile chart must be refused")
        .to_string()
}

#[test]
fn a_range_over_a_huge_int_runs_out_of_steps() {
    let e = render_err(
        "range",
        "a: b\n{{ range 9223372036854775807 }}x{{ end }}\n",
        Limits {
            max_steps: 100_000,
            ..Limits::default()
        },
    );
    assert!(e.contains("hostile/templates/t.yaml:2"), "{e}");
    assert!(e.contains("more than 100000 template steps"), "{e}");
}

#[test]
fn recursion_through_include_stops_at_the_depth_limit() {
    let e = render_err(
        "recursion",
        "{{ define \"loop\" }}{{ include \"loop\" . }}{{ end }}\n{{ include \"loop\" . }}\n",
        Limits::default(),
    );
    assert!(e.contains("nested reference name: loop"), "{e}");
    assert!(e.contains("more than 100 nested template calls"), "{e}");
}

#[test]
fn a_huge_repeat_is_refused_before_it_is_built() {
    let e = render_err(
        "repeat",
        "a: {{ repeat 1073741824 \"x\" }}\n",
        Limits::default(),
    );
    assert!(e.contains("repeat would build 1073741824 bytes"), "{e}");
    assert!(e.contains("hostile/templates/t.yaml:1"), "{e}");
}

#[test]
fn output_growing_by_doubling_runs_out_of_output() {
    let e = render_err(
        "doubling",
        "{{ $s := \"xxxxxxxxxxxxxxxx\" }}{{ range until 40 }}{{ $s = printf \"%s%s\" $s $s }}{{ end }}{{ $s }}\n",
        Limits {
            max_output: 1 << 20,
            ..Limits::default()
        },
    );
    assert!(
        e.contains("printf built a string over 1048576 bytes"),
        "{e}"
    );
}

#[test]
fn a_map_that_contains_itself_is_printed_without_exhausting_the_stack() {
    let dir = std::env::temp_dir().join(format!("kiln-helm-limits-cycle-{}", std::process::id()));
    chart(
        &dir,
        "{{ $d := dict }}{{ $_ := set $d \"self\" $d }}a: {{ toJson $d | quote }}\nb: {{ toYaml $d | len }}\nc: {{ printf \"%v\" $d | len }}\n",
    );
    let result = render(&DirSource(dir.clone()), ".", &Options::default());
    std::fs::remove_dir_all(&dir).unwrap();
    // Go's json.Marshal refuses a cycle and Helm's toJson/toYaml then give
    // "": so do we; `%v` stops at the nesting limit.
    let docs = result.unwrap();
    assert!(
        docs[0].text.starts_with("a: \"\"\nb: 0\nc: "),
        "{}",
        docs[0].text
    );
}

/// An alias bomb in values (the chart's `values.yaml` or a value file) is
/// refused by its expansion, naming the file, before it is read; values
/// with a `*` that is not an alias read as usual.
#[test]
fn an_alias_bomb_in_values_is_refused_naming_the_file() {
    let items = vec!["1"; 3000].join(",");
    let refs = vec!["*a"; 3000].join(",");
    let bomb = format!("a: &a [{items}]\nb: [{refs}]\n");
    let dir = std::env::temp_dir().join(format!("kiln-helm-limits-values-{}", std::process::id()));
    chart(&dir, "v: {{ .Values.glob | quote }}\n");
    std::fs::write(dir.join("values.yaml"), "glob: '*.conf'\nrules: [\"*\"]\n").unwrap();
    std::fs::write(dir.join("bomb.yaml"), &bomb).unwrap();
    let src = DirSource(dir.clone());
    let fine = render(&src, ".", &Options::default()).expect("a `*` in values is text");
    let with_file = render(
        &src,
        ".",
        &Options {
            value_files: vec!["bomb.yaml".into()],
            ..Options::default()
        },
    );
    // Documents of one value file share its budget: each of these is
    // within a text of its own size's, together they are not.
    let small = "---\na: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n";
    std::fs::write(dir.join("many.yaml"), small.repeat(20)).unwrap();
    std::fs::write(dir.join("one.yaml"), small).unwrap();
    let files = |names: &[&str]| Options {
        value_files: names.iter().map(|n| n.to_string()).collect(),
        ..Options::default()
    };
    render(&src, ".", &files(&["one.yaml"])).expect("one document is within its budget");
    let many = render(&src, ".", &files(&["many.yaml"]));
    // Nesting deeper than serde_yaml's recursion limit in front of a bomb
    // (it once ended the count early, and the reader went on).
    let deep = format!("c: {}{}\n{bomb}", "[".repeat(130), "]".repeat(130));
    std::fs::write(dir.join("deep.yaml"), &deep).unwrap();
    // One long string repeated by aliases in a key's text: few nodes,
    // gigabytes of text.
    let keyed = format!(
        "s: &s {}\nk:\n  ? [{}]\n  : 1\n",
        "x".repeat(32 << 10),
        vec!["*s"; 8 << 10].join(", ")
    );
    std::fs::write(dir.join("keyed.yaml"), &keyed).unwrap();
    let keyed = render(&src, ".", &files(&["keyed.yaml"]));
    let deep = render(&src, ".", &files(&["deep.yaml"]));
    // `fromYaml` of a bomb gives Helm's error map, with the limit's message.
    std::fs::write(
        dir.join("templates/t.yaml"),
        "v: {{ (fromYaml (.Files.Get \"bomb.yaml\")).Error | quote }}\n",
    )
    .unwrap();
    let from_yaml = kiln_helm::stream(&render(&src, ".", &Options::default()).unwrap());
    std::fs::write(dir.join("values.yaml"), &bomb).unwrap();
    let in_chart = render(&src, ".", &Options::default());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(from_yaml.contains("an alias bomb?"), "{from_yaml}");
    assert!(
        kiln_helm::stream(&fine).contains("*.conf"),
        "{}",
        kiln_helm::stream(&fine)
    );
    for (what, result, file) in [
        ("value file", with_file, "bomb.yaml"),
        ("chart values", in_chart, "values.yaml"),
        ("documents of one file", many, "many.yaml"),
        ("deep value file", deep, "deep.yaml"),
        ("aliased key text", keyed, "keyed.yaml"),
    ] {
        let Err(e) = result else {
            panic!("the {what} bomb was read");
        };
        let e = e.to_string();
        assert!(e.contains(file), "{what}: {e}");
        assert!(e.contains("an alias bomb?"), "{what}: {e}");
    }
}
