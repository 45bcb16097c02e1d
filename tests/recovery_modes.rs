//! Every `Recovery` mode on the same set of damaged logs, with the exact records,
//! reports and errors expected of each.
//!
//! The log (offsets computed by hand from the format rules, checked against the
//! encoder's positions):
//!
//! | record | size   | fragments                                                       |
//! |--------|--------|-----------------------------------------------------------------|
//! | A      | 100    | FULL @0                                                          |
//! | B      | 50000  | FIRST @107 (32654), LAST @32768 (17346)                          |
//! | C      | 100    | FULL @50121                                                      |
//! | D      | 70000  | FIRST @50228 (15301), MIDDLE @65536 (32761), LAST @98304 (21938) |
//! | E      | 10     | FULL @120249, log ends at 120266                                 |

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use walcodec::format::{fragment_checksum, Position};
use walcodec::{CorruptionKind, Error, LogDecoder, LogEncoder, LogReader, Recovery};

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;
const E: usize = 4;

const D_MIDDLE: usize = 65536;
const D_LAST: usize = 98304;
const LOG_LEN: usize = 120266;

fn records() -> Vec<Vec<u8>> {
    [100usize, 50000, 100, 70000, 10]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect())
        .collect()
}

fn clean_log() -> (BytesMut, Vec<Position>) {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let positions: Vec<_> = records()
        .iter()
        .map(|r| encoder.encode_record(r, &mut log))
        .collect();
    let starts: Vec<u64> = positions.iter().map(|p| p.start).collect();
    assert_eq!(starts, [0, 107, 50121, 50228, 120249]);
    assert_eq!(log.len(), LOG_LEN);
    (log, positions)
}

/// Rewrites a fragment's type and fixes its checksum, so only the type is wrong.
fn retype(log: &mut [u8], header: usize, type_byte: u8) {
    let len = u16::from_le_bytes([log[header + 4], log[header + 5]]) as usize;
    log[header + 6] = type_byte;
    let crc = fragment_checksum(type_byte, &log[header + 7..header + 7 + len]);
    log[header..header + 4].copy_from_slice(&crc.to_le_bytes());
}

#[derive(Debug, PartialEq)]
enum End {
    Clean,
    Halted(u64),
    Failed(u64, String),
    TooLarge(u64),
}

#[derive(Debug)]
struct Outcome {
    records: Vec<usize>,
    reports: Vec<(u64, u64, String)>,
    end: End,
    incomplete_tail: bool,
}

