//! Mutual TLS between the controller and the render server: both present a
//! certificate issued by one CA (deploy/ makes them; `kiln certs` too), and
//! each accepts only the other's CA. HTTP/2 is negotiated with ALPN.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate, key or CA could not be read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A PEM text holds no usable certificate or key.
    #[error("{what}: {message}")]
    Pem {
        /// Which input (file, or "CA").
        what: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration")]
    Config(#[from] rustls::Error),
    /// The client-certificate verifier could not be built.
    #[error("client certificate verifier")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// PEM texts of one side: its certificate chain, its key, and the CA it
/// accepts the other side's certificates from.
#[derive(Clone)]
pub struct Identity {
    /// Certificate chain (PEM).
    pub cert: Vec<u8>,
    /// Private key (PEM, PKCS#8, PKCS#1 or SEC1).
    pub key: Vec<u8>,
    /// The CA the peer's certificate must chain to (PEM).
    pub ca: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity { .. }")
    }
}

impl Identity {
    /// Reads the three files.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        Ok(Self {
            cert: read(cert)?,
            key: read(key)?,
            ca: read(ca)?,
        })
    }

    fn chain(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let chain = certificates(&self.cert, "certificate")?;
        Ok(chain)
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| TlsError::Pem {
            what: "private key".into(),
            message: e.to_string(),
        })
    }

    fn roots(&self) -> Result<rustls::RootCertStore, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(&self.ca, "CA")? {
            roots.add(cert)?;
        }
        Ok(roots)
    }
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what: what.into(),
            message: "no certificate in the PEM text".into(),
        });
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The server's TLS: its certificate, and client certificates required,
/// chaining to `identity.ca`; HTTP/2 only.
pub fn server_config(identity: &Identity) -> Result<rustls::ServerConfig, TlsError> {
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(identity.roots()?),
        provider(),
    )
    .build()?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain()?, identity.private_key()?)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The client's TLS: the server must chain to `identity.ca`; the client
/// presents its own certificate; HTTP/2 only.
pub fn client_config(identity: &Identity) -> Result<rustls::ClientConfig, TlsError> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(identity.roots()?)
        .with_client_auth_cert(identity.chain()?, identity.private_key()?)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Certificates for one installation, made fresh: a CA, a server
/// certificate for `server_names`, and a client certificate. What
/// `kiln certs` writes and the tests use.
pub struct Issued {
    /// The CA certificate (PEM).
    pub ca: String,
    /// The server's certificate and key (PEM).
    pub server: (String, String),
    /// The client's certificate and key (PEM).
    pub client: (String, String),
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issued { .. }")
    }
}

impl Issued {
    /// Makes the three.
    pub fn new(server_names: &[String]) -> Result<Self, rcgen::Error> {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kiln render CA");
        let ca_key = rcgen::KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>, cn: &str| -> Result<(String, String), rcgen::Error> {
            let mut params = rcgen::CertificateParams::new(names)?;
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let key = rcgen::KeyPair::generate()?;
            let cert = params.signed_by(&key, &issuer)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        Ok(Self {
            ca: ca_cert.pem(),
            server: leaf(server_names.to_vec(), "kiln-render-server")?,
            client: leaf(vec!["kiln-controller".into()], "kiln-controller")?,
        })
    }

    /// The server's identity.
    pub fn server_identity(&self) -> Identity {
        Identity {
            cert: self.server.0.clone().into_bytes(),
            key: self.server.1.clone().into_bytes(),
            ca: self.ca.clone().into_bytes(),
        }
    }

    /// The client's identity.
    pub fn client_identity(&self) -> Identity {
        Identity {
            cert: self.client.0.clone().into_bytes(),
            key: self.client.1.clone().into_bytes(),
            ca: self.ca.clone().into_bytes(),
        }
    }
}
