//! Hostile input: random bytes, huge length fields, endless FIRST/MIDDLE chains.
//! The decoder must not panic, must keep consuming its input, and must hold no more
//! memory than `max_record_bytes` and a few blocks of read buffer, whatever the
//! input claims.
//!
//! Memory is measured with a counting global allocator, per thread (each test decodes
//! on its own thread, so tests running side by side do not see each other).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use common::*;
use futures::Stream;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, FramedRead};
use walcodec::{CodecError, LogDecoder, LogInput, Recovery, BLOCK_SIZE, HEADER_SIZE};

const MIB: usize = 1 << 20;
const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;

// ---------------------------------------------------------------------------------
// Counting allocator.

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn track_alloc(size: usize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + size as isize;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

fn track_free(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get() - size as isize));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            track_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            track_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        track_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            track_free(layout.size());
            track_alloc(new_size);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap used by `f` on this thread: the peak above what was live when it started,
/// and the largest single allocation.
#[derive(Debug, Clone, Copy)]
struct Usage {
    peak_bytes: usize,
    largest_allocation: usize,
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, Usage) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    LARGEST.with(|largest| largest.set(0));
    let value = f();
    let usage = Usage {
        peak_bytes: (PEAK.with(Cell::get) - start).max(0) as usize,
        largest_allocation: LARGEST.with(Cell::get),
    };
    (value, usage)
}

// ---------------------------------------------------------------------------------
// Driving a FramedRead by hand, watching its buffer and the decoder's progress.

#[derive(Debug, Default)]
struct Progress {
    largest_buffer_capacity: usize,
    largest_buffered: usize,
    /// Decoder offsets seen at each `Pending`: they must keep growing.
    offsets: Vec<u64>,
}

/// Reads `log` through `FramedRead` over a chunking reader, polling by hand; at every
/// `Pending` checks that everything delivered is either consumed by the decoder or
/// still in the read buffer, and records how big the buffer got.
fn drive(log: Bytes, config: Config, seed: u64, max_chunk: usize) -> (Outcome, Progress) {
    let (decoder, reports) = config.build();
    let mut framed = FramedRead::new(ChunkedReader::new(log, seed, max_chunk), decoder);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut progress = Progress::default();
    let mut records = Vec::new();
    let mut error = None;
    loop {
        progress.largest_buffer_capacity = progress
            .largest_buffer_capacity
            .max(framed.read_buffer().capacity());
        progress.largest_buffered = progress.largest_buffered.max(framed.read_buffer().len());
        match Pin::new(&mut framed).poll_next(&mut cx) {
            Poll::Pending => {
                let consumed = framed.decoder().offset() + framed.read_buffer().len() as u64;
                assert_eq!(consumed, framed.get_ref().delivered() as u64);
                progress.offsets.push(framed.decoder().offset());
            }
            Poll::Ready(Some(Ok(record))) => records.push(record),
            Poll::Ready(Some(Err(e))) => error = Some(e.to_string()),
            Poll::Ready(None) => break,
        }
    }
    let reports = std::mem::take(&mut *reports.lock().unwrap());
    (
        Outcome {
            records,
            reports,
            error,
        },
        progress,
    )
}

/// The decoder never held more than a couple of blocks of unconsumed input.
fn assert_streams(progress: &Progress, log_len: usize) {
    assert!(
        progress.largest_buffer_capacity <= 4 * BLOCK_SIZE,
        "read buffer grew to {} bytes",
        progress.largest_buffer_capacity
    );
    assert!(progress.largest_buffered <= 2 * BLOCK_SIZE);
    // Progress is made all along, not only at the end.
    let quarter = progress.offsets.len() / 4;
    if log_len > 4 * BLOCK_SIZE && quarter > 0 {
        assert!(progress.offsets[quarter] > 0);
        assert!(progress.offsets[3 * quarter] > progress.offsets[quarter]);
    }
}

// ---------------------------------------------------------------------------------
// Endless chains.

