//! The committed id goes to the log in call order, after the entries it names:
//! a power cut keeps a prefix of a batch, and a committed id written ahead of its
//! entries would outlive them (openraft applies up to the committed id at start,
//! and a node whose committed id names a missing entry does not start). Replay
//! lowers a committed id past the last entry (a log written before this rule) to
//! the last entry, with a warning.

use crate::support;

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use support::{entry, log_id, TypeConfig};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use walcodec::{LogDir, LogPosition};
use walcodec_raft::LogStore;

/// Starts an append and leaves it in the writer's queue without waiting for its
/// flush (openraft's own `append` returns before the flush; the test's only way
/// to get a callback is `blocking_append`, polled once and dropped).
async fn start_append(store: &mut LogStore<TypeConfig>, first: u64, n: u64) {
    let mut append = std::pin::pin!(store.blocking_append((first..first + n).map(|i| entry(1, i))));
    std::future::poll_fn(|cx| {
        assert!(
            append.as_mut().poll(cx).is_pending(),
            "the flush cannot have fired before the writer ran"
        );
        Poll::Ready(())
    })
    .await;
}

/// The end of every record of the log at `path`, in order.
async fn record_ends(path: &Path) -> Vec<LogPosition> {
    let log = LogDir::open(path).await.unwrap();
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut ends = Vec::new();
    while let Some(record) = reader.next_record().await {
        ends.push(record.unwrap().end);
    }
    drop(reader);
    log.close().await.unwrap();
    ends
}

/// A copy of the directory `from` in `to` with its log cut at `end`: what a
/// power cut keeps of a batch is a prefix of it.
fn copy_cut(from: &Path, to: &Path, end: LogPosition) {
    std::fs::create_dir(to).unwrap();
    for file in std::fs::read_dir(from).unwrap() {
        let file = file.unwrap();
        let name = file.file_name();
        let name = name.to_str().unwrap();
        let Some(number) = name
            .strip_suffix(".log")
            .and_then(|n| n.parse::<u64>().ok())
        else {
            std::fs::copy(file.path(), to.join(name)).unwrap();
            continue;
        };
        if number > end.segment {
            continue;
        }
        let bytes = std::fs::read(file.path()).unwrap();
        let keep = if number == end.segment {
            end.offset as usize
        } else {
            bytes.len()
        };
        std::fs::write(to.join(name), &bytes[..keep]).unwrap();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_prefix_of_the_log_has_committed_at_or_before_its_last_entry() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let mut store = LogStore::<TypeConfig>::open(&dir).await.unwrap();
    // Each round: an append, its committed id given before its flush fired (both
    // queued before the writer runs: one batch), then a vote that waits for
    // both to be durable.
    let rounds = 10;
    for round in 0..rounds {
        let first = round * 3;
        start_append(&mut store, first, 3).await;
        store
            .save_committed(Some(log_id(1, first + 2)))
            .await
            .unwrap();
        store.save_vote(&Vote::new(1, 1)).await.unwrap();
    }
    assert_eq!(
        store.read_committed().await.unwrap(),
        Some(log_id(1, rounds * 3 - 1))
    );
    store.close().await.unwrap();

    let ends = record_ends(&dir).await;
    assert_eq!(ends.len() as u64, rounds * 5, "3 entries, committed, vote");
    let mut past = Vec::new();
    for (k, &end) in ends.iter().enumerate() {
        let cut = root.path().join(format!("cut{k}"));
        copy_cut(&dir, &cut, end);
        let mut store = LogStore::<TypeConfig>::open(&cut)
            .await
            .unwrap_or_else(|e| panic!("the log cut after record {k} does not open: {e}"));
        let last = store.get_log_state().await.unwrap().last_log_id;
        let committed = store.read_committed().await.unwrap();
        if committed > last {
            past.push((k, committed, last));
        }
        // What the prefix holds is all there: every entry up to the last.
        let entries = store.try_get_log_entries(..).await.unwrap();
        assert_eq!(entries.last().map(|e| e.log_id), last);
        store.close().await.unwrap();
        std::fs::remove_dir_all(&cut).unwrap();
    }
    assert!(
        past.is_empty(),
        "{} of {} cuts leave committed past the last entry (cut, committed, last): {past:?}",
        past.len(),
        ends.len()
    );
}

/// One event: its level and message.
struct Capture(Arc<Mutex<Vec<(Level, String)>>>);

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((*event.metadata().level(), message.0));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn replay_lowers_a_committed_id_past_the_last_entry_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    // As an older version could leave it: entries 0 and 1, then (its batch cut
    // after the committed id it wrote first) committed 4.
    let log = LogDir::open(dir.path()).await.unwrap();
    for i in 0..2 {
        let mut record = vec![1u8];
        record.extend(postcard::to_stdvec(&log_id(1, i)).unwrap());
        record.extend(postcard::to_stdvec(&entry(1, i)).unwrap());
        log.append(record).await.unwrap();
    }
    let mut committed = vec![3u8];
    committed.extend(postcard::to_stdvec(&Some(log_id(1, 4))).unwrap());
    log.append(committed).await.unwrap();
    log.close().await.unwrap();

    let events = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture(Arc::clone(&events)));
    let _guard = tracing::subscriber::set_default(subscriber);
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    assert_eq!(
        store.read_committed().await.unwrap(),
        Some(log_id(1, 1)),
        "lowered to the last entry"
    );
    store.close().await.unwrap();
    let events = events.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|(level, message)| *level == Level::WARN && message.contains("committed")),
        "a warning says so: {events:?}"
    );
}
