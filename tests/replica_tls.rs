//! Replication over TLS with client certificates (`tokio-rustls`, certificates
//! made by `rcgen`), on 127.0.0.1: a replica with a certificate the primary's
//! authority signed syncs byte-identical; a peer without a certificate, or with one
//! another authority signed, is refused before `serve_replica` ever runs; a replica
//! refuses a primary whose certificate its authority did not sign.

use std::sync::Arc;
use std::time::Duration;

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

struct Authority {
    cert: Certificate,
    key: KeyPair,
}

struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Authority { cert, key }
    }

    fn roots(&self) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        Arc::new(roots)
    }

    fn issue(&self, name: &str, client: bool) -> Identity {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }
}

fn acceptor(identity: Identity, clients: &Authority) -> TlsAcceptor {
    let provider = Arc::new(crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(clients.roots(), provider.clone())
        .build()
        .unwrap();
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain, identity.key)
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

fn connector(servers: &Authority, identity: Option<Identity>) -> TlsConnector {
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(servers.roots());
    let config = match identity {
        Some(identity) => builder
            .with_client_auth_cert(identity.chain, identity.key)
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}

/// A primary serving one TLS connection on 127.0.0.1; returns its address and
/// whether the connection reached `serve_replica` (and how that ended).
async fn serve_one(
    log: &LogDir,
    acceptor: TlsAcceptor,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Option<bool>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = log.clone();
    let serving = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        match acceptor.accept(tcp).await {
            Ok(tls) => Some(log.serve_replica(tls).await.is_ok()),
            Err(_) => None,
        }
    });
    (addr, serving)
}

#[tokio::test]
async fn a_replica_with_a_signed_certificate_syncs_over_tls_and_others_are_refused() {
    let ca = Authority::new("replication");
    let stranger = Authority::new("someone else");
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::builder()
        .max_segment_bytes(64 * 1024)
        .open(p.path())
        .await
        .unwrap();
    for i in 0..500 {
        log.append(format!("record {i} {}", "x".repeat(i % 300)))
            .await
            .unwrap();
    }
    let name = ServerName::try_from("localhost").unwrap();

    // No client certificate, then one another authority signed: the TLS handshake
    // fails, serve_replica never runs, the replica writes nothing.
    for identity in [None, Some(stranger.issue("intruder", true))] {
        let (addr, serving) = serve_one(&log, acceptor(ca.issue("localhost", false), &ca)).await;
        let mut replica = Replica::open(r.path()).await.unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let synced = match connector(&ca, identity).connect(name.clone(), tcp).await {
            Ok(tls) => tokio::time::timeout(Duration::from_secs(30), replica.sync_from(tls))
                .await
                .unwrap()
                .is_ok(),
            Err(_) => false,
        };
        assert_eq!(
            serving.await.unwrap(),
            None,
            "the primary served a stray peer"
        );
        assert_eq!(replica.end().offset, 0);
        let _ = synced;
    }

    // A primary whose certificate the replica's authority did not sign.
    let (addr, serving) = serve_one(&log, acceptor(stranger.issue("localhost", false), &ca)).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let refused = connector(&ca, Some(ca.issue("replica-1", true)))
        .connect(name.clone(), tcp)
        .await;
    assert!(refused.is_err(), "a replica accepted an unknown primary");
    assert_eq!(serving.await.unwrap(), None);

    // The real replica.
    let (addr, serving) = serve_one(&log, acceptor(ca.issue("localhost", false), &ca)).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = connector(&ca, Some(ca.issue("replica-1", true)))
        .connect(name, tcp)
        .await
        .unwrap();
    let syncing = tokio::spawn(async move {
        let synced = replica.sync_from(tls).await.is_ok();
        (replica, synced)
    });
    log.append("last").await.unwrap();
    let end = log.close().await.unwrap();
    assert_eq!(serving.await.unwrap(), Some(true));
    let (replica, synced) = syncing.await.unwrap();
    assert!(synced);
    assert_eq!(replica.end(), end);
    for segment in LogDir::list(p.path()).unwrap().segments {
        let copy = std::fs::read(r.path().join(segment.path.file_name().unwrap())).unwrap();
        assert!(
            copy == std::fs::read(&segment.path).unwrap(),
            "segment {}",
            segment.number
        );
    }
    let mut reader = replica.read_from(LogPosition::START).await.unwrap();
    let mut n = 0;
    while let Some(record) = reader.next_record().await {
        record.unwrap();
        n += 1;
    }
    assert_eq!(n, 501);
}
