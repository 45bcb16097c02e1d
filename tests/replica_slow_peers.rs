//! Slow and stalled peers of log shipping: a replica that falls behind while its
//! primary purges keeps its segments pinned only up to
//! `LogDirOptions::replica_retain_bytes` (past it the replica fails with
//! `ReplicaTooFarBehind`, never skipping; within it the replica catches up), and a
//! peer that stalls in the handshake or mid-stream, on either end, is a clear error
//! once the configured timeout has passed, and not before.
//!
//! The timeouts are Tokio timers: the tests about them pause Tokio's clock once the
//! logs are open, so the timeout is measured in the runtime's own time (exactly, and
//! whatever the load on the machine) rather than on the wall.

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;
use walcodec::{Error, LogDir, LogPosition, Replica, REPLICATION_PROTOCOL_VERSION};

/// A record of awkward size: some cross blocks, some fill much of a segment
/// (records 0..10 fill most of the first 200 KiB segment).
fn record(i: usize) -> Vec<u8> {
    let len = match i % 5 {
        1 => 32 * 1024 + 17,
        4 => 100_000,
        _ => (i * 131) % 3000,
    };
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

const SEGMENT: u64 = 200 * 1024;
const RETAIN: u64 = 400 * 1024;

/// A long timeout on both ends: the slow replica below is paused on purpose.
const PATIENT: Duration = Duration::from_secs(120);

/// A primary with retention; with `recycle`, purged segment files are reused (a
/// segment released from a replica is soon written over).
async fn primary(dir: &Path, replica_retain_bytes: u64, recycle: bool) -> LogDir {
    let log = LogDir::builder()
        .max_segment_bytes(SEGMENT)
        .recycle_segments(if recycle { 2 } else { 0 })
        .retain_bytes(RETAIN)
        .replica_retain_bytes(replica_retain_bytes)
        .replica_timeout(PATIENT)
        .open(dir)
        .await
        .unwrap();
    for i in 0..10 {
        log.append(record(i)).await.unwrap();
    }
    log
}

/// Relays between the two ends; from the primary, `budget` bytes while `open` is
/// false, then everything once it turns true (a replica that stops taking bytes).
fn gate(
    mut primary_side: DuplexStream,
    mut replica_side: DuplexStream,
    budget: u64,
    mut open: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut passed = 0u64;
        let mut down = [0u8; 4096];
        let mut up = [0u8; 64];
        loop {
            let may = if *open.borrow() {
                down.len()
            } else {
                (budget - passed).min(down.len() as u64) as usize
            };
            tokio::select! {
                n = primary_side.read(&mut down[..may]), if may > 0 => {
                    let Ok(n) = n else { return };
                    if n == 0 || replica_side.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                    passed += n as u64;
                }
                n = replica_side.read(&mut up) => {
                    let Ok(n) = n else { return };
                    if n == 0 || primary_side.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                changed = open.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    })
}

/// What a replica directory holds, read as a `LogDir` after the replica closed.
async fn records_of(dir: &Path) -> Vec<Vec<u8>> {
    let log = LogDir::open(dir).await.unwrap();
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    log.close().await.unwrap();
    out
}

/// The sealed and active segments' bytes together.
fn disk_bytes(log: &LogDir) -> u64 {
    log.segments().iter().map(|&(_, len)| len).sum()
}

/// What a stalled replica takes: the primary's hello and identity, its first segment
/// message (17) and its first data message (5 + 64 KiB), whose records the replica
/// then makes durable.
const FIRST_MESSAGES: u64 = crate::common::PRIMARY_HANDSHAKE + 17 + 5 + 65_536;

/// A replica that took the first 64 KiB of the first segment and then stalls (the primary
/// blocked inside the first segment), while the primary appends `more` records
/// (rotating and applying retention) and runs `while_stalled`; then it goes on
/// until it caught up or failed. Returns both ends' results and the replica.
async fn slow_replica<F>(
    log: &LogDir,
    replica_dir: &Path,
    more: std::ops::Range<usize>,
    while_stalled: impl FnOnce(LogDir) -> F,
) -> (
    Result<walcodec::ShipStats, Error>,
    Result<LogPosition, Error>,
    Replica,
)
where
    F: std::future::Future<Output = ()>,
{
    let mut replica = Replica::open(replica_dir).await.unwrap();
    replica.set_timeout(PATIENT);
    let mut durable = replica.durable_end();
    let (a, p1) = tokio::io::duplex(64 * 1024);
    let (p2, b) = tokio::io::duplex(64 * 1024);
    let (open, gate_rx) = watch::channel(false);
    let relay = gate(p1, p2, FIRST_MESSAGES, gate_rx);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let syncing = tokio::spawn(async move {
        let synced = replica.sync_from(b).await.map(|s| s.end);
        (synced, replica)
    });
    // The replica holds records of segment 1, and no more is coming through.
    tokio::time::timeout(
        Duration::from_secs(60),
        durable.wait_for(|&end| end > LogPosition::new(1, 0)),
    )
    .await
    .expect("the replica made the first message's records durable")
    .unwrap();
    for i in more {
        log.append(record(i)).await.unwrap();
    }
    while_stalled(log.clone()).await;
    open.send_replace(true);
    let end = log.end();
    let served = tokio::select! {
        served = serving => served.unwrap(),
        // Caught up: hang up, so serve_replica returns.
        _ = durable.wait_for(|&at| at >= end) => {
            relay.abort();
            Ok(Default::default())
        }
    };
    relay.abort();
    let (synced, replica) = syncing.await.unwrap();
    (served, synced, replica)
}

#[tokio::test]
async fn a_stalled_replica_past_the_limit_is_cut_off_and_never_skips() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let limit = 300 * 1024;
    let log = primary(p.path(), limit, true).await;
    let (served, synced, replica) = slow_replica(&log, r.path(), 10..80, |log| async move {
        // Retention ran at each rotation: the segments past the limit are gone,
        // the disk holds what retention keeps plus at most the limit (and the
        // active segment's growth since the last rotation).
        assert!(
            log.start().segment > 1,
            "the stalled replica pinned everything"
        );
        let held = disk_bytes(&log);
        assert!(held <= RETAIN + limit + SEGMENT, "{held} bytes kept");
    })
    .await;
    let first = log.start();
    assert!(
        matches!(served, Err(Error::ReplicaTooFarBehind { first_available }) if first_available.segment > 1),
        "{served:?}"
    );
    assert!(
        matches!(synced, Err(Error::ReplicaTooFarBehind { first_available }) if first_available.segment > 1),
        "{synced:?}"
    );
    // What the replica holds is a prefix of the log, nothing skipped, and a new
    // connection is refused too (re-seed it).
    let at = replica.end();
    assert_eq!(at.segment, 1);
    let mut replica = replica;
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let again = replica.sync_from(b).await;
    assert!(
        matches!(again, Err(Error::ReplicaTooFarBehind { first_available }) if first_available == first),
        "{again:?}"
    );
    assert!(serving.await.unwrap().is_err());
    assert_eq!(replica.end(), at, "nothing skipped");
    replica.close().await.unwrap();
    let copied = records_of(r.path()).await;
    assert!(!copied.is_empty());
    assert_eq!(copied, (0..copied.len()).map(record).collect::<Vec<_>>());
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_slow_replica_within_the_limit_catches_up_then_lets_go() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), 64 << 20, false).await;
    let (served, synced, replica) = slow_replica(&log, r.path(), 10..80, |log| async move {
        assert_eq!(log.start().segment, 1, "a pinned segment was purged");
        assert!(disk_bytes(&log) > RETAIN + SEGMENT);
    })
    .await;
    served.unwrap();
    let end = synced.unwrap();
    assert_eq!(end, log.end());
    // Disconnected, the replica pins nothing: retention purges what it held.
    let purged = log.enforce_retention().await.unwrap();
    assert!(purged.contains(&1), "{purged:?}");
    assert!(disk_bytes(&log) <= RETAIN + SEGMENT);
    replica.close().await.unwrap();
    assert_eq!(
        records_of(r.path()).await,
        (0..80).map(record).collect::<Vec<_>>()
    );
    log.close().await.unwrap();
}

