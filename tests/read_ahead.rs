//! The read-ahead pipeline (`ReadAhead`, behind `LogReader::open*`) reads exactly what
//! the plain reader over a `tokio::fs::File` reads: the same records at the same
//! positions, the same reports, errors and end state, in every recovery mode, for
//! whole logs and for splits, whatever the chunk size. Also: FULL records are views
//! of a chunk, and the pipeline holds a bounded number of chunks.

use std::io::{self, Read, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::AsyncSeekExt;
use walcodec::{
    block_start, split_ranges, DecodeStats, LogDecoder, LogDecoderBuilder, LogEncoder, LogReader,
    Position, ReadAhead, Recovery, BLOCK_SIZE, HEADER_SIZE,
};

/// Everything a read shows.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Each record's position, length and a hash of its bytes.
    records: Vec<(Position, usize, u64)>,
    error: Option<String>,
    reports: Vec<String>,
    stats: DecodeStats,
    valid_prefix_len: u64,
    incomplete_tail: bool,
    halted_at: Option<u64>,
    offset: Option<u64>,
}

fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// A builder for `recovery` over `range` whose reports land in the returned list.
fn builder(
    recovery: Recovery,
    range: &std::ops::Range<u64>,
) -> (LogDecoderBuilder, Arc<Mutex<Vec<String>>>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut builder = LogDecoder::builder();
    builder
        .recovery(recovery)
        .start_offset(range.start)
        .end_offset(range.end)
        .on_corruption(move |c| sink.lock().unwrap().push(c.to_string()));
    (builder, reports)
}

async fn drain<R: tokio::io::AsyncRead + Unpin>(
    mut reader: LogReader<R>,
    reports: Arc<Mutex<Vec<String>>>,
) -> Outcome {
    let mut records = Vec::new();
    let mut error = None;
    while let Some(next) = reader.next_record().await {
        match next {
            Ok(record) => records.push((record.position, record.data.len(), hash(&record.data))),
            Err(e) => error = Some(e.to_string()),
        }
    }
    let decoder = reader.decoder();
    let reports = reports.lock().unwrap().clone();
    // A decoder that stopped (a split's end, a PointInTime stop) drops whatever it
    // is given next, so where it stands then is how much was read, which is the
    // read size's doing and no result of the log.
    let offset = match decoder.halted_at() {
        Some(_) => None,
        None => Some(decoder.offset()),
    };
    Outcome {
        records,
        error,
        reports,
        stats: decoder.stats(),
        valid_prefix_len: decoder.valid_prefix_len(),
        incomplete_tail: decoder.has_incomplete_tail(),
        halted_at: decoder.halted_at(),
        offset,
    }
}

/// The reader as it was before the pipeline: `LogReader::new` over a tokio file.
async fn plain(path: &Path, recovery: Recovery, range: std::ops::Range<u64>) -> Outcome {
    let (builder, reports) = builder(recovery, &range);
    let mut file = tokio::fs::File::open(path).await.unwrap();
    file.seek(SeekFrom::Start(block_start(range.start)))
        .await
        .unwrap();
    drain(LogReader::new(file, builder.build()), reports).await
}

async fn read_ahead(
    path: &Path,
    recovery: Recovery,
    range: std::ops::Range<u64>,
    chunk_bytes: usize,
) -> Outcome {
    let (builder, reports) = builder(recovery, &range);
    let source = ReadAhead::builder()
        .chunk_bytes(chunk_bytes)
        .chunks_in_flight(2)
        .open(path, block_start(range.start))
        .await
        .unwrap();
    drain(LogReader::from_read_ahead(source, builder.build()), reports).await
}

/// Chunk sizes around the block size and its multiples, and odd ones that cut
/// headers and fragments anywhere.
const CHUNK_SIZES: [usize; 8] = [
    61,
    1000,
    BLOCK_SIZE - 1,
    BLOCK_SIZE,
    BLOCK_SIZE + HEADER_SIZE,
    3 * BLOCK_SIZE + 5,
    16 * BLOCK_SIZE,
    1 << 20,
];

