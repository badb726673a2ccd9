//! The plugin host: sandboxing, limits, error variants, concurrency, the
//! read set and the compile cache, proved with real components.

mod support;

use std::path::Path;

use kiln::manifest;
use kiln::plugin::{CacheOutcome, HostConfig, PluginError, PluginHost, World};
use kiln::source::{Escape, Observation, SourcePath};
use serde_json::json;
use support::*;

/// Renders `app` of the tree at `root` through the `values` renderer.
async fn render_with_values(
    root: &std::path::Path,
    app: &kiln::plugin::AppContext,
) -> kiln::render::Rendered {
    let values = host()
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let chain = [kiln::render::Step::Plugin {
        plugin: values,
        params: vec![],
    }];
    kiln::render::render(view(root), app, &chain).await.unwrap()
}

/// Renders the misbehaving fixture in `mode`, as a future of its own.
fn render_mode(
    plugin: &kiln::plugin::Plugin,
    src: &std::path::Path,
    mode: &'static str,
) -> impl std::future::Future<Output = kiln::plugin::Result<Vec<kiln::manifest::Object>>> + Send + 'static
{
    let (plugin, view) = (plugin.clone(), view(src));
    async move {
        plugin
            .render(
                view,
                context(mode, "app"),
                params(&[("mode", mode)]),
                vec![],
            )
            .await
    }
}

fn misbehave(host: &PluginHost) -> kiln::plugin::Plugin {
    host.load_file(
        &component("fixture-misbehave"),
        World::Renderer,
        Some(tight_limits()),
    )
    .unwrap()
}

#[tokio::test]
async fn each_misbehaving_fixture_fails_with_its_own_error_and_the_host_carries_on() {
    let host = host();
    let plugin = misbehave(&host);
    let src = tree(&[("app/ok.yaml", "a: 1")]);
    std::os::unix::fs::symlink("/etc", src.path().join("app/escape")).unwrap();

    let run = |mode: &str| {
        let (plugin, view) = (plugin.clone(), view(src.path()));
        let params = params(&[("mode", mode), ("size-mib", "8")]);
        async move {
            plugin
                .render(view, context("misbehave", "app"), params, vec![])
                .await
        }
    };

    type Expect = fn(&PluginError) -> bool;
    let cases: Vec<(&str, Expect)> = vec![
        ("loop", |e| matches!(e, PluginError::Timeout { .. })),
        (
            "memory-bomb",
            |e| matches!(e, PluginError::OutOfMemory { limit, .. } if *limit == 64 << 20),
        ),
        ("deep-recursion", |e| {
            matches!(e, PluginError::StackOverflow { .. })
        }),
        (
            "giant-output",
            |e| matches!(e, PluginError::OutputTooLarge { limit, .. } if *limit == 4 << 20),
        ),
        (
            "panic",
            |e| matches!(e, PluginError::Trap { stderr: Some(s), .. } if s.contains("fixture-misbehave panics on purpose")),
        ),
        (
            "invalid-output",
            |e| matches!(e, PluginError::InvalidOutput { error, .. } if error.file.as_deref() == Some("generated")),
        ),
        (
            "read-absolute",
            |e| matches!(e, PluginError::AccessDenied { path, escape: Escape::Absolute, .. } if path == "/etc/passwd"),
        ),
        ("read-traversal", |e| {
            matches!(
                e,
                PluginError::AccessDenied {
                    escape: Escape::Traversal,
                    ..
                }
            )
        }),
        (
            "read-symlink",
            |e| matches!(e, PluginError::AccessDenied { path, escape: Escape::Symlink, .. } if path == "app/escape/passwd"),
        ),
    ];
    for (mode, expected) in cases {
        let error = run(mode).await.expect_err(mode);
        assert!(expected(&error), "mode {mode}: unexpected error {error:?}");
        assert_eq!(error.plugin(), "fixture-misbehave", "mode {mode}");
        assert!(
            error.to_string().starts_with("plugin fixture-misbehave: "),
            "{error}"
        );
    }

    // The same host, after all that, still renders correctly.
    let objects = run("trivial").await.unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].display_name(), "ConfigMap/trivial");
    let values = host
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let objects = values
        .render(
            view(&guestbook()),
            context("shop", ""),
            params(&[("replicas", "5")]),
            vec![],
        )
        .await
        .unwrap();
    let deployment = objects.iter().find(|o| o.kind() == "Deployment").unwrap();
    assert_eq!(deployment.name(), "shop-frontend");
    assert_eq!(deployment.value()["spec"]["replicas"], json!(5));
}

