//! Feature `metrics`: the writer's and the log directory's counters, histograms
//! and gauges, labelled with the name the user gave, as metrics-util's debugging
//! recorder sees them.

use std::collections::HashMap;
use std::sync::OnceLock;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use walcodec::{LogDir, WriterOptions};

/// The recorder of this test binary, installed once.
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        snapshotter
    })
}

/// A snapshot drains the debugging recorder (counters and gauges back to 0,
/// histograms emptied), so tests take turns and read each snapshot whole.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The metrics labelled `log = log` since the last snapshot, by name.
struct Metrics(HashMap<String, DebugValue>);

fn snapshot(log: &str) -> Metrics {
    let values = snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| {
            key.key()
                .labels()
                .any(|label| label.key() == "log" && label.value() == log)
        })
        .map(|(key, _, _, value)| (key.key().name().to_string(), value))
        .collect();
    Metrics(values)
}

impl Metrics {
    fn counter(&self, name: &str) -> u64 {
        match self.0.get(name) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("{name}: {other:?}"),
        }
    }

    /// A counter's value, 0 when nothing was counted since the last snapshot.
    fn counted(&self, name: &str) -> u64 {
        match self.0.get(name) {
            None => 0,
            Some(_) => self.counter(name),
        }
    }

    fn gauge(&self, name: &str) -> f64 {
        match self.0.get(name) {
            Some(DebugValue::Gauge(v)) => v.into_inner(),
            other => panic!("{name}: {other:?}"),
        }
    }

    fn histogram(&self, name: &str) -> Vec<f64> {
        match self.0.get(name) {
            Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.into_inner()).collect(),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_counts_appends_bytes_syncs_and_batches() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = WriterOptions::new()
        .name("metrics-writer")
        .create(&path)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for task in 0..8u32 {
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u32 {
                writer
                    .append(format!("{task}-{i}").as_bytes())
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stats = writer.stats();
    let len = writer.close().await.unwrap();

    let m = snapshot("metrics-writer");
    assert_eq!(m.counter("walcodec_appends_total"), 200);
    assert_eq!(m.counter("walcodec_appended_bytes_total"), len);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    let syncs = m.counter("walcodec_syncs_total");
    assert!(syncs >= stats.syncs && syncs > 0, "{syncs} vs {stats:?}");
    let latencies = m.histogram("walcodec_sync_seconds");
    assert_eq!(latencies.len() as u64, syncs);
    assert!(
        latencies.iter().all(|&s| s > 0.0 && s < 60.0),
        "{latencies:?}"
    );
    let batches = m.histogram("walcodec_batch_records");
    assert_eq!(batches.iter().sum::<f64>(), 200.0);
    assert!(batches.len() as u64 <= stats.writes + 1);
    assert_eq!(m.gauge("walcodec_queued_bytes"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_directory_counts_rotations_segments_and_bytes() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .name("metrics-dir")
        .open(dir.path())
        .await
        .unwrap();
    let name = "metrics-dir";
    let m = snapshot(name);
    assert_eq!(m.gauge("walcodec_segments"), 1.0);
    assert_eq!(m.gauge("walcodec_dir_bytes"), 0.0);
    for round in 0..3u8 {
        log.append(&[round; 100]).await.unwrap();
        log.rotate().await.unwrap();
    }
    let m = snapshot(name);
    assert_eq!(m.counter("walcodec_rotations_total"), 3);
    assert_eq!(m.gauge("walcodec_segments"), 4.0);
    let on_disk: u64 = (1..=4)
        .map(|n| {
            std::fs::metadata(dir.path().join(format!("{n:06}.log")))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(m.gauge("walcodec_dir_bytes"), on_disk as f64);
    // The directory's writers carry its name.
    assert_eq!(m.counter("walcodec_appends_total"), 3);

    let end = log.append(b"last").await.unwrap();
    log.purge_before(walcodec::LogPosition::new(end.segment, 0))
        .await
        .unwrap();
    let m = snapshot(name);
    assert_eq!(m.gauge("walcodec_segments"), 1.0);
    assert_eq!(m.gauge("walcodec_dir_bytes"), end.offset as f64);
    log.close().await.unwrap();
}

/// All metrics since the last snapshot, whatever their labels: name, unit,
/// description.
fn described() -> Vec<(String, Option<metrics::Unit>, Option<String>)> {
    snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, description, _)| {
            (
                key.key().name().to_string(),
                unit,
                description.map(|d| d.to_string()),
            )
        })
        .collect()
}

/// Damage a decoder skips is counted under the decoder's name; a torn tail a
/// writer cuts on open, under the writer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_skipped_and_torn_tails_cut_are_counted_by_log() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();

    // One damaged record between two good ones, read in SkipCorrupted.
    let mut log = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    encoder.encode_record(b"good", &mut log);
    let damaged = encoder.encode_record(b"damaged", &mut log);
    log[damaged.start as usize + 8] ^= 0xff;
    let path = dir.path().join("damaged.log");
    std::fs::write(&path, &log).unwrap();
    let mut builder = walcodec::LogDecoder::builder();
    builder
        .recovery(walcodec::Recovery::SkipCorrupted)
        .name("metrics-decoder");
    let mut reader = walcodec::LogReader::open_at(&path, 0, &builder)
        .await
        .unwrap();
    while let Some(record) = reader.next_record().await {
        record.unwrap();
    }
    let m = snapshot("metrics-decoder");
    assert_eq!(m.counter("walcodec_corruptions_skipped_total"), 1);
    assert_eq!(
        m.counter("walcodec_damaged_bytes_skipped_total"),
        reader.decoder().stats().dropped_bytes
    );

    // A record and half of the next: the writer that reopens it cuts the half.
    let mut log = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    let kept = encoder.encode_record(b"kept", &mut log);
    encoder.encode_record(&[7; 100], &mut log);
    log.truncate(log.len() - 50);
    let torn_bytes = log.len() as u64 - kept.end;
    let path = dir.path().join("000001.log");
    std::fs::write(&path, &log).unwrap();
    let writer = WriterOptions::new()
        .name("metrics-torn")
        .open(&path)
        .await
        .unwrap();
    writer.close().await.unwrap();
    let m = snapshot("metrics-torn");
    assert_eq!(m.counter("walcodec_torn_tails_cut_total"), 1);
    assert_eq!(m.counter("walcodec_torn_tail_bytes_cut_total"), torn_bytes);
}

/// Purges count their segments, and those of retention are counted apart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_and_retention_count_segments() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let name = "metrics-purge";
    let log = LogDir::builder().name(name).open(dir.path()).await.unwrap();
    for round in 0..4u8 {
        log.append(&[round; 1000]).await.unwrap();
        log.rotate().await.unwrap();
    }
    let end = log.append(b"x").await.unwrap();
    log.purge_before(walcodec::LogPosition::new(2, 0))
        .await
        .unwrap();
    let m = snapshot(name);
    assert_eq!(m.counter("walcodec_purged_segments_total"), 1);
    log.close().await.unwrap();

    // Reopened with a bound that keeps only the active segment's worth.
    let log = LogDir::builder()
        .name(name)
        .retain_bytes(end.offset)
        .open(dir.path())
        .await
        .unwrap();
    let purged = log.enforce_retention().await.unwrap();
    assert_eq!(purged, [2, 3, 4]);
    let m = snapshot(name);
    assert_eq!(m.counter("walcodec_retention_purged_segments_total"), 3);
    assert_eq!(m.counter("walcodec_purged_segments_total"), 3);
    log.close().await.unwrap();
}

/// Every metric the crate emits reaches the recorder with a description and a
/// unit, so Prometheus shows HELP (and UNIT) lines: a workload that makes every
/// metric move, then every name the recorder saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_emitted_metric_has_a_description_and_a_unit() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("dir")).unwrap();
    let log = LogDir::builder()
        .name("metrics-described")
        .retain_bytes(1)
        .open(dir.path().join("dir"))
        .await
        .unwrap();
    for round in 0..3u8 {
        log.append(&[round; 100]).await.unwrap();
        log.rotate().await.unwrap();
    }
    log.close().await.unwrap();
    let mut damaged = bytes::BytesMut::new();
    let at = walcodec::LogEncoder::new().encode_record(b"bad", &mut damaged);
    damaged[at.start as usize] ^= 1;
    let mut torn = damaged.clone();
    torn.truncate(5);
    std::fs::write(dir.path().join("damaged.log"), &damaged).unwrap();
    std::fs::write(dir.path().join("000009.log"), &torn).unwrap();
    let mut builder = walcodec::LogDecoder::builder();
    builder.recovery(walcodec::Recovery::SkipCorrupted);
    let mut reader = walcodec::LogReader::open_at(dir.path().join("damaged.log"), 0, &builder)
        .await
        .unwrap();
    while reader.next_record().await.is_some() {}
    WriterOptions::new()
        .open(dir.path().join("000009.log"))
        .await
        .unwrap()
        .close()
        .await
        .unwrap();

    let seen = described();
    let mut names: Vec<&str> = seen.iter().map(|(name, _, _)| name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in [
        "walcodec_appends_total",
        "walcodec_appended_bytes_total",
        "walcodec_syncs_total",
        "walcodec_rotations_total",
        "walcodec_sync_seconds",
        "walcodec_batch_records",
        "walcodec_queued_bytes",
        "walcodec_segments",
        "walcodec_dir_bytes",
        "walcodec_torn_tails_cut_total",
        "walcodec_torn_tail_bytes_cut_total",
        "walcodec_corruptions_skipped_total",
        "walcodec_damaged_bytes_skipped_total",
        "walcodec_purged_segments_total",
        "walcodec_retention_purged_segments_total",
    ] {
        assert!(names.contains(&name), "{name} was not emitted: {names:?}");
    }
    for (name, unit, description) in &seen {
        assert!(name.starts_with("walcodec_"), "{name}");
        let description = description
            .as_deref()
            .unwrap_or_else(|| panic!("{name} has no description"));
        assert!(!description.is_empty(), "{name}");
        assert!(unit.is_some(), "{name} has no unit");
    }
}

/// Syncs `replica` from `log` until it holds `log`'s end, then closes `log` (a
/// clean end); returns what the primary shipped.
async fn replicate_then_close(log: LogDir, replica: &mut walcodec::Replica) -> walcodec::ShipStats {
    let end = log.end();
    let (a, b) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let mut durable = replica.durable_end();
    let syncing = replica.sync_from(b);
    let closing = async {
        durable.wait_for(|&e| e >= end).await.unwrap();
        log.close().await.unwrap();
    };
    let (synced, ()) = tokio::join!(syncing, closing);
    assert!(synced.unwrap().primary_closed_cleanly);
    serving.await.unwrap().unwrap()
}

/// Replication is watched on the primary: connections, the replicas connected now,
/// how each connection ended, refusals by reason, the bytes shipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_counts_connections_refusals_and_shipped_bytes() {
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let name = "metrics-primary";
    // A replica of another log, which the named primary refuses.
    let other = LogDir::open(dirs[2].path()).await.unwrap();
    other.append(b"another log").await.unwrap();
    let mut stranger = walcodec::Replica::open(dirs[3].path()).await.unwrap();
    replicate_then_close(other, &mut stranger).await;

    let log = LogDir::builder()
        .name(name)
        .open(dirs[0].path())
        .await
        .unwrap();
    for i in 0..10u8 {
        log.append([i; 500]).await.unwrap();
    }
    let (a, b) = tokio::io::duplex(1 << 16);
    let (served, synced) = tokio::join!(log.serve_replica(a), stranger.sync_from(b));
    assert!(matches!(
        served,
        Err(walcodec::Error::ReplicaOfAnotherLog { .. })
    ));
    assert!(synced.is_err());
    let mut replica = walcodec::Replica::open(dirs[1].path()).await.unwrap();
    let shipped = replicate_then_close(log, &mut replica).await;
    assert!(shipped.bytes > 5000);

    let values: Vec<_> = snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key()
                .labels()
                .any(|l| l.key() == "log" && l.value() == name)
        })
        .collect();
    let find = |metric: &str, label: Option<(&str, &str)>| {
        values
            .iter()
            .find(|(key, ..)| {
                key.key().name() == metric
                    && label.is_none_or(|(k, v)| {
                        key.key().labels().any(|l| l.key() == k && l.value() == v)
                    })
            })
            .map(|(.., value)| value)
            .unwrap_or_else(|| panic!("{metric} {label:?} not recorded"))
    };
    let counter = |metric: &str, label| match find(metric, label) {
        DebugValue::Counter(n) => *n,
        other => panic!("{metric}: {other:?}"),
    };
    assert_eq!(counter("walcodec_replica_connections_total", None), 2);
    assert_eq!(
        counter(
            "walcodec_replica_disconnections_total",
            Some(("how", "clean"))
        ),
        1
    );
    assert_eq!(
        counter(
            "walcodec_replica_disconnections_total",
            Some(("how", "refused"))
        ),
        1
    );
    assert_eq!(
        counter(
            "walcodec_replica_refusals_total",
            Some(("reason", "another_log"))
        ),
        1
    );
    assert_eq!(counter("walcodec_shipped_bytes_total", None), shipped.bytes);
    match find("walcodec_replicas", None) {
        DebugValue::Gauge(v) => assert_eq!(v.into_inner(), 0.0_f64),
        other => panic!("walcodec_replicas: {other:?}"),
    }
}