async fn read(log: &[u8], recovery: Recovery) -> Outcome {
    let all = records();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    // A log file's bytes: a record its end cuts is a torn tail.
    let decoder = LogDecoder::builder()
        .recovery(recovery)
        .input(walcodec::LogInput::File)
        .on_corruption(move |c| {
            sink.lock()
                .unwrap()
                .push((c.offset(), c.bytes(), c.reason().to_string()))
        })
        .build();
    // Small reads, so every case also runs across chunk boundaries.
    let mut reader = LogReader::new(log, decoder).with_read_size(4093);
    let mut returned = Vec::new();
    let mut end = End::Clean;
    while let Some(record) = reader.next_record().await {
        match record {
            Ok(record) => {
                let index = all
                    .iter()
                    .position(|r| r[..] == record.data[..])
                    .expect("every record returned was written");
                returned.push(index);
            }
            Err(Error::Corruption { offset, kind, .. }) => {
                end = End::Failed(offset, kind.to_string())
            }
            Err(Error::RecordTooLarge { offset, .. }) => end = End::TooLarge(offset),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    if let Some(at) = reader.decoder().halted_at() {
        end = End::Halted(at);
    }
    let reports = reports.lock().unwrap().clone();
    Outcome {
        records: returned,
        reports,
        end,
        incomplete_tail: reader.decoder().has_incomplete_tail(),
    }
}

fn rep(offset: usize, bytes: usize, reason: &str) -> (u64, u64, String) {
    (offset as u64, bytes as u64, reason.to_string())
}

/// The expectations of one damage case in each mode.
struct Case {
    name: &'static str,
    log: BytesMut,
    skip_records: Vec<usize>,
    skip_reports: Vec<(u64, u64, String)>,
    /// Records before the first damage and where it is.
    prefix: Vec<usize>,
    first_damage: (u64, &'static str),
}

async fn check(case: Case) {
    let Case {
        name,
        log,
        skip_records,
        skip_reports,
        prefix,
        first_damage,
    } = case;

    let skip = read(&log, Recovery::SkipCorrupted).await;
    assert_eq!(skip.records, skip_records, "{name}: SkipCorrupted records");
    assert_eq!(skip.reports, skip_reports, "{name}: SkipCorrupted reports");
    assert_eq!(
        skip.end,
        End::Clean,
        "{name}: SkipCorrupted never ends early"
    );

    for mode in [Recovery::TolerateTail, Recovery::AbsoluteConsistency] {
        let strict = read(&log, mode).await;
        assert_eq!(strict.records, prefix, "{name}: {mode:?} records");
        assert_eq!(
            strict.end,
            End::Failed(first_damage.0, first_damage.1.to_string()),
            "{name}: {mode:?} error"
        );
        assert!(strict.reports.is_empty(), "{name}: errors are not reported");
    }

    let pit = read(&log, Recovery::PointInTime).await;
    assert_eq!(pit.records, prefix, "{name}: PointInTime records");
    assert_eq!(
        pit.end,
        End::Halted(first_damage.0),
        "{name}: PointInTime stop"
    );
    assert_eq!(
        pit.reports.len(),
        1,
        "{name}: PointInTime reports where it stopped"
    );
    assert_eq!(pit.reports[0].0, first_damage.0);
    assert_eq!(pit.reports[0].2, first_damage.1);
}

#[tokio::test]
async fn bit_flip_in_full_fragment() {
    let (mut log, _) = clean_log();
    log[50] ^= 0x10; // A's payload
    check(Case {
        name: "flip in A",
        log,
        skip_records: vec![C, D, E],
        skip_reports: vec![
            rep(0, 32768, "checksum mismatch"),
            rep(32768, 17346, "missing start of fragmented record"),
        ],
        prefix: vec![],
        first_damage: (0, "checksum mismatch"),
    })
    .await;
}

#[tokio::test]
async fn bit_flip_in_middle_fragment() {
    let (mut log, _) = clean_log();
    log[D_MIDDLE + 7 + 1000] ^= 0x01;
    check(Case {
        name: "flip in D's MIDDLE",
        log,
        skip_records: vec![A, B, C, E],
        skip_reports: vec![
            rep(D_MIDDLE, 32768, "checksum mismatch"),
            rep(50228, 15301, "error in middle of record"),
            rep(D_LAST, 21938, "missing start of fragmented record"),
        ],
        prefix: vec![A, B, C],
        first_damage: (D_MIDDLE as u64, "checksum mismatch"),
    })
    .await;
}

#[tokio::test]
async fn bit_flip_in_last_fragment_of_partial_block() {
    let (mut log, _) = clean_log();
    log[D_LAST + 7 + 5] ^= 0x80;
    check(Case {
        name: "flip in D's LAST",
        log,
        skip_records: vec![A, B, C],
        // The last block is partial: LevelDB drops what it read of it, to EOF.
        skip_reports: vec![
            rep(D_LAST, LOG_LEN - D_LAST, "checksum mismatch"),
            rep(50228, 15301 + 32761, "error in middle of record"),
        ],
        prefix: vec![A, B, C],
        first_damage: (D_LAST as u64, "checksum mismatch"),
    })
    .await;
}

#[tokio::test]
async fn bad_length_runs_past_block() {
    let (mut log, _) = clean_log();
    log[50121 + 4] = 0xff; // C's length becomes 0xff64
    log[50121 + 5] = 0xff;
    check(Case {
        name: "bad length in C",
        log,
        skip_records: vec![A, B, E],
        skip_reports: vec![
            rep(50121, 65536 - 50121, "bad record length"),
            rep(D_MIDDLE, 32761, "missing start of fragmented record"),
            rep(D_LAST, 21938, "missing start of fragmented record"),
        ],
        prefix: vec![A, B],
        first_damage: (50121, "bad record length"),
    })
    .await;
}

#[tokio::test]
async fn zeroed_block_inside_a_record() {
    let (mut log, _) = clean_log();
    log[D_MIDDLE..D_LAST].fill(0);
    check(Case {
        name: "zeroed block 2",
        log: log.clone(),
        skip_records: vec![A, B, C, E],
        // LevelDB skips the zeros themselves silently; the record they cut is reported.
        skip_reports: vec![
            rep(50228, 15301, "error in middle of record"),
            rep(D_LAST, 21938, "missing start of fragmented record"),
        ],
        prefix: vec![A, B, C],
        first_damage: (50228, "error in middle of record"),
    })
    .await;
    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::SkipCorrupted)
        .build();
    let mut reader = LogReader::new(&log[..], std::mem::take(&mut decoder));
    while reader.next_record().await.is_some() {}
    assert_eq!(reader.decoder().stats().zero_fill_bytes, 32768);
}

#[tokio::test]
async fn garbage_block() {
    let (mut log, _) = clean_log();
    log[D_MIDDLE..D_LAST].fill(0xab); // length 0xabab runs past the block
    check(Case {
        name: "garbage block 2",
        log,
        skip_records: vec![A, B, C, E],
        skip_reports: vec![
            rep(D_MIDDLE, 32768, "bad record length"),
            rep(50228, 15301, "error in middle of record"),
            rep(D_LAST, 21938, "missing start of fragmented record"),
        ],
        prefix: vec![A, B, C],
        first_damage: (D_MIDDLE as u64, "bad record length"),
    })
    .await;
}

#[tokio::test]
async fn unknown_record_type() {
    let (mut log, _) = clean_log();
    retype(&mut log, 120249, 9);
    check(Case {
        name: "unknown type on E",
        log,
        skip_records: vec![A, B, C, D],
        skip_reports: vec![rep(120249, 10, "unknown record type 9")],
        prefix: vec![A, B, C, D],
        first_damage: (120249, "unknown record type 9"),
    })
    .await;
}

#[tokio::test]
async fn orphan_middle_fragment() {
    let (mut log, _) = clean_log();
    retype(&mut log, 50121, 3); // C: FULL -> MIDDLE
    check(Case {
        name: "orphan MIDDLE",
        log,
        skip_records: vec![A, B, D, E],
        skip_reports: vec![rep(50121, 100, "missing start of fragmented record")],
        prefix: vec![A, B],
        first_damage: (50121, "missing start of fragmented record"),
    })
    .await;
}

#[tokio::test]
async fn first_without_last() {
    let (mut log, _) = clean_log();
    retype(&mut log, 0, 2); // A: FULL -> FIRST, then B's FIRST interrupts it
    check(Case {
        name: "FIRST interrupted by FIRST",
        log,
        skip_records: vec![B, C, D, E],
        skip_reports: vec![rep(0, 100, "partial record without end")],
        prefix: vec![],
        first_damage: (0, "partial record without end"),
    })
    .await;
}

/// Truncation at every kind of point: a torn tail is a clean end except in
/// AbsoluteConsistency; nothing is reported in any mode.
#[tokio::test]
async fn truncation_points() {
    let (log, positions) = clean_log();
    let e = positions[E].start as usize;
    let cases: [(&str, usize, Vec<usize>, bool); 8] = [
        ("empty", 0, vec![], false),
        ("inside A's header", 3, vec![], true),
        ("inside A's payload", 50, vec![], true),
        ("after B's FIRST", 32768, vec![A], true),
        (
            "inside D's MIDDLE header",
            D_MIDDLE + 2,
            vec![A, B, C],
            true,
        ),
        ("between D's MIDDLE and LAST", D_LAST, vec![A, B, C], true),
        ("inside E's payload", e + 9, vec![A, B, C, D], true),
        ("at a record boundary", e, vec![A, B, C, D], false),
    ];
    for (name, len, expected, torn) in cases {
        let cut = &log[..len];
        for mode in [
            Recovery::TolerateTail,
            Recovery::PointInTime,
            Recovery::SkipCorrupted,
        ] {
            let out = read(cut, mode).await;
            assert_eq!(out.records, expected, "{name}: {mode:?}");
            assert!(
                out.reports.is_empty(),
                "{name}: {mode:?}: {:?}",
                out.reports
            );
            assert_eq!(out.end, End::Clean, "{name}: {mode:?}");
            assert_eq!(out.incomplete_tail, torn, "{name}: {mode:?}");
        }
        let strict = read(cut, Recovery::AbsoluteConsistency).await;
        assert_eq!(strict.records, expected, "{name}: AbsoluteConsistency");
        if torn {
            assert!(
                matches!(&strict.end, End::Failed(_, r) if r == &CorruptionKind::TruncatedTail.to_string()),
                "{name}: {:?}",
                strict.end
            );
        } else {
            assert_eq!(strict.end, End::Clean, "{name}");
        }
    }
}

/// A record over `max_record_bytes` is an error in the strict modes and one report,
/// covering every byte of it, in SkipCorrupted.
#[tokio::test]
async fn record_too_large() {
    let (log, _) = clean_log();
    let decoder = |recovery| {
        LogDecoder::builder()
            .recovery(recovery)
            .max_record_bytes(60000)
            .build()
    };
    let mut reader = LogReader::new(&log[..], decoder(Recovery::TolerateTail));
    let mut seen = 0;
    loop {
        match reader.next_record().await {
            Some(Ok(_)) => seen += 1,
            Some(Err(Error::RecordTooLarge { offset, max, .. })) => {
                assert_eq!((offset, max), (50228, 60000));
                break;
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
    }
    assert_eq!(seen, 3);

    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let decoder = LogDecoder::builder()
        .recovery(Recovery::SkipCorrupted)
        .max_record_bytes(60000)
        .on_corruption(move |c| sink.lock().unwrap().push(c.clone()))
        .build();
    let mut reader = LogReader::new(&log[..], decoder);
    let mut lengths = Vec::new();
    while let Some(record) = reader.next_record().await {
        lengths.push(record.unwrap().data.len());
    }
    assert_eq!(lengths, [100, 50000, 100, 10]);
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].kind(), CorruptionKind::RecordTooLarge);
    assert_eq!((reports[0].offset(), reports[0].bytes()), (50228, 70000));
}

/// A power cut can leave a file whose size reached the disk before its data: a FIRST
/// fragment, then zeros to EOF. That is a torn tail, not damage, except in
/// SkipCorrupted, which reports it as LevelDB does.
#[tokio::test]
async fn first_then_zeros_to_eof_is_a_torn_tail() {
    let (log, _) = clean_log();
    let mut cut = log[..D_MIDDLE].to_vec();
    cut.resize(D_LAST + 100, 0); // zero block 2 and part of block 3
    for mode in [Recovery::TolerateTail, Recovery::PointInTime] {
        let out = read(&cut, mode).await;
        assert_eq!(out.records, [A, B, C], "{mode:?}");
        assert_eq!(out.end, End::Clean, "{mode:?}");
        assert!(out.reports.is_empty(), "{mode:?}");
        assert!(out.incomplete_tail, "{mode:?}");
    }
    let strict = read(&cut, Recovery::AbsoluteConsistency).await;
    assert_eq!(strict.records, [A, B, C]);
    assert_eq!(
        strict.end,
        End::Failed(50228, CorruptionKind::TruncatedTail.to_string())
    );
    let skip = read(&cut, Recovery::SkipCorrupted).await;
    assert_eq!(skip.records, [A, B, C]);
    assert_eq!(
        skip.reports,
        [rep(50228, 15301, "error in middle of record")]
    );
}
