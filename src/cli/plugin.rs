//! `kiln plugin ...`.

use std::path::PathBuf;

use anyhow::Context as _;

use kiln::artifact::{CosignSignature, Fetcher, PluginRef, RegistryCredentials, Store};
use kiln::digest::Digest;
use kiln::plugin::contract::{self, VERSION};
use kiln::trust::{
    Identity, Keyless, PluginSubject, PolicyVerifier, PrivateKey, PublicKey, Refused, Requirement,
    Signer, TrustRoot, Verified,
};

use super::exit;

/// Work with plugin components.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PluginCommand {
    /// Show what a component is: world, contract version, imports, exports,
    /// digest and size. Nothing is compiled or run.
    #[command(after_help = "\
Examples:
  kiln plugin inspect plugins/dist/values.wasm
  kiln plugin inspect plugins/dist/helm.wasm -o json

Exit status: 0 printed, 2 the file is unreadable or not a Kiln component (the message says why).")]
    Inspect {
        /// The component.
        file: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "text")]
        output: Format,
    },
    /// Create an ECDSA P-256 key pair for signing plugins: PREFIX.key
    /// (unencrypted PKCS#8, owner-only) and PREFIX.pub. Like `cosign
    /// generate-key-pair`, without the encryption.
    #[command(after_help = "\
Examples:
  kiln plugin keygen --output-prefix release      # release.key (0600) and release.pub
  kiln plugin sign plugins/dist/values.wasm --key release.key

Exit status: 0 written, 2 an error (PREFIX.key already exists: a key is never overwritten; or it
cannot be written).")]
    Keygen {
        /// Path prefix of the two files.
        #[arg(long, default_value = "cosign")]
        output_prefix: PathBuf,
    },
    /// Sign a component with a key. For a file: writes FILE.sig (base64 DER
    /// ECDSA over the file's bytes), the format of `cosign sign-blob --key`.
    /// For oci://…: signs the manifest digest the reference resolves to and
    /// stores the signature under the cosign tag `sha256-<digest>.sig`.
    #[command(after_help = "\
Examples:
  kiln plugin sign plugins/dist/values.wasm --key release.key      # plugins/dist/values.wasm.sig
  kiln plugin sign oci://ghcr.io/acme/kiln-values:1.0.0 --key release.key