#[tokio::test]
async fn an_explicit_purge_respects_the_limit_too() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No retention: only purge_before deletes, and it keeps at most a segment's
    // bytes (the limit) for the stalled replica.
    let log = LogDir::builder()
        .max_segment_bytes(SEGMENT)
        .replica_retain_bytes(SEGMENT)
        .replica_timeout(PATIENT)
        .open(p.path())
        .await
        .unwrap();
    for i in 0..10 {
        log.append(record(i)).await.unwrap();
    }
    let (served, synced, replica) = slow_replica(&log, r.path(), 10..40, |log| async move {
        assert_eq!(log.start().segment, 1, "nothing purges on its own");
        let purged = log.purge_before(log.end()).await.unwrap();
        assert_eq!(purged.first(), Some(&1));
        let segments = log.segments();
        let sealed: u64 = segments[..segments.len() - 1].iter().map(|&(_, l)| l).sum();
        assert!(
            sealed > 0 && sealed <= SEGMENT,
            "{sealed} sealed bytes kept"
        );
    })
    .await;
    for result in [served.map(|_| ()), synced.map(|_| ())] {
        assert!(
            matches!(result, Err(Error::ReplicaTooFarBehind { first_available }) if first_available == log.start()),
            "{result:?}"
        );
    }
    replica.close().await.unwrap();
    let copied = records_of(r.path()).await;
    assert_eq!(copied, (0..copied.len()).map(record).collect::<Vec<_>>());
    log.close().await.unwrap();
}

