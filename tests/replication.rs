//! Log shipping with `LogDir::serve_replica` and `Replica::sync_from`: a replica
//! far behind gets the sealed segments and then follows the active one; a
//! connection cut at any byte resumes after the last complete record, nothing lost
//! or written twice; every segment of the replica is byte-identical to the
//! primary's; damage on the wire is detected and never written; hostile peers get
//! typed errors; a promoted replica is a `LogDir` that appends on.

use crate::common::sync_until;

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};
use walcodec::{
    Error, LogDir, LogDirOptions, LogPosition, Replica, ShipStats, WriterOptions,
    REPLICATION_PROTOCOL_VERSION,
};

/// A record of awkward size: some cross blocks, some end near a trailer.
/// What the primary sends before the log (its log has one epoch).
const HANDSHAKE: u64 = crate::common::PRIMARY_HANDSHAKE;

fn record(i: usize) -> Vec<u8> {
    let len = match i % 7 {
        0 => 0,
        1 => 32 * 1024 + 17,
        2 => 32 * 1024 - 7 - 3,
        3 => 100_000,
        _ => (i * 131) % 3000,
    };
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

async fn primary(dir: &Path, options: &LogDirOptions, records: std::ops::Range<usize>) -> LogDir {
    let log = options.open(dir).await.unwrap();
    for i in records {
        log.append(record(i)).await.unwrap();
    }
    log
}

fn small_segments() -> LogDirOptions {
    LogDir::builder().max_segment_bytes(200 * 1024).clone()
}

/// Serves `replica` from `log` over an in-memory stream until the log is closed or
/// the connection ends.
async fn sync_over_duplex(
    log: &LogDir,
    replica: &mut Replica,
) -> (Result<ShipStats, Error>, Result<LogPosition, Error>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let synced = replica.sync_from(b).await.map(|s| s.end);
    (serving.await.unwrap(), synced)
}

/// Connects `replica_side` to `primary_side`; passes `cut` bytes from the primary
/// (all when `None`), flipping the byte at `flip` if given, then drops both.
fn proxy(
    mut primary_side: DuplexStream,
    mut replica_side: DuplexStream,
    cut: Option<u64>,
    flip: Option<u64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut passed = 0u64;
        let mut down = [0u8; 4096];
        let mut up = [0u8; 64];
        loop {
            tokio::select! {
                n = primary_side.read(&mut down) => {
                    let Ok(n) = n else { return };
                    if n == 0 { return; }
                    let mut n = n as u64;
                    if let Some(cut) = cut {
                        n = n.min(cut - passed);
                    }
                    let chunk = &mut down[..n as usize];
                    if let Some(flip) = flip {
                        if (passed..passed + n).contains(&flip) {
                            chunk[(flip - passed) as usize] ^= 0x20;
                        }
                    }
                    if replica_side.write_all(chunk).await.is_err() { return; }
                    passed += n;
                    if cut == Some(passed) { return; }
                }
                n = replica_side.read(&mut up) => {
                    let Ok(n) = n else { return };
                    if n == 0 || primary_side.write_all(&up[..n]).await.is_err() { return; }
                }
            }
        }
    })
}

/// One connection through a proxy that cuts it after `cut` bytes (or flips one).
async fn sync_through(
    log: &LogDir,
    replica: &mut Replica,
    cut: Option<u64>,
    flip: Option<u64>,
) -> (Result<ShipStats, Error>, Result<LogPosition, Error>) {
    let (a, p1) = tokio::io::duplex(64 * 1024);
    let (p2, b) = tokio::io::duplex(64 * 1024);
    let relay = proxy(p1, p2, cut, flip);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let synced = replica.sync_from(b).await.map(|s| s.end);
    relay.abort();
    (serving.await.unwrap(), synced)
}