/// A guest that sleeps through WASI must not hold a host thread: its timers
/// fire at once, a guest waiting for the clock to move hits its deadline,
/// and renders queued behind sleeping plugins still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_guests_cannot_block_the_host() {
    let host = PluginHost::new(HostConfig {
        max_concurrency: 2,
        ..HostConfig::default()
    })
    .unwrap();
    let plugin = misbehave(&host);
    let src = tree(&[("app/x.yaml", "a: 1")]);
    let run = |mode: &'static str| render_mode(&plugin, src.path(), mode);
    // An hour-long sleep returns at once: WASI timers do not wait.
    let objects = tokio::time::timeout(std::time::Duration::from_secs(60), run("sleep"))
        .await
        .expect("an hour-long guest sleep must not hold the call")
        .unwrap();
    assert_eq!(objects[0].display_name(), "ConfigMap/slept");

    // Four guests waiting forever for the clock, on two permits, then a
    // trivial render: every sleeper ends with a timeout, the trivial render
    // still completes.
    let sleepers: Vec<_> = (0..4).map(|_| tokio::spawn(run("sleep-forever"))).collect();
    let trivial = tokio::time::timeout(std::time::Duration::from_secs(60), run("trivial"))
        .await
        .expect("a render queued behind sleeping plugins must run")
        .unwrap();
    assert_eq!(trivial[0].display_name(), "ConfigMap/trivial");
    for sleeper in sleepers {
        let error = sleeper.await.unwrap().expect_err("a guest waiting forever");
        assert!(matches!(error, PluginError::Timeout { .. }), "{error:?}");
    }
}

/// A guest whose render is given up (its interrupt raised, as the render
/// server does at a deadline) stops within a few ticks, long before its own
/// CPU deadline, and gives its memory back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_stops_when_its_render_is_given_up() {
    let host = host();
    let limits = kiln::plugin::Limits {
        timeout: std::time::Duration::from_secs(120),
        ..tight_limits()
    };
    let plugin = host
        .load_file(
            &component("fixture-misbehave"),
            World::Renderer,
            Some(limits),
        )
        .unwrap();
    let src = tree(&[("app/x.yaml", "a: 1")]);
    let interrupt = kiln::interrupt::Interrupt::new();
    let spinning = tokio::spawn(
        interrupt
            .clone()
            .scope(render_mode(&plugin, src.path(), "loop")),
    );
    while host.memory_reserved() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    interrupt.raise();
    let error = spinning.await.unwrap().expect_err("an endless loop");
    assert!(
        matches!(error, PluginError::Interrupted { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("given up"), "{error}");
    assert_eq!(host.memory_reserved(), 0);
}

/// Plugin calls hold their memory limit from one host-wide budget: a call
/// that does not fit waits, so plugins never hold more than the budget
/// whatever the concurrency; a budget below the largest limit is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_calls_share_one_memory_budget() {
    let refused = PluginHost::new(HostConfig {
        max_memory: 512 << 20,
        memory_budget: 256 << 20,
        ..HostConfig::default()
    });
    assert!(refused.unwrap_err().to_string().contains("memory budget"));
    // In whole MiB, a 1 GB budget does not hold a 1 GB call.
    let refused = PluginHost::new(HostConfig {
        max_memory: 1_000_000_000,
        memory_budget: 1_000_000_000,
        ..HostConfig::default()
    });
    assert!(refused.is_err());

    // Room for one 64 MiB call at a time, though four may run at once.
    let host = PluginHost::new(HostConfig {
        max_concurrency: 4,
        max_memory: 64 << 20,
        memory_budget: 100 << 20,
        ..HostConfig::default()
    })
    .unwrap();
    let plugin = misbehave(&host);
    let src = tree(&[("app/x.yaml", "a: 1")]);
    let run = |mode: &'static str| render_mode(&plugin, src.path(), mode);
    let spinning = tokio::spawn(run("loop"));
    let reserved = async {
        while host.memory_reserved() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        host.memory_reserved()
    };
    let reserved = tokio::time::timeout(std::time::Duration::from_secs(30), reserved)
        .await
        .expect("the running call reserves its memory");
    assert_eq!(reserved, 64 << 20);
    // A second call cannot reserve its 64 MiB while the first holds its
    // own: it is still waiting when the first ends.
    let waiting = tokio::spawn(run("trivial"));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "a call past the budget must wait");
    assert!(matches!(
        spinning.await.unwrap(),
        Err(PluginError::Timeout { .. })
    ));
    waiting.await.unwrap().unwrap();
    assert_eq!(host.memory_reserved(), 0);
}

