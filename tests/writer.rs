//! `AsyncLogWriter` behaviour: concurrent appends, agreement with `LogEncoder`,
//! reopening, batching, buffered appends, the bounded queue, close and drop.

use crate::writer_support;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use walcodec::testing::{FileStorage, Storage};
use walcodec::{
    AsyncLogWriter, Error, LogDecoder, LogEncoder, Position, WriterOptions, BLOCK_SIZE,
};
use writer_support::{encode_all, make_record, make_record_sized, read_log, verify, verify_sized};

fn temp_log() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    (dir, path)
}

#[test]
fn writer_is_shareable() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<AsyncLogWriter>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_read_back_exactly_once() {
    const TASKS: u32 = 1000;
    const APPENDS: u32 = 100;
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut positions = Vec::with_capacity(APPENDS as usize);
            for seq in 0..APPENDS {
                positions.push(log.append(make_record(task, seq)).await.unwrap());
            }
            positions
        }));
    }
    let mut acked: HashMap<(u32, u32), Position> = HashMap::new();
    for (task, handle) in tasks.into_iter().enumerate() {
        for (seq, position) in handle.await.unwrap().into_iter().enumerate() {
            acked.insert((task as u32, seq as u32), position);
        }
    }
    let stats = log.stats();
    let len = log.close().await.unwrap();

    let records = read_log(&path, true).await;
    assert_eq!(records.len(), (TASKS * APPENDS) as usize);
    assert_eq!(len, std::fs::metadata(&path).unwrap().len());
    let mut last_seen: HashMap<u32, (u32, u64)> = HashMap::new();
    for (position, record) in &records {
        let id = verify(record).expect("every record intact");
        assert_eq!(
            acked.remove(&id),
            Some(*position),
            "{id:?} once, where acked"
        );
        // Each task appends in sequence, so its records appear in sequence.
        if let Some((seq, start)) = last_seen.insert(id.0, (id.1, position.start)) {
            assert!(seq < id.1 && start < position.start);
        }
    }
    assert!(acked.is_empty());

    // The file is what LogEncoder makes of the records in position order.
    let file = std::fs::read(&path).unwrap();
    assert_eq!(file, encode_all(records.iter().map(|(_, r)| &r[..])));

    assert_eq!(stats.records, u64::from(TASKS * APPENDS));
    assert_eq!(stats.durable_len, len);
    assert!(stats.syncs < stats.records / 4, "group commit: {stats:?}");
    assert!(stats.largest_batch_records > 1);
}

#[tokio::test]
async fn output_is_byte_identical_to_log_encoder() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let mut records = Vec::new();
    let mut encoder = LogEncoder::new();
    // Records that leave 7 bytes in the block (the next starts with an empty FIRST),
    // 6 and 1 (trailers), 0 (exact fill), and records spanning blocks.
    enum Size {
        Bytes(usize),
        Leave(usize),
    }
    let sizes = [
        Size::Bytes(8),
        Size::Leave(7),
        Size::Bytes(10),
        Size::Leave(6),
        Size::Bytes(8),
        Size::Leave(1),
        Size::Bytes(100_000),
        Size::Leave(0),
        Size::Bytes(32_761),
        Size::Bytes(9),
        Size::Leave(7),
        Size::Bytes(70_000),
    ];
    for (i, size) in sizes.iter().enumerate() {
        let len = match *size {
            Size::Bytes(n) => n,
            Size::Leave(k) => BLOCK_SIZE - encoder.block_offset() - 7 - k,
        };
        let record = make_record_sized(0, i as u32, len);
        let expected = encoder.encode_record(&record, &mut BytesMut::new());
        let position = match i % 3 {
            0 => log.append(&record).await.unwrap(),
            1 => log.append_buffered(&record).await.unwrap(),
            _ => log.append_batch([&record]).await.unwrap()[0],
        };
        assert_eq!(position, expected, "record {i}");
        if let Size::Leave(k) = *size {
            assert_eq!((BLOCK_SIZE - encoder.block_offset()) % BLOCK_SIZE, k);
        }
        records.push(record);
    }
    let batch: Vec<Vec<u8>> = (0..20).map(|s| make_record(1, s)).collect();
    let positions = log.append_batch(&batch).await.unwrap();
    for (record, position) in batch.iter().zip(&positions) {
        assert_eq!(
            *position,
            encoder.encode_record(record, &mut BytesMut::new())
        );
    }
    records.extend(batch);
    let len = log.close().await.unwrap();
    assert_eq!(len, encoder.offset());

    let file = std::fs::read(&path).unwrap();
    assert_eq!(file, encode_all(records.iter().map(|r| &r[..])));
    for ((_, read), written) in read_log(&path, true).await.iter().zip(&records) {
        assert_eq!(read, written);
    }
}

