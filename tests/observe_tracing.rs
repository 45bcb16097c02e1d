//! Feature `tracing`: the events an operator watches, with their fields, seen by a
//! real subscriber (tracing-subscriber's registry with a capturing layer).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use tracing::field::{Field, Visit};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use walcodec::testing::Storage;
use walcodec::{AsyncLogWriter, LogDecoder, LogDir, LogEncoder, Recovery, WriterOptions};

/// One event as the subscriber saw it.
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    message: String,
    fields: BTreeMap<String, String>,
    /// Names of the spans it happened in, innermost first.
    spans: Vec<String>,
}

impl Seen {
    fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Capture(Arc<Mutex<Vec<Seen>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut fields = fields.0;
        let message = fields.remove("message").unwrap_or_default();
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.map(|span| span.name().to_string()).collect())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Seen {
                level: *event.metadata().level(),
                message,
                fields,
                spans,
            });
    }
}

/// Every event of this test binary (tests run in parallel: each looks for its own
/// paths and names).
fn events() -> &'static Arc<Mutex<Vec<Seen>>> {
    static EVENTS: OnceLock<Arc<Mutex<Vec<Seen>>>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let events = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(Arc::clone(&events)));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        events
    })
}

/// A copy of every event so far (a test that failed while holding the lock does
/// not take the others down with it).
fn seen_all() -> Vec<Seen> {
    events()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn find(message: &str, matches: impl Fn(&Seen) -> bool) -> Vec<Seen> {
    seen_all()
        .into_iter()
        .filter(|seen| seen.message == message && matches(seen))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_cut_on_open_is_a_warning_with_file_offset_and_bytes() {
    events();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::create(&path).await.unwrap();
    writer.append(b"kept").await.unwrap();
    let len = writer.close().await.unwrap();
    // Half of a second record: its header and part of its payload.
    let mut torn = BytesMut::new();
    LogEncoder::with_offset(len).encode_record(&[7u8; 100], &mut torn);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&torn[..40]).unwrap();
    drop(file);

    let writer = AsyncLogWriter::open(&path).await.unwrap();
    writer.close().await.unwrap();

    let shown = path.display().to_string();
    let cut = find("torn tail cut", |seen| seen.field("path") == shown);
    assert_eq!(cut.len(), 1, "{:?}", seen_all());
    let cut = &cut[0];
    assert_eq!(cut.level, Level::WARN);
    assert_eq!(cut.field("offset"), len.to_string());
    assert_eq!(cut.field("bytes"), "40");
    assert_eq!(cut.spans, ["walcodec.open"]);
    let opened = find("log opened", |seen| seen.field("path") == shown);
    assert_eq!(opened[0].level, Level::INFO);
    assert_eq!(opened[0].field("len"), len.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_directory_recovery_rotation_and_purge_are_reported() {
    events();
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .name("events-dir")
        .open(dir.path())
        .await
        .unwrap();
    log.append(b"one").await.unwrap();
    log.rotate().await.unwrap();
    let end = log.append(b"two").await.unwrap();
    log.rotate().await.unwrap();
    log.purge_before(end).await.unwrap();
    log.append(b"three").await.unwrap();
    log.close().await.unwrap();
    // A torn tail in the active segment, cut by the next open inside its spans.
    let active = dir.path().join("000003.log");
    let len = std::fs::metadata(&active).unwrap().len();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&active)
        .unwrap();
    file.write_all(&[0x12, 0x34, 0x56]).unwrap();
    drop(file);
    let log = LogDir::builder()
        .name("events-dir")
        .open(dir.path())
        .await
        .unwrap();
    log.close().await.unwrap();

    let ours = |seen: &Seen| seen.field("log") == "events-dir";
    let rotated = find("log segment rotated", ours);
    assert_eq!(rotated.len(), 2);
    assert_eq!(rotated[0].field("sealed"), "1");
    assert_eq!(rotated[0].field("next"), "2");
    assert_eq!(rotated[0].level, Level::INFO);
    let purged = find("log segments purged", ours);
    assert_eq!(purged.len(), 1);
    assert_eq!(purged[0].field("segments"), "2");
    let recovered = find("log directory recovered", ours);
    assert_eq!(recovered.len(), 2);
    assert_eq!(recovered[1].field("active"), "3");
    assert_eq!(recovered[1].field("active_len"), len.to_string());
    assert_eq!(recovered[1].spans, ["walcodec.open"]);

    let shown = active.display().to_string();
    let cut = find("torn tail cut", |seen| seen.field("path") == shown);
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0].field("offset"), len.to_string());
    assert_eq!(cut[0].field("bytes"), "3");
    assert_eq!(cut[0].spans, ["walcodec.recover", "walcodec.open"]);
}

#[test]
fn damage_skipped_in_a_tolerant_mode_is_a_warning() {
    events();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(b"first", &mut log);
    encoder.encode_record(b"damaged-4242", &mut log);
    let damaged = 12 + 7 + 3;
    log[damaged] ^= 0xff;
    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::SkipCorrupted)
        .build();
    let mut records = 0;
    while decoder.decode_eof(&mut log).unwrap().is_some() {
        records += 1;
    }
    assert_eq!(records, 1);
    let seen = find("damaged log bytes skipped", |seen| {
        seen.field("offset") == "12" && seen.field("recovery") == "skip-corrupted"
    });
    assert_eq!(seen.len(), 1, "{:?}", seen_all());
    assert_eq!(seen[0].level, Level::WARN);
    assert_eq!(seen[0].field("bytes"), "19");
}

/// Storage whose syncs fail once `fail` is set.
struct FailingSync {
    log: Vec<u8>,
    fail: Arc<Mutex<bool>>,
}

impl Storage for FailingSync {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.log.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn sync(&mut self) -> io::Result<()> {
        if *self.fail.lock().unwrap() {
            return Err(io::Error::other("injected sync failure"));
        }
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.log.truncate(len as usize);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_writer_is_an_error_and_a_slow_sync_a_warning() {
    events();
    let fail = Arc::new(Mutex::new(false));
    let storage = FailingSync {
        log: Vec::new(),
        fail: Arc::clone(&fail),
    };
    let writer = WriterOptions::new()
        .name("poisoned-writer")
        // Every sync is "slow" against a zero threshold.
        .slow_sync_threshold(Duration::ZERO)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    writer.append(b"durable").await.unwrap();
    *fail.lock().unwrap() = true;
    writer.append(b"lost").await.unwrap_err();

    let ours = |seen: &Seen| seen.field("log") == "poisoned-writer";
    let slow = find("slow log sync", ours);
    assert!(!slow.is_empty());
    assert_eq!(slow[0].level, Level::WARN);
    assert_eq!(slow[0].field("records"), "1");
    let poisoned = find("log writer poisoned", ours);
    assert_eq!(poisoned.len(), 1);
    assert_eq!(poisoned[0].level, Level::ERROR);
    assert_eq!(poisoned[0].field("error"), "injected sync failure");
    assert_eq!(poisoned[0].field("durable_len"), "14");

    // The default threshold (1 s) keeps quiet about ordinary syncs.
    let dir = tempfile::tempdir().unwrap();
    let quiet = WriterOptions::new()
        .name("quiet-writer")
        .create(dir.path().join("000001.log"))
        .await
        .unwrap();
    quiet.append(b"x").await.unwrap();
    quiet.close().await.unwrap();
    assert!(find("slow log sync", |seen| seen.field("log") == "quiet-writer").is_empty());
}