/// A FIRST fragment then MIDDLE fragments with `payload` bytes each (laid out as a
/// writer would, trailers included) until the log is `total` bytes long.
fn chain(total: usize, payload: usize) -> Vec<u8> {
    let data = patterned(payload.max(1), 7);
    let mut log = Vec::with_capacity(total + BLOCK_SIZE);
    push_fragment(&mut log, FIRST, &data[..payload.max(1)]);
    while log.len() < total {
        pad_trailer(&mut log);
        let left = BLOCK_SIZE - log.len() % BLOCK_SIZE - HEADER_SIZE;
        push_fragment(&mut log, MIDDLE, &data[..payload.min(left)]);
    }
    log
}

fn chain_payload_bytes(log: &[u8]) -> u64 {
    fragment_offsets(log)
        .iter()
        .map(|&at| u16::from_le_bytes([log[at + 4], log[at + 5]]) as u64)
        .sum()
}

fn limited(recovery: Recovery, max: usize) -> Config {
    Config {
        recovery,
        max_record_bytes: Some(max),
        ..Config::DEFAULT
    }
}

/// Memory a decoder limited to `max_record_bytes` may hold: the record being
/// assembled, a copy of it when it is joined, and a few blocks of buffer.
fn memory_bound(max_record_bytes: usize) -> usize {
    2 * max_record_bytes + 8 * BLOCK_SIZE
}