#[tokio::test]
async fn reopen_resumes_at_the_block_offset() {
    // Logs whose end leaves 7, 6, 1 and 0 bytes in the block, and one mid-block.
    for left in [7usize, 6, 1, 0, 20_000] {
        let (_dir, path) = temp_log();
        let first = make_record_sized(0, 0, BLOCK_SIZE - 7 - left);
        std::fs::write(&path, encode_all([&first[..]])).unwrap();

        let log = AsyncLogWriter::open(&path).await.unwrap();
        let more: Vec<Vec<u8>> = (0..3).map(|s| make_record_sized(1, s, 50)).collect();
        for record in &more {
            log.append(record).await.unwrap();
        }
        log.close().await.unwrap();

        let mut all = vec![first];
        all.extend(more);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            encode_all(all.iter().map(|r| &r[..])),
            "{left} bytes left"
        );
    }
}

#[tokio::test]
async fn open_creates_a_missing_log_and_create_refuses_an_existing_one() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::open(&path).await.unwrap();
    log.append(b"first").await.unwrap();
    assert_eq!(log.close().await.unwrap(), 12);
    match AsyncLogWriter::create(&path).await {
        Err(Error::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::AlreadyExists),
        other => panic!("create over an existing log: {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap().len(), 12, "left untouched");
}

#[tokio::test]
async fn from_file_appends_at_the_given_length_and_checks_it() {
    let (_dir, path) = temp_log();
    std::fs::write(&path, encode_all([&b"existing"[..]])).unwrap();
    let open = || async {
        tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .await
            .unwrap()
    };
    match AsyncLogWriter::from_file(open().await, 3).await {
        Err(Error::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::InvalidInput),
        other => panic!("wrong length accepted: {other:?}"),
    }
    let log = AsyncLogWriter::from_file(open().await, 15).await.unwrap();
    assert_eq!(
        log.append(b"new").await.unwrap(),
        Position { start: 15, end: 25 }
    );
    log.close().await.unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        encode_all([&b"existing"[..], b"new"])
    );
}

#[tokio::test]
async fn append_batch_is_contiguous_and_synced_once() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let records: Vec<Vec<u8>> = (0..200).map(|s| make_record_sized(0, s, 100)).collect();
    let positions = log.append_batch(&records).await.unwrap();
    for pair in positions.windows(2) {
        // Contiguous: the next starts where the previous ends, or after a trailer.
        assert!(pair[1].start >= pair[0].end && pair[1].start - pair[0].end < 7);
    }
    let stats = log.stats();
    assert_eq!((stats.records, stats.writes, stats.syncs), (200, 1, 1));
    assert_eq!(stats.largest_batch_records, 200);
    assert!(log
        .append_batch(Vec::<Vec<u8>>::new())
        .await
        .unwrap()
        .is_empty());
    log.close().await.unwrap();
    assert_eq!(read_log(&path, true).await.len(), 200);
}