/// A replica's hello and identity as a raw peer sends them: protocol 3, holding
/// nothing (no log id, no last record, no epochs).
fn empty_replica_handshake() -> Vec<u8> {
    let mut m = b"WALCREPL".to_vec();
    m.extend_from_slice(&3u32.to_le_bytes());
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&[0; 16]);
    m.push(b'I');
    m.extend_from_slice(&[0; 16 + 1 + 20]);
    m.extend_from_slice(&0u32.to_le_bytes());
    m
}

async fn read_u32(conn: &mut tokio::io::DuplexStream) -> u32 {
    use tokio::io::AsyncReadExt;
    let mut b = [0; 4];
    conn.read_exact(&mut b).await.unwrap();
    u32::from_le_bytes(b)
}

/// The primary shows how far behind its replicas are: the furthest behind
/// connected replica's missing bytes, by what it acknowledged, and every data
/// byte counted as it is shipped, not when the connection ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_reports_how_far_behind_its_replica_is_and_ships_bytes_live() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let name = "metrics-behind";
    let log = LogDir::open(dir.path()).await.unwrap();
    for i in 0..10u8 {
        log.append([i; 1000]).await.unwrap();
    }
    let end = log.close().await.unwrap();
    // Reopened with a synchronous replica: its replicated end says when the
    // primary has taken an acknowledgement in.
    let log = LogDir::builder()
        .name(name)
        .sync_replicas(1)
        .open(dir.path())
        .await
        .unwrap();
    snapshot(name);
    let (a, mut b) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    b.write_all(&empty_replica_handshake()).await.unwrap();
    let mut hello = [0; 32];
    b.read_exact(&mut hello).await.unwrap();
    let mut identity = [0; 1 + 16 + 1 + 20];
    b.read_exact(&mut identity).await.unwrap();
    let epochs = read_u32(&mut b).await as usize;
    b.read_exact(&mut vec![0; epochs * 32]).await.unwrap();
    let mut segment = [0; 17];
    b.read_exact(&mut segment).await.unwrap();
    assert_eq!(segment[0], b'S');
    let mut received = 0u64;
    let mut tags = Vec::new();
    while received < end.offset {
        let mut tag = [0];
        b.read_exact(&mut tag).await.unwrap();
        tags.push(tag[0]);
        let len = read_u32(&mut b).await;
        b.read_exact(&mut vec![0; len as usize]).await.unwrap();
        received += u64::from(len);
    }
    assert_eq!(received, end.offset);
    // Only the message that reaches the primary's durable end says so.
    assert_eq!(tags.last(), Some(&b'F'));
    assert!(
        tags[..tags.len() - 1].iter().all(|&t| t == b'D'),
        "{tags:?}"
    );
    // Shipped bytes are counted while the replica is still connected, each
    // message's once its write returns, which can be after the replica read it:
    // wait until all are counted (a snapshot drains the counter, so add them up).
    let counted = async {
        let mut shipped = 0;
        while shipped < end.offset {
            tokio::task::yield_now().await;
            shipped += snapshot(name).counted("walcodec_shipped_bytes_total");
        }
        shipped
    };
    let shipped = tokio::time::timeout(std::time::Duration::from_secs(60), counted)
        .await
        .expect("the shipped bytes counted while the replica is connected");
    assert_eq!(shipped, end.offset);

    let mut replicated = log.replicated_end();
    for acked in [walcodec::LogPosition::new(end.segment, 3000), end] {
        let mut ack = vec![b'A'];
        ack.extend_from_slice(&acked.segment.to_le_bytes());
        ack.extend_from_slice(&acked.offset.to_le_bytes());
        b.write_all(&ack).await.unwrap();
        replicated.wait_for(|&e| e >= acked).await.unwrap();
        assert_eq!(
            snapshot(name).gauge("walcodec_replica_behind_bytes"),
            (end.offset - acked.offset) as f64,
            "acknowledged {acked}"
        );
    }
    drop(b);
    serving.await.unwrap().unwrap();
    log.close().await.unwrap();
}

