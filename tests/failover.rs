//! Failover and failback: a replica checks, before a byte is written, that it is
//! a copy of its primary's log (`Error::ReplicaOfAnotherLog`) whose history has
//! not forked from the primary's (`Error::ReplicaDiverged { common, .. }`);
//! `Replica::rewind` to `common` makes a former primary (or a replica that
//! outran the one promoted) follow the new primary to a byte-identical copy; and
//! `sync_from` tells a primary's clean close from a cut (`SyncEnd`).

use crate::common::{assert_identical, catch_up};
use std::collections::BTreeMap;

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use walcodec::{
    Error, LogDir, LogDirOptions, LogPosition, Replica, ShipStats, SyncEnd,
    REPLICATION_PROTOCOL_VERSION,
};

/// Records of awkward sizes: some cross blocks, some fill most of one.
fn record(tag: u8, i: usize) -> Vec<u8> {
    let len = [10, 3000, 40_000, 0, 700, 32 * 1024 - 7][i % 6];
    (0..len)
        .map(|j| (i * 7 + j) as u8 ^ tag.wrapping_mul(31))
        .collect()
}

fn small_segments() -> LogDirOptions {
    LogDir::builder().max_segment_bytes(128 * 1024).clone()
}

async fn append(log: &LogDir, tag: u8, records: std::ops::Range<usize>) -> LogPosition {
    let mut end = log.end();
    for i in records {
        end = log.append(record(tag, i)).await.unwrap();
    }
    end
}

async fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    let mut reader = walcodec::DirReader::open(dir, LogPosition::START)
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    out
}

/// Every file of the directory but its lock: what "nothing written" compares.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "LOCK")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// `copy` holds every segment of `primary`, byte for byte, and none after.
fn assert_holds(primary: &Path, copy: &Path) {
    let list = LogDir::list(primary).unwrap();
    for segment in &list.segments {
        let theirs = std::fs::read(copy.join(segment.path.file_name().unwrap())).unwrap();
        assert!(
            theirs == std::fs::read(&segment.path).unwrap(),
            "segment {} differs",
            segment.number
        );
    }
    assert_eq!(
        LogDir::list(copy).unwrap().segments.last().unwrap().number,
        list.segments.last().unwrap().number
    );
}

/// One connection over an in-memory stream, for a replica the primary refuses
/// (both ends return at once).
async fn connect(
    log: &LogDir,
    replica: &mut Replica,
) -> (Result<ShipStats, Error>, Result<SyncEnd, Error>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let synced = tokio::time::timeout(Duration::from_secs(30), replica.sync_from(b))
        .await
        .expect("a refusal is prompt");
    (serving.await.unwrap(), synced)
}

/// Both ends refused the replica as diverged, sharing the log up to `common`.
fn assert_diverged(
    (served, synced): &(Result<ShipStats, Error>, Result<SyncEnd, Error>),
    common: LogPosition,
) {
    for result in [served.as_ref().map(|_| ()), synced.as_ref().map(|_| ())] {
        assert!(
            matches!(result, Err(Error::ReplicaDiverged { common: c, .. }) if *c == common),
            "expected a divergence at {common}: {result:?}"
        );
    }
}

