//! `walcodec::inspect` used directly, as an operator's tool would: the pass over a
//! clean log, a damaged one (exact findings, offsets and kinds), a torn tail, and a
//! read in any number of ranges giving exactly the items of one read.

use std::convert::Infallible;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};
use walcodec::fragment::FragmentRules;
use walcodec::inspect::{
    InspectError, Inspection, Inspector, Item, ItemKind, LayoutWalk, RangeSource, Tail, EOF_BLOCK,
};
use walcodec::physical::Piece;
use walcodec::{
    CorruptionKind, Dialect, LogDecoder, LogEncoder, LogInput, Position, Recovery, BLOCK_SIZE,
    HEADER_SIZE,
};

const BLOCK: u64 = BLOCK_SIZE as u64;

/// Appends `records` to `log` as a writer that starts at `log`'s end, which must be a
/// block boundary.
fn append(log: &mut BytesMut, records: &[Vec<u8>]) {
    assert_eq!(log.len() % BLOCK_SIZE, 0, "a fresh encoder starts a block");
    let mut encoder = LogEncoder::new();
    for record in records {
        encoder.encode(&record[..], log).unwrap();
    }
}

fn record(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Where each record of `log` sits, read by a strict decoder: the oracle of offsets.
fn positions(log: &[u8]) -> Vec<Position> {
    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::TolerateTail)
        .input(LogInput::File)
        .build();
    let mut src = BytesMut::from(log);
    let mut found = Vec::new();
    while let Some(_record) = decoder.decode_eof(&mut src).unwrap() {
        found.push(decoder.last_record().unwrap());
    }
    found
}

/// A log laid out block by block so that its findings are known exactly:
///
/// | block | holds |
/// |---|---|
/// | 0 | record 0, a FULL fragment filling the block |
/// | 1 | records 1 (100 bytes) and 2 (200 bytes, a payload byte flipped when `damaged`), record 3 filling the rest |
/// | 2 | record 4 (300 bytes), then a zero header over non-zero bytes to the block's end (when `damaged`; else zeros) |
/// | 3 | records 5 and 6 |
fn laid_out_log(damaged: bool) -> (BytesMut, Vec<Position>) {
    let full = BLOCK_SIZE - HEADER_SIZE;
    let mut log = BytesMut::new();
    let rest_of_block_1 = BLOCK_SIZE - (HEADER_SIZE + 100) - (HEADER_SIZE + 200) - HEADER_SIZE;
    append(
        &mut log,
        &[
            record(full, 0),
            record(100, 1),
            record(200, 2),
            record(rest_of_block_1, 3),
            record(300, 4),
        ],
    );
    let zero_fill_at = log.len();
    log.resize(3 * BLOCK_SIZE, 0);
    if damaged {
        // After a zero header (7 zero bytes), bytes a reader skips without a word.
        log[zero_fill_at + HEADER_SIZE..zero_fill_at + HEADER_SIZE + 50].fill(0xab);
    }
    append(&mut log, &[record(400, 5), record(500, 6)]);
    let clean = positions(&log);
    assert_eq!(clean.len(), 7);
    assert_eq!(clean[4].end, zero_fill_at as u64);
    if damaged {
        // The first payload byte of record 2.
        log[clean[2].start as usize + HEADER_SIZE] ^= 0xff;
    }
    (log, clean)
}

/// Every item of a read, with its rendering.
type Items = Vec<(Item, Vec<u8>)>;

fn read_file(
    inspector: &Inspector,
    source: &(impl RangeSource + ?Sized),
    end: u64,
) -> (Items, Inspection) {
    let mut items = Vec::new();
    let inspection = inspector
        .read_file(source, end, |item, rendered| {
            items.push((item.clone(), rendered.to_vec()));
            Ok::<_, Infallible>(())
        })
        .unwrap();
    (items, inspection)
}

fn kinds(items: &Items) -> Vec<(u64, ItemKind)> {
    items
        .iter()
        .map(|(item, _)| (item.block, item.kind.clone()))
        .collect()
}

fn record_item(block: u64, position: Position, len: usize) -> (u64, ItemKind) {
    let kind = ItemKind::Record {
        position,
        len: len as u64,
        note: None,
    };
    (block, kind)
}

fn verify() -> Inspector {
    Inspector::verify(Dialect::LevelDb, 0, 1 << 20)
}