/// Compares the pipeline with the plain reader on the log at `path`: the whole log
/// in every mode with every chunk size, and three splits with a few chunk sizes.
async fn assert_same(path: &Path, what: &str) {
    let len = std::fs::metadata(path).unwrap().len();
    for recovery in Recovery::ALL {
        let expected = plain(path, recovery, 0..u64::MAX).await;
        let mut sizes = CHUNK_SIZES.to_vec();
        if len <= 40_000 {
            sizes.push(1);
        }
        for &chunk_bytes in &sizes {
            let got = read_ahead(path, recovery, 0..u64::MAX, chunk_bytes).await;
            assert_eq!(got, expected, "{what}, {recovery}, chunks of {chunk_bytes}");
        }
        let (defaults, _) = builder(recovery, &(0..u64::MAX));
        let mut reader = LogReader::open_at(path, 0, &defaults).await.unwrap();
        let mut records = 0;
        while let Some(Ok(_)) = reader.next_record().await {
            records += 1;
        }
        assert_eq!(
            records,
            expected.records.len(),
            "{what}, {recovery}, open_at"
        );
        for range in split_ranges(len, 3) {
            let expected = plain(path, recovery, range.clone()).await;
            for chunk_bytes in [1000, BLOCK_SIZE + HEADER_SIZE, 16 * BLOCK_SIZE] {
                let got = read_ahead(path, recovery, range.clone(), chunk_bytes).await;
                assert_eq!(
                    got, expected,
                    "{what}, {recovery}, split {range:?}, chunks of {chunk_bytes}"
                );
            }
        }
    }
}

fn shared_vectors() -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for dir in ["tests/data/writers", "tests/data/leveldb-db"] {
        let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "log") {
                    logs.push(path);
                }
            }
        }
    }
    logs.sort();
    assert!(logs.len() > 10, "{logs:?}");
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_vectors_read_the_same_through_read_ahead() {
    for path in shared_vectors() {
        assert_same(&path, &path.display().to_string()).await;
    }
}

/// A small, fixed pseudo-random sequence (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// About ten blocks of records from 50 B to 70 KB: FULL records and records of
/// two to three fragments.
fn clean_log(seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    while log.len() < 10 * BLOCK_SIZE {
        let len = match rng.below(4) {
            0 => 50 + rng.below(200),
            1 => 300 + rng.below(3_000),
            2 => 5_000 + rng.below(20_000),
            _ => 30_000 + rng.below(40_000),
        } as usize;
        let fill = rng.next() as u8;
        encoder.encode_record(&vec![fill; len], &mut log);
    }
    log.to_vec()
}

/// Damage of every kind the decoder tells apart, at places that a seed picks.
fn damaged_logs(seed: u64) -> Vec<(String, Vec<u8>)> {
    let log = clean_log(seed);
    let len = log.len();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut out = vec![("clean".to_string(), log.clone())];
    for _ in 0..3 {
        let at = rng.below(len as u64) as usize;
        let mut bad = log.clone();
        bad[at] ^= 0x10;
        out.push((format!("bit flip at {at}"), bad));
    }
    for _ in 0..2 {
        let at = rng.below(len as u64) as usize;
        let mut cut = log.clone();
        cut.truncate(at);
        out.push((format!("truncated at {at}"), cut));
    }
    let block = 1 + rng.below(len as u64 / BLOCK_SIZE as u64 - 2) as usize;
    let mut zeroed = log.clone();
    zeroed[block * BLOCK_SIZE..(block + 1) * BLOCK_SIZE].fill(0);
    out.push((format!("zeroed block {block}"), zeroed));
    let mut garbage = log.clone();
    garbage[block * BLOCK_SIZE..(block + 1) * BLOCK_SIZE].fill(0xee);
    out.push((format!("garbage block {block}"), garbage));
    let sector = (rng.below(len as u64) as usize / 512) * 512;
    let mut zeros = log.clone();
    zeros[sector..(sector + 700).min(len)].fill(0);
    out.push((format!("zeros from sector {sector}"), zeros));
    // Preallocated space: a clean log, and a write cut short inside it.
    let mut preallocated = log.clone();
    preallocated.resize(len + 3 * BLOCK_SIZE + 100, 0);
    out.push(("zeros after the log".to_string(), preallocated));
    let cut = (len - 5_000) / 512 * 512;
    let mut torn = log.clone();
    torn[cut..].fill(0);
    torn.resize(len + BLOCK_SIZE, 0);
    out.push((format!("zeros from {cut} to past the end"), torn));
    // A length field that runs past its block.
    let mut long = log.clone();
    let header = block * BLOCK_SIZE;
    long[header + 4] = 0xff;
    long[header + 5] = 0xff;
    out.push((format!("bad length at {header}"), long));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_logs_read_the_same_through_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    for seed in [1u64, 7, 1234] {
        for (what, log) in damaged_logs(seed) {
            let path = dir.path().join("000001.log");
            std::fs::write(&path, &log).unwrap();
            assert_same(&path, &format!("seed {seed}: {what}")).await;
        }
    }
}