/// A replica shows its lag: the time since it last held everything its primary
/// had made durable, growing while the primary's messages stop short of its end,
/// and 0 (with `caught_up` moved) once one reaches it. A raw primary on a paused
/// clock decides what "behind" is.
#[tokio::test(start_paused = true)]
async fn a_replica_reports_its_lag_in_seconds() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _serial = SERIAL.lock().await;
    snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let name = "metrics-lag";
    let mut replica = walcodec::Replica::open(dir.path()).await.unwrap();
    replica
        .set_name(name)
        .set_timeout(std::time::Duration::from_secs(60));
    let mut caught_up = replica.caught_up();
    snapshot(name);
    let (mut a, b) = tokio::io::duplex(1 << 20);
    let primary = async move {
        let mut hello = b"WALCREPL".to_vec();
        hello.extend_from_slice(&3u32.to_le_bytes());
        hello.extend_from_slice(&0u32.to_le_bytes());
        hello.extend_from_slice(&[0; 16]);
        a.write_all(&hello).await.unwrap();
        let mut theirs = vec![0; 32 + 1 + 16 + 1 + 20 + 4];
        a.read_exact(&mut theirs).await.unwrap();
        let mut identity = vec![b'I'];
        identity.extend_from_slice(&7u128.to_le_bytes());
        identity.push(0);
        identity.extend_from_slice(&[0; 20]);
        identity.extend_from_slice(&1u32.to_le_bytes());
        for field in [1u64, 1, 1, 0] {
            identity.extend_from_slice(&field.to_le_bytes());
        }
        identity.push(b'S');
        identity.extend_from_slice(&1u64.to_le_bytes());
        identity.extend_from_slice(&0u64.to_le_bytes());
        a.write_all(&identity).await.unwrap();
        let mut encoder = walcodec::LogEncoder::new();
        let mut offset = 0u64;
        let mut lags = Vec::new();
        for (tag, wait) in [(b'D', 3), (b'D', 2), (b'F', 1)] {
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            let mut record = bytes::BytesMut::new();
            encoder.encode_record(&[tag; 100][..], &mut record);
            let mut message = vec![tag];
            message.extend_from_slice(&(record.len() as u32).to_le_bytes());
            message.extend_from_slice(&record);
            a.write_all(&message).await.unwrap();
            offset += record.len() as u64;
            // The replica acknowledges once the record is written: its lag was
            // reported before.
            loop {
                let mut ack = [0; 17];
                a.read_exact(&mut ack).await.unwrap();
                if u64::from_le_bytes(ack[9..17].try_into().unwrap()) == offset {
                    break;
                }
            }
            lags.push(snapshot(name).gauge("walcodec_replica_lag_seconds"));
        }
        lags
    };
    let (lags, synced) = tokio::join!(primary, replica.sync_from(b));
    assert!(!synced.unwrap().primary_closed_cleanly);
    // Never caught up since the connection began: 3 s, then 5 s; then caught up.
    assert_eq!(lags, [3.0, 5.0, 0.0]);
    assert!(caught_up.has_changed().unwrap());
    assert!(caught_up.borrow_and_update().is_some());
}
