//! Credentials of a simulated cluster, made in-process (no openssl needed):
//! a CA, the API server's serving certificate for 127.0.0.1, the
//! service-account signing key, and a static admin bearer token.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use super::Error;

/// Files written by [`write`], all inside one directory.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub token_file: PathBuf,
    pub token: String,
}

impl Pki {
    /// Where the files of credentials in `dir` are, with their `token`.
    pub fn at(dir: &Path, token: String) -> Pki {
        Pki {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
            token_file: dir.join("tokens.csv"),
            token,
        }
    }
}

/// Makes fresh credentials under `dir`.
pub fn write(dir: &Path) -> Result<Pki, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nodefall-sim-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default.svc".to_owned(),
    ])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_key = KeyPair::generate()?;
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    // ECDSA P-256 in PKCS#8: kube-apiserver signs service-account tokens with ES256.
    let sa_key = KeyPair::generate()?;

    let token = random_token()?;
    let pki = Pki::at(dir, token);
    let files = [
        (&pki.ca_cert, ca_cert.pem()),
        (&pki.serving_cert, serving_cert.pem()),
        (&pki.serving_key, serving_key.serialize_pem()),
        (&pki.service_account_key, sa_key.serialize_pem()),
        (&pki.service_account_pub, sa_key.public_key_pem()),
        // token,user,uid,"groups"
        (
            &pki.token_file,
            format!(
                "{},nodefall-admin,nodefall-admin,\"system:masters\"\n",
                pki.token
            ),
        ),
    ];
    for (path, contents) in files {
        std::fs::write(path, contents)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(pki)
}

fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("reading /dev/urandom", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