/// Every segment file of `replica` that `primary` still has is equal to it, and
/// the replica has no segment the primary never had.
fn assert_identical(primary: &Path, replica: &Path) {
    let primary_list = LogDir::list(primary).unwrap();
    let replica_list = LogDir::list(replica).unwrap();
    assert!(!primary_list.segments.is_empty());
    let replica_last = replica_list.segments.last().unwrap().number;
    for segment in &primary_list.segments {
        let theirs = replica.join(segment.path.file_name().unwrap());
        let ours = std::fs::read(&segment.path).unwrap();
        let copy = std::fs::read(&theirs).unwrap_or_else(|e| panic!("{}: {e}", theirs.display()));
        assert!(ours == copy, "segment {} differs", segment.number);
    }
    assert_eq!(replica_last, primary_list.segments.last().unwrap().number);
}

/// The bytes of each replica segment are a prefix of the primary's.
fn assert_prefix(primary: &Path, replica: &Path) {
    for segment in LogDir::list(replica).unwrap().segments {
        let copy = std::fs::read(&segment.path).unwrap();
        let ours = std::fs::read(primary.join(segment.path.file_name().unwrap())).unwrap();
        assert!(
            ours.starts_with(&copy),
            "segment {} is no prefix",
            segment.number
        );
    }
}

async fn read_all(log: &LogDir) -> Vec<Vec<u8>> {
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    out
}

#[tokio::test]
async fn a_far_behind_replica_gets_the_sealed_segments_then_follows() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), &small_segments(), 0..60).await;
    assert!(log.segments().len() > 3);
    let mut replica = Replica::open(r.path()).await.unwrap();
    let mut durable = replica.durable_end();
    let appending = tokio::spawn({
        let log = log.clone();
        async move {
            for i in 60..120 {
                log.append(record(i)).await.unwrap();
            }
            log.close().await.unwrap()
        }
    });
    let (shipped, synced) = sync_over_duplex(&log, &mut replica).await;
    let end = appending.await.unwrap();
    let shipped = shipped.unwrap();
    assert_eq!(synced.unwrap(), end);
    assert_eq!(shipped.to, end);
    assert_eq!(shipped.from, LogPosition::new(1, 0));
    assert!(shipped.segments_sealed as usize >= 3);
    assert!(durable.has_changed().unwrap());
    assert_eq!(*durable.borrow_and_update(), end);
    assert_eq!(replica.end(), end);
    assert_identical(p.path(), r.path());
    replica.close().await.unwrap();
    let copy = LogDir::open(r.path()).await.unwrap();
    let records = read_all(&copy).await;
    assert_eq!(records, (0..120).map(record).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_cut_at_any_byte_resumes_after_the_last_complete_record() {
    let (p, _) = (tempfile::tempdir().unwrap(), ());
    let log = primary(p.path(), &small_segments(), 0..20).await;
    log.close().await.unwrap();
    // The handshake and first message headers, then spots across the stream:
    // mid-header, mid-record, in trailers, at message boundaries.
    let mut cuts: Vec<u64> = (1..HANDSHAKE + 30).collect();
    cuts.extend((0..40).map(|i| HANDSHAKE + 30 + i * 9_973));
    cuts.extend([32 * 1024 + HANDSHAKE + 17 + 9, 32 * 1024 - 3, 65_536 + 50]);
    // Eight cuts at a time, each with its own replica: their syncs overlap.
    futures::stream::iter(cuts)
        .for_each_concurrent(8, |cut| resume_after_a_cut(&log, p.path(), cut))
        .await;
}

/// One connection cut after `cut` bytes, then one uncut: the replica ends
/// identical, and the second resumed where the first stopped.
async fn resume_after_a_cut(log: &LogDir, primary: &Path, cut: u64) {
    let r = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (_, synced) = sync_through(log, &mut replica, Some(cut), None).await;
    let at = match synced {
        // A cut in the primary's hello or identity is a truncated handshake.
        Err(Error::ReplicaProtocol { .. }) if cut < HANDSHAKE => replica.end(),
        synced => synced.unwrap_or_else(|e| panic!("cut at {cut}: {e}")),
    };
    assert_prefix(primary, r.path());
    let (shipped, synced) = sync_through(log, &mut replica, None, None).await;
    assert_eq!(synced.unwrap(), log.end(), "cut at {cut}");
    let shipped = shipped.unwrap();
    if at != LogPosition::START && at.offset > 0 {
        assert_eq!(shipped.from, at, "cut at {cut}: resumed elsewhere");
    }
    assert_identical(primary, r.path());
}

#[tokio::test]
async fn successive_cuts_lose_and_repeat_nothing_and_a_restart_resumes() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), &small_segments(), 0..40).await;
    log.close().await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let mut connections = 0;
    // Every cut past the handshake (a cut inside it is a protocol error, see
    // above), so that every connection resumes.
    let mut cut = HANDSHAKE + 15;
    loop {
        connections += 1;
        let (_, synced) = sync_through(&log, &mut replica, Some(cut), None).await;
        if synced.unwrap() == log.end() {
            break;
        }
        assert_prefix(p.path(), r.path());
        cut = cut * 3 % 150_001 + HANDSHAKE;
        if connections % 4 == 0 {
            // A restart mid-segment, with a torn record at the end of the copy.
            let last = LogDir::list(r.path()).unwrap().segments.pop().unwrap();
            drop(replica);
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&last.path)
                .unwrap();
            std::io::Write::write_all(&mut file, &[0x42; 20]).unwrap();
            replica = Replica::open(r.path()).await.unwrap();
        }
        assert!(connections < 500);
    }
    assert!(connections > 5);
    assert_identical(p.path(), r.path());
}