#[test]
fn endless_chain_of_full_blocks_fails_as_record_too_large() {
    let log = chain(10 * MIB, BLOCK_SIZE - HEADER_SIZE);
    let mut decoder = LogDecoder::builder().max_record_bytes(MIB).build();
    let mut src = BytesMut::from(&log[..]);
    let (result, usage) = measure(|| {
        let result = decoder.decode(&mut src);
        drop(src);
        result
    });
    match result {
        Err(CodecError::RecordTooLarge { offset, size, max }) => {
            assert_eq!(offset, 0);
            assert_eq!(max, MIB);
            assert!(
                size > MIB as u64 && size <= (MIB + BLOCK_SIZE) as u64,
                "{size}"
            );
        }
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert!(decoder.is_finished());
    assert!(decoder.offset() <= (MIB + 2 * BLOCK_SIZE) as u64);
    assert!(usage.peak_bytes <= memory_bound(MIB), "{usage:?}");
}

#[test]
fn endless_chain_through_framed_read_fails_as_record_too_large() {
    let log = Bytes::from(chain(10 * MIB, BLOCK_SIZE - HEADER_SIZE));
    let len = log.len();
    let ((outcome, progress), usage) =
        measure(|| drive(log.clone(), limited(Recovery::TolerateTail, MIB), 3, 70_000));
    assert_eq!(outcome.records, Vec::<Bytes>::new());
    let error = outcome.error.expect("an error");
    assert!(error.contains("larger than the limit"), "{error}");
    assert_streams(&progress, len);
    assert!(usage.peak_bytes <= memory_bound(MIB), "{usage:?}");
}

#[test]
fn endless_chain_then_a_record_is_reported_as_too_large_and_skipped() {
    let mut log = chain(10 * MIB, BLOCK_SIZE - HEADER_SIZE);
    let dropped = chain_payload_bytes(&log);
    pad_trailer(&mut log);
    push_fragment(&mut log, FULL, b"after");
    let log = Bytes::from(log);
    let len = log.len();
    let ((outcome, progress), usage) =
        measure(|| drive(log, limited(Recovery::SkipCorrupted, MIB), 4, 70_000));
    assert_eq!(outcome.record_vecs(), [b"after".to_vec()]);
    assert_eq!(
        outcome.reports,
        [Report {
            offset: 0,
            bytes: dropped,
            reason: "record too large".into()
        }]
    );
    assert_streams(&progress, len);
    assert!(usage.peak_bytes <= memory_bound(MIB), "{usage:?}");
    assert!(usage.largest_allocation <= MIB + BLOCK_SIZE, "{usage:?}");
}

/// An endless chain that runs into EOF drops megabytes: with `SkipCorrupted` that must
/// be reported like any other drop, not pass as a quiet torn tail.
#[test]
fn endless_chain_cut_by_eof_is_reported_as_too_large() {
    let log = chain(10 * MIB, BLOCK_SIZE - HEADER_SIZE);
    let dropped = chain_payload_bytes(&log);
    let outcome = read_every_way(&log, limited(Recovery::SkipCorrupted, MIB));
    assert_eq!(outcome.records, Vec::<Bytes>::new());
    assert_eq!(
        outcome.reports,
        [Report {
            offset: 0,
            bytes: dropped,
            reason: "record too large".into()
        }]
    );
}

/// The same chain with `TolerateTail` (the default) is an error: the limit is crossed
/// long before EOF.
#[test]
fn endless_chain_cut_by_eof_fails_by_default() {
    let log = chain(4 * MIB, BLOCK_SIZE - HEADER_SIZE);
    let outcome = read_every_way(&log, limited(Recovery::TolerateTail, MIB));
    assert!(outcome.error.unwrap().contains("larger than the limit"));
}

/// 1-byte fragments: a record of `max_record_bytes` takes eight times as many input
/// bytes and a million fragments. The memory held must still be bounded by the
/// record's size, not by its fragment count.
#[test]
fn chain_of_one_byte_fragments_holds_memory_bounded_by_the_limit() {
    let max = 256 * 1024;
    let mut log = chain(4 * MIB, 1);
    pad_trailer(&mut log);
    push_fragment(&mut log, FULL, b"after");
    let log = Bytes::from(log);
    let len = log.len();
    let ((outcome, progress), usage) =
        measure(|| drive(log, limited(Recovery::SkipCorrupted, max), 5, 70_000));
    assert_eq!(outcome.record_vecs(), [b"after".to_vec()]);
    assert_eq!(outcome.message(), "record too large");
    assert_streams(&progress, len);
    assert!(usage.peak_bytes <= memory_bound(max), "{usage:?}");
}

/// Empty MIDDLE fragments never grow the record, so `max_record_bytes` never trips;
/// the memory held must not grow with them either.
#[test]
fn chain_of_empty_middle_fragments_holds_bounded_memory() {
    let max = 256 * 1024;
    let mut log = chain(4 * MIB, 0);
    pad_trailer(&mut log);
    push_fragment(&mut log, FULL, b"after");
    let log = Bytes::from(log);
    let len = log.len();
    let ((outcome, progress), usage) =
        measure(|| drive(log, limited(Recovery::SkipCorrupted, max), 6, 70_000));
    assert_eq!(outcome.record_vecs(), [b"after".to_vec()]);
    // LevelDB's report: the one byte of the FIRST fragment is dropped.
    assert_eq!(outcome.message(), "partial record without end");
    assert_eq!(outcome.dropped(), 1);
    assert_streams(&progress, len);
    assert!(usage.peak_bytes <= memory_bound(max), "{usage:?}");
}

// ---------------------------------------------------------------------------------
// Huge length fields.

/// A header claiming 65535 bytes at the start of every block: each block is dropped
/// as "bad record length", and nothing is buffered beyond the block.
#[test]
fn huge_length_fields_drop_their_blocks_without_buffering() {
    let mut log = Vec::new();
    for _ in 0..64 {
        let start = log.len();
        push_fragment(&mut log, FULL, b"x");
        log[start + 4..start + 6].copy_from_slice(&u16::MAX.to_le_bytes());
        log.resize(start + BLOCK_SIZE, 0xab);
    }
    push_fragment(&mut log, FULL, b"survivor");
    let outcome = read_like_leveldb(&log);
    assert_eq!(outcome.record_vecs(), [b"survivor".to_vec()]);
    assert_eq!(outcome.reports.len(), 64);
    assert!(outcome
        .reports
        .iter()
        .all(|r| r.reason == "bad record length"));
    assert_eq!(outcome.dropped(), 64 * BLOCK_SIZE as u64);

    let len = log.len();
    let ((_, progress), usage) = measure(|| drive(Bytes::from(log), Config::LEVELDB, 7, 70_000));
    assert_streams(&progress, len);
    assert!(usage.peak_bytes <= 8 * BLOCK_SIZE, "{usage:?}");
}

/// A huge length at EOF is a torn tail, however long the claimed payload.
#[test]
fn huge_length_at_eof_is_a_torn_tail() {
    let mut log = Vec::new();
    push_fragment(&mut log, FULL, b"kept");
    let start = log.len();
    push_fragment(&mut log, FULL, b"x");
    log[start + 4..start + 6].copy_from_slice(&u16::MAX.to_le_bytes());
    let outcome = read_like_leveldb(&log);
    assert_eq!(outcome.record_vecs(), [b"kept".to_vec()]);
    assert_eq!(outcome.reports, []);
}

/// A FULL fragment larger than `max_record_bytes` is refused, not returned.
#[test]
fn full_fragment_over_the_limit_is_refused() {
    let log = encode_all(&[patterned(2_000, 1), b"small".to_vec()]);
    let skip = read_every_way(&log, limited(Recovery::SkipCorrupted, 1_000));
    assert_eq!(skip.record_vecs(), [b"small".to_vec()]);
    assert_eq!(skip.message(), "record too large");
    assert_eq!(skip.dropped(), 2_000);
    let strict = read_every_way(&log, limited(Recovery::TolerateTail, 1_000));
    assert_eq!(strict.records, Vec::<Bytes>::new());
    assert!(strict.error.unwrap().contains("larger than the limit"));
}

// ---------------------------------------------------------------------------------
// Random bytes.

fn any_recovery() -> impl Strategy<Value = Recovery> {
    prop_oneof![
        Just(Recovery::TolerateTail),
        Just(Recovery::AbsoluteConsistency),
        Just(Recovery::PointInTime),
        Just(Recovery::SkipCorrupted),
    ]
}

/// Random bytes, sometimes behind a valid-looking header.
fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 0..(3 * BLOCK_SIZE)),
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(|(mut bytes, type_byte, len, valid_header)| {
            if valid_header && bytes.len() >= HEADER_SIZE {
                bytes[4..6].copy_from_slice(&len.to_le_bytes());
                bytes[6] = type_byte;
                let end = (HEADER_SIZE + len as usize).min(bytes.len());
                let crc = masked_crc(type_byte, &bytes[HEADER_SIZE..end]);
                bytes[..4].copy_from_slice(&crc.to_le_bytes());
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_bytes_never_panic_and_are_consumed(
        bytes in hostile_bytes(),
        recovery in any_recovery(),
        max_record_bytes in prop_oneof![Just(None), (0usize..70_000).prop_map(Some)],
        seed in any::<u64>(),
        max_chunk in prop_oneof![1usize..=16, 17usize..=(3 * BLOCK_SIZE)],
    ) {
        let config = Config { recovery, max_record_bytes, ..Config::DEFAULT };
        let whole = decode_whole(&bytes, config);
        let (framed, progress) =
            drive(Bytes::from(bytes.clone()), config, seed, max_chunk.max(bytes.len() / 1_000));
        prop_assert_eq!(&framed, &whole);
        prop_assert!(progress.largest_buffer_capacity <= 4 * BLOCK_SIZE);
        if let Some(max) = max_record_bytes {
            prop_assert!(whole.records.iter().all(|r| r.len() <= max));
        }
    }

    #[test]
    fn random_bytes_decode_with_checksums_off_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..(3 * BLOCK_SIZE)),
        max_record_bytes in 0usize..70_000,
    ) {
        // A file of random bytes: whatever its end cuts is a torn tail.
        let mut decoder = LogDecoder::builder()
            .checksums(false)
            .recovery(Recovery::SkipCorrupted)
            .input(LogInput::File)
            .max_record_bytes(max_record_bytes)
            .build();
        let mut src = BytesMut::from(&bytes[..]);
        while let Some(record) = decoder.decode(&mut src).unwrap() {
            prop_assert!(record.len() <= max_record_bytes);
        }
        while let Some(record) = decoder.decode_eof(&mut src).unwrap() {
            prop_assert!(record.len() <= max_record_bytes);
        }
    }
}