/// Compiled components are kept in memory up to a size: past it, a
/// component is compiled again (here: no compile cache on disk).
#[test]
fn compiled_plugins_in_memory_are_bounded() {
    let host = PluginHost::new(HostConfig {
        compiled_size: 1024,
        ..HostConfig::default()
    })
    .unwrap();
    let load = || {
        host.load_file(&component("values"), World::Renderer, None)
            .unwrap()
            .cache_outcome()
    };
    assert_eq!(load(), CacheOutcome::Compiled);
    assert_eq!(load(), CacheOutcome::Compiled, "too large to be kept");
    let roomy = host_with_room();
    let load = || {
        roomy
            .load_file(&component("values"), World::Renderer, None)
            .unwrap()
            .cache_outcome()
    };
    assert_eq!(load(), CacheOutcome::Compiled);
    assert_eq!(load(), CacheOutcome::Hit);
}

fn host_with_room() -> PluginHost {
    PluginHost::new(HostConfig::default()).unwrap()
}

#[tokio::test]
async fn a_wasi_guest_finds_nothing_ambient() {
    let host = host();
    let plugin = misbehave(&host);
    let src = tree(&[("app/x.yaml", "a: 1")]);
    let objects = plugin
        .render(
            view(src.path()),
            context("snoop", "app"),
            params(&[("mode", "wasi-snoop")]),
            vec![],
        )
        .await
        .unwrap();
    let data = &objects[0].value()["data"];
    let field = |k: &str| data[k].as_str().unwrap_or_default().to_owned();
    assert_eq!(field("env"), "[]", "no environment variables");
    assert_eq!(field("args"), "[]", "no arguments");
    let host_cwd = std::env::current_dir().unwrap();
    assert!(
        !field("cwd").contains(&*host_cwd.to_string_lossy()),
        "the host's directory stays hidden"
    );
    for denied in ["root", "passwd", "tcp", "dns"] {
        assert!(
            field(denied).starts_with("Err("),
            "{denied} must fail, got {}",
            field(denied)
        );
    }
    assert_eq!(
        field("wallclock"),
        "0",
        "the wall clock is frozen at the epoch"
    );
    assert_eq!(field("elapsed"), "0", "the monotonic clock does not move");
}

/// The versioning rule: a component built against an earlier patch of the
/// contract line (0.1.0, before the optional `rules` export) loads and runs
/// unchanged on this host.
#[tokio::test]
async fn a_component_of_an_earlier_patch_runs_unchanged() {
    let plugin = host()
        .load_file(&component("fixture-contract-0-1-0"), World::Policy, None)
        .unwrap();
    assert!(!plugin.reports_rules());
    let objects = manifest::parse(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        Some("a.yaml"),
    )
    .unwrap();
    let findings = plugin
        .review(
            view(Path::new(".")),
            None,
            context("old", ""),
            objects.into(),
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0].message,
        "reviewed manifest 0 under contract 0.1.0"
    );
    let info = kiln::plugin::inspect(&std::fs::read(component("fixture-contract-0-1-0")).unwrap())
        .unwrap();
    assert_eq!(info.contract_version.unwrap().to_string(), "0.1.0");
}