/// Failback: 100 records shipped; the old primary appends 50 that never reach the
/// replica; the replica is promoted and appends 80; the old primary, reopened as
/// a replica of the new one, is refused as diverged at the end of the 100,
/// rewound there, and then follows to a byte-identical copy. `rotate_at_fork`:
/// the fork falls on a segment boundary; `purge`: the new primary purged the
/// segments before the fork first.
async fn failback(rotate_at_fork: bool, purge: bool) {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = small_segments().open(p.path()).await.unwrap();
    append(&old, 0, 0..100).await;
    if rotate_at_fork {
        old.rotate().await.unwrap();
    }
    let shipped = old.end();
    assert_eq!(shipped.offset == 0, rotate_at_fork);
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&old, &mut replica).await;
    assert_eq!(
        replica.log_id(),
        Some(old.log_id()),
        "the replica took the id"
    );
    // 50 records the replica never gets; then the old primary goes away.
    append(&old, 1, 0..50).await;
    old.close().await.unwrap();
    drop(old);

    let new = replica.promote_with(&small_segments()).await.unwrap();
    append(&new, 2, 0..80).await;
    if purge {
        let purged = new.purge_before(shipped).await.unwrap();
        assert!(!purged.is_empty(), "nothing purged");
    }
    let history = new.history();
    assert_eq!(history.epochs.len(), 2);
    assert_eq!(history.epochs[1].start, shipped, "promoted at its end");

    // The old primary's directory, opened as a replica of the new one.
    let mut back = Replica::open(p.path()).await.unwrap();
    assert_eq!(back.log_id(), Some(new.log_id()));
    let before = snapshot(p.path());
    let refused = connect(&new, &mut back).await;
    assert_diverged(&refused, shipped);
    assert_eq!(
        snapshot(p.path()),
        before,
        "the diverged replica was written"
    );

    back.rewind(shipped).await.unwrap();
    assert_eq!(back.end(), shipped);
    catch_up(&new, &mut back).await;
    assert_eq!(
        back.history(),
        &history,
        "its history follows the new primary's"
    );
    // A clean close: the old primary hears the goodbye at the new one's end.
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let new = new.clone();
        async move { new.serve_replica(a).await }
    });
    let end = new.close().await.unwrap();
    let synced = back.sync_from(b).await.unwrap();
    serving.await.unwrap().unwrap();
    assert_eq!(synced.end, end);
    assert!(synced.primary_closed_cleanly);
    back.close().await.unwrap();
    if purge {
        // The old primary keeps the segments the new one purged.
        assert_holds(r.path(), p.path());
    } else {
        assert_identical(r.path(), p.path());
    }
    let expected: Vec<Vec<u8>> = (0..100)
        .map(|i| record(0, i))
        .chain((0..80).map(|i| record(2, i)))
        .collect();
    let copied = read_all(p.path()).await;
    if purge {
        assert!(expected.ends_with(&copied) && copied.len() >= 80);
    } else {
        assert_eq!(copied, expected);
    }
    // Reopened as a log, it is the new primary's, history and all.
    let reopened = LogDir::open(p.path()).await.unwrap();
    assert_eq!(reopened.history(), history);
    reopened.close().await.unwrap();
}

#[tokio::test]
async fn failback_mid_segment_is_found_and_rewound() {
    failback(false, false).await;
}

#[tokio::test]
async fn failback_at_a_segment_boundary_is_found_and_rewound() {
    failback(true, false).await;
}

#[tokio::test]
async fn failback_after_a_purge_is_found_and_rewound() {
    failback(false, true).await;
}