// ---------------------------------------------------------------------------------
// Compression bombs (RocksDB's zstd WALs): the inflated size is bounded by
// `max_record_bytes` whatever the frame claims or holds.

#[cfg(feature = "zstd")]
mod compression_bombs {
    use super::*;
    use std::io::Write;
    use walcodec::fragment::legacy_header;
    use walcodec::metadata::WalCompressionType;
    use walcodec::{Dialect, LogEncoder};

    /// A compressed WAL's start: the type-9 record.
    fn compressed_log() -> Vec<u8> {
        let zstd = WalCompressionType::Zstd.to_payload();
        let mut log = legacy_header(9, &zstd).to_vec();
        log.extend_from_slice(&zstd);
        log
    }

    /// `log` with `payload` appended as one FULL fragment.
    fn push_full(log: &mut Vec<u8>, payload: &[u8]) {
        log.extend_from_slice(&legacy_header(1, payload));
        log.extend_from_slice(payload);
    }

    /// Decodes `log` whole in `recovery` with a 1 MiB limit; the outcome and the
    /// decoding's memory.
    fn decode_limited(log: &[u8], recovery: Recovery) -> (Outcome, Usage) {
        let config = Config {
            recovery,
            max_record_bytes: Some(MIB),
            dialect: Dialect::RocksDb,
            ..Config::DEFAULT
        };
        measure(|| decode_whole(log, config))
    }