#[test]
fn a_clean_log_gives_its_records_in_order_and_nothing_else() {
    let (log, positions) = laid_out_log(false);
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    let lens = [BLOCK_SIZE - HEADER_SIZE, 100, 200];
    let found: Vec<_> = items
        .iter()
        .map(|(item, _)| match item.kind {
            ItemKind::Record { position, .. } => position,
            ref other => panic!("a clean log has only records: {other:?}"),
        })
        .collect();
    assert_eq!(found, positions);
    assert_eq!(items[0].0.block, 0);
    for (i, len) in lens.into_iter().enumerate() {
        assert!(matches!(items[i].0.kind, ItemKind::Record { len: l, .. } if l == len as u64));
    }
    assert_eq!(inspection.stats.records, 7);
    assert_eq!(inspection.stats.corruptions, 0);
    assert_eq!(inspection.read_to, log.len() as u64);
    assert_eq!(inspection.valid_prefix_len, positions[6].end);
    assert!(!inspection.incomplete_tail);
    assert!(inspection.error.is_none());
    assert_eq!(inspection.strict.damage, None);
    assert!(!inspection.strict.incomplete_tail);
    // Seven FULL fragments, and the zero fill of block 2 (all zeros: hides nothing).
    assert_eq!(inspection.layout.by_type, [0, 7, 0, 0, 0]);
    assert_eq!(inspection.layout.header_bytes, 7 * HEADER_SIZE as u64);
    assert_eq!(
        inspection.layout.zero_fill_bytes,
        3 * BLOCK - positions[4].end
    );
    assert_eq!(inspection.layout.hidden_zero_fills, 0);
    assert_eq!(inspection.tail(), Tail::Clean);
}

#[test]
fn zeros_after_the_last_record_are_a_tail_of_zeros_not_damage() {
    let mut log = BytesMut::new();
    append(&mut log, &[record(1000, 1), record(2000, 2)]);
    let end = log.len() as u64;
    // Preallocated space: zeros to the end of the next block.
    log.resize(2 * BLOCK_SIZE, 0);
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    assert_eq!(items.len(), 2);
    assert_eq!(
        inspection.tail(),
        Tail::Zeros {
            after: end,
            bytes: 2 * BLOCK - end
        }
    );
    // The same zeros with data hidden in them are no tail: the walk found the data.
    log[end as usize + HEADER_SIZE] = 1;
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    // The layout's finding first: it is in the records' block.
    assert!(matches!(items[0].0.kind, ItemKind::HiddenData { offset, .. } if offset == end));
    assert_eq!(inspection.tail(), Tail::Clean);
}

#[test]
fn a_damaged_log_gives_each_finding_at_its_offset_in_log_order() {
    let (log, positions) = laid_out_log(true);
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    let report = items
        .iter()
        .find_map(|(item, _)| match &item.kind {
            ItemKind::Report(report) => Some(report.clone()),
            _ => None,
        })
        .expect("the bad checksum is reported");
    assert_eq!(report.kind(), CorruptionKind::ChecksumMismatch);
    assert_eq!(report.offset(), positions[2].start);
    // LevelDB's reader drops the rest of the block: records 2 and 3.
    assert_eq!(report.bytes(), 2 * BLOCK - positions[2].start);
    let hidden_at = positions[4].end;
    assert_eq!(
        kinds(&items),
        [
            record_item(0, positions[0], BLOCK_SIZE - HEADER_SIZE),
            record_item(1, positions[1], 100),
            (1, ItemKind::Diverged),
            (1, ItemKind::Report(report)),
            (1, ItemKind::StrictFailed),
            // In a block, the layout's findings come before the decoder's.
            (
                2,
                ItemKind::HiddenData {
                    offset: hidden_at,
                    len: 3 * BLOCK - hidden_at,
                }
            ),
            record_item(2, positions[4], 300),
            record_item(3, positions[5], 400),
            record_item(3, positions[6], 500),
        ]
    );
    assert_eq!(inspection.stats.records, 5);
    assert_eq!(inspection.stats.corruptions, 1);
    assert_eq!(
        inspection.stats.dropped_bytes,
        2 * BLOCK - positions[2].start
    );
    let damage = inspection.strict.damage.as_deref().unwrap();
    assert!(damage.contains("checksum"), "{damage}");
    // The strict reader stopped at the damage, after record 1.
    assert_eq!(inspection.strict.valid_prefix_len, positions[1].end);
    assert_eq!(
        inspection.layout.bad_checksum_bytes,
        positions[2].end - positions[2].start
    );
    assert_eq!(
        inspection.layout.skipped_bytes,
        2 * BLOCK - positions[2].end
    );
    assert_eq!(inspection.layout.hidden_zero_fills, 1);
    assert_eq!(inspection.layout.hidden_bytes, 3 * BLOCK - hidden_at);
    // Damage stopped the strict reader: no tail, the damage is the verdict.
    assert_eq!(inspection.tail(), Tail::Clean);
}