/// Failback where the fork falls inside a recycled segment: the old primary
/// reuses purged files (RocksDB's recyclable records), so the segment it forked
/// in, and the ones it appended after, are files that held older segments; past
/// the end of what was written they still hold those bytes. The old primary's
/// records that never reached the replica are found, rewound and replaced, and
/// what the copy holds reads back as the new primary's log, record for record,
/// its segments byte-identical to the new primary's up to their ends.
#[tokio::test]
async fn failback_inside_a_recycled_segment_is_found_and_rewound() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let recycling = small_segments().recycle_segments(4).clone();
    let old = recycling.open(p.path()).await.unwrap();
    append(&old, 0, 0..40).await;
    // Purged segments go to the pool; the next segments are their files.
    let pooled = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".recycle")
            })
            .count()
    };
    let purged = old.purge_before(old.end()).await.unwrap();
    assert!(purged.len() >= 2, "a pool to recycle from: {purged:?}");
    let pool = pooled(p.path());
    assert!(pool >= 2, "purged files kept for reuse: {pool}");
    old.rotate().await.unwrap();
    assert_eq!(
        pooled(p.path()),
        pool - 1,
        "the new segment is a recycled file"
    );
    // Less than a segment: the fork falls inside the recycled one.
    let first_new = old.end().segment;
    assert!(first_new > *purged.last().unwrap());
    append(&old, 3, 0..6).await;
    let shipped = old.end();
    assert_eq!(shipped.segment, first_new);
    assert_ne!(shipped.offset, 0, "the fork is inside a segment");
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&old, &mut replica).await;
    // Records the replica never gets, in the recycled segment and the next ones.
    append(&old, 1, 0..50).await;
    old.close().await.unwrap();
    drop(old);

    let new = replica.promote_with(&recycling).await.unwrap();
    append(&new, 2, 0..30).await;
    let mut back = Replica::open(p.path()).await.unwrap();
    let before = snapshot(p.path());
    let refused = connect(&new, &mut back).await;
    assert_diverged(&refused, shipped);
    assert_eq!(
        snapshot(p.path()),
        before,
        "the diverged replica was written"
    );
    back.rewind(shipped).await.unwrap();
    assert_eq!(back.end(), shipped);
    catch_up(&new, &mut back).await;
    back.close().await.unwrap();
    let end = new.close().await.unwrap();
    let expected: Vec<Vec<u8>> = (0..6)
        .map(|i| record(3, i))
        .chain((0..30).map(|i| record(2, i)))
        .collect();
    let copied = read_all(p.path()).await;
    assert_eq!(
        copied,
        read_all(r.path()).await,
        "the copy reads as the new primary"
    );
    assert!(
        copied.ends_with(&expected),
        "{} records: {:?}",
        copied.len(),
        copied
            .iter()
            .map(|r| (r.len(), r.first().copied()))
            .collect::<Vec<_>>()
    );
    // Each segment of the copy is the new primary's up to its end (a recycled
    // file may hold old bytes past it).
    for segment in LogDir::list(r.path()).unwrap().segments {
        let theirs = std::fs::read(&segment.path).unwrap();
        let ours = std::fs::read(p.path().join(segment.path.file_name().unwrap())).unwrap();
        let len = if segment.number == end.segment {
            end.offset as usize
        } else {
            theirs.len()
        };
        assert!(ours.len() >= len, "segment {} short", segment.number);
        assert!(
            ours[..len] == theirs[..len],
            "segment {} differs",
            segment.number
        );
    }
}

#[tokio::test]
async fn a_truncation_while_the_replica_was_away_is_found() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    let mut ends = Vec::new();
    for i in 0..10 {
        ends.push(log.append(record(0, i)).await.unwrap());
    }
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&log, &mut replica).await;
    // Away: the primary cuts after record 4 and appends 10 others.
    let cut = ends[4];
    log.truncate_after(cut).await.unwrap();
    append(&log, 1, 0..10).await;
    let before = snapshot(r.path());
    let refused = connect(&log, &mut replica).await;
    assert_diverged(&refused, cut);
    assert_eq!(
        snapshot(r.path()),
        before,
        "the diverged replica was written"
    );
    replica.rewind(cut).await.unwrap();
    catch_up(&log, &mut replica).await;
    assert_eq!(replica.history(), &log.history());
    log.close().await.unwrap();
    replica.close().await.unwrap();
    assert_identical(p.path(), r.path());
    let expected: Vec<Vec<u8>> = (0..5)
        .map(|i| record(0, i))
        .chain((0..10).map(|i| record(1, i)))
        .collect();
    assert_eq!(read_all(r.path()).await, expected);
}

#[tokio::test]
async fn a_truncation_below_what_a_connected_replica_holds_is_found() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    let mut ends = Vec::new();
    for i in 0..10 {
        ends.push(log.append(record(0, i)).await.unwrap());
    }
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let mut end = replica.durable_end();
    let target = log.end();
    let truncating = async {
        end.wait_for(|&e| e >= target).await.unwrap();
        log.truncate_after(ends[3]).await.unwrap();
        // Wakes the shipping task, which finds the cut.
        log.append(record(1, 0)).await.unwrap();
    };
    let (synced, ()) = tokio::join!(replica.sync_from(b), truncating);
    let refused = (serving.await.unwrap(), synced);
    assert_diverged(&refused, ends[3]);
    replica.rewind(ends[3]).await.unwrap();
    catch_up(&log, &mut replica).await;
    assert_eq!(replica.history(), &log.history());
    log.close().await.unwrap();
    replica.close().await.unwrap();
    assert_identical(p.path(), r.path());
}