/// A policy reporting its rules can neither flood the host nor lie in its
/// results: too many results, an over-long name and a result for an object
/// the set lacks are refused naming the plugin; an `error` outcome fails
/// the review closed naming the rule; an honest report becomes findings.
#[tokio::test]
async fn attack_a_policy_reporting_rules_is_bounded_and_checked() {
    let plugin = host()
        .load_file(&component("fixture-misreport"), World::Policy, None)
        .unwrap();
    assert!(plugin.reports_rules());
    let objects: std::sync::Arc<[manifest::Object]> = manifest::parse(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        Some("a.yaml"),
    )
    .unwrap()
    .into();
    let settings = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let failed = |result: kiln::plugin::Result<Vec<kiln::plugin::Finding>>| match result {
        Err(PluginError::Failed { plugin, failure }) => {
            assert_eq!(plugin, "fixture-misreport");
            failure.to_string()
        }
        other => panic!("expected the review to fail, got {other:?}"),
    };
    let review = |pairs: Vec<(String, String)>| {
        plugin.review(
            view(Path::new(".")),
            None,
            context("app", ""),
            objects.clone(),
            pairs,
        )
    };
    let message = failed(review(settings(&[("mode", "flood")])).await);
    assert!(
        message.contains("1000001 rule results, more than the 1000000"),
        "{message}"
    );
    let message = failed(review(settings(&[("mode", "long-name")])).await);
    assert!(message.contains("300 bytes (at most 253)"), "{message}");
    let message = failed(review(settings(&[("mode", "stray-object")])).await);
    assert!(
        message.contains("manifest 4294967295, but the set has 1"),
        "{message}"
    );
    let message = failed(review(settings(&[("mode", "rule-error")])).await);
    assert!(
        message.contains("rule misreport/broken on ConfigMap/a"),
        "{message}"
    );
    // Exactly at the bound is fine; an honest report names its rule.
    let at_bound = review(settings(&[("mode", "flood"), ("count", "1000000")]))
        .await
        .unwrap();
    assert!(at_bound.is_empty(), "passes are not findings");
    let findings = review(settings(&[("mode", "honest")])).await.unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0]
            .rule
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("misreport/r")
    );
}