/// A record in one fragment is a view of the chunk it was read into: two FULL
/// records in a row sit one header apart in memory.
#[tokio::test]
async fn full_records_are_views_of_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..1000u32 {
        encoder.encode_record(&vec![i as u8; 100 + i as usize % 300], &mut log);
    }
    std::fs::write(&path, &log).unwrap();
    let mut reader = LogReader::open(&path).await.unwrap();
    let mut previous: Option<Bytes> = None;
    let mut adjacent = 0;
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap().data;
        if let Some(previous) = &previous {
            let gap = record.as_ptr() as usize - (previous.as_ptr() as usize + previous.len());
            // In the same block the next fragment follows at once; across a block
            // end there may be a trailer too.
            if gap == HEADER_SIZE {
                adjacent += 1;
            }
        }
        previous = Some(record);
    }
    // Every pair but the two around each block boundary, where a record is cut in
    // fragments (and copied once, into a buffer of its own).
    let boundaries = log.len() / BLOCK_SIZE;
    assert!(
        adjacent >= 999 - 2 * boundaries,
        "{adjacent} of 999 pairs adjacent, {boundaries} block boundaries"
    );
}

/// A source that counts the bytes read from it, and says when it is dropped (which
/// the reading thread does when it ends).
struct Counting {
    read: Arc<AtomicU64>,
    dropped: Option<tokio::sync::oneshot::Sender<u64>>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        buf.fill(0xab);
        self.read.fetch_add(buf.len() as u64, Ordering::SeqCst);
        Ok(buf.len())
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        let read = self.read.load(Ordering::SeqCst);
        let _ = self.dropped.take().unwrap().send(read);
    }
}

/// A reader that stops taking chunks stops the reads: the pipeline holds the chunks
/// in flight, the one being filled and the one handed out, no more; and dropping it
/// ends the reading thread.
///
/// Events, not waits: the test waits (with a hang guard) until the thread has read
/// as far as the bound allows, then drops the reader and waits until the thread has
/// dropped its source, which it does only once it has stopped. The bytes read by
/// then are exact: a pipeline that read past its bound would have read more before
/// it noticed the reader was gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_when_the_reader_stops() {
    let read = Arc::new(AtomicU64::new(0));
    let (dropped, source_gone) = tokio::sync::oneshot::channel();
    let chunk_bytes = 64 << 10;
    let in_flight = 3;
    let mut source = ReadAhead::builder()
        .chunk_bytes(chunk_bytes)
        .chunks_in_flight(in_flight)
        .spawn(Counting {
            read: read.clone(),
            dropped: Some(dropped),
        });
    let first = source.next().await.unwrap().unwrap();
    assert_eq!(first.len(), chunk_bytes);
    // The chunk handed out, `in_flight` queued, and one read that waits for room.
    let bound = ((in_flight + 2) * chunk_bytes) as u64;
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while read.load(Ordering::SeqCst) < bound {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the reading thread never read ahead");
    // Dropping the reader ends the reading thread, which drops its source.
    drop(source);
    let at_drop = tokio::time::timeout(std::time::Duration::from_secs(60), source_gone)
        .await
        .expect("the reading thread did not stop")
        .unwrap();
    assert_eq!(at_drop, bound);
    drop(first);
}

/// A read error reaches the reader as `Error::Io`, after the bytes before it.
#[tokio::test]
async fn read_errors_end_the_stream() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(0);
            self.0 -= n;
            Ok(n)
        }
    }
    let source = ReadAhead::builder().chunk_bytes(1000).spawn(Failing(5000));
    let mut reader = LogReader::from_read_ahead(source, LogDecoder::new());
    let error = reader.next_record().await.unwrap().unwrap_err();
    assert!(error.to_string().contains("disk on fire"), "{error}");
    assert!(reader.next_record().await.is_none());
}

/// `ReadAhead` is an `AsyncRead` too: any reader can use it, copying out of its
/// chunks.
#[tokio::test]
async fn read_ahead_as_async_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..300u32 {
        encoder.encode_record(&vec![i as u8; 1 + i as usize * 97], &mut log);
    }
    std::fs::write(&path, &log).unwrap();
    let source = ReadAhead::builder()
        .chunk_bytes(5000)
        .open(&path, 0)
        .await
        .unwrap();
    let records: Vec<_> = LogDecoder::framed_read(source)
        .map(|r| r.unwrap())
        .collect()
        .await;
    assert_eq!(records.len(), 300);
    assert_eq!(records[299].len(), 1 + 299 * 97);
}
