//! The streaming decoder returns the same records and the same reports however its
//! input is chunked, and the same as a plain whole-buffer reference reader that
//! follows LevelDB's algorithm (`common::ReferenceReader`), on valid, random and
//! damaged logs.

use crate::common;

use common::*;
use proptest::prelude::*;
use walcodec::{Recovery, BLOCK_SIZE, HEADER_SIZE};

/// A log of four blocks and a bit with every kind of fragment and of damage: an
/// empty FIRST in a 7-byte gap, an unknown type, an orphaned LAST, a FIRST cut by a
/// FULL, a checksum mismatch mid-block, zero fill inside a fragmented record, a
/// trailer, and a torn tail.
fn damaged_log() -> Vec<u8> {
    let mut log = Vec::new();
    push_fragment(&mut log, 1, b"one");
    push_fragment(&mut log, 1, b"");
    let fill = BLOCK_SIZE - log.len() - 2 * HEADER_SIZE;
    push_fragment(&mut log, 1, &patterned(fill, 1));
    push_fragment(&mut log, 2, b""); // empty FIRST in the last 7 bytes
    assert_eq!(log.len(), BLOCK_SIZE);
    push_fragment(&mut log, 4, b"joins the empty first");
    push_fragment(&mut log, 7, b"unknown type");
    push_fragment(&mut log, 4, b"orphaned last");
    push_fragment(&mut log, 2, b"first, then cut by a full");
    push_fragment(&mut log, 1, b"full");
    let damaged = log.len();
    push_fragment(&mut log, 1, b"checksum will be wrong");
    log[damaged + HEADER_SIZE] ^= 1;
    push_fragment(&mut log, 1, b"dropped with the rest of block 1");
    log.resize(2 * BLOCK_SIZE, 0xee);
    push_fragment(&mut log, 2, b"first, then zero fill");
    log.resize(3 * BLOCK_SIZE, 0);
    push_fragment(
        &mut log,
        2,
        &patterned(BLOCK_SIZE - 2 * HEADER_SIZE - 13, 2),
    );
    push_fragment(&mut log, 4, b"0123456789");
    pad_trailer(&mut log);
    assert_eq!(log.len(), 4 * BLOCK_SIZE);
    push_fragment(&mut log, 1, b"last good record");
    push_fragment(&mut log, 2, b"torn");
    push_fragment(&mut log, 3, b"torn middle");
    log.truncate(log.len() - 3);
    log
}

#[test]
fn damaged_log_reads_as_leveldb_reads_it() {
    let log = damaged_log();
    let out = read_like_leveldb(&log);
    let expected = [
        b"one".to_vec(),
        b"".to_vec(),
        patterned(BLOCK_SIZE - (10 + 7) - 2 * HEADER_SIZE, 1),
        b"joins the empty first".to_vec(),
        b"full".to_vec(),
        [
            patterned(BLOCK_SIZE - 2 * HEADER_SIZE - 13, 2),
            b"0123456789".to_vec(),
        ]
        .concat(),
        b"last good record".to_vec(),
    ];
    assert!(out.record_vecs() == expected, "{out:?}");
    let reports: Vec<(&str, u64)> = out
        .reports
        .iter()
        .map(|r| (r.reason.as_str(), r.bytes))
        .collect();
    let block_1_damage = 2 * BLOCK_SIZE - (BLOCK_SIZE + 21 + 12 + 13 + 25 + 4 + 5 * HEADER_SIZE);
    assert_eq!(
        reports,
        [
            ("unknown record type 7", 12),
            ("missing start of fragmented record", 13),
            ("partial record without end", 25),
            ("checksum mismatch", block_1_damage as u64),
            ("error in middle of record", 21),
        ]
    );
}

/// Every way of cutting the log in two, with `Pending` before each part.
#[test]
fn every_two_way_split_reads_the_same() {
    let log = damaged_log();
    let whole = read_like_leveldb(&log);
    for cut in 0..=log.len() {
        let split = decode_reader(ScriptedReader::new(&log, &[cut]), Config::LEVELDB);
        assert_eq!(split, whole, "log split at {cut}");
    }
}

