//! Torn-tail scan and repair: `scan_log` finds the end of the last complete record,
//! `repair_log` cuts what follows it (and only that), and a writer reopened on the
//! repaired log appends records that read back.

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use futures::TryStreamExt;
use tokio_util::codec::FramedRead;
use walcodec::{
    repair_log, scan_log, AsyncLogWriter, CodecError, CorruptionKind, Error, LogDecoder,
    LogEncoder, Position, Recovery, TailScan, BLOCK_SIZE,
};

const BLOCK: u64 = BLOCK_SIZE as u64;

/// Encodes `records` as one log, returning the bytes and each record's position.
fn encode(records: &[Vec<u8>]) -> (Vec<u8>, Vec<Position>) {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let positions = records
        .iter()
        .map(|r| encoder.encode_record(r, &mut log))
        .collect();
    (log.to_vec(), positions)
}

fn record(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
}

struct Log {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn log_file(bytes: &[u8]) -> Log {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    std::fs::write(&path, bytes).unwrap();
    Log { _dir: dir, path }
}

/// Every record in the file, read with no tolerance for damage at all.
async fn read_strict(path: &Path) -> Vec<Vec<u8>> {
    let file = tokio::fs::File::open(path).await.unwrap();
    let decoder = LogDecoder::builder()
        .recovery(Recovery::AbsoluteConsistency)
        .build();
    FramedRead::new(file, decoder)
        .map_ok(|r| r.to_vec())
        .try_collect()
        .await
        .unwrap()
}

/// Cuts `log` to `cut` bytes and checks scan, repair, and appending afterwards.
async fn check_torn(log: &[u8], cut: usize, valid_len: u64, kept: &[Vec<u8>], incomplete: bool) {
    let file = log_file(&log[..cut]);
    let expected = TailScan {
        valid_len,
        file_len: cut as u64,
        incomplete_tail: incomplete,
    };
    assert_eq!(
        scan_log(&file.path).await.unwrap(),
        expected,
        "cut at {cut}"
    );
    // Scanning changes nothing.
    assert_eq!(std::fs::read(&file.path).unwrap(), &log[..cut]);

    assert_eq!(repair_log(&file.path).await.unwrap(), expected);
    assert_eq!(
        std::fs::read(&file.path).unwrap(),
        &log[..valid_len as usize],
        "repair keeps exactly the valid prefix"
    );
    let again = scan_log(&file.path).await.unwrap();
    assert!(!again.needs_repair() && !again.incomplete_tail);

    // A writer resumes there and its records read back after the kept ones.
    let writer = AsyncLogWriter::open(&file.path).await.unwrap();
    let position = writer.append(b"after repair").await.unwrap();
    assert!(position.start >= valid_len);
    writer.close().await.unwrap();
    let mut want = kept.to_vec();
    want.push(b"after repair".to_vec());
    assert_eq!(read_strict(&file.path).await, want);
}

#[tokio::test]
async fn torn_header_is_cut() {
    let records = vec![record(1, 100), record(2, 50)];
    let (log, positions) = encode(&records);
    let second = positions[1].start as usize;
    for cut in second + 1..second + 7 {
        check_torn(&log, cut, positions[0].end, &records[..1], true).await;
    }
}

#[tokio::test]
async fn torn_payload_is_cut() {
    let records = vec![record(1, 100), record(2, 50)];
    let (log, positions) = encode(&records);
    let second = positions[1].start as usize;
    for cut in [second + 7, second + 8, second + 30, log.len() - 1] {
        check_torn(&log, cut, positions[0].end, &records[..1], true).await;
    }
}

#[tokio::test]
async fn first_without_last_is_cut() {
    // The second record spans three blocks: FIRST, MIDDLE, LAST.
    let records = vec![record(1, 1000), record(2, 2 * BLOCK_SIZE + 500)];
    let (log, positions) = encode(&records);
    let b = BLOCK as usize;
    // At each block boundary (FIRST or MIDDLE complete, nothing after), inside the
    // next header, inside the MIDDLE, and one byte short of the end.
    for cut in [b, b + 3, b + 4000, 2 * b, 2 * b + 7, log.len() - 1] {
        check_torn(&log, cut, positions[0].end, &records[..1], true).await;
    }
}

#[tokio::test]
async fn torn_record_after_an_empty_first_is_cut() {
    // The first record leaves exactly 7 bytes: the second starts with an empty FIRST
    // at the end of block 0 and goes on in block 1.
    let records = vec![record(1, BLOCK_SIZE - 14), record(2, 10)];
    let (log, positions) = encode(&records);
    assert_eq!(positions[1].start, BLOCK - 7);
    for cut in [BLOCK as usize, BLOCK as usize + 5, log.len() - 1] {
        check_torn(&log, cut, positions[0].end, &records[..1], true).await;
    }
}

#[tokio::test]
async fn trailing_zeros_are_cut() {
    let records = vec![record(1, 100), record(2, 3000)];
    let (log, positions) = encode(&records);
    let end = log.len();
    // Zero fill (a preallocated file): a few bytes, the rest of the block, several
    // blocks. Fewer than 7 zeros could be a torn header and are reported as one.
    for zeros in [
        1usize,
        6,
        7,
        8,
        1000,
        BLOCK as usize - end,
        3 * BLOCK as usize,
    ] {
        let mut file = log.clone();
        file.resize(end + zeros, 0);
        check_torn(&file, file.len(), positions[1].end, &records, zeros < 7).await;
    }
}

/// A crash in preallocated space: the last write stops inside a record and zeros run
/// on to the end of the file. The cut record fails its checksum, but nothing but zeros
/// follows it: a torn tail, cut like any other.
#[tokio::test]
async fn a_write_cut_short_in_preallocated_space_is_a_torn_tail() {
    // Record 2's header straddles a sector boundary (it starts at 507).
    let records = vec![record(1, 500), record(2, 3000), record(3, BLOCK_SIZE + 100)];
    let (log, positions) = encode(&records);
    assert_eq!(positions[1].start, 507);
    assert!(positions[2].start < BLOCK && positions[2].end > BLOCK + 7 + 512);
    let sector_after = |at: u64| at.next_multiple_of(512) as usize;
    let file_len = 3 * BLOCK as usize;
    // A write stops at a sector boundary: inside record 2's payload, inside record
    // 3's FIRST and LAST fragments, and inside record 2's header.
    for (cut, kept) in [
        (sector_after(positions[1].start + 7 + 1000), 1),
        (sector_after(positions[2].start + 7), 2),
        (sector_after(BLOCK + 7 + 1), 2),
        (512, 1),
    ] {
        let mut file = log[..cut].to_vec();
        file.resize(file_len, 0);
        check_torn(
            &file,
            file_len,
            positions[kept - 1].end,
            &records[..kept],
            true,
        )
        .await;
    }
}

/// A corrupt last record whose final byte is zero, followed by zeros to EOF, is not
/// a torn write (its zeros do not begin at a sector boundary): scanning, repair and
/// reopening refuse it rather than cut it silently.
#[tokio::test]
async fn a_corrupt_last_record_ending_in_zero_is_not_cut() {
    let records: Vec<Vec<u8>> = (0..11).map(|i| record(i, 100 + i as usize)).collect();
    let (mut log, positions) = encode(&records);
    let last = positions[10];
    log[last.end as usize - 1] = 0;
    log[(last.start + last.end) as usize / 2] ^= 0x10;
    for padding in [0, 4096] {
        let mut bytes = log.clone();
        bytes.resize(log.len() + padding, 0);
        let file = log_file(&bytes);
        for result in [scan_log(&file.path).await, repair_log(&file.path).await] {
            match result {
                Err(Error::Corruption { offset, kind, .. }) => {
                    assert_eq!(offset, last.start);
                    assert_eq!(kind, CorruptionKind::ChecksumMismatch);
                }
                other => panic!("padding {padding}: {other:?}"),
            }
        }
        assert_eq!(std::fs::read(&file.path).unwrap(), bytes, "left as it was");
        assert!(AsyncLogWriter::open(&file.path).await.is_err());
    }
}

#[tokio::test]
async fn appending_after_zero_fill_without_repair_hides_records() {
    // Why the repair matters (google/leveldb#1287): resume after the zeros, as LevelDB
    // does, and a reader skips the new record with the zero fill.
    let (mut log, _) = encode(&[record(1, 100)]);
    log.resize(4096, 0);
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    let mut appended = BytesMut::new();
    encoder.encode_record(b"lost", &mut appended);
    log.extend_from_slice(&appended);
    let records: Vec<_> = FramedRead::new(&log[..], LogDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        records.len(),
        1,
        "the record after the zero fill is skipped"
    );
}

#[tokio::test]
async fn zero_fill_after_a_first_fragment_is_a_torn_tail() {
    // A crash that persisted the file size but not the data: the record's FIRST
    // fragment is there, the rest of the file is zeros.
    let records = vec![record(1, 100), record(2, BLOCK_SIZE + 10)];
    let (log, positions) = encode(&records);
    let mut file = log[..BLOCK as usize].to_vec();
    file.resize(log.len(), 0);
    check_torn(&file, file.len(), positions[0].end, &records[..1], true).await;
}

#[tokio::test]
async fn trailer_bytes_after_the_last_record_are_cut() {
    // The first record leaves 3 bytes in block 0; the writer died after the trailer.
    let records = vec![record(1, BLOCK_SIZE - 10), record(2, 10)];
    let (log, positions) = encode(&records);
    assert_eq!(positions[0].end, BLOCK - 3);
    for cut in [BLOCK as usize - 2, BLOCK as usize] {
        check_torn(&log, cut, positions[0].end, &records[..1], false).await;
    }
}

#[tokio::test]
async fn clean_logs_are_untouched() {
    let mut files: Vec<(String, Vec<u8>)> = [
        "empty-file",
        "ends-in-trailer-eof",
        "exact-fill-eof",
        "leave6-trailer",
        "leave7-zero-first",
        "spill-1byte",
        "with-flush",
        "trailers-6-to-1",
        "many-small-10000",
        "big-1mib",
    ]
    .iter()
    .map(|case| {
        let path = format!(
            "{}/tests/data/writers/{case}/000001.log",
            env!("CARGO_MANIFEST_DIR")
        );
        (case.to_string(), std::fs::read(path).unwrap())
    })
    .collect();
    files.push((
        "leveldb wal".into(),
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/leveldb-db/wal/000003.log"
        ))
        .unwrap(),
    ));
    let (ours, _) = encode(&[record(1, 100), record(2, 3 * BLOCK_SIZE), record(3, 0)]);
    files.push(("ours".into(), ours));

    for (name, bytes) in files {
        let file = log_file(&bytes);
        let scan = scan_log(&file.path).await.unwrap();
        let clean = TailScan {
            valid_len: bytes.len() as u64,
            file_len: bytes.len() as u64,
            incomplete_tail: false,
        };
        assert_eq!(scan, clean, "{name}");
        let modified = std::fs::metadata(&file.path).unwrap().modified().unwrap();
        assert_eq!(repair_log(&file.path).await.unwrap(), clean, "{name}");
        assert_eq!(std::fs::read(&file.path).unwrap(), bytes, "{name}");
        let after = std::fs::metadata(&file.path).unwrap().modified().unwrap();
        assert_eq!(modified, after, "{name}: repair must not write a clean log");
    }
}