#[tokio::test]
async fn buffered_appends_become_durable_at_sync() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let mut expected = Vec::new();
    for seq in 0..50 {
        let record = make_record(0, seq);
        log.append_buffered(&record).await.unwrap();
        expected.push(record);
    }
    log.sync().await.unwrap();
    let stats = log.stats();
    assert_eq!(stats.durable_len, stats.len);
    assert_eq!(stats.records, 50);
    assert!(stats.syncs >= 1);
    // The flusher writes buffered records without syncing each batch.
    assert!(stats.syncs <= stats.writes);
    // Nothing new: sync returns without another round.
    log.sync().await.unwrap();
    assert_eq!(log.stats().syncs, stats.syncs);
    // The records are in the file before close.
    let read: Vec<_> = read_log(&path, true)
        .await
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(read, expected);
    log.close().await.unwrap();
}

#[tokio::test]
async fn close_returns_the_length_and_refuses_later_calls() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let other = log.clone();
    log.append(b"a").await.unwrap();
    other.append_buffered(b"b").await.unwrap();
    let len = log.close().await.unwrap();
    assert_eq!(len, 16);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
    assert_eq!(
        log.stats().durable_len,
        16,
        "close synced the buffered record"
    );
    assert!(matches!(other.append(b"c").await, Err(Error::Closed)));
    assert!(matches!(
        other.append_buffered(b"c").await,
        Err(Error::Closed)
    ));
    assert!(matches!(
        other.append_batch([b"c"]).await,
        Err(Error::Closed)
    ));
    assert!(matches!(other.sync().await, Err(Error::Closed)));
    assert_eq!(other.close().await.unwrap(), 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_completes_appends_already_queued() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let records: Vec<Vec<u8>> = (0..64).map(|seq| make_record(1, seq)).collect();
    // Each append polled once: encoded and queued (64 small records fit the queue,
    // so none waits for room), not necessarily written yet.
    let mut appends: Vec<_> = records
        .iter()
        .map(|record| Box::pin(futures::future::maybe_done(log.append(record))))
        .collect();
    for append in &mut appends {
        let _ = futures::poll!(append.as_mut());
    }
    let len = log.close().await.unwrap();
    // Every one of them was written and acknowledged, in order, and nothing after.
    let mut ends = Vec::new();
    for mut append in appends {
        append.as_mut().await;
        let position = append
            .as_mut()
            .take_output()
            .unwrap()
            .expect("an append queued before close is written");
        ends.push(position.end);
    }
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    assert!(matches!(log.append(b"late").await, Err(Error::Closed)));
    let read = read_log(&path, true).await;
    let read: Vec<&[u8]> = read.iter().map(|(_, data)| &data[..]).collect();
    let expected: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    assert_eq!(read, expected);
    assert_eq!(len, *ends.last().unwrap());
    assert_eq!(len, std::fs::metadata(&path).unwrap().len());
}

#[test]
fn dropping_the_writer_writes_queued_records_without_blocking() {
    let (_dir, path) = temp_log();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let expected: Vec<Vec<u8>> = (0..200).map(|s| make_record(7, s)).collect();
    runtime.block_on(async {
        let log = AsyncLogWriter::create(&path).await.unwrap();
        for record in &expected {
            log.append_buffered(record).await.unwrap();
        }
        // Dropped here, no close: the flusher finishes on its own.
    });
    drop(runtime);

    let want = encode_all(expected.iter().map(|r| &r[..]));
    // A hang guard, not a measure: the flusher thread finishes whenever it is let run.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read(&path).unwrap() != want {
        assert!(std::time::Instant::now() < deadline, "queued records lost");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_sync_interval_strands_no_one() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .min_sync_interval(Duration::from_millis(5))
        .create(&path)
        .await
        .unwrap();
    // A lone append after a sync still completes: the interval only delays it.
    log.append(b"one").await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), log.append(b"two"))
        .await
        .expect("an append is never stranded")
        .unwrap();
    assert_eq!(log.stats().syncs, 2);
    log.close().await.unwrap();
}