Exit status: 0 signed, 2 an error (an unreadable key or file, a registry that refused).")]
    Sign {
        /// The component: a file or an oci:// reference.
        file: String,
        /// The private key (PKCS#8 PEM, e.g. from `kiln plugin keygen`).
        #[arg(long)]
        key: PathBuf,
        /// Where to write the signature of a file. Default: FILE.sig.
        #[arg(long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Push a component to an OCI registry as an artifact with one wasm layer
    /// (media type application/vnd.wasm.content.layer.v1+wasm); prints the
    /// manifest digest to pin. Sigstore bundles beside the file
    /// (FILE.sigstore.json, FILE.*.sigstore.json) are attached as OCI
    /// referrers of the pushed manifest.
    #[command(after_help = "\
Examples:
  kiln plugin push plugin.wasm oci://ghcr.io/acme/kiln-values:1.0.0
  kiln plugin push plugin.wasm oci://127.0.0.1:5000/kiln/values:dev   # plain HTTP on loopback only

Exit status: 0 pushed (the digest is printed), 2 an error (not a component, a registry that
refused or asked for credentials: the message names the registry).")]
    Push {
        /// The component.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a component from an OCI registry (tags are resolved to a digest,
    /// which is printed; the bytes are cached by digest).
    #[command(after_help = "\
Examples:
  kiln plugin pull oci://ghcr.io/acme/kiln-values:1.0.0 -o values.wasm
  kiln plugin pull oci://ghcr.io/acme/kiln-values@sha256:0123... -o values.wasm

Exit status: 0 pulled (the digest is printed), 2 an error (no such reference, a digest that does
not match the bytes, a registry that refused).")]
    Pull {
        /// oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST.
        reference: String,
        /// Where to write the component. Default: REPOSITORY's last segment + .wasm.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Verify a component's signatures (FILE.sig, FILE.*.sig,
    /// FILE.sigstore.json, FILE.*.sigstore.json), offline.
    #[command(after_help = "\
Examples:
  kiln plugin verify plugin.wasm --key release.pub
  kiln plugin verify plugin.wasm --certificate-identity-regexp 'https://github.com/acme/plugins/.*' \\
      --certificate-oidc-issuer https://token.actions.githubusercontent.com
  kiln plugin verify oci://ghcr.io/acme/kiln-values@sha256:0123... --policy trust.yaml

Exit status: 0 verified, 1 refused (the reason is printed: no signature, a signature by another
key or identity, a file that changed after it was signed), 2 an error (an unreadable file or key).")]
    Verify(VerifyArgs),
}

/// Registry access.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Registries")]
pub(crate) struct RegistryArgs {
    /// Docker config.json with registry credentials (also the format of a
    /// kubernetes.io/dockerconfigjson Secret). Default: $DOCKER_CONFIG/config.json
    /// or ~/.docker/config.json, if present.
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// Deadline of each registry operation.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::args::parse_duration)]
    registry_timeout: std::time::Duration,
}

impl RegistryArgs {
    /// The registry credentials: --registry-config, or Docker's default
    /// config file if present.
    pub(crate) fn credentials(&self) -> anyhow::Result<RegistryCredentials> {
        let default = std::env::var_os("DOCKER_CONFIG")
            .map(|d| PathBuf::from(d).join("config.json"))
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
            })
            .filter(|p| p.exists());
        Ok(match self.registry_config.clone().or(default) {
            Some(path) => {
                let json = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                RegistryCredentials::from_docker_config(&json)
                    .with_context(|| path.display().to_string())?
            }
            None => RegistryCredentials::none(),
        })
    }

    pub(crate) fn fetcher(&self) -> anyhow::Result<Fetcher> {
        let credentials = self.credentials()?;
        let dir = super::default_cache_dir()
            .context("no cache directory: set HOME")?
            .join("plugins");
        let store = Store::open(&dir).with_context(|| format!("plugin store {}", dir.display()))?;
        Ok(Fetcher::new(store, credentials, self.registry_timeout))
    }
}

/// What `kiln plugin verify` checks against.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("expect").required(true).args(["key", "certificate_identity", "certificate_identity_regexp", "policy"])))]
pub(crate) struct VerifyArgs {
    /// The component: a file or an oci:// reference.
    file: String,
    /// A trusted public key (PEM).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Keyless: the exact certificate identity (SAN) expected.
    #[arg(long, requires = "certificate_oidc_issuer")]
    certificate_identity: Option<String>,
    /// Keyless: a regex the whole certificate identity must match.
    #[arg(
        long,
        requires = "certificate_oidc_issuer",
        conflicts_with = "certificate_identity"
    )]
    certificate_identity_regexp: Option<String>,
    /// Keyless: the OIDC issuer expected.
    #[arg(long)]
    certificate_oidc_issuer: Option<String>,
    /// The trusted root for Sigstore bundles (trusted_root.json). Default: the
    /// Sigstore public-good root built into kiln (no network is used).
    #[arg(long)]
    trusted_root: Option<PathBuf>,
    /// A trust policy file (see docs/plugins.md); the plugin is matched by
    /// its file name (without .wasm) and its file:// reference.
    #[arg(long, conflicts_with_all = ["key", "certificate_identity", "certificate_identity_regexp"])]
    policy: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

