//! How often a busy log wakes what follows it in the writer's process: a
//! [`DirReader`] follower ([`DirReader::with_wake_interval`]) and a replica's sender
//! ([`LogDirOptions::replica_wake_interval`]). Woken by the first commit after a
//! quiet spell, each then looks again no sooner than its interval later, taking all
//! that arrived meanwhile; a zero interval wakes it on every commit.
//!
//! "Not before the interval" is measured from a moment before the commit that woke
//! the follower (it saw that commit after it), to a moment after the follower
//! yielded the next record: a bound that the machine's load can only widen, so it
//! is asserted with no slack (a floor of 350 ms on a 400 ms interval, measured from
//! the first record's arrival, failed about 1 run in 34 under an fsync load). The
//! intervals are long (a second; 400 ms for a replica, below its sender's heartbeat,
//! which sends what is new too) so that "at once" has a wide margin.

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;
use walcodec::{LogDir, LogDirOptions, LogPosition, Replica};

const INTERVAL: Duration = Duration::from_secs(1);
/// "At once": far below the interval.
const AT_ONCE: Duration = Duration::from_millis(600);

/// Follows `log` from its end with `interval`; each record's data and when it was
/// yielded.
fn follow(log: &LogDir, interval: Duration) -> mpsc::UnboundedReceiver<(Vec<u8>, Instant)> {
    let mut follower = log
        .read_from(log.end())
        .unwrap()
        .follow()
        .with_wake_interval(interval);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(record) = follower.next().await {
            let data = record.unwrap().data.to_vec();
            if tx.send((data, Instant::now())).is_err() {
                return;
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_of_a_busy_log_looks_again_only_after_its_wake_interval() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let mut yielded = follow(&log, INTERVAL);
    // A record, then a quiet spell: the follower is running and waits to be woken
    // (a record it found on its first look, unwoken, would not start an interval).
    log.append(b"warm").await.unwrap();
    assert_eq!(yielded.recv().await.unwrap().0, b"warm");
    tokio::time::sleep(INTERVAL * 3 / 2).await;

    let before_a = Instant::now();
    log.append(b"a").await.unwrap();
    let (a, _) = yielded.recv().await.unwrap();
    assert_eq!(a, b"a");
    log.append(b"b").await.unwrap();
    log.append(b"c").await.unwrap();
    let (b, b_at) = yielded.recv().await.unwrap();
    let (c, c_at) = yielded.recv().await.unwrap();
    assert_eq!((b.as_slice(), c.as_slice()), (&b"b"[..], &b"c"[..]));
    assert!(
        b_at - before_a >= INTERVAL,
        "woken again {:?} after the commit that woke it last",
        b_at - before_a
    );
    assert!(
        c_at - b_at < AT_ONCE,
        "the commits that gathered came apart"
    );

    // A quiet spell longer than the interval: the next commit wakes it at once.
    tokio::time::sleep(INTERVAL * 3 / 2).await;
    log.append(b"d").await.unwrap();
    // From the acknowledgement, which follows the commit that wakes the follower:
    // the append's own sync, however slow the disk, is not counted.
    let appended = Instant::now();
    let (d, d_at) = yielded.recv().await.unwrap();
    assert_eq!(d, b"d");
    assert!(d_at - appended < AT_ONCE, "took {:?}", d_at - appended);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_with_a_zero_wake_interval_is_woken_by_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let mut yielded = follow(&log, Duration::ZERO);
    for record in [&b"a"[..], b"b", b"c"] {
        log.append(record).await.unwrap();
        let appended = Instant::now();
        let (data, at) = yielded.recv().await.unwrap();
        assert_eq!(data, record);
        assert!(at - appended < AT_ONCE, "took {:?}", at - appended);
    }
    log.close().await.unwrap();
}

/// Below the sender's heartbeat interval (at most 500 ms), whose wake also sends
/// what is new.
const REPLICA_INTERVAL: Duration = Duration::from_millis(400);

/// When the replica's durable end first covers `target`.
async fn replicated(
    end: &mut tokio::sync::watch::Receiver<LogPosition>,
    target: LogPosition,
) -> Instant {
    end.wait_for(|&e| e >= target).await.unwrap();
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_of_a_busy_log_is_sent_its_commits_once_per_wake_interval() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDirOptions::new()
        .replica_wake_interval(REPLICA_INTERVAL)
        .open(p.path())
        .await
        .unwrap();
    log.append(b"before").await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let mut end = replica.durable_end();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let syncing = tokio::spawn(async move { replica.sync_from(b).await });
    // What the replica lacked is sent unwoken; then a quiet spell, so the sender
    // waits to be woken by the next commit.
    replicated(&mut end, log.end()).await;
    tokio::time::sleep(REPLICA_INTERVAL * 3 / 2).await;

    let before_first = Instant::now();
    let first = log.append(b"first").await.unwrap();
    replicated(&mut end, first).await;
    let second = log.append(b"second").await.unwrap();
    let second_at = replicated(&mut end, second).await;
    assert!(
        second_at - before_first >= REPLICA_INTERVAL,
        "sent again {:?} after the commit that woke the sender last",
        second_at - before_first
    );

    tokio::time::sleep(INTERVAL * 3 / 2).await;
    let third = log.append(b"third").await.unwrap();
    let appended = Instant::now();
    let third_at = replicated(&mut end, third).await;
    assert!(
        third_at - appended < AT_ONCE,
        "took {:?}",
        third_at - appended
    );

    let closed = log.close().await.unwrap();
    serving.await.unwrap().unwrap();
    assert_eq!(syncing.await.unwrap().unwrap().end, closed);
}