#[tokio::test]
async fn a_flipped_byte_on_the_wire_is_detected_and_never_written() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), &small_segments(), 0..20).await;
    log.close().await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    // Past the handshake and the first message headers: in a record's header or payload.
    for flip in [
        HANDSHAKE + 17 + 5 + 2,
        HANDSHAKE + 17 + 5 + 40_000,
        HANDSHAKE + 17 + 5 + 150_000,
    ] {
        let (_, synced) = sync_through(&log, &mut replica, None, Some(flip)).await;
        let error = synced.expect_err("a flipped byte must be detected");
        assert!(
            matches!(
                error,
                Error::Corruption { .. } | Error::ReplicaProtocol { .. }
            ),
            "{error}"
        );
        assert_prefix(p.path(), r.path());
    }
    let (_, synced) = sync_through(&log, &mut replica, None, None).await;
    assert_eq!(synced.unwrap(), log.end());
    assert_identical(p.path(), r.path());
}

#[tokio::test]
async fn a_flipped_byte_in_a_block_trailer_is_detected_and_never_written() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    // Records that end 3 bytes before a block's end: the next one leaves a trailer.
    log.append(vec![7u8; walcodec::BLOCK_SIZE - 7 - 3])
        .await
        .unwrap();
    log.append(b"next").await.unwrap();
    log.close().await.unwrap();
    let trailer = (walcodec::BLOCK_SIZE - 3) as u64;
    // The handshake, the segment message (17), the data message's header (5).
    let flip = HANDSHAKE + 17 + 5 + trailer + 1;
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (_, synced) = sync_through(&log, &mut replica, None, Some(flip)).await;
    assert!(
        matches!(synced, Err(Error::ReplicaProtocol { .. })),
        "{synced:?}"
    );
    assert!(replica.end().offset <= trailer, "nothing past the trailer");
    assert_prefix(p.path(), r.path());
    let (_, synced) = sync_through(&log, &mut replica, None, None).await;
    assert_eq!(synced.unwrap(), log.end());
    assert_identical(p.path(), r.path());
}

