//! A shared secret in the replication handshake (feature `replica-auth`): peers
//! that know it sync; a stray replica is refused before it reads anything of the
//! log (not even its end) or pins a segment; a fake primary is refused before the
//! replica writes a byte; the secret never crosses the wire.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use walcodec::{Error, LogDir, LogPosition, Replica};

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

async fn primary(dir: &std::path::Path, secret: Option<&[u8]>) -> LogDir {
    let mut options = LogDir::builder();
    options.replica_timeout(Duration::from_secs(5));
    if let Some(secret) = secret {
        options.replica_secret(secret);
    }
    let log = options.open(dir).await.unwrap();
    for i in 0..50 {
        log.append(format!("record {i}")).await.unwrap();
    }
    log
}

/// One connection: the primary's and the replica's results.
async fn connect(log: &LogDir, replica: &mut Replica) -> (Result<(), Error>, Result<(), Error>) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await.map(|_| ()) }
    });
    // The primary closes once the replica holds all of its log (an event, not a
    // pause that a slow machine can outlast mid-handshake); a refused replica never
    // does, its connection ends on its own, and this is aborted.
    let mut replicated = replica.durable_end();
    let closing = tokio::spawn({
        let log = log.clone();
        async move {
            let end = log.end();
            let _ = replicated.wait_for(|&e| e >= end).await;
            log.close().await.unwrap();
        }
    });
    let synced = tokio::time::timeout(Duration::from_secs(30), replica.sync_from(b))
        .await
        .unwrap()
        .map(|_| ());
    let served = serving.await.unwrap();
    closing.abort();
    (served, synced)
}

#[tokio::test]
async fn peers_with_the_same_secret_sync() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), Some(SECRET)).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    replica.set_secret(SECRET);
    let (served, synced) = connect(&log, &mut replica).await;
    served.unwrap();
    synced.unwrap();
    assert_eq!(replica.end(), log.end());
}

#[tokio::test]
async fn a_replica_without_the_secret_is_refused_on_both_ends_and_writes_nothing() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), Some(SECRET)).await;
    for secret in [None, Some(&b"a guess"[..])] {
        let mut replica = Replica::open(r.path()).await.unwrap();
        if let Some(secret) = secret {
            replica.set_secret(secret);
        }
        let before = replica.end();
        let (a, b) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(a).await }
        });
        let synced = replica.sync_from(b).await;
        let served = serving.await.unwrap();
        assert!(
            matches!(served, Err(Error::ReplicaAuthentication { .. })),
            "{secret:?}: {served:?}"
        );
        assert!(
            matches!(synced, Err(Error::ReplicaAuthentication { .. })),
            "{secret:?}: {synced:?}"
        );
        assert_eq!(replica.end(), before);
    }
}

#[tokio::test]
async fn a_stray_peer_reads_nothing_but_the_challenge() {
    let p = tempfile::tempdir().unwrap();
    let log = primary(p.path(), Some(SECRET)).await;
    let (a, mut stray) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    // A replica's hello, as a peer without a secret sends it.
    let mut hello = b"WALCREPL".to_vec();
    hello.extend_from_slice(&[0; 24]);
    stray.write_all(&hello).await.unwrap();
    let mut got = Vec::new();
    stray.read_to_end(&mut got).await.unwrap();
    assert!(matches!(
        serving.await.unwrap(),
        Err(Error::ReplicaAuthentication { .. })
    ));
    // The challenge only: "WALCAUTH" and a nonce; no hello, no log end, no byte
    // of the log.
    assert_eq!(got.len(), 40);
    assert_eq!(&got[..8], b"WALCAUTH");
    assert!(!got.windows(SECRET.len()).any(|w| w == SECRET));
    // Nothing was left pinned: a purge of everything sealed goes through.
    log.rotate().await.unwrap();
    let purged = log.purge_before(log.end()).await.unwrap();
    assert!(!purged.is_empty());
}

#[tokio::test]
async fn a_fake_primary_is_refused_before_the_replica_writes_a_byte() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut replica = Replica::open(r.path()).await.unwrap();
    replica.set_secret(SECRET);
    for secret in [None, Some(&b"not it"[..])] {
        let p = tempfile::tempdir_in(p.path()).unwrap();
        let log = primary(p.path(), secret).await;
        let (served, synced) = connect(&log, &mut replica).await;
        assert!(
            matches!(synced, Err(Error::ReplicaAuthentication { .. })),
            "{secret:?}: {synced:?}"
        );
        assert!(served.is_err(), "{secret:?}: {served:?}");
        assert_eq!(replica.end(), LogPosition::new(1, 0));
        assert_eq!(
            std::fs::metadata(r.path().join("000001.log"))
                .unwrap()
                .len(),
            0
        );
    }
}
