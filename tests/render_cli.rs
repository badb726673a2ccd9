//! `kiln render` and `kiln plugin inspect`, run as a user runs them.

mod support;

use std::process::{Command, Output};

use support::*;

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[test]
fn renders_the_example_through_a_renderer_and_policies() {
    let (values, labels) = (
        path(&component("values")),
        path(&component("required-labels")),
    );
    let out = kiln(&[
        "render",
        &path(&guestbook()),
        "--no-compile-cache",
        "--plugin",
        &values,
        "--param",
        "replicas=3",
        "--policy",
        &labels,
        "--setting",
        "labels=app.kubernetes.io/name,team",
        "--policy",
        &labels,
        "--setting",
        "labels=cost-center",
        "--mode",
        "warn",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let objects = kiln::manifest::parse(&stdout, None).unwrap();
    let names: Vec<_> = objects.iter().map(|o| o.display_name()).collect();
    assert_eq!(
        names,
        [
            "ConfigMap/guestbook-settings",
            "Deployment/guestbook-frontend",
            "Service/guestbook-frontend"
        ]
    );
    assert_eq!(objects[1].value()["spec"]["replicas"], serde_json::json!(3));
    assert!(
        stderr.contains("policy required-labels (enforce): passed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "policy required-labels (warn): 4 finding(s), 4 error(s) — not blocking (warn mode)\n"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("error    Deployment/guestbook-frontend metadata.labels.cost-center: missing required label `cost-center`"), "{stderr}");
}

/// The guestbook rendered under an enforced policy it fails (a missing
/// `cost-center` label), with `extra` flags.
fn blocked_render(extra: &[&str]) -> Output {
    let (guestbook, values, labels) = (
        path(&guestbook()),
        path(&component("values")),
        path(&component("required-labels")),
    );
    let mut args = vec!["render", &guestbook, "--no-compile-cache"];
    args.extend_from_slice(extra);
    args.extend([
        "--plugin",
        &values,
        "--policy",
        &labels,
        "--setting",
        "labels=cost-center",
    ]);
    kiln(&args)
}

#[test]
fn an_enforced_policy_failure_exits_1() {
    let out = blocked_render(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("— BLOCKED"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "`kiln render | kubectl apply -f -` must not apply what a policy refused: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("--output-on-block"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn output_on_block_prints_the_refused_manifests_for_inspection() {
    let out = blocked_render(&["--output-on-block"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let objects = kiln::manifest::parse(&text(&out.stdout), None).unwrap();
    assert_eq!(objects.len(), 3);
}

#[test]
fn an_enforced_policy_that_cannot_run_is_an_error_not_a_verdict() {
    // `labels` is a required setting of required-labels: a configuration
    // error, exit 2, nothing on stdout.
    let args = |mode: &'static str| {
        vec![
            "render".to_owned(),
            path(&guestbook()),
            "--no-compile-cache".into(),
            "--plugin".into(),
            path(&component("values")),
            "--policy".into(),
            path(&component("required-labels")),
            "--mode".into(),
            mode.into(),
        ]
    };
    let run = |mode| {
        let args = args(mode);
        kiln(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = run("enforce");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(stderr.contains("FAILED TO RUN"), "{stderr}");
    assert!(stderr.contains("setting `labels` is required"), "{stderr}");
    // In warn mode the failure is reported and blocks nothing.
    let out = run("warn");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("FAILED TO RUN"));
    assert!(!out.stdout.is_empty());
}

#[test]
fn a_plugin_error_is_one_line_naming_plugin_and_cause() {
    let src = tree(&[("app/x.yaml", "")]);
    let args = [
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--plugin-timeout",
        "300ms",
        "--plugin",
        &path(&component("fixture-misbehave")),
        "--param",
        "mode=loop",
    ];
    let out = kiln(&args);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.lines().last(),
        Some("error: plugin fixture-misbehave: timed out after 300ms"),
        "{stderr}"
    );
    assert!(
        stderr.starts_with("warning: plugin fixture-misbehave (sha256:"),
        "unverified plugins are reported: {stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn broken_yaml_in_a_plain_directory_names_file_and_line() {
    let src = tree(&[
        (
            "app/good.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good}\n",
        ),
        (
            "app/broken.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: b\n",
        ),
    ]);
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--root",
        &path(src.path()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: app/broken.yaml:6: invalid YAML"),
        "{stderr}"
    );
}

#[test]
fn an_alias_bomb_in_a_plain_directory_is_refused_naming_the_file() {
    let bomb = alias_bomb(3000);
    let src = tree(&[
        (
            "app/good.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good}\n",
        ),
        ("app/bomb.yaml", &bomb),
    ]);
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--root",
        &path(src.path()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let expected = format!(
        "error: app/bomb.yaml:4: YAML aliases expand to more than {} nodes, the limit for {} bytes of YAML",
        8 * bomb.len(),
        bomb.len()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
}

#[test]
fn a_few_aliases_in_a_plain_directory_still_render() {
    let src = tree(&[(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: &labels {app: web, team: x}\n  \
         annotations: *labels\ndata: {a: &v value, b: *v}\n",
    )]);
    let out = kiln(&["render", &path(&src.path().join("app")), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list["items"][0]["metadata"]["annotations"],
        serde_json::json!({"app": "web", "team": "x"})
    );
    assert_eq!(list["items"][0]["data"]["b"], "value");
}

#[test]
fn an_alias_bomb_in_plugin_output_is_refused_naming_plugin_and_file() {
    let src = tree(&[("app/x.yaml", "")]);
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--plugin",
        &path(&component("fixture-misbehave")),
        "--param",
        "mode=yaml-bomb",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: plugin fixture-misbehave: invalid output: bomb.yaml:4: YAML aliases expand to more than "),
        "{stderr}"
    );
}

#[test]
fn plain_directories_render_without_plugins_as_json() {
    let src = tree(&[
        (
            "b.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        ),
        (
            "a.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
        ),
        (
            "sub/c.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        ),
    ]);
    let out = kiln(&["render", &path(src.path()), "--recurse", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    let names: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[test]
fn parameters_must_follow_their_plugin() {
    let out = kiln(&[
        "render",
        &path(&guestbook()),
        "--param",
        "a=b",
        "--plugin",
        &path(&component("values")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: --param must follow the --plugin it belongs to\n"
    );
}

#[test]
fn verbose_errors_show_the_whole_chain() {
    let out = kiln(&["render", "/nonexistent/app", "-v"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "error: cannot open source directory /nonexistent/app\n  caused by: No such file or directory"
        ),
        "{stderr}"
    );
}

#[test]
fn inspect_describes_a_component() {
    let file = component("required-labels");
    let out = kiln(&["plugin", "inspect", &path(&file)]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let digest = kiln::digest::Digest::of(&std::fs::read(&file).unwrap());
    assert!(stdout.contains("world:    policy\n"), "{stdout}");
    assert!(
        stdout.contains("contract: kiln:plugin@0.1.2 (accepted by this host"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("digest:   {digest}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("imports:\n  kiln:plugin/types@0.1.2\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("exports:\n  kiln:plugin/review@0.1.2\n"),
        "{stdout}"
    );

    let out = kiln(&[
        "plugin",
        "inspect",
        &path(&component("fixture-future-contract")),
        "-o",
        "json",
    ]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["world"], "renderer");
    assert_eq!(info["contract_version"], "0.2.0");

    let out = kiln(&["plugin", "inspect", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).eq("error: Cargo.toml: not a WebAssembly component: magic header not detected: bad magic number\n"), "{}", text(&out.stderr));
}

#[test]
fn a_remote_plugin_without_a_trust_policy_is_refused_before_it_is_fetched() {
    let home = tempfile::tempdir().unwrap();
    let app = guestbook();
    let pin = format!("sha256:{}", "a".repeat(64));
    // Nothing listens on port 9: a fetch would fail with another error.
    for reference in [
        "oci://127.0.0.1:9/kiln/values:1".to_owned(),
        format!("https://127.0.0.1:9/values.wasm@{pin}"),
    ] {
        for command in ["render", "diff", "sync"] {
            let out = kiln_as_user(
                home.path(),
                home.path(),
                &[
                    command,
                    app.to_str().unwrap(),
                    "--no-compile-cache",
                    "--plugin",
                    &reference,
                ],
            );
            assert_eq!(out.status.code(), Some(2), "{command} {reference}");
            let stderr = text(&out.stderr);
            assert!(
                stderr.starts_with(&format!(
                    "error: plugin {reference} is not verified: give --trust-policy FILE"
                )) && stderr.contains("--insecure-skip-verify"),
                "{command}: {stderr}"
            );
        }
    }
}

#[test]
fn a_helm_chart_error_exits_2_naming_the_template_and_line() {
    let src = tree(&[
        (
            "app/Chart.yaml",
            "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
        ),
        (
            "app/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata:\n  db: {{ required \"database.host is required\" .Values.database }}\n",
        ),
    ]);
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--plugin",
        &path(&component("helm")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: plugin helm"), "{stderr}");
    assert!(
        last.contains("execution error at (shop/templates/cm.yaml:6:9): database.host is required"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// Issue 36: alias-free YAML was not counted, so two 15 MiB files of
/// `[1,1,…]` took gigabytes (serde_yaml holds every event of a document
/// before it builds a value). Each document is now held to its events as
/// it streams by: two files of 2 million items (8 MiB) are refused at the
/// first, naming it, and the process's peak memory stays a small multiple
/// of the input (it was about 70 times it).
#[test]
fn attack_alias_free_yaml_floods_are_refused_within_bounded_memory() {
    let flood = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\nx: {}\n",
        flood(2_000_000)
    );
    let src = tree(&[("app/a.yaml", &flood), ("app/b.yaml", &flood)]);
    let (out, peak_kib) = render_app(&src, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: app/a.yaml:1: YAML document of {} bytes holds more than 1000000 nodes and collection ends",
            flood.len()
        )),
        "{stderr}"
    );
    let input_kib = 2 * flood.len() as u64 / 1024;
    assert!(
        peak_kib < 16 * input_kib,
        "peak {peak_kib} KiB for {input_kib} KiB of input"
    );
}

/// Issue 36: files each within every per-text bound add up: one render
/// parses at most so many nodes over all its files (4,000,000 by default,
/// `--max-manifest-nodes`), then fails naming the file it was reading; its
/// memory is that budget's, not the files' sum.
#[test]
fn attack_many_files_each_within_bounds_exhaust_the_render_s_budget() {
    let file = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\nx: {}\n",
            flood(90_000)
        )
    };
    let names = ["a", "b", "c", "d", "e", "f"];
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| (format!("app/{n}.yaml"), file(n)))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let src = tree(&refs);
    let render = |extra: &[&str]| render_app(&src, extra);
    let (out, _) = render(&["--max-manifest-nodes", "400000"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: app/e.yaml: the render's manifests hold more than 400000 nodes, the most one render may parse"
        ),
        "{stderr}"
    );
    // Bytes are counted the same way.
    let (out, _) = render(&["--max-manifest-bytes", "500000"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with(
            "error: app/c.yaml: the render's manifests pass 500000 bytes, the most one render may read"
        ),
        "{}",
        text(&out.stderr)
    );
    // Within the default budget they render.
    let (out, _) = render(&["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `kiln render app --root ROOT EXTRA…` of the tree `root`, with its peak
/// memory in KiB.
fn render_app(root: &tempfile::TempDir, extra: &[&str]) -> (Output, u64) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .args([
            "render",
            &path(&root.path().join("app")),
            "--root",
            &path(root.path()),
        ])
        .args(extra)
        .env_remove("KILN_LOG");
    output_with_peak_rss(&command)
}

#[test]
fn a_newcomer_is_told_what_an_empty_or_plugin_directory_needs() {
    let src = tree(&[
        ("empty/README.md", "no manifests here"),
        (
            "empty/sub/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        ),
        ("k/kustomization.yaml", "resources: [cm.yaml]\n"),
        (
            "k/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        ),
    ]);
    let out = kiln(&["render", &path(&src.path().join("empty"))]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("warning: the application rendered no objects")
            && stderr.contains("--recurse"),
        "{stderr}"
    );

    let out = kiln(&["render", &path(&src.path().join("k"))]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("kustomization.yaml is a kustomization, not a plain manifest: render it with the kustomize plugin"),
        "{stderr}"
    );
    assert!(!stderr.contains("metadata.name"), "{stderr}");
}

#[test]
fn a_first_party_plugin_is_named_by_its_name_wherever_kiln_runs() {
    let src = tree(&[
        (
            "k/kustomization.yaml",
            "resources: [cm.yaml]\ncommonLabels: {team: a}\n",
        ),
        (
            "k/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        ),
    ]);
    let dist = component("kustomize").parent().unwrap().to_path_buf();
    // From another directory, with KILN_PLUGIN_PATH naming where the
    // first-party plugins are.
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["render", "k", "--plugin", "kustomize", "--no-compile-cache"])
        .current_dir(src.path())
        .env("KILN_PLUGIN_PATH", &dist)
        .env_remove("KILN_LOG")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        text(&out.stdout).contains("team: a"),
        "{}",
        text(&out.stdout)
    );
    // A name found nowhere: one line saying where it looked and what to do.
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["render", "k", "--plugin", "kustomise"])
        .current_dir(src.path())
        .env("KILN_PLUGIN_PATH", src.path())
        .env_remove("KILN_LOG")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("plugin kustomise: no first-party plugin of that name here")
            && stderr.contains(&src.path().join("kustomise.wasm").display().to_string())
            && stderr.contains("KILN_PLUGIN_PATH"),
        "{stderr}"
    );
    // A file of that name here is the file.
    std::fs::write(src.path().join("kustomize"), b"not a component").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["render", "k", "--plugin", "kustomize"])
        .current_dir(src.path())
        .env("KILN_PLUGIN_PATH", &dist)
        .env_remove("KILN_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_missing_repository_is_one_plain_line() {
    let out = kiln(&[
        "render",
        "--repo",
        "file:///nonexistent/kiln-repo",
        "--revision",
        "main",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    for debug in ["Message {", "Os {", "kind:", "Caused by", "Some("] {
        assert!(!stderr.contains(debug), "no `{debug}` in: {stderr}");
    }
    assert!(stderr.contains("/nonexistent/kiln-repo"), "{stderr}");
}

#[test]
fn the_readme_kustomize_example_renders() {
    // The README's and docs/kustomize.md's command, as written there.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .current_dir(root)
        .env_remove("KILN_LOG")
        .args([
            "render",
            "examples/kustomize/overlays/prod",
            "--root",
            "examples/kustomize",
            "--no-compile-cache",
            "--plugin",
            &path(&component("kustomize")),
            "--param",
            "image=nginx=nginx:1.27",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let objects = kiln::manifest::parse(&text(&out.stdout), None).unwrap();
    let names: Vec<_> = objects.iter().map(|o| o.display_name()).collect();
    assert_eq!(names, ["Service/prod-web", "Deployment/prod-web"]);
    let deployment = objects[1].value();
    assert_eq!(deployment["spec"]["replicas"], serde_json::json!(3));
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(deployment["metadata"]["labels"]["team"], "shop");
}

#[test]
fn a_chart_version_without_a_chart_is_refused() {
    let out = kiln(&["render", &path(&guestbook()), "--version", "1.0"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--version is the chart's version and needs --chart"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