#[tokio::test]
async fn several_replicas_over_tcp_while_the_primary_rotates_and_purges() {
    let p = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(128 * 1024)
        .retain_bytes(400 * 1024)
        .open(p.path())
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn({
        let log = log.clone();
        async move {
            let mut serving = Vec::new();
            for _ in 0..3 {
                let (conn, _) = listener.accept().await.unwrap();
                let log = log.clone();
                serving.push(tokio::spawn(async move { log.serve_replica(conn).await }));
            }
            let mut stats = Vec::new();
            for s in serving {
                stats.push(s.await.unwrap().unwrap());
            }
            stats
        }
    });
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let mut replica = Replica::open(dir.path()).await.unwrap();
        let conn = TcpStream::connect(addr).await.unwrap();
        let task = tokio::spawn(async move {
            let end = replica.sync_from(conn).await.map(|s| s.end);
            (replica, end)
        });
        replicas.push((dir, task));
    }
    for i in 0..150 {
        log.append(record(i)).await.unwrap();
    }
    let end = log.close().await.unwrap();
    let stats = server.await.unwrap();
    assert!(stats.iter().all(|s| s.to == end));
    assert!(
        LogDir::list(p.path()).unwrap().segments[0].number > 1,
        "nothing purged"
    );
    for (dir, task) in replicas {
        let (replica, synced) = task.await.unwrap();
        assert_eq!(synced.unwrap(), end);
        drop(replica);
        // The replica keeps what the primary purged since.
        assert_eq!(LogDir::list(dir.path()).unwrap().segments[0].number, 1);
        assert_identical(p.path(), dir.path());
        let copy = LogDir::open(dir.path()).await.unwrap();
        assert_eq!(read_all(&copy).await.len(), 150);
    }
}

#[tokio::test]
async fn primaries_with_preallocation_and_recycled_segments_are_copied_exactly() {
    for options in [
        LogDir::builder()
            .max_segment_bytes(150 * 1024)
            .writer(WriterOptions::new().preallocate(1 << 20).clone())
            .clone(),
        LogDir::builder()
            .max_segment_bytes(150 * 1024)
            .recycle_segments(2)
            .retain_bytes(300 * 1024)
            .clone(),
    ] {
        let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let log = primary(p.path(), &options, 0..30).await;
        let mut replica = Replica::open(r.path()).await.unwrap();
        let appending = tokio::spawn({
            let log = log.clone();
            async move {
                for i in 30..60 {
                    log.append(record(i)).await.unwrap();
                }
                log.close().await.unwrap()
            }
        });
        let (shipped, synced) = sync_over_duplex(&log, &mut replica).await;
        let end = appending.await.unwrap();
        shipped.unwrap();
        assert_eq!(synced.unwrap(), end, "{options:?}");
        drop(replica);
        assert_identical(p.path(), r.path());
        let copy = LogDir::open(r.path()).await.unwrap();
        let records = read_all(&copy).await;
        assert_eq!(records.last(), Some(&record(59)));
    }
}

#[tokio::test]
async fn a_replica_behind_a_purge_is_too_far_behind_on_both_ends() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), &small_segments(), 0..10).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (_, synced) = sync_through(&log, &mut replica, Some(150_000), None).await;
    let at = synced.unwrap();
    assert_eq!(at.segment, 1);
    assert!(at.offset > 0);
    for i in 10..60 {
        log.append(record(i)).await.unwrap();
    }
    let end = log.end();
    log.purge_before(end).await.unwrap();
    let first = log.start();
    assert!(first.segment > 1);
    let (served, synced) = sync_over_duplex(&log, &mut replica).await;
    assert!(
        matches!(served, Err(Error::ReplicaTooFarBehind { first_available }) if first_available == first)
    );
    assert!(
        matches!(synced, Err(Error::ReplicaTooFarBehind { first_available }) if first_available == first)
    );
    assert_eq!(replica.end(), at, "nothing skipped");
}

