//! Real Git servers and fixture repositories, made with the `git` CLI.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs git in `dir` with a fixed identity and clock, so fixtures are
/// reproducible; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "Kiln Test")
        .env("GIT_AUTHOR_EMAIL", "test@kiln.dev")
        .env("GIT_COMMITTER_NAME", "Kiln Test")
        .env("GIT_COMMITTER_EMAIL", "test@kiln.dev")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A working repository under `root/name.src` published as the bare
/// repository `root/name.git` (what the servers serve).
pub struct Fixture {
    pub work: PathBuf,
    pub bare: PathBuf,
}

impl Fixture {
    /// Creates an empty repository with branch `main`.
    pub fn new(root: &Path, name: &str) -> Self {
        let work = root.join(format!("{name}.src"));
        let bare = root.join(format!("{name}.git"));
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        git(
            root,
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Fixture { work, bare }
    }

    /// Writes files (a `-> target` value makes a symlink) and commits them.
    pub fn commit(&self, message: &str, files: &[(&str, &str)]) -> String {
        for (path, content) in files {
            let path = self.work.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&path);
            match content.strip_prefix("-> ") {
                Some(target) => std::os::unix::fs::symlink(target, &path).unwrap(),
                None => std::fs::write(&path, content).unwrap(),
            }
        }
        git(&self.work, &["add", "-A"]);
        git(
            &self.work,
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        self.rev_parse("HEAD")
    }

    /// Pushes every branch and tag to the served bare repository.
    pub fn publish(&self) {
        git(&self.work, &["push", "-q", "--force", "--all", "origin"]);
        git(&self.work, &["push", "-q", "--force", "--tags", "origin"]);
    }

    /// What the git CLI says a revision is, as a commit.
    pub fn rev_parse(&self, revision: &str) -> String {
        git(
            &self.work,
            &["rev-parse", &format!("{revision}^{{commit}}")],
        )
    }

    /// Runs git in the working repository.
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for(port: u16) {
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("server on port {port} did not start");
}

/// `git daemon` serving every repository under a directory over git://.
pub struct GitDaemon {
    child: Child,
    port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> Self {
        let port = free_port();
        // git-daemon itself, not `git daemon`: killing the `git` wrapper
        // would leave the daemon running after the test.
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git --exec-path");
        let exec_path = String::from_utf8_lossy(&exec_path.stdout).trim().to_owned();
        let child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .args([
                "--reuseaddr",
                "--export-all",
                "--informative-errors",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        wait_for(port);
        GitDaemon { child, port }
    }

    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}.git", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `git http-backend` behind a small CGI shim (smart HTTP), optionally with
/// basic authentication; records each request it receives.
pub struct HttpBackend {
    child: Child,
    port: u16,
    scheme: &'static str,
    requests: Arc<Mutex<Vec<String>>>,
}

/// A private CA and a server certificate it issued for 127.0.0.1, made with
/// the openssl CLI: clients trust `ca`, the server presents `cert`/`key`.
pub struct SelfSigned {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    _dir: tempfile::TempDir,
}

impl SelfSigned {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let openssl = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs");
            assert!(status.success(), "openssl {args:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-days",
                    "2",
                    "-subj",
                    "/CN=kiln test CA",
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-subj",
                    "/CN=127.0.0.1",
                    "-keyout",
                    "key.pem",
                    "-out",
                    "server.csr",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            d.join("ext.cnf"),
            "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "cert.pem",
        ]);
        SelfSigned {
            ca: d.join("ca.pem"),
            cert: d.join("cert.pem"),
            key: d.join("key.pem"),
            _dir: dir,
        }
    }
}

impl HttpBackend {
    /// Plain HTTP.
    pub fn start(base: &Path, auth: Option<&str>) -> Self {
        Self::start_with(base, auth, None)
    }

    /// HTTPS with a self-signed certificate.
    pub fn start_tls(base: &Path, auth: Option<&str>, tls: &SelfSigned) -> Self {
        Self::start_with(base, auth, Some(tls))
    }

    fn start_with(base: &Path, auth: Option<&str>, tls: Option<&SelfSigned>) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/git_http_backend.py");
        let mut command = Command::new("python3");
        command.arg(script).arg(base);
        if let Some(auth) = auth {
            command.args(["--auth", auth]);
        }
        if let Some(tls) = tls {
            command.arg("--tls").arg(&tls.cert).arg(&tls.key);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port: u16 = first.strip_prefix("listening ").unwrap().parse().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let sink = requests.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        wait_for(port);
        HttpBackend {
            child,
            port,
            scheme: if tls.is_some() { "https" } else { "http" },
            requests,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("{}://127.0.0.1:{}/{name}.git", self.scheme, self.port)
    }

    /// Requests received so far (`request METHOD PATH`).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for HttpBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP server that accepts connections and never answers.
pub struct Blackhole {
    pub port: u16,
}

impl Blackhole {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                held.push(stream);
            }
        });
        Blackhole { port }
    }
}

/// An OpenSSH server on loopback that lets one generated key log in as the
/// current user, so `ssh://` URLs can be tested for real. `None` when sshd is
/// not installed.
pub struct SshServer {
    child: Child,
    pub port: u16,
    /// The private key authorized to log in.
    pub client_key: String,
    /// The server's public host key (`ssh-ed25519 AAAA… comment`).
    pub host_key: String,
    _dir: tempfile::TempDir,
}

impl SshServer {
    /// Starts `sshd` (from [`super::require`]`(Tool::Sshd)`).
    pub fn start(sshd: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let keygen = |name: &str| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(name))
                .status()
                .unwrap();
            assert!(status.success());
        };
        keygen("host_key");
        keygen("client_key");
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\nUsePAM no\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        // sshd insists on its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", sshd.display()));
        wait_for(port);
        let client_key = std::fs::read_to_string(d.join("client_key")).unwrap();
        let host_key = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        SshServer {
            child,
            port,
            client_key,
            host_key: host_key.trim().to_owned(),
            _dir: dir,
        }
    }

    /// `ssh://USER@127.0.0.1:PORT/abs/path`.
    pub fn url(&self, repo: &Path) -> String {
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        format!("ssh://{user}@127.0.0.1:{}{}", self.port, repo.display())
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
