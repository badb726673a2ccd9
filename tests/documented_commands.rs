//! Every command the README and the docs show works as shown.
//!
//! The fenced blocks of `README.md`, `docs/*.md` and `deploy/README.md`
//! whose info string starts with `sh` are read in order, one scratch copy
//! of the repository's `examples/`, `deploy/` and built `plugins/dist/`
//! per document (a reader follows a page from its top), with a dev cluster
//! of its own (`KUBECONFIG` points at it):
//!
//! - ```` ```sh ```` blocks are **run**, as `bash -euo pipefail`, with
//!   the `kiln` under test and the real `kubectl` first in `PATH` and an
//!   empty `HOME`; each must exit 0 (or `exit=N` after `sh`: the status it
//!   ends with, e.g. `kiln diff` reporting drift) within two minutes.
//! - ```` ```sh no-run ```` blocks are the ones a test cannot run here
//!   (a server left running, a public registry or repository, a long
//!   benchmark, the build itself): every `kiln …` command in them is still
//!   parsed by `kiln` itself (`--help` appended, so each flag and value is
//!   read as a user's would be, and a flag that does not exist fails).
//!
//! Any other `sh` info string fails the test, so that a block cannot be
//! left out by a typo.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Tool, require};

/// How long one block may run.
const BLOCK_DEADLINE: Duration = Duration::from_secs(120);

/// The documents whose commands are checked.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs.push(root.join("deploy/README.md"));
    docs
}

/// What a block is for.
#[derive(Debug, PartialEq)]
enum Kind {
    /// Run it; it ends with this status.
    Run { status: i32 },
    /// Parse its `kiln` commands only.
    NoRun,
}

/// A fenced `sh` block.
#[derive(Debug)]
struct Block {
    /// `FILE:LINE` of its opening fence.
    place: String,
    kind: Kind,
    text: String,
}

/// The `sh` blocks of a Markdown text, in order.
fn blocks(file: &str, markdown: &str) -> Result<Vec<Block>, String> {
    let mut found = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let language = words.next().unwrap_or("");
        let mut body = String::new();
        for (_, line) in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        if !matches!(language, "sh" | "bash" | "shell" | "console") {
            continue;
        }
        let place = format!("{file}:{}", number + 1);
        if language != "sh" {
            return Err(format!(
                "{place}: write ```sh (not ```{language}) so the test reads it"
            ));
        }
        let kind = match words.next() {
            None => Kind::Run { status: 0 },
            Some("no-run") => Kind::NoRun,
            Some(word) => match word.strip_prefix("exit=").map(str::parse) {
                Some(Ok(status)) => Kind::Run { status },
                _ => {
                    return Err(format!(
                        "{place}: unknown block kind `{word}` (no-run, exit=N)"
                    ));
                }
            },
        };
        found.push(Block {
            place,
            kind,
            text: body,
        });
    }
    Ok(found)
}

/// The `kiln` commands of a block, without the word `kiln`: the logical
/// lines (backslash continuations joined) split at unquoted `|`, `&`, `;`
/// and `#`, each command taken up to a redirection.
fn kiln_commands(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines() {
        for segment in segments(line) {
            let segment = segment
                .split_once(" >")
                .map_or(segment, |(before, _)| before);
            let words: Vec<&str> = segment.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "kiln") else {
                continue;
            };
            // `kiln` as the command: first, or after `env`/`time` and
            // their options and assignments (`env -u KUBECONFIG HOME=/x kiln`).
            let before = &words[..at];
            let is_command = before.is_empty()
                || matches!(before[0], "env" | "time")
                    && before[1..].iter().all(|w| {
                        w.starts_with('-')
                            || w.contains('=')
                            || w.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    });
            if !is_command {
                continue;
            }
            let from = if before.is_empty() {
                segment.trim_start()
            } else {
                &segment[segment.find(" kiln").unwrap() + 1..]
            };
            commands.push(from["kiln".len()..].trim().to_owned());
        }
    }
    commands
}

/// A shell line split at its unquoted `|`, `&` and `;`, without its
/// comment.
fn segments(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let (mut quote, mut previous, mut start) = (None, ' ', 0);
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if matches!(c, '|' | '&' | ';') => {
                found.push(&line[start..i]);
                start = i + 1;
            }
            None if c == '#' && previous.is_whitespace() => {
                found.push(&line[start..i]);
                return found;
            }
            None => {}
        }
        previous = c;
    }
    found.push(&line[start..]);
    found
}

