//! The first-party `helm` plugin against Helm's own engine, through the
//! plugin host: every chart of `tests/helm/` is rendered by
//! `plugins/dist/helm.wasm` with the case's parameters and by Helm v4.2.3
//! (`tests/support/helm_template.py`), and the objects must be the same,
//! in the same order; a chart Helm refuses must fail here too.
//! (`plugins/helm/tests/oracle.rs` compares the same corpus natively.)

mod support;

use std::path::{Path, PathBuf};

use kiln::plugin::{Plugin, World};
use serde_json::Value;

fn plugin() -> Plugin {
    support::host()
        .load_file(&support::component("helm"), World::Renderer, None)
        .unwrap()
}

/// The plugin with a deadline for output, not speed: the corpus's crypto
/// cases (scrypt, RSA) take seconds in the sandbox, more on a loaded CI
/// machine, and what they check is the objects.
fn corpus_plugin() -> Plugin {
    let limits = kiln::plugin::Limits {
        timeout: std::time::Duration::from_secs(120),
        ..kiln::plugin::Limits::default()
    };
    support::host()
        .load_file(&support::component("helm"), World::Renderer, Some(limits))
        .unwrap()
}

/// The plugin parameters a case's `case.json` asks for.
fn params(case: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut one = |key: &str, value: String| out.push((key.to_owned(), value));
    if let Some(r) = case["release"].as_str() {
        one("releaseName", r.to_owned());
    }
    if let Some(n) = case["namespace"].as_str() {
        one("namespace", n.to_owned());
    }
    if let Some(k) = case["kube_version"].as_str() {
        one("kubeVersion", k.to_owned());
    }
    if case["skip_crds"].as_bool() == Some(true) {
        one("skipCrds", "true".to_owned());
    }
    for (field, key) in [
        ("values", "valueFiles"),
        ("set", "set"),
        ("set_string", "setString"),
        ("api_versions", "apiVersions"),
    ] {
        for v in case[field].as_array().into_iter().flatten() {
            one(key, v.as_str().unwrap().to_owned());
        }
    }
    out
}

/// What Helm gives for the case, as objects (Err: Helm's message).
fn oracle(python: &Path, case: &Path) -> Result<Vec<Value>, String> {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/helm_template.py");
    let out = std::process::Command::new(python)
        .arg(harness)
        .arg("--objects")
        .arg(case)
        .output()
        .unwrap();
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        other => panic!(
            "{}: the oracle failed ({other:?}): {}",
            case.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    // One object a line, each read as Helm's install reads it (YAML 1.1).
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect())
}

