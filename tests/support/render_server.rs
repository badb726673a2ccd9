//! The real `kiln render-server` and `kiln controller --render-server`
//! processes, with the certificates they share, for end-to-end tests.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kiln::render::remote::tls::Issued;

/// A child process killed when dropped, so that a failing test leaves no
/// render server or controller behind.
pub struct Process(Option<Child>);

impl Process {
    /// Owns `child`.
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    /// The child, no longer killed on drop.
    pub fn into_child(mut self) -> Child {
        self.0.take().expect("a child")
    }
}

impl std::ops::Deref for Process {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("a child")
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Writes the certificates of a render server reachable at 127.0.0.1.
pub fn write_certs(dir: &Path) -> Issued {
    let issued = Issued::new(&["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    for (name, text) in [
        ("ca.crt", &issued.ca),
        ("server.crt", &issued.server.0),
        ("server.key", &issued.server.1),
        ("client.crt", &issued.client.0),
        ("client.key", &issued.client.1),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    issued
}

/// Starts the real `kiln render-server` on `port` (certificates from
/// `dir/certs`, caches in `dir/render-cache`) with nothing in its
/// environment but PATH (no HOME, no KUBECONFIG) plus `env`, and `args`;
/// its standard error to `stderr`.
pub fn render_server(
    dir: &Path,
    port: u16,
    env: &[(&str, &str)],
    args: &[String],
    stderr: Stdio,
) -> Process {
    let certs = dir.join("certs");
    let cache = dir.join("render-cache");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .arg("render-server")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--tls-cert={}", certs.join("server.crt").display()))
        .arg(format!("--tls-key={}", certs.join("server.key").display()))
        .arg(format!("--client-ca={}", certs.join("ca.crt").display()))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg(format!(
            "--compile-cache={}",
            cache.join("compiled").display()
        ))
        .arg("--allow-file-plugins")
        .args(args)
        .stdout(Stdio::null())
        .stderr(stderr);
    Process::new(command.spawn().unwrap())
}

/// Waits until something listens on `port` of loopback.
pub async fn wait_listening(port: u16) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the render server never listened on {port}");
}

/// Starts `kiln controller` rendering on `servers` (certificates from
/// `dir/certs`), its metrics on `metrics_port`. `KILN_TEST_CONTROLLER_LOG`
/// names a file for its log.
pub fn controller(dir: &Path, kubeconfig: &Path, metrics_port: u16, servers: &[String]) -> Process {
    let certs = dir.join("certs");
    Process::new(
        Command::new(env!("CARGO_BIN_EXE_kiln"))
            .env_remove("KUBECONFIG")
            .env("HOME", dir)
            .arg("controller")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(["--namespace=kiln", "--no-leader-election", "--resync=1s"])
            .arg(format!("--listen=127.0.0.1:{metrics_port}"))
            .args(servers.iter().map(|url| format!("--render-server={url}")))
            .arg(format!("--render-ca={}", certs.join("ca.crt").display()))
            .arg(format!(
                "--render-client-cert={}",
                certs.join("client.crt").display()
            ))
            .arg(format!(
                "--render-client-key={}",
                certs.join("client.key").display()
            ))
            .arg("--render-deadline=20s")
            .env("KILN_LOG", "kiln=debug")
            .arg(format!(
                "--git-cache={}",
                dir.join("controller-git").display()
            ))
            .arg(format!(
                "--plugin-store={}",
                dir.join("controller-plugins").display()
            ))
            .arg(format!(
                "--chart-cache={}",
                dir.join("controller-charts").display()
            ))
            .stdout(Stdio::null())
            .stderr(match std::env::var_os("KILN_TEST_CONTROLLER_LOG") {
                Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
                None => Stdio::null(),
            })
            .spawn()
            .unwrap(),
    )
}
