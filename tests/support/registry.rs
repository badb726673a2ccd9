//! A real OCI registry (the CNCF distribution registry, Debian's
//! `docker-registry`) on loopback, with optional htpasswd auth.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts `binary` (from [`super::require`]`(Tool::DockerRegistry)`),
    /// with htpasswd `auth` when given.
    pub fn start(binary: &Path, auth: Option<(&str, &str)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let port = super::git::free_port();
        let mut config = format!(
            "version: 0.1\nlog: {{level: error, accesslog: {{disabled: true}}}}\n\
             storage: {{filesystem: {{rootdirectory: {}/data}}, delete: {{enabled: true}}}}\n\
             http: {{addr: 127.0.0.1:{port}, secret: kiln-test-only}}\n",
            d.display()
        );
        if let Some((user, password)) = auth {
            // bcrypt, as the registry requires.
            let out = Command::new("python3")
                .args(["-c", "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))", password])
                .output()
                .unwrap();
            let hash = String::from_utf8(out.stdout).unwrap();
            std::fs::write(d.join("htpasswd"), format!("{user}:{}\n", hash.trim())).unwrap();
            config.push_str(&format!(
                "auth: {{htpasswd: {{realm: kiln-test, path: {}/htpasswd}}}}\n",
                d.display()
            ));
        }
        std::fs::write(d.join("config.yml"), config).unwrap();
        let child = Command::new(binary)
            .arg("serve")
            .arg(d.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", binary.display()));
        // Owned at once, so that a registry that never listens is killed
        // (Drop) by the panic below.
        let registry = Registry {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return registry;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("docker-registry did not start on {port}");
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pushes `archive` as a Helm chart (Helm's media types) to
/// `host/repository:tag`, as `auth` (`user`, `password`) if given.
pub async fn push_chart(
    host: &str,
    repository: &str,
    tag: &str,
    archive: Vec<u8>,
    auth: Option<(&str, &str)>,
) {
    use kiln::source::helm::oci::{HELM_CHART_LAYER_MEDIA_TYPE, HELM_CONFIG_MEDIA_TYPE};
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    use oci_client::secrets::RegistryAuth;
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![host.to_owned()]),
        ..Default::default()
    });
    let reference = oci_client::Reference::with_tag(host.into(), repository.into(), tag.into());
    let layer = ImageLayer::new(archive, HELM_CHART_LAYER_MEDIA_TYPE.into(), None);
    let name = repository.rsplit('/').next().unwrap_or(repository);
    let config = Config::new(
        format!("{{\"name\":\"{name}\",\"version\":\"{tag}\"}}").into_bytes(),
        HELM_CONFIG_MEDIA_TYPE.into(),
        None,
    );
    let auth = match auth {
        Some((user, password)) => RegistryAuth::Basic(user.into(), password.into()),
        None => RegistryAuth::Anonymous,
    };
    client
        .push(&reference, &[layer], config, &auth, None)
        .await
        .unwrap();
}