#[tokio::test]
async fn a_replica_of_another_log_is_refused_and_not_written() {
    let (a, b, r) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log_a = LogDir::open(a.path()).await.unwrap();
    append(&log_a, 0, 0..10).await;
    let log_b = LogDir::open(b.path()).await.unwrap();
    append(&log_b, 1, 0..20).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&log_a, &mut replica).await;
    let before = snapshot(r.path());
    let (served, synced) = connect(&log_b, &mut replica).await;
    for result in [served.map(|_| ()), synced.map(|_| ())] {
        assert!(
            matches!(result, Err(Error::ReplicaOfAnotherLog { primary, replica })
                if primary == log_b.log_id() && replica == log_a.log_id()),
            "{result:?}"
        );
    }
    assert_eq!(
        snapshot(r.path()),
        before,
        "records of another log were written"
    );
    assert_eq!(
        read_all(r.path()).await,
        (0..10).map(|i| record(0, i)).collect::<Vec<_>>()
    );
    log_a.close().await.unwrap();
    log_b.close().await.unwrap();
}

/// Histories that agree while the records differ (a log whose `HISTORY` was
/// copied from another): the last record's checksum finds it, and nothing
/// shared is proven.
#[tokio::test]
async fn the_last_records_checksum_finds_what_histories_miss() {
    let (a, b, r) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log_a = LogDir::open(a.path()).await.unwrap();
    // Its last record not empty: two empty records are the same record.
    append(&log_a, 0, 0..11).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&log_a, &mut replica).await;
    log_a.close().await.unwrap();
    // Log B: A's history, other records (more of them, so it ends past A).
    std::fs::copy(a.path().join("HISTORY"), b.path().join("HISTORY")).unwrap();
    let log_b = LogDir::open(b.path()).await.unwrap();
    assert_eq!(log_b.log_id(), replica.log_id().unwrap());
    append(&log_b, 1, 0..30).await;
    let before = snapshot(r.path());
    let refused = connect(&log_b, &mut replica).await;
    assert_diverged(&refused, LogPosition::START);
    assert_eq!(snapshot(r.path()), before);
    // Rewound to the start, it copies B whole.
    replica.rewind(LogPosition::START).await.unwrap();
    assert_eq!(read_all(r.path()).await, Vec::<Vec<u8>>::new());
    catch_up(&log_b, &mut replica).await;
    log_b.close().await.unwrap();
    replica.close().await.unwrap();
    assert_identical(b.path(), r.path());
}

/// A replica that outran the one promoted, two promotions ago.
#[tokio::test]
async fn a_stale_replica_two_promotions_behind_is_rewound_and_follows() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let p0 = small_segments().open(dirs[0].path()).await.unwrap();
    let first = append(&p0, 0, 0..100).await;
    let mut r1 = Replica::open(dirs[1].path()).await.unwrap();
    let mut stale = Replica::open(dirs[3].path()).await.unwrap();
    catch_up(&p0, &mut r1).await;
    append(&p0, 1, 0..20).await;
    // Only the stale one gets the 20.
    catch_up(&p0, &mut stale).await;
    p0.close().await.unwrap();

    let p1 = r1.promote_with(&small_segments()).await.unwrap();
    append(&p1, 2, 0..30).await;
    let mut r2 = Replica::open(dirs[2].path()).await.unwrap();
    catch_up(&p1, &mut r2).await;
    p1.close().await.unwrap();
    let p2 = r2.promote_with(&small_segments()).await.unwrap();
    append(&p2, 3, 0..10).await;
    assert_eq!(p2.history().epochs.len(), 3);

    let before = snapshot(dirs[3].path());
    let refused = connect(&p2, &mut stale).await;
    assert_diverged(&refused, first);
    assert_eq!(snapshot(dirs[3].path()), before);
    stale.rewind(first).await.unwrap();
    catch_up(&p2, &mut stale).await;
    assert_eq!(stale.history(), &p2.history());
    p2.close().await.unwrap();
    stale.close().await.unwrap();
    assert_identical(dirs[2].path(), dirs[3].path());
    let expected: Vec<Vec<u8>> = (0..100)
        .map(|i| record(0, i))
        .chain((0..30).map(|i| record(2, i)))
        .chain((0..10).map(|i| record(3, i)))
        .collect();
    assert_eq!(read_all(dirs[3].path()).await, expected);
}