#[tokio::test]
async fn mid_log_corruption_is_refused() {
    let records = vec![record(1, 100), record(2, 100), record(3, BLOCK_SIZE)];
    let (log, positions) = encode(&records);

    // A flipped payload byte in the second record, with a good record after it.
    let mut bad_checksum = log.clone();
    bad_checksum[positions[1].start as usize + 20] ^= 0x40;
    // A length that runs past the block, not at EOF.
    let mut bad_length = log.clone();
    bad_length[positions[1].start as usize + 5] = 0xff;
    // A fragmented record cut by a zeroed block, with good records in the next block.
    let (mut zero_gap, gap_positions) = encode(&[
        record(1, 100),
        record(2, BLOCK_SIZE),
        record(3, BLOCK_SIZE),
        record(4, 50),
    ]);
    assert!(gap_positions[3].start > 2 * BLOCK);
    zero_gap[BLOCK as usize..2 * BLOCK as usize].fill(0);
    // The shape of a write cut short in preallocated space, but with the log going on
    // after it: damage, not a torn tail.
    let mut zeroed_end = log.clone();
    zeroed_end[positions[1].end as usize - 30..positions[1].end as usize].fill(0);

    for (name, bytes, kind) in [
        ("checksum", bad_checksum, CorruptionKind::ChecksumMismatch),
        ("length", bad_length, CorruptionKind::BadRecordLength),
        ("zero gap", zero_gap, CorruptionKind::ErrorInMiddleOfRecord),
        ("zeroed end", zeroed_end, CorruptionKind::ChecksumMismatch),
    ] {
        let file = log_file(&bytes);
        match scan_log(&file.path).await {
            Err(Error::Corruption { kind: got, .. }) => assert_eq!(got, kind, "{name}"),
            other => panic!("{name}: expected corruption, got {other:?}"),
        }
        assert!(matches!(
            repair_log(&file.path).await,
            Err(Error::Corruption { .. })
        ));
        assert!(matches!(
            AsyncLogWriter::open(&file.path).await,
            Err(Error::Corruption { .. })
        ));
        assert_eq!(
            std::fs::read(&file.path).unwrap(),
            bytes,
            "{name}: a damaged log is never cut"
        );
    }
}