/// Sync pacing holds records back for company: with an interval no test outlasts,
/// what is queued after a sync waits until a full batch is waiting (then goes in one
/// write and one sync) or the writer closes. The counts are exact: only those two
/// events release records here, never the clock. The hold itself is an event the
/// test waits for (`WriterStats::paced_rounds`), not a pause it hopes is long enough:
/// a writer that does not pace never starts one, and fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_sync_interval_holds_records_until_a_full_batch_or_close() {
    const RECORDS: u32 = 64;
    let (_dir, path) = temp_log();
    // 100-byte records, 107 bytes encoded, none across a block edge.
    let records: Vec<Vec<u8>> = (0..RECORDS + RECORDS / 2)
        .map(|seq| make_record_sized(3, seq, 100))
        .collect();
    let log = WriterOptions::new()
        .min_sync_interval(Duration::from_secs(3600))
        .max_batch_bytes(RECORDS as usize * 107)
        .create(&path)
        .await
        .unwrap();
    // The first sync has no previous one to keep apart from.
    log.append(b"one").await.unwrap();
    let mut appends: Vec<_> = records
        .iter()
        .map(|record| Box::pin(futures::future::maybe_done(log.append(record))))
        .collect();
    let mut paced = 0;
    for (i, append) in appends.iter_mut().enumerate() {
        assert!(futures::poll!(append.as_mut()).is_pending(), "append {i}");
        if i + 1 < RECORDS as usize {
            continue;
        }
        if i + 1 == RECORDS as usize {
            // The batch is full: written and synced at once, all of it together.
            tokio::time::timeout(Duration::from_secs(60), append.as_mut())
                .await
                .expect("a full batch is not held back");
            let stats = log.stats();
            assert_eq!((stats.writes, stats.syncs), (2, 2), "{stats:?}");
            assert_eq!(stats.largest_batch_records, u64::from(RECORDS), "{stats:?}");
            // Rounds paced so far, read before a record of the half batch is
            // queued (nothing waits now, so none starts): the first batch may or
            // may not have been held (its 64 records may all be queued before the
            // flusher first looks), so count from here.
            paced = stats.paced_rounds;
        }
    }
    // Half a batch more is not a full batch: held back until close. The flusher
    // starts to hold it (an event, counted), and then has written nothing of it.
    let holding = tokio::time::timeout(Duration::from_secs(60), async {
        while log.stats().paced_rounds == paced {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    holding
        .await
        .unwrap_or_else(|_| panic!("records not held back: {:?}", log.stats()));
    let stats = log.stats();
    assert_eq!(
        (stats.writes, stats.syncs, stats.records, stats.paced_rounds),
        (2, 2, 65, paced + 1),
        "{stats:?}"
    );
    let len = tokio::time::timeout(Duration::from_secs(60), log.close())
        .await
        .expect("close does not wait for the interval")
        .unwrap();
    let stats = log.stats();
    assert_eq!(
        (stats.writes, stats.syncs, stats.records),
        (3, 3, 97),
        "{stats:?}"
    );
    for mut append in appends {
        append.as_mut().await;
        append.as_mut().take_output().unwrap().unwrap();
    }
    let read = read_log(&path, true).await;
    assert_eq!(read.len(), 1 + records.len());
    assert_eq!(read.last().unwrap().0.end, len);
}

/// Storage whose first write blocks until the test opens the gate.
struct GatedStorage {
    inner: FileStorage,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Storage for GatedStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (open, opened) = &*self.gate;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        drop(open);
        self.inner.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_makes_appends_wait() {
    let (_dir, path) = temp_log();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let storage = GatedStorage {
        inner: FileStorage::new(std::fs::File::create(&path).unwrap()),
        gate: Arc::clone(&gate),
    };
    // Room for two 500-byte records (507 bytes encoded, 520 reserved each).
    let log = WriterOptions::new()
        .max_queued_bytes(1200)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    let record = |seq| make_record_sized(0, seq, 500);
    log.append_buffered(record(0)).await.unwrap();
    log.append_buffered(record(1)).await.unwrap();
    // The gate is shut, so no room can come free: polled, the third append waits.
    let third_record = record(2);
    let mut third = Box::pin(log.append_buffered(&third_record));
    let len = log.stats().len;
    assert!(
        futures::poll!(third.as_mut()).is_pending(),
        "the queue is full: the third append waits"
    );
    assert_eq!(log.stats().len, len, "and is not queued");

    let (open, opened) = &*gate;
    *open.lock().unwrap() = true;
    opened.notify_all();
    tokio::time::timeout(Duration::from_secs(60), third)
        .await
        .expect("room comes free once the gate opens")
        .unwrap();
    log.close().await.unwrap();
    let read: Vec<_> = read_log(&path, true).await;
    assert_eq!(read.len(), 3);
    assert_eq!(verify_sized(&read[2].1), Some((0, 2)));
}

#[tokio::test]
async fn a_record_larger_than_the_queue_and_a_batch_goes_through() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .max_queued_bytes(1000)
        .max_batch_bytes(4096)
        .create(&path)
        .await
        .unwrap();
    let small = make_record_sized(0, 0, 100);
    let big = make_record_sized(0, 1, 100_000);
    log.append(&small).await.unwrap();
    log.append(&big).await.unwrap();
    log.append(&small).await.unwrap();
    let stats = log.stats();
    assert!(
        stats.writes >= 100_000 / 4096,
        "the record was cut into batches"
    );
    assert!(stats.largest_batch_bytes <= 4096);
    log.close().await.unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        encode_all([&small[..], &big, &small])
    );
}

#[tokio::test]
async fn a_record_larger_than_readers_accept_is_refused() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let huge = vec![0u8; LogDecoder::DEFAULT_MAX_RECORD_BYTES + 1];
    match log.append(&huge).await {
        Err(Error::RecordTooLarge { size, max, .. }) => {
            assert_eq!(
                (size, max),
                (huge.len() as u64, LogDecoder::DEFAULT_MAX_RECORD_BYTES)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        log.append_batch([&b"ok"[..], &huge]).await,
        Err(Error::RecordTooLarge { .. })
    ));
    // Nothing was queued and the writer goes on.
    log.append(b"after").await.unwrap();
    assert_eq!(log.close().await.unwrap(), 12);
}

#[tokio::test]
async fn stats_add_up() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    assert_eq!(log.stats().records, 0);
    assert_eq!(log.stats().average_batch_records(), 0.0);
    for seq in 0..10 {
        log.append(make_record_sized(0, seq, 93)).await.unwrap();
    }
    let stats = log.stats();
    assert_eq!(stats.records, 10);
    assert_eq!(stats.bytes, 1000);
    assert_eq!((stats.len, stats.durable_len), (1000, 1000));
    // One task, one record at a time: every append is its own batch and sync.
    assert_eq!((stats.writes, stats.syncs), (10, 10));
    assert_eq!(stats.average_batch_records(), 1.0);
    assert_eq!(stats.syncs_per_record(), 1.0);
    assert!(stats.last_sync_latency.is_some());
    assert!(stats.max_sync_latency >= stats.last_sync_latency);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_wake_the_flusher_whether_it_spins_or_sleeps() {
    for spin in [
        Duration::ZERO,
        Duration::from_micros(50),
        Duration::from_millis(20),
    ] {
        let (_dir, path) = temp_log();
        let log = WriterOptions::new()
            .idle_spin(spin)
            .create(&path)
            .await
            .unwrap();
        // Appends that find the flusher busy, spinning, and asleep (after a pause).
        for seq in 0..30 {
            let append = log.append(make_record(0, seq));
            tokio::time::timeout(Duration::from_secs(5), append)
                .await
                .unwrap_or_else(|_| panic!("append {seq} stranded with spin {spin:?}"))
                .unwrap();
            if seq % 10 == 9 {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }
        let mut tasks = Vec::new();
        for task in 1..17 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for seq in 0..50 {
                    log.append(make_record(task, seq)).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        log.close().await.unwrap();
        assert_eq!(read_log(&path, true).await.len(), 30 + 16 * 50);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preallocation_keeps_the_file_ahead_and_close_cuts_it_back() {
    const STEP: u64 = 64 * 1024;
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .preallocate(STEP)
        .create(&path)
        .await
        .unwrap();
    // The first step is taken before the first append.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), STEP);
    let records: Vec<Vec<u8>> = (0..60)
        .map(|seq| make_record_sized(1, seq, 5000 + seq as usize * 97))
        .collect();
    for (i, record) in records.iter().enumerate() {
        let position = log.append(record).await.unwrap();
        let file_len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(file_len % STEP, 0, "grown in whole steps");
        assert!(
            file_len >= position.end && file_len < position.end + STEP,
            "file of {file_len} bytes for a log of {}",
            position.end
        );
        if i % 20 == 10 {
            // A reader of the live file sees every durable record, then zeros that
            // read as a clean end.
            let read = read_log(&path, false).await;
            assert_eq!(read.len(), i + 1);
            assert_eq!(read[i].0, position);
            assert_eq!(&read[i].1[..], &record[..]);
        }
    }
    let len = log.close().await.unwrap();
    let expected = encode_all(records.iter().map(|r| &r[..]));
    assert_eq!(len, expected.len() as u64);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        expected,
        "exactly the log, no zeros"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_preallocating_writer_cuts_the_zeros_too() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .preallocate(1 << 20)
        .create(&path)
        .await
        .unwrap();
    log.append(b"one").await.unwrap();
    log.append_buffered(b"two").await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
    drop(log);
    // The flusher finishes on its own thread after the last handle goes (polled with
    // a generous hang guard: how soon is not the point).
    let expected = encode_all([&b"one"[..], b"two"]);
    for _ in 0..6000 {
        if std::fs::read(&path).unwrap() == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "file is {} bytes, not the {}-byte log",
        std::fs::metadata(&path).unwrap().len(),
        expected.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preallocated_log_left_by_a_crash_reopens_at_its_end() {
    let (dir, path) = temp_log();
    let log = WriterOptions::new()
        .preallocate(256 * 1024)
        .create(&path)
        .await
        .unwrap();
    let mut records = Vec::new();
    for seq in 0..30 {
        records.push(make_record_sized(2, seq, 3000));
        log.append(&records[seq as usize]).await.unwrap();
    }
    // What a killed process leaves: the records, then the preallocated zeros.
    let crashed = dir.path().join("000002.log");
    std::fs::copy(&path, &crashed).unwrap();
    log.close().await.unwrap();
    assert_eq!(std::fs::metadata(&crashed).unwrap().len(), 256 * 1024);

    let reopened = WriterOptions::new()
        .preallocate(256 * 1024)
        .open(&crashed)
        .await
        .unwrap();
    let log_len = encode_all(records.iter().map(|r| &r[..])).len() as u64;
    assert_eq!(reopened.stats().len, log_len);
    for seq in 30..40 {
        records.push(make_record_sized(2, seq, 3000));
        reopened.append(&records[seq as usize]).await.unwrap();
    }
    reopened.close().await.unwrap();
    assert_eq!(
        std::fs::read(&crashed).unwrap(),
        encode_all(records.iter().map(|r| &r[..]))
    );
}

/// A writer with no options preallocates (the fast path by default): the file is a
/// whole step of zeros ahead of the log while it is open, and exactly the log once
/// closed; `preallocate(0)` grows it with each write instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_writer_preallocates_and_close_cuts_the_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let end = log.append(b"first").await.unwrap().end;
    let open_len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(open_len, WriterOptions::DEFAULT_PREALLOCATE_BYTES);
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes[end as usize..].iter().all(|&b| b == 0));
    assert_eq!(log.close().await.unwrap(), end);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), end);

    let grown = dir.path().join("000002.log");
    let log = WriterOptions::new()
        .preallocate(0)
        .create(&grown)
        .await
        .unwrap();
    let end = log.append(b"first").await.unwrap().end;
    assert_eq!(std::fs::metadata(&grown).unwrap().len(), end);
    log.close().await.unwrap();
}