#[tokio::test]
async fn a_replica_that_holds_everything_follows_a_promoted_one_without_rewind() {
    // The old primary stopped exactly where the replica was promoted: no fork.
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = LogDir::open(p.path()).await.unwrap();
    append(&old, 0, 0..20).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&old, &mut replica).await;
    old.close().await.unwrap();
    let new = replica.promote().await.unwrap();
    append(&new, 1, 0..20).await;
    let mut back = Replica::open(p.path()).await.unwrap();
    catch_up(&new, &mut back).await;
    new.close().await.unwrap();
    back.close().await.unwrap();
    assert_identical(r.path(), p.path());
}

#[tokio::test]
async fn rewind_refuses_positions_it_cannot_cut_at() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    let at = append(&log, 0, 0..3).await;
    append(&log, 0, 3..6).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&log, &mut replica).await;
    let end = replica.end();
    for bad in [
        LogPosition::new(end.segment, end.offset + 1),
        LogPosition::new(at.segment, at.offset - 1),
    ] {
        assert!(
            matches!(
                replica.rewind(bad).await,
                Err(Error::InvalidPosition { .. })
            ),
            "{bad}"
        );
        assert_eq!(replica.end(), end);
    }
    replica.rewind(at).await.unwrap();
    replica.close().await.unwrap();
    assert_eq!(
        read_all(r.path()).await,
        (0..3).map(|i| record(0, i)).collect::<Vec<_>>()
    );
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_clean_close_is_told_from_a_primary_that_died() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    append(&log, 0, 0..10).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();

    // Died: the serving task goes away (its socket closed), the log stays open.
    let serving = tokio::spawn({
        let log = log.clone();
        async move {
            let (conn, _) = listener.accept().await.unwrap();
            let _ = log.serve_replica(conn).await;
            listener
        }
    });
    let mut end = replica.durable_end();
    let target = log.end();
    let conn = TcpStream::connect(addr).await.unwrap();
    let killing = async {
        end.wait_for(|&e| e >= target).await.unwrap();
        serving.abort();
    };
    let (synced, ()) = tokio::join!(replica.sync_from(conn), killing);
    let synced = synced.unwrap();
    assert_eq!(synced.end, target);
    assert!(
        !synced.primary_closed_cleanly,
        "a cut taken for a clean close"
    );

    // Closed: the goodbye comes after the last record.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn({
        let log = log.clone();
        async move {
            let (conn, _) = listener.accept().await.unwrap();
            log.serve_replica(conn).await
        }
    });
    append(&log, 1, 0..5).await;
    let conn = TcpStream::connect(addr).await.unwrap();
    let closing = async { log.close().await.unwrap() };
    let (synced, end) = tokio::join!(replica.sync_from(conn), closing);
    serving.await.unwrap().unwrap();
    let synced = synced.unwrap();
    assert_eq!(synced.end, end);
    assert!(synced.primary_closed_cleanly);
    replica.close().await.unwrap();
    assert_identical(p.path(), r.path());
}

/// The replica's identity as a raw peer reads it: its id, last record (end, crc)
/// and epochs (number, id, start).
struct Said {
    log_id: u128,
    last: Option<(LogPosition, u32)>,
    epochs: Vec<[u64; 4]>,
}