    /// Each mode: an error in the strict ones, a report in the others, and never
    /// more memory than the limit allows.
    fn assert_refused(log: &[u8], what: &str, then: &[u8]) {
        for recovery in Recovery::ALL {
            let (outcome, usage) = decode_limited(log, recovery);
            assert!(
                usage.peak_bytes <= memory_bound(MIB) + 4 * MIB,
                "{what}: {usage:?}"
            );
            match recovery {
                Recovery::TolerateTail | Recovery::AbsoluteConsistency => {
                    assert!(outcome.records.is_empty(), "{what}");
                    assert!(outcome.error.is_some(), "{what}");
                }
                _ => {
                    assert_eq!(outcome.reports.len(), 1, "{what}: {outcome:?}");
                    assert_eq!(outcome.error, None, "{what}");
                    let expected: Vec<Vec<u8>> = match recovery {
                        Recovery::SkipCorrupted => vec![then.to_vec()],
                        _ => vec![],
                    };
                    assert_eq!(outcome.record_vecs(), expected, "{what}");
                }
            }
        }
    }

    /// A 64 MiB record of zeros, compressed as RocksDB does (its frame declares
    /// the size): refused before anything is inflated.
    #[test]
    fn a_frame_declaring_a_huge_size_is_refused_before_inflating() {
        let mut log = bytes::BytesMut::new();
        let mut encoder = LogEncoder::builder().zstd().build();
        encoder.encode_record(&vec![0u8; 64 * MIB], &mut log);
        encoder.encode_record(b"next", &mut log);
        assert!(log.len() < 64 * 1024, "{}", log.len());
        assert_refused(&log, "declared 64 MiB", b"next");
        let (outcome, _) = decode_limited(&log, Recovery::TolerateTail);
        let error = outcome.error.unwrap();
        assert!(error.contains("larger than the limit"), "{error}");
    }

    /// A frame with no declared size (a streaming compressor's) that inflates to
    /// 64 MiB: inflation stops at the limit.
    #[test]
    fn a_frame_without_a_size_stops_at_the_limit() {
        let mut compressor = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        compressor.include_contentsize(false).unwrap();
        compressor.long_distance_matching(false).unwrap();
        for _ in 0..64 {
            compressor.write_all(&vec![0u8; MIB]).unwrap();
        }
        let frame = compressor.finish().unwrap();
        assert!(frame.len() < BLOCK_SIZE - HEADER_SIZE, "{}", frame.len());
        let mut log = compressed_log();
        push_full(&mut log, &frame);
        let mut next = Vec::new();
        zstd::stream::copy_encode(&b"next"[..], &mut next, 1).unwrap();
        push_full(&mut log, &next);
        assert_refused(&log, "no declared size", b"next");
    }

    /// Anything but zstd frames after the compression record: typed errors or
    /// reports, no panic, whatever the bytes.
    #[test]
    fn garbage_after_the_compression_record_is_damage() {
        let mut rng = SplitMix64::new(7);
        for case in 0..200 {
            let mut log = compressed_log();
            for _ in 0..rng.range(1, 6) {
                let mut payload = vec![0u8; rng.range(0, 3000)];
                rng.fill(&mut payload);
                if case % 3 == 0 && payload.len() >= 4 {
                    // A zstd magic number before the garbage.
                    payload[..4].copy_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
                }
                push_full(&mut log, &payload);
            }
            for recovery in Recovery::ALL {
                let (outcome, usage) = decode_limited(&log, recovery);
                assert!(usage.peak_bytes <= memory_bound(MIB), "{usage:?}");
                for record in &outcome.records {
                    // Only an empty payload, RocksDB's empty record, comes back.
                    assert!(record.is_empty(), "case {case}: garbage inflated");
                }
            }
        }
    }
}