#[test]
fn a_torn_tail_is_torn_and_not_damage() {
    let mut log = BytesMut::new();
    append(
        &mut log,
        &[record(1000, 1), record(2000, 2), record(40_000, 3)],
    );
    let positions = positions(&log);
    // Cut the last record in its second block: a writer that died mid-write.
    log.truncate(BLOCK_SIZE + 100);
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    assert_eq!(
        kinds(&items)
            .into_iter()
            .filter(|(_, kind)| matches!(kind, ItemKind::Record { .. }))
            .collect::<Vec<_>>(),
        [
            record_item(0, positions[0], 1000),
            record_item(0, positions[1], 2000)
        ]
    );
    assert!(!items
        .iter()
        .any(|(item, _)| item.kind == ItemKind::StrictFailed));
    assert_eq!(inspection.strict.damage, None);
    assert!(inspection.strict.incomplete_tail);
    assert_eq!(inspection.strict.valid_prefix_len, positions[1].end);
    assert!(inspection.incomplete_tail);
    assert_eq!(inspection.layout.torn_bytes, 100);
    assert_eq!(
        inspection.tail(),
        Tail::Torn {
            after: positions[1].end,
            bytes: BLOCK + 100 - positions[1].end
        }
    );
    assert_eq!(inspection.read_to, BLOCK + 100);
}

/// Logs with every kind of finding: damage, hidden data, a zeroed block followed by
/// data, records across blocks, a torn tail.
fn damaged_logs() -> Vec<BytesMut> {
    let (laid_out, _) = laid_out_log(true);
    let mut logs = vec![laid_out.clone()];
    // Records of every size across blocks, with a few bytes flipped.
    let mut random = BytesMut::new();
    let records: Vec<_> = (0..120)
        .map(|i| record((i * 7919) % 9000 + (i % 5) * 20_000 % 45_000, i as u8))
        .collect();
    append(&mut random, &records);
    let mut seed = 0x2545_f491_u64;
    for _ in 0..6 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let at = (seed >> 33) as usize % random.len();
        random[at] ^= 0x5a;
    }
    logs.push(random.clone());
    // A whole block zeroed, data after it.
    let mut zeroed = random.clone();
    zeroed[3 * BLOCK_SIZE..4 * BLOCK_SIZE].fill(0);
    logs.push(zeroed);
    // Torn in the middle of a record.
    let mut torn = random.clone();
    torn.truncate(random.len() - 5000);
    logs.push(torn);
    logs
}

#[test]
fn any_split_gives_exactly_the_items_of_one_read() {
    for (n, log) in damaged_logs().iter().enumerate() {
        let end = log.len() as u64;
        let mut inspector = verify();
        // Records rendered on the reading threads come back with their items.
        inspector.render(|record, out| {
            out.extend_from_slice(
                format!("{}+{}", record.position.start, record.data.len()).as_bytes(),
            );
            (record.data.len() % 3 == 0).then(|| "a third".into())
        });
        let (whole, whole_end) = read_file(&inspector, &log[..], end);
        assert!(whole.iter().any(|(_, rendered)| !rendered.is_empty()));
        for blocks in [1, 2, 3, 5] {
            for jobs in [1, 2, 3] {
                inspector.jobs(jobs).range_bytes(Some(blocks * BLOCK));
                let (split, split_end) = read_file(&inspector, &log[..], end);
                let context = format!("log {n}, ranges of {blocks} blocks, {jobs} jobs");
                assert_eq!(split, whole, "{context}");
                assert_eq!(split_end.stats, whole_end.stats, "{context}");
                assert_eq!(split_end.layout, whole_end.layout, "{context}");
                assert_eq!(split_end.wal, whole_end.wal, "{context}");
                assert_eq!(split_end.strict, whole_end.strict, "{context}");
                assert_eq!(split_end.read_to, whole_end.read_to, "{context}");
                assert_eq!(
                    split_end.valid_prefix_len, whole_end.valid_prefix_len,
                    "{context}"
                );
                assert_eq!(
                    split_end.incomplete_tail, whole_end.incomplete_tail,
                    "{context}"
                );
            }
        }
    }
}

