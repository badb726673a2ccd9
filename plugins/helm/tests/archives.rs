//! Packaged subcharts (`charts/*.tgz`) are unpacked inside the plugin:
//! hostile archives (bombs, links, devices, paths escaping the archive,
//! absolute or too deep paths, too many entries) are each refused with an
//! error naming the archive, and a well-formed one renders.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use kiln_helm::archive::ArchiveLimits;
use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render};

/// One tar entry: its type, raw path bytes, link target and data.
struct Entry {
    kind: tar::EntryType,
    path: Vec<u8>,
    link: Option<&'static str>,
    data: Vec<u8>,
}

fn file(path: &str, data: &str) -> Entry {
    Entry {
        kind: tar::EntryType::Regular,
        path: path.as_bytes().to_vec(),
        link: None,
        data: data.as_bytes().to_vec(),
    }
}

/// A gzipped tar of `entries`, written header by header so that paths the
/// `tar` crate's builder refuses (`..`, absolute) can be made.
fn tgz(entries: &[Entry]) -> Vec<u8> {
    let mut raw = Vec::new();
    for e in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..e.path.len()].copy_from_slice(&e.path);
        header.set_entry_type(e.kind);
        header.set_size(e.data.len() as u64);
        header.set_mode(0o644);
        if let Some(link) = e.link {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        raw.extend_from_slice(header.as_bytes());
        raw.extend_from_slice(&e.data);
        raw.resize(raw.len().div_ceil(512) * 512, 0);
    }
    raw.resize(raw.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

fn sub_chart() -> Vec<Entry> {
    vec![
        file(
            "sub/Chart.yaml",
            "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
        ),
        file("sub/values.yaml", "greeting: hello\n"),
        file(
            "sub/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\ndata:\n  g: {{ .Values.greeting }}\n",
        ),
    ]
}

/// A parent chart whose `charts/` holds `archive` as `sub-0.1.0.tgz`.
fn parent(name: &str, archive: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-helm-archive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("charts")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: top\nversion: 1.0.0\ndependencies:\n  - name: sub\n    version: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("charts/sub-0.1.0.tgz"), archive).unwrap();
    dir
}

fn render_with(dir: &Path, archive: ArchiveLimits) -> Result<Vec<kiln_helm::Document>, String> {
    let opts = Options {
        archive,
        ..Options::default()
    };
    let result = render(&DirSource(dir.to_path_buf()), ".", &opts).map_err(|e| e.to_string());
    std::fs::remove_dir_all(dir).unwrap();
    result
}

fn refused(name: &str, entries: Vec<Entry>, limits: ArchiveLimits) -> String {
    let dir = parent(name, &tgz(&entries));
    let e = render_with(&dir, limits).expect_err("the archive must be refused");
    assert!(e.contains("charts/sub-0.1.0.tgz"), "{e}");
    e
}

#[test]
fn a_packaged_subchart_renders() {
    let dir = parent("good", &tgz(&sub_chart()));
    let docs = render_with(&dir, ArchiveLimits::default()).unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].source, "top/charts/sub/templates/cm.yaml");
    assert!(docs[0].text.contains("g: hello"), "{}", docs[0].text);
}

#[test]
fn an_archive_bomb_is_refused_by_its_uncompressed_size() {
    let mut entries = sub_chart();
    entries.push(Entry {
        data: vec![0; 8 << 20],
        ..file("sub/files/zeros", "")
    });
    let e = refused(
        "bomb",
        entries,
        ArchiveLimits {
            uncompressed_bytes: 4 << 20,
            ..ArchiveLimits::default()
        },
    );
    assert!(e.contains("expands to more than 4194304 bytes"), "{e}");
}

#[test]
fn an_archive_over_the_compressed_cap_is_refused() {
    let e = refused(
        "compressed",
        sub_chart(),
        ArchiveLimits {
            compressed_bytes: 64,
            ..ArchiveLimits::default()
        },
    );
    assert!(e.contains("bytes compressed, more than 64"), "{e}");
}

#[test]
fn too_many_entries_are_refused() {
    let mut entries = sub_chart();
    for i in 0..20 {
        entries.push(file(&format!("sub/files/f{i}"), "x"));
    }
    let e = refused(
        "entries",
        entries,
        ArchiveLimits {
            entries: 10,
            ..ArchiveLimits::default()
        },
    );
    assert!(e.contains("more than 10 entries"), "{e}");
}

#[test]
fn a_too_deep_path_is_refused() {
    let mut entries = sub_chart();
    entries.push(file("sub/a/b/c/d/e/f/g/h/i/j/k/l", "x"));
    let e = refused(
        "depth",
        entries,
        ArchiveLimits {
            depth: 8,
            ..ArchiveLimits::default()
        },
    );
    assert!(e.contains("deeper than 8 levels"), "{e}");
}

#[test]
fn a_symlink_is_refused() {
    let mut entries = sub_chart();
    entries.push(Entry {
        kind: tar::EntryType::Symlink,
        link: Some("/etc/passwd"),
        ..file("sub/files/passwd", "")
    });
    let e = refused("symlink", entries, ArchiveLimits::default());
    assert!(e.contains("sub/files/passwd"), "{e}");
    assert!(e.contains("symbolic link"), "{e}");
}

#[test]
fn a_hardlink_is_refused() {
    let mut entries = sub_chart();
    entries.push(Entry {
        kind: tar::EntryType::Link,
        link: Some("sub/values.yaml"),
        ..file("sub/files/values", "")
    });
    let e = refused("hardlink", entries, ArchiveLimits::default());
    assert!(e.contains("hard link"), "{e}");
}

#[test]
fn a_device_is_refused() {
    let mut entries = sub_chart();
    entries.push(Entry {
        kind: tar::EntryType::Char,
        ..file("sub/files/null", "")
    });
    let e = refused("device", entries, ArchiveLimits::default());
    assert!(e.contains("character device"), "{e}");
}

#[test]
fn a_path_escaping_the_archive_is_refused() {
    let mut entries = sub_chart();
    entries.push(file("sub/../../escape.yaml", "x: 1\n"));
    let e = refused("escape", entries, ArchiveLimits::default());
    assert!(e.contains("sub/../../escape.yaml"), "{e}");
    assert!(
        e.contains("chart illegally references parent directory"),
        "{e}"
    );
}

#[test]
fn an_absolute_path_is_refused() {
    let mut entries = sub_chart();
    entries.push(file("/etc/cron.d/x", "x\n"));
    let e = refused("absolute", entries, ArchiveLimits::default());
    assert!(e.contains("chart illegally contains absolute paths"), "{e}");
}

#[test]
fn a_file_that_is_not_gzip_is_refused() {
    let dir = parent("notgzip", b"this is not an archive");
    let e = render_with(&dir, ArchiveLimits::default()).unwrap_err();
    assert!(e.contains("charts/sub-0.1.0.tgz"), "{e}");
}