#[tokio::test]
async fn a_truncation_below_the_replica_is_a_divergence_on_both_ends() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    let mut checkpoint = LogPosition::START;
    for i in 0..10 {
        let end = log.append(record(i)).await.unwrap();
        if i == 4 {
            checkpoint = end;
        }
    }
    let mut replica = Replica::open(r.path()).await.unwrap();
    sync_until(&log, &mut replica, log.end()).await;
    log.truncate_after(checkpoint).await.unwrap();
    let (served, synced) = sync_over_duplex(&log, &mut replica).await;
    assert!(
        matches!(served, Err(Error::ReplicaDiverged { .. })),
        "{served:?}"
    );
    assert!(
        matches!(synced, Err(Error::ReplicaDiverged { .. })),
        "{synced:?}"
    );

    // A truncation while a replica is connected and caught up, then appends past
    // where it was: the replica is told, never sent the new bytes after its old ones.
    let r2 = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r2.path()).await.unwrap();
    let mut durable = replica.durable_end();
    let target = log.end();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let syncing = tokio::spawn(async move { replica.sync_from(b).await });
    durable.wait_for(|&end| end >= target).await.unwrap();
    log.truncate_after(LogPosition::new(1, 0)).await.unwrap();
    for i in 0..10 {
        log.append(record(i + 100)).await.unwrap();
    }
    let served = serving.await.unwrap();
    let synced = syncing.await.unwrap();
    assert!(
        matches!(served, Err(Error::ReplicaDiverged { .. })),
        "{served:?}"
    );
    assert!(
        matches!(synced, Err(Error::ReplicaDiverged { .. })),
        "{synced:?}"
    );
}

#[tokio::test]
async fn a_promoted_replica_appends_on_and_reopens_whole() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = primary(p.path(), &small_segments(), 0..30).await;
    log.close().await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (_, synced) = sync_over_duplex(&log, &mut replica).await;
    assert_eq!(synced.unwrap(), log.end());
    let promoted = replica.promote().await.unwrap();
    assert_eq!(promoted.end(), log.end());
    for i in 30..40 {
        promoted.append(record(i)).await.unwrap();
    }
    promoted.close().await.unwrap();
    let reopened = LogDir::open(r.path()).await.unwrap();
    assert_eq!(
        read_all(&reopened).await,
        (0..40).map(record).collect::<Vec<_>>()
    );
}

/// A peer speaking the protocol by hand (as a replica when `position` is not the
/// fake primary's 000001:0).
async fn hello(conn: &mut DuplexStream, version: u32, position: LogPosition) {
    let from_replica = position != LogPosition::new(1, 0);
    let mut bytes = b"WALCREPL".to_vec();
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&u32::from(from_replica).to_le_bytes());
    bytes.extend_from_slice(&position.segment.to_le_bytes());
    bytes.extend_from_slice(&position.offset.to_le_bytes());
    // Its identity: the replica's, of a copy without id or record; the
    // primary's, of a log with one epoch.
    if from_replica {
        bytes.push(b'I');
        bytes.extend_from_slice(&[0; 16 + 1 + 20 + 4]);
    } else {
        bytes.extend_from_slice(&crate::common::primary_identity(7));
    }
    conn.write_all(&bytes).await.unwrap();
}