#[test]
fn a_stream_gives_the_items_and_verdict_of_a_file() {
    for log in damaged_logs() {
        let end = log.len() as u64;
        let (file, file_end) = read_file(&verify(), &log[..], end);
        let mut stream = Vec::new();
        let stream_end = verify()
            .read_stream(io::Cursor::new(log.to_vec()), |item, rendered| {
                stream.push((item.clone(), rendered.to_vec()));
                Ok::<_, Infallible>(())
            })
            .unwrap();
        // A stream's strict reader runs beside the decoder: its verdict is the same,
        // found in the same block.
        assert_eq!(stream, file);
        assert_eq!(stream_end.strict, file_end.strict);
        assert_eq!(stream_end.stats, file_end.stats);
        assert_eq!(stream_end.layout, file_end.layout);
    }
}

#[test]
fn a_file_by_its_path_reads_as_its_bytes_and_reports_progress() {
    let (log, _) = laid_out_log(true);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000007.log");
    std::fs::write(&path, &log).unwrap();
    let read = Arc::new(AtomicU64::new(0));
    let counter = read.clone();
    let mut inspector = verify();
    inspector
        .jobs(2)
        .range_bytes(Some(BLOCK))
        .progress(move |bytes| {
            counter.fetch_add(bytes, Ordering::Relaxed);
        });
    let (from_path, path_end) = read_file(&inspector, path.as_path(), log.len() as u64);
    let (in_memory, memory_end) = read_file(&verify(), &log[..], log.len() as u64);
    assert_eq!(from_path, in_memory);
    assert_eq!(path_end.strict, memory_end.strict);
    // Each range's own bytes once (a range reads on past its end without counting).
    assert_eq!(read.load(Ordering::Relaxed), log.len() as u64);
}

#[test]
fn from_a_start_offset_only_later_records_are_read() {
    let (log, positions) = laid_out_log(false);
    let mut inspector = Inspector::new(
        {
            let mut builder = LogDecoder::builder();
            builder.input(LogInput::File);
            builder
        },
        FragmentRules::new(Dialect::LevelDb),
    );
    inspector.start(positions[5].start);
    let (items, inspection) = read_file(&inspector, &log[..], log.len() as u64);
    assert_eq!(
        kinds(&items),
        [
            record_item(3, positions[5], 400),
            record_item(3, positions[6], 500)
        ]
    );
    assert_eq!(inspection.stats.records, 2);
}

#[test]
fn a_consumer_error_stops_the_read_and_is_returned() {
    let log = &damaged_logs()[1];
    let mut inspector = verify();
    inspector.jobs(3).range_bytes(Some(BLOCK));
    let mut seen = 0;
    let result = inspector.read_file(&log[..], log.len() as u64, |_, _| {
        seen += 1;
        if seen == 4 {
            Err("enough")
        } else {
            Ok(())
        }
    });
    assert!(matches!(result, Err(InspectError::Consumer("enough"))));
    assert_eq!(seen, 4);
}

/// A file that a writer fills in place while it is read: the first `opens` reads
/// see `before`, the later ones `after`.
struct Changing {
    before: Vec<u8>,
    after: Vec<u8>,
    opens: AtomicU64,
}

impl RangeSource for Changing {
    fn open_range(&self, from: u64, to: u64) -> io::Result<Box<dyn Read + '_>> {
        let bytes = match self.opens.fetch_add(1, Ordering::SeqCst) {
            // One thread: the first range's own bytes, then its read past its end.
            0 | 1 => &self.before,
            _ => &self.after,
        };
        bytes[..].open_range(from, to)
    }
}

#[test]
fn ranges_that_disagree_fail_the_read_rather_than_merge_two_files() {
    let mut before = BytesMut::new();
    append(
        &mut before,
        &(0..40).map(|i| record(3000, i)).collect::<Vec<_>>(),
    );
    let mut after = BytesMut::new();
    append(
        &mut after,
        &(0..40).map(|i| record(2500, i)).collect::<Vec<_>>(),
    );
    let source = Changing {
        before: before.to_vec(),
        after: after.to_vec(),
        opens: AtomicU64::new(0),
    };
    let mut inspector = verify();
    inspector.jobs(1).range_bytes(Some(BLOCK));
    let result = inspector.read_file(&source, before.len().min(after.len()) as u64, |_, _| {
        Ok::<_, Infallible>(())
    });
    match result {
        Err(InspectError::Io(e)) => assert!(e.to_string().contains("changed"), "{e}"),
        other => panic!("expected the ranges to disagree: {other:?}"),
    }
}