async fn read_said(conn: &mut (impl AsyncRead + Unpin)) -> Said {
    let mut hello = [0u8; 32];
    conn.read_exact(&mut hello).await.unwrap();
    let mut fixed = [0u8; 1 + 16 + 1 + 16 + 4 + 4];
    conn.read_exact(&mut fixed).await.unwrap();
    assert_eq!(fixed[0], b'I');
    let u64_at = |at: usize| u64::from_le_bytes(fixed[at..at + 8].try_into().unwrap());
    let log_id = u128::from_le_bytes(fixed[1..17].try_into().unwrap());
    let last = (fixed[17] == 1).then(|| {
        (
            LogPosition::new(u64_at(18), u64_at(26)),
            u32::from_le_bytes(fixed[34..38].try_into().unwrap()),
        )
    });
    let count = u32::from_le_bytes(fixed[38..42].try_into().unwrap());
    let mut epochs = Vec::new();
    for _ in 0..count {
        let mut e = [0u8; 32];
        conn.read_exact(&mut e).await.unwrap();
        let f = |i: usize| u64::from_le_bytes(e[i * 8..i * 8 + 8].try_into().unwrap());
        epochs.push([f(0), f(1), f(2), f(3)]);
    }
    Said {
        log_id,
        last,
        epochs,
    }
}

/// A primary's hello and identity, as a hostile peer crafts them.
fn crafted(
    end: LogPosition,
    log_id: u128,
    last: Option<(LogPosition, u32)>,
    count: u32,
    epochs: &[[u64; 4]],
) -> Vec<u8> {
    let mut m = b"WALCREPL".to_vec();
    m.extend_from_slice(&REPLICATION_PROTOCOL_VERSION.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&end.segment.to_le_bytes());
    m.extend_from_slice(&end.offset.to_le_bytes());
    m.push(b'I');
    m.extend_from_slice(&log_id.to_le_bytes());
    let (pos, crc) = last.unwrap_or((LogPosition::START, 0));
    m.push(u8::from(last.is_some()));
    m.extend_from_slice(&pos.segment.to_le_bytes());
    m.extend_from_slice(&pos.offset.to_le_bytes());
    m.extend_from_slice(&crc.to_le_bytes());
    m.extend_from_slice(&count.to_le_bytes());
    for e in epochs {
        for f in e {
            m.extend_from_slice(&f.to_le_bytes());
        }
    }
    m
}

/// Records that would go on after `end` (in its segment) if the replica took
/// them.
fn more_records(end: LogPosition) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::with_offset(end.offset);
    for i in 0..5 {
        encoder.encode_record(&record(9, i), &mut buf);
    }
    let mut m = vec![b'S'];
    m.extend_from_slice(&end.segment.to_le_bytes());
    m.extend_from_slice(&end.offset.to_le_bytes());
    m.push(b'D');
    m.extend_from_slice(&(buf.len() as u32).to_le_bytes());
    m.extend_from_slice(&buf);
    m
}