#[tokio::test]
async fn hostile_replicas_get_typed_errors() {
    let p = tempfile::tempdir().unwrap();
    let log = primary(p.path(), &small_segments(), 0..5).await;
    let serve = |log: &LogDir| {
        let (a, b) = tokio::io::duplex(1 << 16);
        let log = log.clone();
        (tokio::spawn(async move { log.serve_replica(a).await }), b)
    };
    // A version from the future.
    let (served, mut peer) = serve(&log);
    hello(
        &mut peer,
        REPLICATION_PROTOCOL_VERSION + 1,
        LogPosition::START,
    )
    .await;
    assert!(
        matches!(served.await.unwrap(), Err(Error::ReplicaVersion { theirs, .. }) if theirs == REPLICATION_PROTOCOL_VERSION + 1)
    );
    // Garbage.
    let (served, mut peer) = serve(&log);
    peer.write_all(&[0xee; 32]).await.unwrap();
    assert!(matches!(
        served.await.unwrap(),
        Err(Error::ReplicaProtocol { .. })
    ));
    // A truncated hello.
    let (served, mut peer) = serve(&log);
    peer.write_all(b"WALC").await.unwrap();
    peer.shutdown().await.unwrap();
    assert!(matches!(
        served.await.unwrap(),
        Err(Error::ReplicaProtocol { .. })
    ));
    // A segment far ahead, a position past the end.
    for position in [
        LogPosition::new(1 << 40, 0),
        LogPosition::new(log.end().segment, 1 << 40),
    ] {
        let (served, mut peer) = serve(&log);
        hello(&mut peer, REPLICATION_PROTOCOL_VERSION, position).await;
        assert!(matches!(
            served.await.unwrap(),
            Err(Error::ReplicaDiverged { .. })
        ));
    }
    // Another primary.
    let (served, mut peer) = serve(&log);
    hello(
        &mut peer,
        REPLICATION_PROTOCOL_VERSION,
        LogPosition::new(1, 0),
    )
    .await;
    assert!(matches!(
        served.await.unwrap(),
        Err(Error::ReplicaProtocol { .. })
    ));
    // Bytes after the hello.
    let (served, mut peer) = serve(&log);
    hello(&mut peer, REPLICATION_PROTOCOL_VERSION, LogPosition::START).await;
    peer.write_all(b"more").await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), async {
        let mut sink = vec![0u8; 1 << 16];
        loop {
            if peer.read(&mut sink).await.unwrap_or(0) == 0 {
                break;
            }
        }
        served.await.unwrap()
    })
    .await
    .unwrap();
    assert!(
        matches!(result, Err(Error::ReplicaProtocol { .. })),
        "{result:?}"
    );
}

/// A fake primary: its hello, then `body`, then the connection ends.
async fn from_fake_primary(
    replica: &mut Replica,
    version: u32,
    body: Vec<u8>,
) -> Result<LogPosition, Error> {
    let identity = crate::common::primary_identity(7);
    from_fake_primary_of(replica, version, LogPosition::new(1, 0), identity, body).await
}

/// A fake primary that sends its hello (its durable end `end`), reads the
/// replica's, then sends `identity` (its answer to the replica's identity) and `body`.
async fn from_fake_primary_of(
    replica: &mut Replica,
    version: u32,
    end: LogPosition,
    identity: Vec<u8>,
    body: Vec<u8>,
) -> Result<LogPosition, Error> {
    let (mut a, b) = tokio::io::duplex(1 << 16);
    let fake = tokio::spawn(async move {
        let mut hello = b"WALCREPL".to_vec();
        hello.extend_from_slice(&version.to_le_bytes());
        hello.extend_from_slice(&0u32.to_le_bytes());
        hello.extend_from_slice(&end.segment.to_le_bytes());
        hello.extend_from_slice(&end.offset.to_le_bytes());
        let _ = a.write_all(&hello).await;
        let mut theirs = [0u8; 32];
        let _ = a.read_exact(&mut theirs).await;
        let _ = a.write_all(&identity).await;
        let _ = a.write_all(&body).await;
    });
    let result = tokio::time::timeout(Duration::from_secs(30), replica.sync_from(b))
        .await
        .expect("bounded time");
    fake.abort();
    result.map(|s| s.end)
}

/// The identity `log`'s primary sends a replica whose last record ends at `end`
/// with payload `last`: its id, that record's checksum, its history.
fn identity_of(log: &LogDir, end: LogPosition, last: &[u8]) -> Vec<u8> {
    let mut m = vec![b'I'];
    m.extend_from_slice(&log.log_id().as_u128().to_le_bytes());
    m.push(1);
    m.extend_from_slice(&end.segment.to_le_bytes());
    m.extend_from_slice(&end.offset.to_le_bytes());
    m.extend_from_slice(&crc32c::crc32c(last).to_le_bytes());
    let history = log.history();
    m.extend_from_slice(&(history.epochs.len() as u32).to_le_bytes());
    for epoch in &history.epochs {
        for field in [
            epoch.number,
            epoch.id,
            epoch.start.segment,
            epoch.start.offset,
        ] {
            m.extend_from_slice(&field.to_le_bytes());
        }
    }
    m
}

