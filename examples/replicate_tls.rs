//! Replication over TLS with client certificates, the documented way to ship a log
//! across a network: the primary accepts only replicas whose certificate its
//! certificate authority signed, and the replica accepts only a primary whose
//! certificate names the host it dialled. `LogDir::serve_replica` and
//! `Replica::sync_from` take any byte stream: here a `tokio-rustls` stream.
//!
//! ```text
//! cargo run --example replicate_tls
//! ```
//!
//! The certificates are made on the spot with `rcgen` (a real deployment loads
//! its own, from files: `rustls-pemfile`, or `CertificateDer::from_pem_file` with
//! rustls-pki-types' `pem` feature). Everything listens on 127.0.0.1 only. With the
//! `replica-auth` feature, `LogDirOptions::replica_secret` and
//! `Replica::set_secret` add a shared secret on top.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName,
};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{crypto, ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use walcodec::{LogDir, LogPosition, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A certificate and its key.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// A certificate authority, and identities it signs.
struct Authority {
    cert: Certificate,
    key: KeyPair,
}

impl Authority {
    fn new(name: &str) -> Result<Authority, BoxError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key)?;
        Ok(Authority { cert, key })
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A server certificate for `names`, or a client certificate.
    fn issue(&self, names: &[&str], client: bool) -> Result<Identity, BoxError> {
        let key = KeyPair::generate()?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        })
    }
}

/// The primary's TLS: its certificate, and client certificates required, signed
/// by `clients`.
fn server_config(identity: Identity, clients: &Authority) -> Result<Arc<ServerConfig>, BoxError> {
    // ring: no cmake or assembler toolchain needed beyond a C compiler.
    let provider = Arc::new(crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(clients.der())?;
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain, identity.key)?;
    Ok(Arc::new(config))
}

/// A replica's TLS: the primary's certificate authority, and its own certificate.
fn client_config(servers: &Authority, identity: Identity) -> Result<Arc<ClientConfig>, BoxError> {
    let provider = Arc::new(crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(servers.der())?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(identity.chain, identity.key)?;
    Ok(Arc::new(config))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let ca = Authority::new("walcodec replication")?;
    let acceptor = TlsAcceptor::from(server_config(ca.issue(&["localhost"], false)?, &ca)?);
    let connector = TlsConnector::from(client_config(&ca, ca.issue(&["replica-1"], true)?)?);

    let (primary_dir, replica_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let log = LogDir::open(primary_dir.path()).await?;
    for i in 0..1000 {
        log.append(format!("event {i}")).await?;
    }

    // The primary: TLS first; a peer without a certificate our authority signed
    // never reaches serve_replica.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn({
        let log = log.clone();
        async move {
            let (tcp, peer) = listener.accept().await?;
            let tls = acceptor.accept(tcp).await?;
            println!("primary: replica {peer} presented a valid certificate");
            log.serve_replica(tls).await?;
            Ok::<_, BoxError>(())
        }
    });

    // The replica: checks the primary's certificate names "localhost".
    let mut replica = Replica::open(replica_dir.path()).await?;
    let tcp = TcpStream::connect(addr).await?;
    let tls = connector
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let syncing = tokio::spawn(async move {
        let synced = replica.sync_from(tls).await;
        (replica, synced.map(|_| ()))
    });
    log.append("the last event").await?;
    let end = log.close().await?;
    serving.await??;
    let (replica, synced) = syncing.await?;
    synced?;
    assert_eq!(replica.end(), end);
    let mut reader = replica.read_from(LogPosition::START).await?;
    let mut n = 0;
    while let Some(record) = reader.next_record().await {
        record?;
        n += 1;
    }
    println!("replica: {n} records over TLS, up to {end}");
    Ok(())
}