#[tokio::test]
async fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.log");
    assert!(matches!(scan_log(&missing).await, Err(Error::Io(_))));
    assert!(matches!(repair_log(&missing).await, Err(Error::Io(_))));
}

/// A reader agrees with `scan_log` on the power-cut shape: a FIRST followed by zeros to
/// EOF is a torn tail, not damage.
#[tokio::test]
async fn decoder_treats_first_then_zeros_to_eof_as_a_torn_tail() {
    let (log, positions) = encode(&[record(1, 100), record(2, BLOCK_SIZE + 10)]);
    let mut torn = log[..BLOCK as usize].to_vec();
    torn.resize(BLOCK as usize + 100, 0);
    let mut records = FramedRead::new(
        &torn[..],
        LogDecoder::builder()
            .input(walcodec::LogInput::File)
            .build(),
    );
    let mut read = Vec::new();
    while let Some(record) = records.try_next().await.expect("a torn tail ends cleanly") {
        read.push(record);
    }
    assert_eq!(read, [record(1, 100)]);
    assert!(records.decoder().has_incomplete_tail());
    assert_eq!(records.decoder().valid_prefix_len(), positions[0].end);
}

/// Under `TolerateTail`, zeros after a FIRST are a torn tail "if only zeros follow to
/// EOF, damage if anything else does" (the decoder's own comment). But the zero fill
/// is skipped to the block end unread, so a complete record later in the same block
/// is not seen: the log below reads as a torn tail and `repair_log` cuts that record.
/// Harmless for logs this crate writes (un-synced bytes only), but not what the
/// comment promises.
#[tokio::test]
async fn decoder_sees_a_record_after_zeros_in_the_same_block() {
    let (mut log, positions) = encode(&[record(1, 100), record(2, BLOCK_SIZE + 10), record(3, 50)]);
    // Zero the LAST fragment of record 2 (start of block 1); record 3 follows it there.
    assert!(positions[2].start > BLOCK && positions[2].end < 2 * BLOCK);
    log[BLOCK as usize..positions[1].end as usize].fill(0);
    let result: Result<Vec<_>, CodecError> = FramedRead::new(&log[..], LogDecoder::new())
        .try_collect()
        .await;
    assert!(
        matches!(result, Err(CodecError::Corruption { .. })),
        "a good record after the zeros is damage, not a torn tail: {result:?}"
    );
}

