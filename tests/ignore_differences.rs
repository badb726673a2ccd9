//! `ignoreDifferences` jq expressions run in `kiln __jq-worker` processes: a
//! runaway expression is stopped and reported with the expression and the
//! object, and leaves nothing running behind it.

use std::time::Duration;

use kiln::diff::{IgnoreDifferences, IgnoreError, IgnoreRules, Jq, JqConfig};
use kiln::manifest::ObjectKey;
use serde_json::{Value, json};

fn jq() -> Jq {
    Jq::new(JqConfig {
        program: env!("CARGO_BIN_EXE_kiln").into(),
        timeout: Duration::from_millis(500),
        max_memory: 128 << 20,
        ..JqConfig::default()
    })
}

fn key() -> ObjectKey {
    ObjectKey {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: Some("default".into()),
        name: "web".into(),
    }
}

fn rule(expression: &str) -> Vec<IgnoreDifferences> {
    vec![IgnoreDifferences {
        kind: "*".into(),
        jq_path_expressions: vec![expression.into()],
        ..Default::default()
    }]
}

fn object() -> Value {
    json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
        {"name": "web"}, {"name": "istio-proxy"}]}}}})
}

const SIDECAR: &str = ".spec.template.spec.containers[] | select(.name == \"istio-proxy\")";

/// Removes the sidecar with `SIDECAR`, as an ordinary rule does.
async fn remove_sidecar(jq: &Jq) {
    let rules = IgnoreRules::new(rule(SIDECAR), jq).await.unwrap();
    let mut cleaned = object();
    rules.apply(&key(), None, &mut cleaned).await.unwrap();
    assert_eq!(
        cleaned["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web"}])
    );
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Processes whose parent is this one (zombies included: a worker that is
/// not reaped counts).
fn children() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            // `pid (comm) state ppid ...`; comm may hold spaces.
            let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or_default();
            after.split_whitespace().nth(1) == Some(me.as_str())
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_expressions_are_stopped_and_reported() {
    let jq = jq();
    remove_sidecar(&jq).await;
    let (threads_before, children_before) = (threads(), children());
    for runaway in [
        // Loops without touching a value: only a kill stops it.
        "def f: f; f",
        // Recursion that overflows the stack of whoever runs it.
        "def f: f + 1; f",
        "def f: [f]; f",
        // Memory without bound.
        "[limit(1000000000; repeat(1))]",
        "[range(1000000000000)] | length",
        "\"x\" * 10000000000",
    ] {
        // In a condition, so that it runs on the object (`del` takes paths).
        let expression = format!(".spec | select(({runaway}) != null)");
        let rules = IgnoreRules::new(rule(&expression), &jq).await.unwrap();
        let error = rules.apply(&key(), None, &mut object()).await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "ignoreDifferences: jq expression {expression:?} on apps/Deployment default/web: "
            )),
            "{message}"
        );
        assert!(
            ["(stopped)", "crashed"].iter().any(|m| message.contains(m)),
            "{message}"
        );
    }
    assert_eq!(threads(), threads_before, "no thread is left behind");
    assert!(
        children() <= children_before,
        "every stopped worker is reaped ({} children, {children_before} before)",
        children()
    );
    // The pool still works.
    remove_sidecar(&jq).await;
}

#[tokio::test]
async fn bad_expressions_are_refused_up_front() {
    let jq = jq();
    for (expression, complaint) in [
        (".spec[".to_owned(), "parse error"),
        // Nesting that would overflow the parser's stack.
        (
            format!("{}.{}", "(".repeat(200_000), ")".repeat(200_000)),
            "",
        ),
    ] {
        let error = IgnoreRules::new(rule(&expression), &jq).await.unwrap_err();
        assert!(
            matches!(&error, IgnoreError::InvalidJq { expression: e, .. } if *e == expression),
            "{error}"
        );
        assert!(error.to_string().contains(complaint), "{error}");
    }
    remove_sidecar(&jq).await;
}

#[tokio::test]
async fn many_objects_share_a_bounded_pool() {
    let jq = Jq::new(JqConfig {
        workers: 1,
        ..jq().config().clone()
    });
    let rules = IgnoreRules::new(rule(SIDECAR), &jq).await.unwrap();
    let before = children();
    let runs = (0..20).map(|_| {
        let rules = rules.clone();
        tokio::spawn(async move {
            let mut object = object();
            rules.apply(&key(), None, &mut object).await.map(|_| object)
        })
    });
    for run in futures_util::future::join_all(runs).await {
        let object = run.unwrap().unwrap();
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][0]["name"],
            "web"
        );
    }
    assert!(children() <= before + 1, "one worker at most");
}