/// Cuts at every byte around every fragment header and block boundary, three at a
/// time.
#[test]
fn splits_around_headers_and_block_ends_read_the_same() {
    let log = damaged_log();
    let whole = read_like_leveldb(&log);
    let mut points: Vec<usize> = Vec::new();
    for anchor in fragment_offsets(&log)
        .into_iter()
        .chain((0..=log.len() / BLOCK_SIZE).map(|b| b * BLOCK_SIZE))
    {
        points.extend(anchor.saturating_sub(2)..(anchor + 9).min(log.len()));
    }
    points.sort_unstable();
    points.dedup();
    for window in points.windows(3) {
        let split = decode_reader(ScriptedReader::new(&log, window), Config::LEVELDB);
        assert_eq!(split, whole, "log split at {window:?}");
    }
}

/// Every recovery mode gives the same answer whatever the chunking.
#[test]
fn every_recovery_mode_is_chunking_independent() {
    let log = damaged_log();
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        read_every_way(&log, Config::with_recovery(recovery));
    }
}

/// One piece of a synthetic log.
#[derive(Debug, Clone)]
enum Piece {
    /// A fragment header and payload; the checksum is valid unless `bad_crc`.
    Fragment {
        type_byte: u8,
        len: usize,
        bad_crc: bool,
    },
    /// Zeros, as preallocated space leaves.
    Zeros(usize),
    /// Arbitrary bytes.
    Garbage(Vec<u8>),
    /// Zeros up to the block end when fewer than 7 bytes are left (a trailer).
    Trailer,
}

fn type_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        8 => 1u8..=4,
        1 => Just(0u8),
        1 => 5u8..=8,
        1 => any::<u8>(),
    ]
}

fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0usize..=3,
        4 => 4usize..=200,
        2 => 1_000usize..=20_000,
        1 => (BLOCK_SIZE - 40)..=(BLOCK_SIZE - HEADER_SIZE),
        1 => (BLOCK_SIZE - HEADER_SIZE + 1)..=u16::MAX as usize,
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        12 => (type_byte(), payload_len(), prop::bool::weighted(0.1)).prop_map(
            |(type_byte, len, bad_crc)| Piece::Fragment { type_byte, len, bad_crc }
        ),
        1 => (1usize..=3 * HEADER_SIZE).prop_map(Piece::Zeros),
        1 => prop::collection::vec(any::<u8>(), 1..24).prop_map(Piece::Garbage),
        3 => Just(Piece::Trailer),
    ]
}

/// Builds a log from pieces; a fragment's payload is cut to what fits in its block
/// unless its length is meant to run past it.
fn build(pieces: &[Piece]) -> Vec<u8> {
    let mut log = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Fragment {
                type_byte,
                len,
                bad_crc,
            } => {
                let left = BLOCK_SIZE - log.len() % BLOCK_SIZE;
                let len = if *len <= BLOCK_SIZE - HEADER_SIZE && left >= HEADER_SIZE {
                    (*len).min(left - HEADER_SIZE)
                } else {
                    *len
                };
                if len > BLOCK_SIZE - HEADER_SIZE {
                    // A length field past any block, with whatever follows as payload.
                    log.extend_from_slice(&masked_crc(*type_byte, b"").to_le_bytes());
                    log.extend_from_slice(&(len as u16).to_le_bytes());
                    log.push(*type_byte);
                    continue;
                }
                let start = log.len();
                push_fragment(&mut log, *type_byte, &patterned(len, i as u64));
                if *bad_crc {
                    log[start] ^= 0x40;
                }
            }
            Piece::Zeros(n) => log.resize(log.len() + n, 0),
            Piece::Garbage(bytes) => log.extend_from_slice(bytes),
            Piece::Trailer => pad_trailer(&mut log),
        }
    }
    log
}