/// A hello as a peer sends it (as the replica when `replica`).
fn hello_bytes(replica: bool, position: LogPosition) -> Vec<u8> {
    let mut bytes = b"WALCREPL".to_vec();
    bytes.extend_from_slice(&REPLICATION_PROTOCOL_VERSION.to_le_bytes());
    bytes.extend_from_slice(&u32::from(replica).to_le_bytes());
    bytes.extend_from_slice(&position.segment.to_le_bytes());
    bytes.extend_from_slice(&position.offset.to_le_bytes());
    // Its identity: the replica's, of a copy that holds nothing; the primary's,
    // of a log with one epoch.
    if replica {
        bytes.push(b'I');
        bytes.extend_from_slice(&[0; 16 + 1 + 20 + 4]);
    } else {
        bytes.extend_from_slice(&crate::common::primary_identity(7));
    }
    bytes
}

const SHORT: Duration = Duration::from_millis(300);

/// Runs `replica.sync_from` against a fake primary that sends `sent` and then
/// stalls, holding the connection open; returns the result and how long it took on
/// the (paused) Tokio clock.
async fn against_stalled_primary(
    replica: &mut Replica,
    sent: Vec<u8>,
) -> (Result<LogPosition, Error>, Duration) {
    let (mut a, b) = tokio::io::duplex(1 << 16);
    let fake = tokio::spawn(async move {
        a.write_all(&sent).await.unwrap();
        let mut sink = [0u8; 64];
        // Reads the replica's hello, then nothing more: the connection stays open.
        let _ = a.read(&mut sink).await;
        std::future::pending::<()>().await;
    });
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), replica.sync_from(b))
        .await
        .expect("the replica waited past its timeout");
    fake.abort();
    (result.map(|s| s.end), started.elapsed())
}

/// The clock paused, the runtime's time moves only when every task waits, and then
/// straight to the next timer: a timeout fires at exactly its time after the peer's
/// last step, and a loaded machine can make it neither late nor early. (`slack`:
/// runtime time in which the stalled peer still took something, such as heartbeats
/// into the free room of the connection's buffer.)
fn assert_timed_out_after_the_timeout(place: &str, took: Duration, slack: Duration) {
    assert!(
        took >= SHORT && took <= SHORT + slack + Duration::from_millis(5),
        "{place}: {took:?}"
    );
}

#[tokio::test]
async fn a_stalled_primary_is_a_clear_error_once_the_replicas_timeout_has_passed() {
    let r = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    replica.set_timeout(SHORT);
    tokio::time::pause();
    let mut data = vec![b'S'];
    data.extend_from_slice(&1u64.to_le_bytes());
    data.extend_from_slice(&0u64.to_le_bytes());
    data.push(b'D');
    data.extend_from_slice(&1000u32.to_le_bytes());
    data.extend_from_slice(&[0u8; 10]);
    let hello = hello_bytes(false, LogPosition::new(1, 0));
    let stalls = [
        ("no hello", Vec::new()),
        ("half a hello", hello[..10].to_vec()),
        ("after the hello", hello[..32].to_vec()),
        ("after the identity", hello.clone()),
        ("mid-message", [hello.clone(), data].concat()),
    ];
    for (place, sent) in stalls {
        let (result, took) = against_stalled_primary(&mut replica, sent).await;
        assert!(
            matches!(&result, Err(Error::ReplicaProtocol { reason }) if reason.contains("in time")),
            "{place}: {result:?}"
        );
        assert_timed_out_after_the_timeout(place, took, Duration::ZERO);
        assert_eq!(
            replica.end(),
            LogPosition::new(1, 0),
            "{place}: wrote something"
        );
    }
}

