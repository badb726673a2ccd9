//! The first-party `kustomize` plugin against the real kustomize: every tree
//! of `tests/kustomize/` is rendered by the plugin through the plugin host
//! and by `kubectl kustomize` (kustomize v5.5 built into kubectl), and the
//! objects must be the same, in the same order. A tree builds its root, or
//! the path its `BUILD` file names. (`plugins/kustomize/tests/oracle.rs`
//! compares the same corpus byte for byte on the YAML.)

mod support;

use std::path::{Path, PathBuf};

use kiln::plugin::{Plugin, World};
use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kustomize")
}

fn plugin() -> Plugin {
    support::host()
        .load_file(&support::component("kustomize"), World::Renderer, None)
        .unwrap()
}

/// The path a tree builds.
fn build_path(tree: &Path) -> String {
    std::fs::read_to_string(tree.join("BUILD"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// What kustomize prints.
fn oracle_text(kubectl: &Path, dir: &Path) -> Result<String, String> {
    let out = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8(out.stdout).unwrap())
}

/// What kustomize gives, as objects.
fn oracle(kubectl: &Path, dir: &Path) -> Result<Vec<Value>, String> {
    let text = oracle_text(kubectl, dir)?;
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect())
}

/// What `kiln render` prints for the tree, rendered by the plugin through
/// the host.
async fn printed(plugin: &Plugin, root: &Path, path: &str) -> Result<String, String> {
    let chain = [kiln::render::Step::Plugin {
        plugin: plugin.clone(),
        params: support::params(&[]),
    }];
    let context = support::context("app", path);
    kiln::render::render(support::view(root), &context, &chain)
        .await
        .map(|r| kiln::manifest::to_yaml_stream(&r.objects))
        .map_err(|e| format!("{e:#}"))
}

/// What the plugin gives through the host, as objects.
async fn rendered(
    plugin: &Plugin,
    root: &Path,
    path: &str,
    params: &[(&str, &str)],
) -> Result<Vec<Value>, String> {
    let chain = [kiln::render::Step::Plugin {
        plugin: plugin.clone(),
        params: support::params(params),
    }];
    let context = support::context("app", path);
    kiln::render::render(support::view(root), &context, &chain)
        .await
        .map(|r| {
            r.objects
                .iter()
                .map(|o| Value::Object(o.value().clone()))
                .collect()
        })
        .map_err(|e| format!("{e:#}"))
}

fn ids(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The corpus' trees, in order.
fn corpus_trees() -> Vec<PathBuf> {
    let mut trees: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    trees.sort();
    trees
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tree_renders_as_kustomize_renders_it() {
    let Some(kubectl) = support::require(support::Tool::Kubectl) else {
        return;
    };
    let plugin = plugin();
    let trees = corpus_trees();
    assert!(trees.len() >= 60, "{} trees", trees.len());
    let mut wrong = Vec::new();
    for tree in &trees {
        let name = tree.file_name().unwrap().to_string_lossy().into_owned();
        let path = build_path(tree);
        let want = oracle(&kubectl, &tree.join(&path))
            .unwrap_or_else(|e| panic!("{name}: kubectl kustomize failed: {e}"));
        match rendered(&plugin, tree, &path, &[]).await {
            Err(e) => wrong.push(format!("{name}: the plugin failed: {e}")),
            Ok(got) if ids(&got) != ids(&want) => wrong.push(format!(
                "{name}: objects or order differ:\n  kustomize {:?}\n  plugin    {:?}",
                ids(&want),
                ids(&got)
            )),
            Ok(got) => {
                for (w, g) in want.iter().zip(&got) {
                    if w != g {
                        wrong.push(format!(
                            "{name}: {}:\n  kustomize {w}\n  plugin    {g}",
                            ids(std::slice::from_ref(w))[0]
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What `kiln render` prints must mean, to a YAML 1.1 reader (`kubectl
/// apply -f`, every Go tool), what `kubectl kustomize` prints: a string
/// printed plain where kustomize quotes it (`yes`, `on`, `017`,
/// `2024-01-01`) reads back as a boolean, a number or a timestamp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tree_means_to_a_yaml_1_1_reader_what_kustomize_output_means() {
    let Some(kubectl) = support::require(support::Tool::Kubectl) else {
        return;
    };
    let plugin = plugin();
    let trees = corpus_trees();
    assert!(trees.len() >= 70, "{} trees", trees.len());
    let mut wrong = Vec::new();
    for tree in &trees {
        let name = tree.file_name().unwrap().to_string_lossy().into_owned();
        let path = build_path(tree);
        let want = oracle_text(&kubectl, &tree.join(&path))
            .unwrap_or_else(|e| panic!("{name}: kubectl kustomize failed: {e}"));
        let want = support::yaml11::read(&want);
        match printed(&plugin, tree, &path).await {
            Err(e) => wrong.push(format!("{name}: the plugin failed: {e}")),
            Ok(got) => {
                let got = support::yaml11::read(&got);
                if got.len() != want.len() {
                    wrong.push(format!("{name}: {} objects, not {}", got.len(), want.len()));
                }
                for (w, g) in want.iter().zip(&got) {
                    if w != g {
                        wrong.push(format!(
                            "{name}: {}:\n  kustomize {w}\n  kiln      {g}",
                            ids(std::slice::from_ref(w))[0]
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_yaml_1_1_reader_types_every_special_form() {
    use serde_json::json;
    let text = "bools: [y, Y, yes, Yes, YES, n, N, no, No, NO, true, True, TRUE, false, False, FALSE, on, On, ON, off, Off, OFF]\n\
                nulls: [~, null, Null, NULL]\n\
                empty:\n\
                ints: [0b1_01, -0b101, 017, 0o17, '017', 0, -12, +12, 1_000, 0x1F, 0x_1F, 190:20:30, 18446744073709551616]\n\
                floats: [1.5, .5, -.5, +.5, 1., 1e3, 1E+3, 08, 1.25_5, 190:20:30.15, .inf, -.Inf, .NaN, \"1e3\"]\n\
                times: [2024-01-01, 2024-1-2, 2024-1-2 3:04:05.5, 2001-12-14t21:59:43.10-05:00, \"2024-01-01\"]\n\
                strings: [yES, nULL, 0x, 1e, e3, 12:60, 2024-13-1x, a:b]\n\
                block: |\n  yes\n\
                keys: {on: 1, \"on\": 2, 017: 3}\n";
    let read = support::yaml11::read(text);
    assert_eq!(
        read,
        [json!({
            "bools": [true, true, true, true, true, false, false, false, false, false, true, true, true,
                      false, false, false, true, true, true, false, false, false],
            "nulls": [null, null, null, null],
            "empty": null,
            "ints": [5, -5, 15, 15, "017", 0, -12, 12, 1000, 31, 31, 685230, {"!!int": "18446744073709551616"}],
            "floats": [1.5, 0.5, -0.5, 0.5, 1.0, 1000.0, 1000.0, 8.0, 1.255, 685230.15,
                       {"!!float": ".inf"}, {"!!float": "-.inf"}, {"!!float": ".nan"}, "1e3"],
            "times": [{"!!timestamp": "2024-01-01"}, {"!!timestamp": "2024-1-2"},
                      {"!!timestamp": "2024-1-2 3:04:05.5"},
                      {"!!timestamp": "2001-12-14t21:59:43.10-05:00"}, "2024-01-01"],
            "strings": ["yES", "nULL", "0x", "1e", "e3", "12:60", "2024-13-1x", "a:b"],
            "block": "yes\n",
            "keys": {"!!on": 1, "on": 2, "!!017": 3},
        })]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_parameters_override_like_kustomize_edit() {
    let Some(kubectl) = support::require(support::Tool::Kubectl) else {
        return;
    };
    // The overrides written into the kustomization (what `kustomize edit
    // set ...` would do) give the oracle.
    let tree = support::tree(&[
        ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
        (
            "base/deploy.yaml",
            &std::fs::read_to_string(corpus().join("02-base-overlay/base/deploy.yaml")).unwrap(),
        ),
        (
            "app/kustomization.yaml",
            "resources: [../base]\nnamePrefix: old-\n",
        ),
    ]);
    let edited = support::tree(&[
        ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
        (
            "base/deploy.yaml",
            &std::fs::read_to_string(corpus().join("02-base-overlay/base/deploy.yaml")).unwrap(),
        ),
        (
            "app/kustomization.yaml",
            "resources: [../base]\nnamePrefix: new-\nnamespace: qa\ncommonLabels: {env: qa}\ncommonAnnotations: {by: kiln}\nimages:\n- {name: nginx, newName: mirror.example.com/nginx, newTag: '1.27'}\nreplicas:\n- {name: web, count: 3}\n",
        ),
    ]);
    let want = oracle(&kubectl, &edited.path().join("app")).unwrap();
    let got = rendered(
        &plugin(),
        tree.path(),
        "app",
        &[
            ("namePrefix", "new-"),
            ("namespace", "qa"),
            ("commonLabel", "env=qa"),
            ("commonAnnotation", "by=kiln"),
            ("image", "nginx=mirror.example.com/nginx:1.27"),
            ("replicas", "web=3"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(got, want);
    let error = rendered(&plugin(), tree.path(), "app", &[("nameprefix", "x-")])
        .await
        .unwrap_err();
    assert!(
        error.contains("unknown parameter \"nameprefix\""),
        "{error}"
    );
}

const CONFIG_MAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n";

#[tokio::test]
async fn a_patch_target_that_selects_nothing_is_an_error_when_asked() {
    // kustomize ignores such a patch; `strictPatchTargets=true` refuses it.
    let tree = support::tree(&[
        (
            "app/kustomization.yaml",
            "resources: [cm.yaml]\npatches:\n- target: {kind: Deployment, name: web}\n  patch: '[{\"op\": \"add\", \"path\": \"/metadata/labels\", \"value\": {\"a\": \"b\"}}]'\n",
        ),
        ("app/cm.yaml", CONFIG_MAP),
    ]);
    let plugin = plugin();
    let objects = rendered(&plugin, tree.path(), "app", &[]).await.unwrap();
    assert_eq!(ids(&objects), ["ConfigMap//settings"]);
    let error = rendered(
        &plugin,
        tree.path(),
        "app",
        &[("strictPatchTargets", "true")],
    )
    .await
    .unwrap_err();
    assert!(
        error.contains(
            "app/kustomization.yaml: the patch target (kind=Deployment, name=web) selects no object of the build"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn alias_bombs_are_refused_naming_the_file() {
    let plugin = plugin();
    let bomb = support::alias_bomb(3000);
    let indented: String = bomb.lines().map(|l| format!("    {l}\n")).collect();
    let inline_patch = format!("resources: [cm.yaml]\npatches:\n- patch: |\n{indented}");
    let kustomization = format!("{bomb}resources: [cm.yaml]\n");
    // (files, what the error must start with)
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[
                ("app/kustomization.yaml", "resources: [bomb.yaml]\n"),
                ("app/bomb.yaml", &bomb),
            ],
            "app/bomb.yaml:4: YAML aliases expand to more than ",
        ),
        (
            &[
                ("app/kustomization.yaml", &inline_patch),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app/kustomization.yaml: line 4: YAML aliases expand to more than ",
        ),
        (
            &[
                ("app/kustomization.yaml", &kustomization),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app/kustomization.yaml:4: YAML aliases expand to more than ",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nconfigurations: [config.yaml]\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                ("app/config.yaml", &bomb),
            ],
            "app/config.yaml: configurations: line 4: YAML aliases expand to more than ",
        ),
    ];
    for (files, expected) in cases {
        let tree = support::tree(files);
        // Not `unwrap_err`: it would print millions of values.
        let Err(error) = rendered(&plugin, tree.path(), "app", &[]).await else {
            panic!("the bomb was rendered: {expected}");
        };
        assert!(error.contains(expected), "want {expected:?}, got: {error}");
    }
    // A few aliases are fine.
    let tree = support::tree(&[
        ("app/kustomization.yaml", "resources: [cm.yaml]\n"),
        (
            "app/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: &l {app: web}, annotations: *l}\n",
        ),
    ]);
    let objects = rendered(&plugin, tree.path(), "app", &[]).await.unwrap();
    assert_eq!(objects[0]["metadata"]["annotations"]["app"], "web");
}

/// `loadRestrictor=LoadRestrictionsNone` reads files outside the
/// kustomization's directory, as `kubectl kustomize --load-restrictor
/// LoadRestrictionsNone` does (the default refuses them: see
/// `bad_trees_fail_with_the_file_that_is_wrong`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_restrictor_can_be_lifted_like_kustomize_flag() {
    let Some(kubectl) = support::require(support::Tool::Kubectl) else {
        return;
    };
    let tree = support::tree(&[
        (
            "app/kustomization.yaml",
            "resources: [../shared/cm.yaml, ../base]\npatches:\n- path: ../shared/patch.yaml\nconfigMapGenerator:\n- name: gen\n  files: [../shared/a.txt]\n  envs: [../shared/b.env]\n",
        ),
        ("shared/cm.yaml", CONFIG_MAP),
        (
            "shared/patch.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {c: d}\n",
        ),
        ("shared/a.txt", "alpha\n"),
        ("shared/b.env", "B=2\n"),
        ("base/kustomization.yaml", "resources: [sa.yaml]\n"),
        (
            "base/sa.yaml",
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\n",
        ),
    ]);
    let out = std::process::Command::new(&kubectl)
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(tree.path().join("app"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<Value> =
        serde_yaml::Deserializer::from_str(std::str::from_utf8(&out.stdout).unwrap())
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
    let got = rendered(
        &plugin(),
        tree.path(),
        "app",
        &[("loadRestrictor", "LoadRestrictionsNone")],
    )
    .await
    .unwrap();
    assert_eq!(got, want);
    let error = rendered(&plugin(), tree.path(), "app", &[])
        .await
        .unwrap_err();
    assert!(
        error.contains("security: file shared/cm.yaml is not in or below app"),
        "{error}"
    );
    let error = rendered(&plugin(), tree.path(), "app", &[("loadRestrictor", "none")])
        .await
        .unwrap_err();
    assert!(error.contains("loadRestrictor: \"none\" is not"), "{error}");
}

#[tokio::test]
async fn vars_cannot_blow_up_the_output() {
    // A 64 KiB value named 2000 times in one annotation would add 128 MiB:
    // the substitution budget (64 MiB per build) stops it, naming the
    // kustomization, before the text is built.
    let big = "x".repeat(64 << 10);
    let config_map = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    blown: \"{}\"\ndata:\n  big: {big}\n",
        "$(BIG)".repeat(2000)
    );
    let kustomization = "resources: [cm.yaml]\nvars:\n- name: BIG\n  objref: {kind: ConfigMap, name: settings, apiVersion: v1}\n  fieldref: {fieldpath: data.big}\n";
    let tree = support::tree(&[
        ("app/kustomization.yaml", kustomization),
        ("app/cm.yaml", &config_map),
    ]);
    let Err(error) = rendered(&plugin(), tree.path(), "app", &[]).await else {
        panic!("a 128 MiB annotation was rendered");
    };
    assert!(
        error.contains(
            "app/kustomization.yaml: var substitution: ConfigMap/settings: field \"metadata/annotations\": var substitution adds more than 67108864 bytes to the build"
        ),
        "{error}"
    );
    // A value naming another var is not expanded again (one pass, as in
    // kustomize): `$(A)` whose value is `$(A)$(A)` stays that text.
    let tree = support::tree(&[
        (
            "app/kustomization.yaml",
            "resources: [cm.yaml]\nvars:\n- name: A\n  objref: {kind: ConfigMap, name: settings, apiVersion: v1}\n  fieldref: {fieldpath: data.a}\n",
        ),
        (
            "app/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations: {x: \"<$(A)>\"}\ndata: {a: \"$(A)$(A)\"}\n",
        ),
    ]);
    let objects = rendered(&plugin(), tree.path(), "app", &[]).await.unwrap();
    assert_eq!(objects[0]["metadata"]["annotations"]["x"], "<$(A)$(A)>");
}

#[tokio::test]
async fn bad_trees_fail_with_the_file_that_is_wrong() {
    let plugin = plugin();
    // (files, the path to build, what the error must say)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case] = &[
        (
            &[("app/kustomization.yaml", "resources: [missing.yaml]\n")],
            "app",
            "app/kustomization.yaml: resource \"missing.yaml\": no such file or directory",
        ),
        (
            &[
                ("a/kustomization.yaml", "resources: [../b]\n"),
                ("b/kustomization.yaml", "resources: [../a]\n"),
            ],
            "a",
            "a cycle between kustomizations: a → b → a",
        ),
        (
            &[
                ("app/kustomization.yaml", "resources: [bad.yaml]\n"),
                (
                    "app/bad.yaml",
                    "kind: ConfigMap\nmetadata:\n  name: [unclosed\n",
                ),
            ],
            "app",
            "app/bad.yaml:4: did not find expected",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "resources: []\nhelmCharts:\n- name: redis\n",
            )],
            "app",
            "app/kustomization.yaml: field `helmCharts` is not supported by Kiln's kustomize plugin: it inflates Helm charts",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "resources: []\ntransformers: [plugin.yaml]\n",
            )],
            "app",
            "field `transformers` is not supported by Kiln's kustomize plugin: it loads kustomize plugins",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "resources: []\nopenapi: {path: schema.json}\n",
            )],
            "app",
            "field `openapi` is not supported by Kiln's kustomize plugin: it replaces the OpenAPI schema",
        ),
        // vars: a name declared twice (in one layer, or in a base and its overlay).
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: var \"X\" is declared twice in the build (also in app/kustomization.yaml)",
        ),
        (
            &[
                (
                    "base/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
                ("base/cm.yaml", CONFIG_MAP),
                (
                    "app/kustomization.yaml",
                    "resources: [../base]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: var \"X\" is declared twice in the build (also in base/kustomization.yaml)",
        ),
        (
            &[
                ("app/kustomization.yaml", "resources: [../a, ../b]\n"),
                (
                    "a/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
                ("a/cm.yaml", CONFIG_MAP),
                (
                    "b/kustomization.yaml",
                    "vars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: var \"X\" is declared twice in the build (also in a/kustomization.yaml)",
        ),
        // vars: the object is not in the build (here: no apiVersion, which
        // kustomize compares exactly).
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings}}\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: var \"X\" names ConfigMap settings, which is not in the build",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}, fieldref: {fieldPath: data.nope}}\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: var \"X\": ConfigMap/settings: no field \"data.nope\"",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
                (
                    "app/cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: other}\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: var \"X\": 2 objects of the build are ConfigMap settings (v1)",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nvars:\n- {name: X, objref: {kind: ConfigMap, name: settings, apiVersion: v1}}\n",
                ),
                (
                    "app/cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    args: [1, $(X)]\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: var substitution: Pod/p: field \"spec/containers/args\": a list item is not a string",
        ),
        // configurations
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nconfigurations: [missing.yaml]\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: configuration \"missing.yaml\": no such file (app/missing.yaml)",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nconfigurations: [c.yaml]\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                ("app/c.yaml", "nameRefrence: []\n"),
            ],
            "app",
            "app/c.yaml: configurations: line 1: unknown field `nameRefrence`",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nconfigurations: [c.yaml]\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                (
                    "app/c.yaml",
                    "varReference:\n- {kind: Deployment, path: spec/template/spec/containers/args, create: true}\n",
                ),
            ],
            "app",
            "app/c.yaml: configurations: varReference: conflicting field specs for Deployment spec/template/spec/containers/args",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [w.yaml]\nconfigurations: [c.yaml]\nimages:\n- {name: mailer, newTag: '2'}\n",
                ),
                (
                    "app/w.yaml",
                    "apiVersion: example.com/v1\nkind: Worker\nmetadata: {name: w}\nspec:\n  images: [mailer:1]\n",
                ),
                (
                    "app/c.yaml",
                    "images:\n- {kind: Worker, path: spec/images}\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: configurations: Worker/w: field \"spec/images\": an images field spec must name a scalar",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "namePrefix: p-\nresources: [r.yaml]\nconfigurations: [c.yaml]\n",
                ),
                (
                    "app/r.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\napiVersion: x.io/v1\nkind: Foo\nmetadata: {name: f}\nspec: {ref: cm}\n",
                ),
                (
                    "app/c.yaml",
                    "nameReference:\n- kind: ConfigMap\n  fieldSpecs:\n  - {kind: Foo, path: spec/ref/name}\n",
                ),
            ],
            "app",
            "app/kustomization.yaml: configurations: nameReference to ConfigMap: Foo/p-f: field \"spec/ref/name\": \"name\" is under a scalar",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nconfigurations: [c.yaml]\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                (
                    "app/c.yaml",
                    "volumeClaimTemplateLabels:\n- {kind: Foo, path: spec/claims/metadata/labels}\n",
                ),
            ],
            "app",
            "app/c.yaml: configurations: line 1: unknown field `volumeClaimTemplateLabels`",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- path: p.yaml\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                (
                    "app/p.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndata: {a: b}\n",
                ),
            ],
            "app",
            "app/p.yaml: the patch is for ConfigMap/typo, which is not in the build",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- path: missing.yaml\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: patches: patch file \"missing.yaml\" does not exist",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- patch: '[{\"op\": \"remove\", \"path\": \"/data\"}]'\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "a JSON 6902 patch needs a `target`",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"remove\", \"path\": \"/nope\"}]'\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "ConfigMap/settings: remove \"/nope\"",
        ),
        (
            &[
                ("app/kustomization.yaml", "resources: [../c]\n"),
                (
                    "c/kustomization.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nnamePrefix: c-\n",
                ),
            ],
            "app",
            "c/kustomization.yaml: is a Component: list its directory under `components`",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\nreplacements:\n- source: {kind: Secret, name: nope}\n  targets:\n  - select: {kind: ConfigMap}\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "no object matches the replacement source (kind=Secret, name=nope)",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "resources: []\nnamePrefx: typo-\n",
            )],
            "app",
            "unknown field `namePrefx`",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "resources: [https://github.com/org/repo//deploy?ref=v1]\n",
            )],
            "app",
            "the sandbox has no network",
        ),
        (
            &[("app/kustomization.yaml", "resources: [../../outside]\n")],
            "app",
            "climbs above the repository root",
        ),
        (
            &[("app/deploy.yaml", "kind: ConfigMap\n")],
            "app",
            "no kustomization.yaml, kustomization.yml or Kustomization",
        ),
        // kustomize refuses a kustomization that sets nothing (comments,
        // `---`, `{}`, only apiVersion and kind, only empty values).
        (
            &[("app/kustomization.yaml", "# nothing yet\n")],
            "app",
            "app/kustomization.yaml: kustomization.yaml is empty",
        ),
        (
            &[(
                "app/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: ''\nresources:\n",
            )],
            "app",
            "app/kustomization.yaml: kustomization.yaml is empty",
        ),
        // kustomize's ids: an unset namespace is `default`.
        (
            &[
                ("app/kustomization.yaml", "resources: [cm.yaml]\n"),
                (
                    "app/cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n",
                ),
            ],
            "app",
            "ConfigMap/default/x is defined twice in the build",
        ),
        // kustomize's default load restrictor: a kustomization reads files
        // only in or below its directory (directories, i.e. bases, may be
        // anywhere in the repository).
        (
            &[
                ("app/kustomization.yaml", "resources: [../shared/cm.yaml]\n"),
                ("shared/cm.yaml", CONFIG_MAP),
            ],
            "app",
            "app/kustomization.yaml: resource \"../shared/cm.yaml\": security: file shared/cm.yaml is not in or below app",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- path: ../shared/p.yaml\n",
                ),
                ("app/cm.yaml", CONFIG_MAP),
                ("shared/p.yaml", CONFIG_MAP),
            ],
            "app",
            "security: file shared/p.yaml is not in or below app",
        ),
        (
            &[
                (
                    "app/kustomization.yaml",
                    "configMapGenerator:\n- name: x\n  files: [../shared/a.txt]\n",
                ),
                ("shared/a.txt", "a"),
            ],
            "app",
            "security: file shared/a.txt is not in or below app",
        ),
    ];
    for (files, path, expected) in cases {
        let tree = support::tree(files);
        let error = rendered(&plugin, tree.path(), path, &[])
            .await
            .expect_err(expected);
        assert!(
            error.contains(expected),
            "expected {expected:?} in: {error}"
        );
    }
}