async fn rendered(
    plugin: &Plugin,
    root: &Path,
    params: Vec<(String, String)>,
) -> Result<Vec<Value>, String> {
    let chain = [kiln::render::Step::Plugin {
        plugin: plugin.clone(),
        params,
    }];
    let context = support::context("app", "chart");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chart_renders_through_the_plugin_as_helm_renders_it() {
    let Some(python) = support::require(support::Tool::HelmPython) else {
        return;
    };
    let plugin = corpus_plugin();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("chart").is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 64, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case_dir in &cases {
        let name = case_dir.file_name().unwrap().to_string_lossy().into_owned();
        let case: Value = std::fs::read_to_string(case_dir.join("case.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null);
        let want = oracle(&python, case_dir);
        let got = rendered(&plugin, case_dir, params(&case)).await;
        match (want, got) {
            (Ok(want), Ok(got)) if want != got => wrong.push(format!(
                "{name}: {} objects, Helm {}; first difference:\n  helm {}\n  ours {}",
                got.len(),
                want.len(),
                want.iter()
                    .zip(&got)
                    .find(|(w, g)| w != g)
                    .map_or(String::new(), |p| p.0.to_string()),
                want.iter()
                    .zip(&got)
                    .find(|(w, g)| w != g)
                    .map_or(String::new(), |p| p.1.to_string()),
            )),
            (Ok(_), Ok(_)) => {}
            (Err(helm), Err(ours)) => match case["error"].as_str() {
                None => wrong.push(format!(
                    "{name}: Helm fails ({helm}) but case.json expects no error"
                )),
                Some(expected) if !ours.contains(expected) => wrong.push(format!(
                    "{name}: {ours:?} lacks Helm's {expected:?} ({helm:?})"
                )),
                Some(_) => {}
            },
            (Ok(_), Err(e)) => wrong.push(format!("{name}: Helm renders, the plugin fails: {e}")),
            (Err(e), Ok(_)) => wrong.push(format!("{name}: Helm fails ({e}), the plugin renders")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A chart named `name` whose one template is `template`, under `app/`.
fn hostile_chart(root: &Path, name: &str, template: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
    )
    .unwrap();
    std::fs::write(dir.join("templates/t.yaml"), template).unwrap();
}

/// Least-significant-bit-first bits, as DEFLATE packs them.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn push(&mut self, value: u64, count: u32) {
        self.acc |= value << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code: its bits go most significant first.
    fn code(&mut self, code: u64, count: u32) {
        let reversed = (0..count).fold(0, |r, i| r | (((code >> i) & 1) << (count - 1 - i)));
        self.push(reversed, count);
    }
}

/// A gzipped tar whose one file (`bomb/zeros`) is `size` zero bytes, in a
/// few hundred KiB: one fixed-Huffman DEFLATE block of 258-byte matches.
/// The stream ends after the data, without a trailer: a reader that stops
/// at its budget never gets there.
fn archive_bomb(size: u64) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..10].copy_from_slice(b"bomb/zeros");
    header[100..107].copy_from_slice(b"0000644");
    header[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    header[136..147].copy_from_slice(b"00000000000");
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut bits = Bits::default();
    bits.push(1, 1); // the final block
    bits.push(1, 2); // fixed Huffman codes
    for b in header {
        let b = u64::from(b);
        if b < 144 {
            bits.code(0x30 + b, 8);
        } else {
            bits.code(0x190 + b - 144, 9);
        }
    }
    // The header ends with a zero byte: each match copies 258 more.
    for _ in 0..size / 258 {
        bits.code(0xC5, 8); // length 258 (code 285)
        bits.code(0, 5); // distance 1
    }
    bits.push(0, 7); // end of block
    bits.push(0, 7);
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.extend_from_slice(&bits.out);
    out
}

/// Hostile charts rendered at the same time as a good one: each is
/// refused with its own error, and the good one renders meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_charts_are_refused_while_a_good_chart_renders() {
    let plugin = plugin();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    hostile_chart(
        root,
        "forever",
        "a: b\n{{ range 9223372036854775807 }}x{{ end }}\n",
    );
    hostile_chart(
        root,
        "recursion",
        "{{ define \"loop\" }}{{ include \"loop\" . }}{{ end }}\n{{ include \"loop\" . }}\n",
    );
    hostile_chart(root, "repeat", "a: {{ repeat 1073741824 \"x\" }}\n");
    hostile_chart(root, "bomb", "a: b\n");
    std::fs::create_dir_all(root.join("bomb/charts")).unwrap();
    std::fs::write(
        root.join("bomb/charts/zeros-0.1.0.tgz"),
        archive_bomb(64 << 20),
    )
    .unwrap();
    hostile_chart(root, "link", "a: b\n");
    std::fs::create_dir_all(root.join("link/charts")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("link/charts/passwd.tgz")).unwrap();
    hostile_chart(root, "linkdir", "a: b\n");
    std::fs::create_dir_all(root.join("linkdir/charts")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("linkdir/charts/etc")).unwrap();
    hostile_chart(
        root,
        "good",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  count: {{ len (until 1000) | quote }}\n",
    );
    let render = |name: &'static str| {
        let plugin = plugin.clone();
        let root = root.to_path_buf();
        async move {
            let chain = [kiln::render::Step::Plugin {
                plugin,
                params: Vec::new(),
            }];
            let context = support::context(name, name);
            let result = kiln::render::render(support::view(&root), &context, &chain)
                .await
                .map_err(|e| format!("{e:#}"));
            (name, result)
        }
    };
    let results = futures_util::future::join_all(
        [
            "forever",
            "recursion",
            "repeat",
            "bomb",
            "link",
            "linkdir",
            "good",
        ]
        .map(render),
    )
    .await;
    for (name, result) in results {
        let want = match name {
            "good" => {
                let objects = result.unwrap().objects;
                assert_eq!(objects.len(), 1);
                assert_eq!(objects[0].value()["data"]["count"], "1000");
                continue;
            }
            "forever" => "template steps",
            "recursion" => "nested template calls",
            "repeat" => "repeat would build 1073741824 bytes",
            "bomb" => "charts/zeros-0.1.0.tgz: the archive expands to more than",
            "link" => "symlink leads outside the source root",
            "linkdir" => {
                let e = result.as_ref().expect_err(name);
                assert!(e.contains("linkdir/charts/etc"), "{name}: {e}");
                "symlink leads outside the source root"
            }
            _ => unreachable!(),
        };
        let e = result.expect_err(name);
        assert!(e.contains(want), "{name}: {e}");
    }
}

/// The crypto work budget is the `cryptoWork` parameter (raised, with the
/// Plugin's timeout, for a chart such as bitnami's etcd whose RSA keys
/// need more than the default), checked before the work is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crypto_work_budget_is_a_parameter() {
    let plugin = plugin();
    let tmp = tempfile::tempdir().unwrap();
    hostile_chart(
        tmp.path(),
        "chart",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hashes\ndata:\n  \
         a: {{ bcrypt \"a\" | len | quote }}\n  b: {{ bcrypt \"b\" | len | quote }}\n",
    );
    let root = tmp.path();
    let with = |work: &str| vec![("cryptoWork".to_owned(), work.to_owned())];
    let e = rendered(&plugin, root, with("200")).await.unwrap_err();
    assert!(
        e.contains("budget of 200 crypto work units is spent"),
        "{e}"
    );
    assert!(e.contains("cryptoWork parameter"), "{e}");
    let objects = rendered(&plugin, root, with("300")).await.unwrap();
    assert_eq!(objects[0]["data"]["b"], "60");
    for bad in ["-1", "lots", "1000001"] {
        let e = rendered(&plugin, root, with(bad)).await.unwrap_err();
        assert!(
            e.contains(&format!("cryptoWork: {bad:?} is not a number")),
            "{e}"
        );
    }
}