/// What a policy reads of the destination goes through the host's view,
/// which answers only what it holds and may hand out: a Secret is refused,
/// a key no object could have is refused, a flood of lookups is cut at
/// [`MAX_LOOKUPS`] (each pending one recorded for the next round, the rest
/// unavailable), and a review without a cluster is told so.
#[tokio::test]
async fn attack_a_policy_reads_of_the_cluster_only_what_the_view_hands_out() {
    use kiln::plugin::cluster::{ClusterKey, ClusterReads, ClusterView, MAX_LOOKUPS, Observed};
    let plugin = host()
        .load_file(&component("fixture-misreport"), World::Policy, None)
        .unwrap();
    let objects: std::sync::Arc<[manifest::Object]> = manifest::parse(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        Some("a.yaml"),
    )
    .unwrap()
    .into();
    let mut destination = ClusterView::new();
    destination.insert(
        ClusterKey::new("v1", "Namespace", None, "shop").unwrap(),
        Observed::Present {
            object: r#"{"metadata":{"name":"shop"}}"#.into(),
        },
    );
    let destination = std::sync::Arc::new(destination);
    let lookup = |pairs: &[(&str, &str)], reads: Option<std::sync::Arc<ClusterReads>>| {
        let mut settings = vec![("mode".to_owned(), "lookup".to_owned())];
        settings.extend(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let plugin = plugin.clone();
        let objects = objects.clone();
        async move {
            let results = plugin
                .review_rules(
                    view(Path::new(".")),
                    reads,
                    context("app", ""),
                    objects,
                    settings,
                )
                .await
                .unwrap();
            results[0].message.clone()
        }
    };
    let reads = || std::sync::Arc::new(ClusterReads::new(destination.clone()));
    assert_eq!(lookup(&[("name", "shop")], Some(reads())).await, "found=1");
    assert_eq!(lookup(&[("name", "shop")], None).await, "no-cluster=1");
    let secret = lookup(
        &[("kind", "Secret"), ("namespace", "shop"), ("name", "token")],
        Some(reads()),
    )
    .await;
    assert!(
        secret.starts_with("unavailable=1 (Secret shop/token may not be read"),
        "{secret}"
    );
    let lying = "../".repeat(100);
    let lying = lookup(&[("name", lying.as_str())], Some(reads())).await;
    assert!(
        lying.starts_with("not-permitted=1 (not an object key"),
        "{lying}"
    );
    // A flood: the first MAX_LOOKUPS are pending (to be read), the rest
    // refused; the call ends.
    let flood = reads();
    let tally = lookup(&[("count", "100000")], Some(flood.clone())).await;
    assert_eq!(
        tally,
        format!(
            "pending={MAX_LOOKUPS} unavailable={} (more than {MAX_LOOKUPS} lookups of the cluster in one review)",
            100_000 - MAX_LOOKUPS
        )
    );
    assert_eq!(flood.pending().len(), MAX_LOOKUPS);
}

#[tokio::test]
async fn components_of_another_world_or_version_are_refused() {
    let host = host();
    let mismatch = |result: kiln::plugin::Result<kiln::plugin::Plugin>| match result {
        Err(PluginError::ContractMismatch { detail, .. }) => detail,
        other => panic!("expected a contract mismatch, got {other:?}"),
    };
    let detail = mismatch(host.load_file(&component("required-labels"), World::Renderer, None));
    assert!(detail.contains("it is a policy"), "{detail}");
    let detail = mismatch(host.load_file(&component("values"), World::Policy, None));
    assert!(detail.contains("it is a renderer"), "{detail}");
    let detail =
        mismatch(host.load_file(&component("fixture-future-contract"), World::Renderer, None));
    assert!(detail.contains("kiln:plugin@0.2.0"), "{detail}");

    let core_module = b"\0asm\x01\0\0\0";
    match host.load("core", core_module, World::Renderer, None) {
        Err(PluginError::NotAComponent { reason, .. }) => {
            assert!(reason.contains("core WebAssembly module"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match host.load_file("does/not/exist.wasm".as_ref(), World::Renderer, None) {
        Err(PluginError::Read { plugin, .. }) => assert_eq!(plugin, "exist"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_renders_are_correct_and_independent() {
    let host = host();
    let values = host
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let source = view(&guestbook());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (values, source) = (values.clone(), source.clone());
        tasks.spawn(async move {
            let params = params(&[("replicas", &i.to_string()), ("team", &format!("team-{i}"))]);
            let objects = values
                .render(source, context(&format!("app-{i}"), ""), params, vec![])
                .await
                .unwrap();
            (i, objects)
        });
    }
    let mut seen = 0;
    while let Some(joined) = tasks.join_next().await {
        let (i, objects) = joined.unwrap();
        let deployment = objects.iter().find(|o| o.kind() == "Deployment").unwrap();
        assert_eq!(deployment.name(), format!("app-{i}-frontend"));
        assert_eq!(deployment.value()["spec"]["replicas"], json!(i));
        assert_eq!(
            deployment.value()["metadata"]["labels"]["team"],
            json!(format!("team-{i}"))
        );
        seen += 1;
    }
    assert_eq!(seen, 200);
}

#[tokio::test]
async fn the_read_set_is_exactly_what_the_render_read() {
    let src = tree(&[
        ("apps/web/values.yaml", "name: web\n"),
        (
            "apps/web/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Values.name }}-a'}\n",
        ),
        (
            "apps/web/sub/b.yml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        ),
        ("apps/web/notes.txt", "not read: not a template"),
        ("apps/other/c.yaml", "not read: another app"),
    ]);
    let rendered = render_with_values(src.path(), &context("web", "apps/web")).await;
    let names: Vec<_> = rendered
        .objects
        .iter()
        .map(|o| o.name().to_owned())
        .collect();
    assert_eq!(names, ["web-a", "b"]);

    let paths: Vec<String> = rendered
        .read_set
        .iter()
        .map(|(p, _)| p.to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "apps/web",
            "apps/web/a.yaml",
            "apps/web/sub",
            "apps/web/sub/b.yml",
            "apps/web/values.yaml"
        ]
    );
    let file = |p: &str| {
        rendered
            .read_set
            .get(&SourcePath::parse(p).unwrap())
            .copied()
    };
    assert_eq!(
        file("apps/web/values.yaml"),
        Some(Observation::File {
            digest: kiln::digest::Digest::of(b"name: web\n")
        }),
        "stat'ed then read: recorded as read, with the content digest"
    );
    assert!(matches!(
        file("apps/web"),
        Some(Observation::Directory { .. })
    ));
}

#[tokio::test]
async fn a_missing_optional_file_is_recorded_as_absent() {
    let src = tree(&[(
        "app/a.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )]);
    let rendered = render_with_values(src.path(), &context("a", "app")).await;
    assert_eq!(
        rendered
            .read_set
            .get(&SourcePath::parse("app/values.yaml").unwrap()),
        Some(&Observation::Absent),
        "creating values.yaml later must invalidate the render"
    );
}

#[tokio::test]
async fn a_chain_passes_each_output_to_the_next_plugin() {
    let src = tree(&[("app/values.yaml", "unused: true\n")]);
    let host = host();
    let first = misbehave(&host);
    let second = host
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let chain = [
        kiln::render::Step::Plugin {
            plugin: first,
            params: params(&[("mode", "trivial")]),
        },
        kiln::render::Step::Plugin {
            plugin: second,
            params: vec![],
        },
    ];
    let rendered = kiln::render::render(view(src.path()), &context("c", "app"), &chain)
        .await
        .unwrap();
    let names: Vec<_> = rendered.objects.iter().map(|o| o.display_name()).collect();
    assert_eq!(
        names,
        ["ConfigMap/trivial"],
        "the second plugin received and kept the first one's output"
    );
}

#[tokio::test]
async fn guest_reported_errors_name_plugin_file_and_line() {
    let src = tree(&[(
        "app/bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n",
    )]);
    let host = host();
    let values = host
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let error = values
        .render(view(src.path()), context("bad", "app"), vec![], vec![])
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("plugin values: app/bad.yaml:5: "),
        "{message}"
    );

    let error = values
        .render(
            view(src.path()),
            context("bad", "app"),
            params(&[("values-file", "nope.yaml")]),
            vec![],
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("app/nope.yaml"), "{error}");
}

#[test]
fn the_compile_cache_is_reused_and_rebuilt_when_corrupt() {
    let cache = tempfile::tempdir().unwrap();
    let config = || HostConfig {
        compile_cache: Some(cache.path().to_path_buf()),
        ..HostConfig::default()
    };
    let file = component("fixture-misbehave");
    let first = PluginHost::new(config())
        .unwrap()
        .load_file(&file, World::Renderer, None)
        .unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Compiled);
    let second = PluginHost::new(config())
        .unwrap()
        .load_file(&file, World::Renderer, None)
        .unwrap();
    assert_eq!(
        second.cache_outcome(),
        CacheOutcome::Hit,
        "a new process loads the artefact from disk"
    );

    // Truncate every entry: the next load recompiles and the plugin still works.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    let third = PluginHost::new(config())
        .unwrap()
        .load_file(&file, World::Renderer, None)
        .unwrap();
    assert_eq!(third.cache_outcome(), CacheOutcome::Compiled);
    let src = tree(&[("app/x.yaml", "")]);
    let objects = third
        .render_blocking(
            view(src.path()),
            &context("t", "app"),
            &params(&[("mode", "trivial")]),
            &[],
        )
        .unwrap();
    assert_eq!(objects.len(), 1);
}

/// The compile cache entries of a cache directory (not its key).
fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    entries.sort();
    entries
}

#[test]
fn a_planted_cache_entry_is_recompiled_not_loaded() {
    // Precompile `values` into one cache and the misbehaving fixture into
    // another (each entry with an intact SHA-256 header), then plant the
    // fixture's artefact under the name of the `values` entry.
    let (victim, attacker) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = |dir: &std::path::Path| HostConfig {
        compile_cache: Some(dir.to_path_buf()),
        ..HostConfig::default()
    };
    let values = component("values");
    PluginHost::new(config(victim.path()))
        .unwrap()
        .load_file(&values, World::Renderer, None)
        .unwrap();
    PluginHost::new(config(attacker.path()))
        .unwrap()
        .load_file(&component("fixture-misbehave"), World::Renderer, None)
        .unwrap();
    let [target] = &cache_entries(victim.path())[..] else {
        panic!("one entry")
    };
    let [planted] = &cache_entries(attacker.path())[..] else {
        panic!("one entry")
    };
    std::fs::copy(planted, target).unwrap();

    let loaded = PluginHost::new(config(victim.path()))
        .unwrap()
        .load_file(&values, World::Renderer, None)
        .unwrap();
    assert_eq!(
        loaded.cache_outcome(),
        CacheOutcome::Compiled,
        "the planted entry fails its MAC and is never deserialized"
    );
    let src = tree(&[(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: real}\n",
    )]);
    let objects = loaded
        .render_blocking(view(src.path()), &context("t", "app"), &params(&[]), &[])
        .unwrap();
    let names: Vec<_> = objects.iter().map(|o| o.display_name()).collect();
    assert_eq!(names, ["ConfigMap/real"], "the plugin is `values`");
    // The recompiled entry replaced the planted one and is used next time.
    let again = PluginHost::new(config(victim.path()))
        .unwrap()
        .load_file(&values, World::Renderer, None)
        .unwrap();
    assert_eq!(again.cache_outcome(), CacheOutcome::Hit);

    // An entry of this very installation, moved under another component's
    // name, fails too: the MAC is bound to the name.
    let before = cache_entries(victim.path());
    PluginHost::new(config(victim.path()))
        .unwrap()
        .load_file(&component("fixture-misbehave"), World::Renderer, None)
        .unwrap();
    let after = cache_entries(victim.path());
    let moved = after.iter().find(|p| !before.contains(p)).unwrap();
    std::fs::copy(moved, target).unwrap();
    let loaded = PluginHost::new(config(victim.path()))
        .unwrap()
        .load_file(&values, World::Renderer, None)
        .unwrap();
    assert_eq!(loaded.cache_outcome(), CacheOutcome::Compiled);
}

#[test]
fn a_cache_directory_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let cache = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = PluginHost::new(HostConfig {
        compile_cache: Some(cache.path().to_path_buf()),
        ..HostConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!(
            "{} is writable by group and others (mode 0777)",
            cache.path().display()
        )),
        "{err}"
    );
}

#[test]
fn cache_directories_are_created_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("kiln/compiled");
    PluginHost::new(HostConfig {
        compile_cache: Some(cache.clone()),
        ..HostConfig::default()
    })
    .unwrap()
    .load_file(&component("values"), World::Renderer, None)
    .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&base.path().join("kiln")), 0o700);
    assert_eq!(mode(&cache), 0o700);
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path) & 0o022, 0, "{}", path.display());
    }
}