fn segment_message(segment: u64, offset: u64) -> Vec<u8> {
    let mut m = vec![b'S'];
    m.extend_from_slice(&segment.to_le_bytes());
    m.extend_from_slice(&offset.to_le_bytes());
    m
}

fn data_message(bytes: &[u8]) -> Vec<u8> {
    let mut m = vec![b'D'];
    m.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    m.extend_from_slice(bytes);
    m
}

#[tokio::test]
async fn hostile_primaries_get_typed_errors_and_write_nothing() {
    let r = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let v = REPLICATION_PROTOCOL_VERSION;
    let result = from_fake_primary(&mut replica, v + 1, Vec::new()).await;
    assert!(matches!(result, Err(Error::ReplicaVersion { theirs, .. }) if theirs == v + 1));
    let result = from_fake_primary(&mut replica, v, vec![b'Z'; 10]).await;
    assert!(matches!(result, Err(Error::ReplicaProtocol { .. })));
    // Data before any segment; a data message larger than the bound.
    let result = from_fake_primary(&mut replica, v, data_message(b"abc")).await;
    assert!(matches!(result, Err(Error::ReplicaProtocol { .. })));
    let mut huge = segment_message(1, 0);
    huge.push(b'D');
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    let result = from_fake_primary(&mut replica, v, huge).await;
    assert!(matches!(result, Err(Error::ReplicaProtocol { .. })));
    // Garbage records; endless zeros; a seal where no record ends.
    let mut garbage = segment_message(1, 0);
    for _ in 0..100 {
        garbage.extend(data_message(&[0xa5; 60_000]));
    }
    let result = from_fake_primary(&mut replica, v, garbage).await;
    assert!(
        matches!(result, Err(Error::Corruption { offset: 0, .. })),
        "{result:?}"
    );
    let mut zeros = segment_message(1, 0);
    let chunk = data_message(&vec![0; 1 << 20]);
    for _ in 0..70 {
        zeros.extend_from_slice(&chunk);
    }
    let result = from_fake_primary(&mut replica, v, zeros).await;
    assert!(
        matches!(
            result,
            Err(Error::ReplicaProtocol { ref reason }) if reason.contains("largest record")
        ),
        "{result:?}"
    );
    let mut seal = segment_message(1, 0);
    seal.push(b'E');
    seal.extend_from_slice(&500u64.to_le_bytes());
    let result = from_fake_primary(&mut replica, v, seal).await;
    assert!(matches!(result, Err(Error::ReplicaProtocol { .. })));
    // The replica wrote nothing: still empty, and a valid log directory.
    assert_eq!(replica.end().offset, 0);
    let segments = LogDir::list(r.path()).unwrap().segments;
    assert!(segments.iter().all(|s| s.len == 0), "{segments:?}");
    // Segment far ahead of a replica that holds records.
    let p = tempfile::tempdir().unwrap();
    let log = primary(p.path(), &small_segments(), 0..3).await;
    sync_until(&log, &mut replica, log.end()).await;
    let at = replica.end();
    assert!(at.offset > 0);
    // (The fake speaks for the log the replica holds: its id, history and last
    // record, so only the segment message is wrong.)
    let last = read_all(&log).await.pop().unwrap();
    let identity = identity_of(&log, at, &last);
    let result = from_fake_primary_of(
        &mut replica,
        v,
        log.end(),
        identity,
        segment_message(1 << 40, 0),
    )
    .await;
    assert!(
        matches!(result, Err(Error::ReplicaProtocol { .. })),
        "{result:?}"
    );
    assert_eq!(replica.end(), at);
    assert_prefix(p.path(), r.path());
}

