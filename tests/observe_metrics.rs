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