/// A change to a valid log.
#[derive(Debug, Clone)]
enum Mutation {
    SetByte(prop::sample::Index, u8),
    /// Gives a fragment another type and a checksum that matches it.
    Retype(prop::sample::Index, u8),
    /// Changes a fragment's length field, with a matching checksum when the new
    /// length stays inside the log.
    Relength(prop::sample::Index, u16, bool),
    Zero(prop::sample::Index, usize),
    Delete(prop::sample::Index, usize),
    Insert(prop::sample::Index, Vec<u8>),
    Truncate(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        (any::<Index>(), type_byte()).prop_map(|(i, t)| Mutation::Retype(i, t)),
        (any::<Index>(), any::<u16>(), any::<bool>())
            .prop_map(|(i, l, fix)| Mutation::Relength(i, l, fix)),
        (any::<Index>(), 1usize..=BLOCK_SIZE).prop_map(|(i, n)| Mutation::Zero(i, n)),
        (any::<Index>(), 1usize..=64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(log: &mut Vec<u8>, mutation: &Mutation) {
    if log.is_empty() {
        return;
    }
    let fragments = fragment_offsets(log);
    match mutation {
        Mutation::SetByte(at, byte) => {
            let at = at.index(log.len());
            log[at] = *byte;
        }
        Mutation::Retype(which, type_byte) if !fragments.is_empty() => {
            let at = fragments[which.index(fragments.len())];
            log[at + 6] = *type_byte;
            refresh_checksum(log, at);
        }
        Mutation::Relength(which, len, fix) if !fragments.is_empty() => {
            let at = fragments[which.index(fragments.len())];
            log[at + 4..at + 6].copy_from_slice(&len.to_le_bytes());
            if *fix {
                refresh_checksum(log, at);
            }
        }
        Mutation::Zero(at, n) => {
            let at = at.index(log.len());
            let end = (at + n).min(log.len());
            log[at..end].fill(0);
        }
        Mutation::Delete(at, n) => {
            let at = at.index(log.len());
            let end = (at + n).min(log.len());
            log.drain(at..end);
        }
        Mutation::Insert(at, bytes) => {
            let at = at.index(log.len() + 1);
            log.splice(at..at, bytes.iter().copied());
        }
        Mutation::Truncate(at) => log.truncate(at.index(log.len() + 1)),
        Mutation::Retype(..) | Mutation::Relength(..) => {}
    }
}

/// Makes the checksum of the fragment at `at` match its type and payload, if the
/// payload its length field claims is inside the log.
fn refresh_checksum(log: &mut [u8], at: usize) {
    let len = u16::from_le_bytes([log[at + 4], log[at + 5]]) as usize;
    if at + HEADER_SIZE + len <= log.len() {
        let crc = masked_crc(log[at + 6], &log[at + HEADER_SIZE..at + HEADER_SIZE + len]);
        log[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

fn small_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let len = prop_oneof![
        0usize..=2,
        3usize..=2_000,
        (BLOCK_SIZE - 14)..=BLOCK_SIZE,
        (BLOCK_SIZE + 1)..=(2 * BLOCK_SIZE + 100),
    ];
    prop::collection::vec((len, any::<u64>()), 0..8).prop_map(|specs| {
        specs
            .into_iter()
            .map(|(len, seed)| patterned(len, seed))
            .collect()
    })
}

/// Reads `log` whole and chunked with the decoder (LevelDB mode) and with the
/// reference reader: all must agree.
fn assert_agrees_with_reference(
    log: &[u8],
    seed: u64,
    max_chunk: usize,
) -> Result<(), TestCaseError> {
    let reference = reference_read(log);
    let whole = decode_whole(log, Config::LEVELDB);
    prop_assert_eq!(&whole, &reference, "whole-buffer decode vs reference");
    let chunked = decode_framed(log, Config::LEVELDB, seed, max_chunk);
    prop_assert_eq!(&chunked, &reference, "chunked decode vs reference");
    Ok(())
}

fn max_chunk() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=16, 17usize..=3_000, 3_000usize..=(3 * BLOCK_SIZE)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn decoder_agrees_with_reference_on_random_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..(2 * BLOCK_SIZE + 300)),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        assert_agrees_with_reference(&bytes, seed, max_chunk.max(bytes.len() / 2_000))?;
    }

    #[test]
    fn decoder_agrees_with_reference_on_synthetic_fragment_streams(
        pieces in prop::collection::vec(piece(), 0..40),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        let mut log = build(&pieces);
        if truncate {
            log.truncate(cut.index(log.len() + 1));
        }
        assert_agrees_with_reference(&log, seed, max_chunk.max(log.len() / 2_000))?;
    }

    #[test]
    fn decoder_agrees_with_reference_on_damaged_logs(
        records in small_records(),
        mutations in prop::collection::vec(mutation(), 1..6),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        let mut log = encode_all(&records);
        for mutation in &mutations {
            apply(&mut log, mutation);
        }
        assert_agrees_with_reference(&log, seed, max_chunk.max(log.len() / 2_000))?;
    }

    #[test]
    fn decoder_agrees_with_reference_on_valid_logs(
        records in small_records(),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        let log = encode_all(&records);
        let reference = reference_read(&log);
        prop_assert_eq!(reference.record_vecs(), records);
        prop_assert_eq!(&reference.reports, &[]);
        assert_agrees_with_reference(&log, seed, max_chunk.max(log.len() / 2_000))?;
    }
}

/// A write cut short in preallocated space (a fragment whose payload runs into zeros
/// that go on to EOF) reads the same in any chunks, in every mode; so does the same
/// shape with data after the zeros, which is damage.
#[test]
fn a_fragment_cut_by_zeros_reads_the_same_in_any_chunks() {
    let mut torn = Vec::new();
    push_fragment(&mut torn, 1, b"kept");
    push_fragment(&mut torn, 1, &patterned(3000, 3));
    // The last 2000 bytes of that payload never made it: zeros, then more zeros to
    // two blocks past the end.
    let cut = torn.len() - 2000;
    torn.truncate(cut);
    torn.resize(3 * BLOCK_SIZE, 0);
    let mut damaged = torn.clone();
    damaged[2 * BLOCK_SIZE + 100] = 0x42;

    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        let config = Config::with_recovery(recovery);
        let clean = read_every_way(&torn, config);
        assert_eq!(clean.record_vecs(), [b"kept".to_vec()], "{recovery:?}");
        let bad = read_every_way(&damaged, config);
        assert_eq!(bad.record_vecs(), [b"kept".to_vec()], "{recovery:?}");
        // A torn tail: a clean end where the mode allows one. Data after the zeros:
        // the checksum mismatch, as an error or (PointInTime) a reported stop.
        // SkipCorrupted reports both as LevelDB does.
        let (clean_error, clean_reports, bad_error, bad_reports) = match recovery {
            Recovery::TolerateTail => (None, 0, Some("checksum mismatch"), 0),
            Recovery::AbsoluteConsistency => (Some("truncated"), 0, Some("checksum mismatch"), 0),
            Recovery::PointInTime => (None, 0, None, 1),
            _ => (None, 1, None, 1),
        };
        let has = |error: &Option<String>, want: Option<&str>| match (error, want) {
            (None, None) => true,
            (Some(e), Some(w)) => e.contains(w),
            _ => false,
        };
        assert!(has(&clean.error, clean_error), "{recovery:?}: {clean:?}");
        assert_eq!(
            clean.reports.len(),
            clean_reports,
            "{recovery:?}: {clean:?}"
        );
        assert!(has(&bad.error, bad_error), "{recovery:?}: {bad:?}");
        assert_eq!(bad.reports.len(), bad_reports, "{recovery:?}: {bad:?}");
    }
}