pub(crate) async fn run(command: &PluginCommand) -> anyhow::Result<u8> {
    match command {
        PluginCommand::Keygen { output_prefix } => keygen(output_prefix),
        PluginCommand::Sign {
            file,
            key,
            output,
            registry,
        } => {
            let pem = std::fs::read_to_string(key)
                .with_context(|| format!("cannot read {}", key.display()))?;
            let key = PrivateKey::from_pem(&pem).with_context(|| key.display().to_string())?;
            if file.starts_with("oci://") {
                let fetcher = registry.fetcher()?;
                let fetched = fetcher.fetch(&PluginRef::parse(file)?).await?;
                let PluginRef::Oci {
                    repository,
                    digest: Some(manifest),
                    ..
                } = &fetched.resolved
                else {
                    anyhow::bail!("{file}: could not resolve a manifest digest");
                };
                let payload = CosignSignature::payload_for(repository, manifest);
                let signature = CosignSignature {
                    signature: key.sign(&payload),
                    payload,
                };
                fetcher
                    .push_cosign_signature(&fetched.resolved, signature)
                    .await?;
                println!(
                    "signed {} with key {}",
                    fetched.resolved,
                    key.public_key().fingerprint()
                );
                return Ok(exit::OK);
            }
            let file = PathBuf::from(file);
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let output = output.clone().unwrap_or_else(|| with_suffix(&file, ".sig"));
            std::fs::write(&output, key.sign(&bytes) + "\n")
                .with_context(|| format!("cannot write {}", output.display()))?;
            println!(
                "signed {} ({}) with key {}",
                file.display(),
                Digest::of(&bytes),
                key.public_key().fingerprint()
            );
            println!("signature: {}", output.display());
            Ok(exit::OK)
        }
        PluginCommand::Verify(args) => verify(args).await,
        PluginCommand::Push {
            file,
            reference,
            registry,
        } => {
            let reference = PluginRef::parse(reference)?;
            let bytes =
                std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let fetcher = registry.fetcher()?;
            let digest = fetcher.push(&bytes, &reference).await?;
            println!(
                "pushed {} ({}) to {reference}",
                file.display(),
                Digest::of(&bytes)
            );
            println!("manifest digest: {digest}");
            // Sigstore bundles beside the file travel with it, as referrers.
            let beside = kiln::trust::Signatures::next_to(file)
                .with_context(|| format!("signatures beside {}", file.display()))?;
            if let PluginRef::Oci {
                repository, tag, ..
            } = &reference
            {
                let resolved = PluginRef::Oci {
                    repository: repository.clone(),
                    tag: tag.clone(),
                    digest: Some(digest),
                };
                for bundle in &beside.bundles {
                    let referrer = fetcher.push_bundle(&resolved, bundle.as_bytes()).await?;
                    println!("attached a Sigstore bundle as referrer {referrer}");
                }
            }
            if !beside.key_signatures.is_empty() {
                eprintln!(
                    "note: {}.sig signs the file, not the OCI manifest: run `kiln plugin sign {reference} --key KEY` to sign the pushed artifact",
                    file.display()
                );
            }
            Ok(exit::OK)
        }
        PluginCommand::Pull {
            reference,
            output,
            registry,
        } => {
            let reference = PluginRef::parse(reference)?;
            let fetched = registry.fetcher()?.fetch(&reference).await?;
            let output = output.clone().unwrap_or_else(|| {
                let name = match &reference {
                    PluginRef::Oci { repository, .. } => {
                        repository.rsplit('/').next().unwrap_or("plugin").to_owned()
                    }
                    _ => "plugin".to_owned(),
                };
                PathBuf::from(format!("{name}.wasm"))
            });
            std::fs::write(&output, &fetched.bytes)
                .with_context(|| format!("cannot write {}", output.display()))?;
            println!(
                "pulled {} ({}) to {}",
                fetched.resolved,
                fetched.digest,
                output.display()
            );
            Ok(exit::OK)
        }
        PluginCommand::Inspect { file, output } => {
            let bytes =
                std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let info = contract::inspect(&bytes).with_context(|| file.display().to_string())?;
            match output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&info)?),
                Format::Text => {
                    let world = match info.world {
                        None => "none (not a Kiln plugin)".to_owned(),
                        Some(w) if info.reports_rules => {
                            format!("{w}, reporting each rule's result (kiln:plugin/rules)")
                        }
                        Some(w) => w.to_string(),
                    };
                    let contract = match info.contract_version {
                        Some(v) => format!(
                            "{}@{v} ({})",
                            contract::PACKAGE,
                            if v.is_compatible_with(VERSION) {
                                format!("accepted by this host, which speaks {VERSION}")
                            } else {
                                format!("NOT accepted: this host speaks {VERSION}")
                            }
                        ),
                        None => "none".to_owned(),
                    };
                    println!("file:     {}", file.display());
                    println!("world:    {world}");
                    println!("contract: {contract}");
                    println!("digest:   {}", info.digest);
                    println!("size:     {} bytes", info.size);
                    println!("imports:");
                    for import in &info.imports {
                        println!("  {import}");
                    }
                    println!("exports:");
                    for export in &info.exports {
                        println!("  {export}");
                    }
                }
            }
            Ok(exit::OK)
        }
    }
}