/// A raw TCP peer posing as the primary, lying about its log in each way a
/// handshake can: the replica is never written to, and fails with a typed error.
#[tokio::test]
async fn a_hostile_primary_lying_about_its_history_writes_nothing() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    append(&log, 0, 0..10).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    catch_up(&log, &mut replica).await;
    log.close().await.unwrap();
    let before = snapshot(r.path());
    let end = replica.end();

    type Lie = fn(&Said, LogPosition) -> Vec<u8>;
    type Expected = fn(&Error) -> bool;
    let lies: [(&str, Lie, Expected); 6] = [
        (
            "another log id",
            |said, end| crafted(end, said.log_id ^ 1, None, 1, &[[1, 1, 1, 0]]),
            |e| matches!(e, Error::ReplicaOfAnotherLog { .. }),
        ),
        (
            "its id, a forked history",
            |said, end| {
                let mut epochs = said.epochs.clone();
                epochs[0][1] ^= 1;
                crafted(end, said.log_id, said.last, 1, &epochs)
            },
            |e| matches!(e, Error::ReplicaDiverged { common, .. } if *common == LogPosition::START),
        ),
        (
            "its id and history, another last record",
            |said, end| {
                let last = said.last.map(|(at, crc)| (at, crc ^ 1));
                crafted(end, said.log_id, last, 1, &said.epochs)
            },
            |e| matches!(e, Error::ReplicaDiverged { common, .. } if *common == LogPosition::START),
        ),
        (
            "its id and history, ending before it",
            |said, _| {
                crafted(
                    LogPosition::new(1, 0),
                    said.log_id,
                    said.last,
                    1,
                    &said.epochs,
                )
            },
            |e| matches!(e, Error::ReplicaDiverged { .. }),
        ),
        (
            "more epochs than a log keeps",
            |said, end| crafted(end, said.log_id, said.last, u32::MAX, &[]),
            |e| matches!(e, Error::ReplicaProtocol { .. }),
        ),
        (
            "epochs out of order",
            |said, end| {
                crafted(
                    end,
                    said.log_id,
                    said.last,
                    2,
                    &[[2, 1, 1, 0], [1, 2, 1, 0]],
                )
            },
            |e| matches!(e, Error::ReplicaProtocol { .. }),
        ),
    ];
    for (lie, craft, expected) in lies {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let said = read_said(&mut conn).await;
            let mut m = craft(&said, end);
            m.extend_from_slice(&more_records(end));
            let _ = conn.write_all(&m).await;
            // Whatever the replica says, until it hangs up.
            let mut sink = [0u8; 256];
            while let Ok(1..) = conn.read(&mut sink).await {}
        });
        let conn = TcpStream::connect(addr).await.unwrap();
        let synced = tokio::time::timeout(Duration::from_secs(30), replica.sync_from(conn))
            .await
            .expect("bounded time");
        fake.await.unwrap();
        match &synced {
            Err(e) if expected(e) => {}
            other => panic!("{lie}: {other:?}"),
        }
        assert_eq!(replica.end(), end, "{lie}: records written");
        assert_eq!(snapshot(r.path()), before, "{lie}: the directory changed");
    }
    // The honest echo (its own id and history, its own last record) is not
    // refused: only the shared secret keeps such a forger out.
    replica.close().await.unwrap();
}

/// A raw TCP peer posing as a replica of this log with a forked history, or with
/// a history larger than any: the primary refuses it, typed, and tells it why.
#[tokio::test]
async fn a_hostile_replica_lying_about_its_history_is_refused() {
    let p = tempfile::tempdir().unwrap();
    let log = LogDir::open(p.path()).await.unwrap();
    let end = append(&log, 0, 0..10).await;
    let id = log.log_id().as_u128();
    let epoch = log.history().epochs[0];
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "a forked epoch holding records past the end",
            replica_identity(id, end, &[[1, epoch.id ^ 1, 1, 0]], 1),
        ),
        (
            "its epoch, past the primary's end",
            replica_identity(
                id,
                LogPosition::new(end.segment, end.offset + 100),
                &[[1, epoch.id, 1, 0]],
                1,
            ),
        ),
        (
            "a history larger than any",
            replica_identity(id, end, &[], u32::MAX),
        ),
    ];
    for (case, said) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = tokio::spawn({
            let log = log.clone();
            async move {
                let (conn, _) = listener.accept().await.unwrap();
                log.serve_replica(conn).await
            }
        });
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(&said).await.unwrap();
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got).await;
        let served = serving.await.unwrap();
        assert!(
            matches!(
                served,
                Err(Error::ReplicaDiverged { .. } | Error::ReplicaProtocol { .. })
            ),
            "{case}: {served:?}"
        );
        // Its hello, then the refusal: no segment, no byte of the log.
        assert_eq!(got.len(), 32 + 1 + 1 + 48, "{case}");
        assert_eq!(got[32], b'X', "{case}");
    }
    assert_eq!(log.end(), end);
    log.close().await.unwrap();
}

/// A replica's hello at `end` and identity claiming `epochs` (`count` of them).
fn replica_identity(log_id: u128, end: LogPosition, epochs: &[[u64; 4]], count: u32) -> Vec<u8> {
    let mut m = b"WALCREPL".to_vec();
    m.extend_from_slice(&REPLICATION_PROTOCOL_VERSION.to_le_bytes());
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&end.segment.to_le_bytes());
    m.extend_from_slice(&end.offset.to_le_bytes());
    m.push(b'I');
    m.extend_from_slice(&log_id.to_le_bytes());
    m.push(0);
    m.extend_from_slice(&[0; 20]);
    m.extend_from_slice(&count.to_le_bytes());
    for e in epochs {
        for f in e {
            m.extend_from_slice(&f.to_le_bytes());
        }
    }
    m
}