#[tokio::test]
async fn a_stalled_replica_is_a_clear_error_once_the_primarys_timeout_has_passed() {
    let p = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .replica_timeout(SHORT)
        .open(p.path())
        .await
        .unwrap();
    for i in 0..20 {
        log.append(record(i)).await.unwrap();
    }
    tokio::time::pause();
    let hello = hello_bytes(true, LogPosition::START);
    // Silent; half a hello; a hello, then it takes nothing (more than the
    // connection's buffer is to be sent: the buffer takes the records that fit,
    // then heartbeats, 75 ms apart, until it is full).
    for (place, sent, slack) in [
        ("no hello", Vec::new(), Duration::ZERO),
        ("half a hello", hello[..10].to_vec(), Duration::ZERO),
        // A hello without the identity: the primary refuses it once its timeout has
        // passed, then waits one heartbeat interval for the replica to hang up.
        (
            "no identity",
            hello[..32].to_vec(),
            Duration::from_millis(75),
        ),
        (
            "takes nothing",
            hello.clone(),
            Duration::from_millis(5 * 75),
        ),
    ] {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let started = Instant::now();
        let serving = tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(a).await }
        });
        b.write_all(&sent).await.unwrap();
        let served = tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .unwrap_or_else(|_| panic!("{place}: the primary waited past its timeout"))
            .unwrap();
        let took = started.elapsed();
        assert!(
            matches!(&served, Err(Error::ReplicaProtocol { reason }) if reason.contains("in time")),
            "{place}: {served:?}"
        );
        assert_timed_out_after_the_timeout(place, took, slack);
        drop(b);
    }
    log.close().await.unwrap();
}

#[tokio::test]
async fn an_idle_primary_keeps_a_replica_with_a_short_timeout_connected() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::builder()
        .replica_timeout(SHORT)
        .open(p.path())
        .await
        .unwrap();
    log.append(record(1)).await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    replica.set_timeout(SHORT);
    let (a, b) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let mut durable = replica.durable_end();
    let syncing = tokio::spawn(async move {
        let synced = replica.sync_from(b).await.map(|s| s.end);
        (synced, replica)
    });
    // Caught up with the first record: from here both ends only wait on each other.
    let caught_up = log.end();
    tokio::time::timeout(
        Duration::from_secs(60),
        durable.wait_for(|&e| e >= caught_up),
    )
    .await
    .expect("the replica never caught up")
    .unwrap();
    // Idle for many timeouts, on the paused clock (so the heartbeats cannot be late
    // however loaded the machine): heartbeats keep it alive; then one more record.
    tokio::time::pause();
    let idle_from = Instant::now();
    tokio::time::sleep(SHORT * 6).await;
    assert!(idle_from.elapsed() >= SHORT * 6);
    assert!(
        !syncing.is_finished(),
        "the replica gave an idle primary up"
    );
    tokio::time::resume();
    log.append(record(2)).await.unwrap();
    let end = log.close().await.unwrap();
    serving.await.unwrap().unwrap();
    let (synced, replica) = syncing.await.unwrap();
    assert_eq!(synced.unwrap(), end);
    replica.close().await.unwrap();
    assert_eq!(records_of(r.path()).await, vec![record(1), record(2)]);
}

#[tokio::test]
async fn a_slow_replica_stops_pinning_at_the_default_limit() {
    // No `replica_retain_bytes`: the default, 16 segments' worth, still bounds what
    // a replica that stays connected but takes nothing more can pin.
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::builder()
        .max_segment_bytes(SEGMENT)
        .retain_bytes(RETAIN)
        .replica_timeout(PATIENT)
        .open(p.path())
        .await
        .unwrap();
    for i in 0..10 {
        log.append(record(i)).await.unwrap();
    }
    let default_limit = 16 * SEGMENT;
    let (served, synced, replica) = slow_replica(&log, r.path(), 10..260, |log| async move {
        assert!(
            log.start().segment > 1,
            "the stalled replica pinned everything"
        );
        let held = disk_bytes(&log);
        assert!(
            held <= RETAIN + default_limit + SEGMENT,
            "{held} bytes kept"
        );
    })
    .await;
    assert!(
        matches!(served, Err(Error::ReplicaTooFarBehind { .. })),
        "{served:?}"
    );
    assert!(
        matches!(synced, Err(Error::ReplicaTooFarBehind { .. })),
        "{synced:?}"
    );
    replica.close().await.unwrap();
    log.close().await.unwrap();
}