fn with_suffix(file: &std::path::Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn keygen(prefix: &std::path::Path) -> anyhow::Result<u8> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let key = PrivateKey::generate();
    let (private, public) = (with_suffix(prefix, ".key"), with_suffix(prefix, ".pub"));
    // Owner-only from the first byte; never overwrite an existing key.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&private)
        .with_context(|| format!("cannot create {}", private.display()))?;
    file.write_all(key.to_pem()?.as_bytes())?;
    std::fs::write(&public, key.public_key().to_pem())
        .with_context(|| format!("cannot write {}", public.display()))?;
    println!("private key: {} (keep it secret)", private.display());
    println!(
        "public key:  {} ({})",
        public.display(),
        key.public_key().fingerprint()
    );
    Ok(exit::OK)
}

async fn verify(args: &VerifyArgs) -> anyhow::Result<u8> {
    let reference = PluginRef::parse(&args.file)?;
    let fetcher = args.registry.fetcher()?;
    let fetched = fetcher.fetch(&reference).await?;
    let signatures = super::load::signatures(&fetcher, &reference, &fetched).await?;
    let outcome = match &args.policy {
        Some(path) => {
            let verifier = PolicyVerifier::load(path).map_err(|e| anyhow::anyhow!("{e}"))?;
            verifier
                .verify(
                    &PluginSubject::reference(&reference),
                    &fetched.bytes,
                    &signatures,
                )
                .map_err(|refused| match refused {
                    Refused::Untrusted { reason, .. } => reason.to_string(),
                    other => other.to_string(),
                })
        }
        None => {
            let signer = match (
                &args.key,
                &args.certificate_identity,
                &args.certificate_identity_regexp,
            ) {
                (Some(key), _, _) => {
                    let pem = std::fs::read_to_string(key)
                        .with_context(|| format!("cannot read {}", key.display()))?;
                    Signer::Key(
                        PublicKey::from_pem(&pem).with_context(|| key.display().to_string())?,
                    )
                }
                (None, exact, regexp) => {
                    let identity = match (exact, regexp) {
                        (Some(exact), _) => Identity::Exact(exact.clone()),
                        (None, Some(pattern)) => {
                            Identity::regex(pattern).context("--certificate-identity-regexp")?
                        }
                        (None, None) => {
                            anyhow::bail!("give --key, --certificate-identity(-regexp) or --policy")
                        }
                    };
                    let issuer = args
                        .certificate_oidc_issuer
                        .clone()
                        .context("--certificate-oidc-issuer is required")?;
                    Signer::Keyless(Keyless { identity, issuer })
                }
            };
            let requirement = Requirement {
                signers: vec![signer],
                min_signers: 1,
                insecure: false,
            };
            let root = match &args.trusted_root {
                Some(path) => TrustRoot::from_file(path)?,
                None => TrustRoot::public_good()?,
            };
            kiln::trust::verify(&fetched.bytes, &signatures, &requirement, &root)
                .map_err(|e| e.to_string())
        }
    };
    match outcome {
        Ok(Verified::Signed { digest, signers }) => {
            println!(
                "verified {} ({digest}): signed by {}",
                args.file,
                signers.join(", ")
            );
            Ok(exit::OK)
        }
        Ok(Verified::Insecure { digest }) => {
            eprintln!(
                "WARNING: {} ({digest}) is NOT verified: the trust policy marks it insecure",
                args.file
            );
            Ok(exit::OK)
        }
        Ok(_) => Ok(exit::OK),
        Err(reason) => {
            eprintln!("refused {}: {reason}", args.file);
            Ok(exit::POLICY_BLOCKED)
        }
    }
}