/// Forwards bytes from `from` to `to` while `open` says so; bytes read while it is
/// shut are held until it opens again.
fn gate(
    mut from: impl AsyncRead + Unpin + Send + 'static,
    mut to: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    mut open: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if open.wait_for(|&o| o).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    })
}

/// A truncation while a replica is connected, at a position the primary has not
/// shipped past: the new epoch (the history message) reaches the replica before
/// any byte of it, and is durable on the replica before it holds any record of
/// it. A shut gate on the wire holds the primary's sending inside a large record
/// while records past it are appended, cut off, and replaced.
#[tokio::test]
async fn a_new_epoch_reaches_a_connected_replica_before_its_records() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    append(&log, 0, 0..5).await;
    let mut replica = Replica::open(r.path()).await.unwrap();
    // Primary -> gate -> replica, little buffered on the way; acknowledgements
    // go straight back.
    let (primary_side, primary_proxy) = tokio::io::duplex(512);
    let (replica_side, replica_proxy) = tokio::io::duplex(512);
    let (from_primary, mut to_primary) = tokio::io::split(primary_proxy);
    let (mut from_replica, to_replica) = tokio::io::split(replica_proxy);
    let (open, opened) = tokio::sync::watch::channel(true);
    let down = gate(from_primary, to_replica, opened);
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_replica, &mut to_primary).await;
    });
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(primary_side).await }
    });
    // At each durable end the replica reports: the epochs its HISTORY holds.
    let mut durable = replica.durable_end();
    let watching = tokio::spawn({
        let (mut durable, dir) = (durable.clone(), r.path().to_path_buf());
        async move {
            let mut seen = Vec::new();
            while durable.changed().await.is_ok() {
                let end = *durable.borrow_and_update();
                let (_, history) = LogDir::read_history(&dir).unwrap().unwrap();
                seen.push((end, history.epochs.len()));
            }
            seen
        }
    });
    let syncing = tokio::spawn(async move {
        let synced = replica.sync_from(replica_side).await;
        (replica, synced)
    });
    let caught_up = log.end();
    durable.wait_for(|&e| e >= caught_up).await.unwrap();

    open.send_replace(false);
    // Larger than a shipped chunk: the primary's sending stops inside it.
    let big: Vec<u8> = (0..200_000).map(|i| (i % 251) as u8).collect();
    let cut = log.append(&big).await.unwrap();
    append(&log, 1, 0..5).await;
    log.truncate_after(cut).await.unwrap();
    let end = append(&log, 2, 0..5).await;
    let history = log.history();
    assert_eq!(history.epochs.len(), 2);
    assert_eq!(history.epochs[1].start, cut);
    open.send_replace(true);

    durable.wait_for(|&e| e >= end).await.unwrap();
    log.close().await.unwrap();
    let (replica, synced) = syncing.await.unwrap();
    assert!(synced.unwrap().primary_closed_cleanly);
    serving.await.unwrap().unwrap();
    down.await.unwrap();
    up.await.unwrap();
    assert_eq!(replica.history(), &history);
    replica.close().await.unwrap();
    let seen = watching.await.unwrap();
    let past_cut: Vec<_> = seen.iter().filter(|(e, _)| *e > cut).collect();
    assert!(
        !past_cut.is_empty(),
        "no end past the cut reported: {seen:?}"
    );
    assert!(
        past_cut.iter().all(|&&(_, epochs)| epochs == 2),
        "records of the new epoch held before the epoch: {seen:?}"
    );
    let expected: Vec<Vec<u8>> = (0..5)
        .map(|i| record(0, i))
        .chain([big])
        .chain((0..5).map(|i| record(2, i)))
        .collect();
    assert_eq!(read_all(r.path()).await, expected);
    assert_identical(p.path(), r.path());
}