#[tokio::test]
async fn a_refused_seal_still_reports_the_records_written_before_it() {
    // Found by the replica_sync fuzz target: a seal refused mid-stream dropped the
    // segment's unsynced records without reporting them, so `end()` lagged what the
    // replica held.
    let r = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let mut log = bytes::BytesMut::new();
    let end = walcodec::LogEncoder::with_offset(0)
        .encode_record(b"first", &mut log)
        .end;
    let mut body = segment_message(1, 0);
    body.extend(data_message(&log));
    body.push(b'E');
    body.extend_from_slice(&(end + 1).to_le_bytes());
    let result = from_fake_primary(&mut replica, REPLICATION_PROTOCOL_VERSION, body).await;
    assert!(
        matches!(result, Err(Error::ReplicaProtocol { .. })),
        "{result:?}"
    );
    assert_eq!(replica.end(), LogPosition::new(1, end));
    assert_eq!(*replica.durable_end().borrow(), LogPosition::new(1, end));
}

#[tokio::test]
async fn a_segment_numbered_0_or_the_last_number_is_refused_and_the_replica_kept() {
    // Found by the replica_sync fuzz target: an empty replica took segment 0 from a
    // primary, a number no log directory lists, and was left without segments.
    for number in [0, u64::MAX] {
        let r = tempfile::tempdir().unwrap();
        let mut replica = Replica::open(r.path()).await.unwrap();
        let result = from_fake_primary(
            &mut replica,
            REPLICATION_PROTOCOL_VERSION,
            segment_message(number, 0),
        )
        .await;
        assert!(
            matches!(result, Err(Error::ReplicaProtocol { .. })),
            "{result:?}"
        );
        replica.close().await.unwrap();
        let listed = LogDir::list(r.path()).unwrap().segments;
        assert_eq!(listed.len(), 1, "{number}: {listed:?}");
    }
}

#[tokio::test]
async fn a_seal_of_the_second_to_last_segment_number_is_refused() {
    // A primary that seals segment u64::MAX - 1 would leave the replica a segment
    // numbered u64::MAX, with no next one (a debug build overflowed on the next
    // segment message).
    let r = tempfile::tempdir().unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let mut body = segment_message(u64::MAX - 1, 0);
    body.push(b'E');
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend(segment_message(5, 0));
    let result = from_fake_primary(&mut replica, REPLICATION_PROTOCOL_VERSION, body).await;
    assert!(
        matches!(result, Err(Error::ReplicaProtocol { .. })),
        "{result:?}"
    );
    replica.close().await.unwrap();
    let listed = LogDir::list(r.path()).unwrap().segments;
    assert!(listed.iter().all(|s| s.number != u64::MAX), "{listed:?}");
    // Still a replica, still a log directory.
    Replica::open(r.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    LogDir::open(r.path()).await.unwrap().close().await.unwrap();
}

/// A replica's acknowledgement: its durable end.
fn ack_message(end: LogPosition) -> Vec<u8> {
    let mut m = vec![b'A'];
    m.extend_from_slice(&end.segment.to_le_bytes());
    m.extend_from_slice(&end.offset.to_le_bytes());
    m
}

#[tokio::test]
async fn acknowledgements_out_of_bounds_are_refused() {
    let p = tempfile::tempdir().unwrap();
    let log = primary(p.path(), &small_segments(), 0..5).await;
    let end = log.end();
    for acks in [
        // Past what was sent (the log's end is all it can have been sent).
        vec![LogPosition::new(end.segment, end.offset + 1)],
        vec![LogPosition::new(u64::MAX, u64::MAX)],
        // Back before the last one.
        vec![LogPosition::new(1, 1), LogPosition::new(1, 0)],
        // Before where the replica started.
        vec![LogPosition::START],
    ] {
        let (a, mut peer) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(a).await }
        });
        hello(&mut peer, REPLICATION_PROTOCOL_VERSION, LogPosition::START).await;
        for ack in &acks {
            peer.write_all(&ack_message(*ack)).await.unwrap();
        }
        let result = tokio::time::timeout(Duration::from_secs(10), async {
            let mut sink = vec![0u8; 1 << 16];
            while peer.read(&mut sink).await.unwrap_or(0) != 0 {}
            served.await.unwrap()
        })
        .await
        .unwrap();
        assert!(
            matches!(result, Err(Error::ReplicaProtocol { .. })),
            "{acks:?}: {result:?}"
        );
    }
}