#[test]
fn hostile_bytes_never_panic_and_split_as_one_read() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..12 {
        let len = (next() % (5 * BLOCK)) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Some rounds: headers that claim the largest lengths and every type.
        if round % 3 == 0 {
            for at in (0..len.saturating_sub(7)).step_by(97) {
                bytes[at + 4] = 0xff;
                bytes[at + 5] = 0xff;
                bytes[at + 6] = (at % 256) as u8;
            }
        }
        for dialect in [Dialect::LevelDb, Dialect::RocksDb, Dialect::Pebble] {
            let inspector = Inspector::verify(dialect, 7, 4096);
            let (whole, _) = read_file(&inspector, &bytes[..], len as u64);
            let mut split = inspector.clone();
            split.jobs(2).range_bytes(Some(BLOCK));
            let (items, _) = read_file(&split, &bytes[..], len as u64);
            assert_eq!(items, whole, "round {round}, {dialect:?}");
        }
    }
    // An end past the bytes, and a start past the end.
    let mut inspector = verify();
    inspector.start(u64::MAX).jobs(4);
    let (items, inspection) = read_file(&inspector, &[1u8, 2, 3][..], u64::MAX);
    assert!(items.is_empty());
    assert_eq!(inspection.stats.records, 0);
}

#[test]
fn the_layout_walk_in_ranges_gives_the_pieces_of_one_walk() {
    for log in damaged_logs() {
        let walk = |jobs: usize, blocks: Option<u64>| {
            let mut pieces = Vec::new();
            LayoutWalk::new(FragmentRules::new(Dialect::LevelDb))
                .jobs(jobs)
                .range_bytes(blocks.map(|b| b * BLOCK))
                .read_file(
                    &log[..],
                    0,
                    log.len() as u64,
                    |chunk| {
                        chunk
                            .map(|piece: Piece<'_>| (piece.offset(), piece.len()))
                            .collect::<Vec<_>>()
                    },
                    |chunk| {
                        pieces.extend(chunk);
                        Ok::<_, Infallible>(())
                    },
                )
                .unwrap();
            pieces
        };
        let whole = walk(1, None);
        // The pieces tile the file.
        let mut at = 0;
        for &(offset, len) in &whole {
            assert_eq!(offset, at);
            at += len;
        }
        assert_eq!(at, log.len() as u64);
        for blocks in [1, 2, 3] {
            assert_eq!(walk(3, Some(blocks)), whole);
        }
    }
}

#[test]
fn the_strict_verdict_is_placed_in_the_block_of_its_damage() {
    // A record across two blocks whose LAST fragment is damaged: LevelDB's reader
    // reports it, and the strict reader (read again from the record before) stops
    // there, in block 1, before anything of block 2.
    let mut log = BytesMut::new();
    append(
        &mut log,
        &[record(100, 1), record(40_000, 2), record(50_000, 3)],
    );
    let positions = positions(&log);
    log[positions[1].end as usize - 10] ^= 1;
    let (items, inspection) = read_file(&verify(), &log[..], log.len() as u64);
    assert!(inspection.strict.damage.is_some());
    assert_eq!(inspection.strict.valid_prefix_len, positions[0].end);
    let found = kinds(&items);
    let strict_failed = found
        .iter()
        .position(|(_, kind)| *kind == ItemKind::StrictFailed)
        .unwrap();
    assert_eq!(found[strict_failed].0, 1);
    // After the block's own findings, before those of later blocks.
    assert!(found[..strict_failed].iter().all(|(block, _)| *block <= 1));
    assert!(found[strict_failed + 1..]
        .iter()
        .all(|(block, _)| *block > 1 && *block != EOF_BLOCK));
    assert_eq!(
        found
            .iter()
            .filter(|(_, kind)| matches!(kind, ItemKind::Record { .. }))
            .count(),
        // Record 1 damaged, record 2 begun in the rest of its block, which is dropped.
        1
    );
}