#[test]
fn limits_above_the_host_maximum_are_refused() {
    let host = PluginHost::new(HostConfig {
        max_memory: 128 << 20,
        ..HostConfig::default()
    })
    .unwrap();
    let mut limits = tight_limits();
    limits.memory = 512 << 20;
    match host.load_file(&component("values"), World::Renderer, Some(limits)) {
        Err(PluginError::InvalidLimits { detail, .. }) => {
            assert!(detail.contains("memory limit"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
}

/// A pooled memory slot kept resident between calls (faster: no page
/// faults) is zeroed before the next call: one tenant's plugin cannot read
/// what another call left in the slot it reuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_memory_slot_holds_nothing_of_the_last_call() {
    let host = PluginHost::new(HostConfig {
        max_concurrency: 1,
        keep_resident: 32 << 20,
        ..HostConfig::default()
    })
    .unwrap();
    let plugin = misbehave(&host);
    let src = tree(&[("app/x.yaml", "a: 1")]);
    let value = |objects: &[kiln::manifest::Object]| {
        objects[0].value()["data"]["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for round in 0..3 {
        let filled = render_mode(&plugin, src.path(), "fill-memory")
            .await
            .unwrap();
        assert_eq!(value(&filled), (8 << 20).to_string(), "round {round}");
        let fresh = render_mode(&plugin, src.path(), "read-fresh-memory")
            .await
            .unwrap();
        assert_eq!(value(&fresh), "0", "round {round}: another call's bytes");
    }
}