/// A scratch copy of what the documents' commands read, and the tools
/// they run.
struct Scratch {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Scratch {
    fn new(kubectl: &Path, kubeconfig_text: &str) -> Scratch {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().unwrap();
        for tree in ["examples", "deploy"] {
            copy_tree(&root.join(tree), &dir.path().join(tree));
        }
        let dist = dir.path().join("plugins/dist");
        std::fs::create_dir_all(&dist).unwrap();
        for name in [
            "values",
            "required-labels",
            "kustomize",
            "helm",
            "pod-security",
            "gatekeeper",
            "vap",
            "kyverno",
            "appset",
        ] {
            let file = format!("{name}.wasm");
            std::fs::copy(support::component(name), dist.join(&file)).unwrap();
        }
        let bin = dir.path().join(".bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kiln"), bin.join("kiln")).unwrap();
        std::os::unix::fs::symlink(kubectl, bin.join("kubectl")).unwrap();
        std::fs::create_dir_all(dir.path().join(".home")).unwrap();
        let kubeconfig = dir.path().join(".kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text).unwrap();
        Scratch { dir, kubeconfig }
    }

    /// A shell in the scratch directory, as a reader's would be.
    fn shell(&self, script: &str) -> Command {
        let path = self.dir.path();
        let mut command = Command::new("bash");
        command
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(path)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", path.join(".bin").display()),
            )
            .env("HOME", path.join(".home"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("TMPDIR", path)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs `command` to its end or the deadline; whatever it left running in
/// its process group is stopped either way. Returns the status (None past
/// the deadline) and the output.
fn run(mut command: Command) -> (Option<i32>, String) {
    let output = tempfile::NamedTempFile::new().unwrap();
    command
        .stdout(output.reopen().unwrap())
        .stderr(output.reopen().unwrap());
    let mut child = command.spawn().expect("bash runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > BLOCK_DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    (
        status,
        std::fs::read_to_string(output.path()).unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_the_readme_and_docs_show_works_as_shown() {
    let Some(kubectl) = require(Tool::Kubectl) else {
        return;
    };
    let mut failures = Vec::new();
    let (mut ran, mut parsed) = (0, 0);
    for document in documents() {
        let name = document
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .display()
            .to_string();
        let markdown = std::fs::read_to_string(&document).unwrap();
        let blocks = match blocks(name.trim_start_matches('/'), &markdown) {
            Ok(blocks) => blocks,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        if blocks.is_empty() {
            continue;
        }
        let cluster = support::cluster::Cluster::start().await;
        let scratch = Scratch::new(&kubectl, &cluster.server.kubeconfig());
        for block in blocks {
            match block.kind {
                Kind::NoRun => {
                    for args in kiln_commands(&block.text) {
                        parsed += 1;
                        let script = format!("kiln {args} --help >/dev/null");
                        let shell = scratch.shell(&script);
                        let (status, output) = tokio::task::spawn_blocking(move || run(shell))
                            .await
                            .unwrap();
                        if status != Some(0) {
                            failures.push(format!(
                                "{}: `kiln {args}` does not parse:\n{output}",
                                block.place
                            ));
                        }
                    }
                }
                Kind::Run { status: expected } => {
                    ran += 1;
                    let shell = scratch.shell(&block.text);
                    let (status, output) = tokio::task::spawn_blocking(move || run(shell))
                        .await
                        .unwrap();
                    if status != Some(expected) {
                        failures.push(format!(
                            "{}: ended with {} (expected {expected}):\n{}\n--- output:\n{output}",
                            block.place,
                            status
                                .map_or("no status within the deadline".into(), |s| s.to_string()),
                            block.text
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the documented commands failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The documents do show runnable commands; a parser that found none
    // would pass vacuously.
    assert!(
        ran >= 10 && parsed >= 15,
        "ran {ran} blocks, parsed {parsed} commands"
    );
}

#[test]
fn blocks_and_commands_are_read_as_a_shell_reads_them() {
    let markdown = "text\n```sh\nkiln render a \\\n  --plugin b.wasm | kubectl apply -f -\n```\n\
                    ```yaml\nkiln: x\n```\n```sh no-run\nenv -u KUBECONFIG HOME=/x kiln render-server --listen ':8443' # c\necho kiln\n```\n\
                    ```sh exit=1\nkiln diff x\n```\n";
    let found = blocks("doc.md", markdown).unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(found[0].kind, Kind::Run { status: 0 });
    assert_eq!(found[1].kind, Kind::NoRun);
    assert_eq!(found[2].kind, Kind::Run { status: 1 });
    assert_eq!(found[1].place, "doc.md:9");
    assert_eq!(
        kiln_commands(&found[0].text),
        ["render a    --plugin b.wasm"]
    );
    assert_eq!(
        kiln_commands(
            "kiln plugin keygen --output-prefix dev && kiln plugin sign x --key dev.key\nkiln crds > crds.yaml\n"
        ),
        [
            "plugin keygen --output-prefix dev",
            "plugin sign x --key dev.key",
            "crds"
        ]
    );
    assert_eq!(
        kiln_commands(&found[1].text),
        ["render-server --listen ':8443'"]
    );
    assert!(blocks("doc.md", "```sh maybe\nx\n```\n").is_err());
    assert!(blocks("doc.md", "```bash\nx\n```\n").is_err());
}