/// The record limit is the caller's: a log with a record above a small limit is
/// refused (not cut) under that limit and clean under the default.
#[tokio::test]
async fn scan_and_repair_take_a_record_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let (log, _) = encode(&[record(1, 100), record(2, 3 * BLOCK_SIZE)]);
    std::fs::write(&path, &log).unwrap();
    assert!(!walcodec::scan_log(&path).await.unwrap().needs_repair());
    let refused = walcodec::RepairOptions::new()
        .max_record_bytes(BLOCK_SIZE)
        .repair(&path)
        .await;
    assert!(
        matches!(refused, Err(Error::RecordTooLarge { .. })),
        "{refused:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), log);
    let scan = walcodec::RepairOptions::new()
        .max_record_bytes(4 * BLOCK_SIZE)
        .scan(&path)
        .await
        .unwrap();
    assert_eq!(scan.valid_len, log.len() as u64);
}

/// After a power cut, storage may have written back a later page of the unsynced
/// tail but not an earlier one: the fragment holding the lost page (zeros) fails its
/// checksum with more log after it. Reopening the writer cuts that tail, while the
/// same hole far back in the log (further than a writer keeps unsynced) is refused,
/// and so is a flipped bit, which leaves no zero sector.
#[tokio::test]
async fn reopen_cuts_a_page_lost_in_the_unsynced_tail_and_nothing_else() {
    // 120 records of 1000 bytes: about 3.7 blocks.
    let records: Vec<Vec<u8>> = (0..120).map(|i| record(i as u8 | 1, 1000)).collect();
    let (log, positions) = encode(&records);
    let lost_page = 3 * BLOCK as usize + 4096..3 * BLOCK as usize + 8192;
    let damaged_first = positions
        .iter()
        .position(|p| p.end as usize > lost_page.start)
        .unwrap();

    let mut lost = log.clone();
    lost[lost_page.clone()].fill(0);
    let file = log_file(&lost);
    let writer = AsyncLogWriter::open(&file.path).await.unwrap();
    assert_eq!(writer.stats().len, positions[damaged_first - 1].end);
    writer.close().await.unwrap();
    assert_eq!(read_strict(&file.path).await, &records[..damaged_first]);
    // A plain repair (no writer's knowledge of what it leaves unsynced) refuses it.
    let file = log_file(&lost);
    assert!(repair_log(&file.path).await.is_err());

    // The same hole with 8 MiB of log after it: not an unsynced tail.
    let more: Vec<Vec<u8>> = (0..8200).map(|i| record(i as u8 | 1, 1000)).collect();
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    let mut tail = BytesMut::new();
    for r in &more {
        encoder.encode_record(r, &mut tail);
    }
    let mut far = lost.clone();
    far.extend_from_slice(&tail);
    let file = log_file(&far);
    assert!(matches!(
        AsyncLogWriter::open(&file.path).await,
        Err(Error::Corruption { .. })
    ));
    assert_eq!(std::fs::read(&file.path).unwrap(), far, "left as it was");

    // A flipped bit in the last record: corruption, refused.
    let mut flipped = log.clone();
    let last = positions.last().unwrap();
    flipped[last.start as usize + 100] ^= 4;
    flipped.resize(flipped.len() + 8192, 0);
    let file = log_file(&flipped);
    assert!(matches!(
        AsyncLogWriter::open(&file.path).await,
        Err(Error::Corruption { .. })
    ));
}

/// A write that began right after the last complete record, 2 bytes before a sector
/// (and page) boundary, whose first page was lost in write-back while the later
/// pages landed: the next record's fragment starts with 2 zero bytes, then holds
/// data. Reopening the writer cuts it (the record was never acknowledged); the same
/// shape further from the end than the writer's unsynced window is corruption.
#[tokio::test]
async fn a_first_page_lost_after_the_last_record_is_cut_on_reopen() {
    let records = vec![record(1, 4096 - 2 - 7), record(2, 10_000)];
    let (log, positions) = encode(&records);
    assert_eq!(positions[0].end, 4094);
    let mut lost = log.clone();
    lost[4094..4096].fill(0);
    let file = log_file(&lost);
    let writer = AsyncLogWriter::open(&file.path).await.unwrap();
    writer.append(b"after").await.unwrap();
    writer.close().await.unwrap();
    assert_eq!(
        read_strict(&file.path).await,
        vec![records[0].clone(), b"after".to_vec()]
    );

    // Far more data after it than a writer leaves unsynced: damage, refused.
    let mut far = lost.clone();
    far.resize(far.len() + (12 << 20), 0xab);
    let file = log_file(&far);
    assert!(AsyncLogWriter::open(&file.path).await.is_err());
}
