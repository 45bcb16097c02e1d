//! Exhaustive damage: every truncation of a multi-block log, and single-byte
//! corruption of every header byte and a sample of payload bytes, in every recovery
//! mode. The decoder never panics, never returns a record that was not written, and
//! in `SkipCorrupted` loses only records that touch the damaged block.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use walcodec::format::Position;
use walcodec::{CodecError, LogDecoder, LogEncoder, LogInput, Recovery, BLOCK_SIZE, HEADER_SIZE};

const MODES: [Recovery; 4] = [
    Recovery::TolerateTail,
    Recovery::AbsoluteConsistency,
    Recovery::PointInTime,
    Recovery::SkipCorrupted,
];

struct Log {
    bytes: Vec<u8>,
    records: Vec<Vec<u8>>,
    positions: Vec<Position>,
    /// Offsets of every fragment header.
    headers: Vec<usize>,
}

fn build() -> Log {
    // Sizes chosen to hit every fragment shape and both trailer kinds.
    let sizes = [
        10usize, 0, 200, 30000, 2541, 7, 5000, 40000, 1, 300, 32761, 3, 12,
    ];
    let records: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            // Distinct first bytes keep every non-empty record unique.
            let mut r = vec![i as u8; 2.min(n)];
            r.extend((2..n).map(|j| (j * 7 + i * 13) as u8));
            r
        })
        .collect();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let mut headers = Vec::new();
    let positions = records
        .iter()
        .map(|r| {
            let p = encoder.encode_record(r, &mut log);
            // Walk the record's fragments to list their headers.
            let mut at = p.start as usize;
            while at < p.end as usize {
                if BLOCK_SIZE - at % BLOCK_SIZE < HEADER_SIZE {
                    at += BLOCK_SIZE - at % BLOCK_SIZE;
                }
                headers.push(at);
                let len = u16::from_le_bytes([log[at + 4], log[at + 5]]) as usize;
                at += HEADER_SIZE + len;
            }
            p
        })
        .collect();
    Log {
        bytes: log.to_vec(),
        records,
        positions,
        headers,
    }
}

struct Outcome {
    records: Vec<Bytes>,
    error: Option<CodecError>,
    reports: usize,
    torn: bool,
    valid_prefix: u64,
}

fn decode(bytes: &[u8], recovery: Recovery) -> Outcome {
    let reports = Arc::new(Mutex::new(0usize));
    let sink = reports.clone();
    // A damaged file: a record its end cuts is a torn tail.
    let mut decoder = LogDecoder::builder()
        .recovery(recovery)
        .input(LogInput::File)
        .on_corruption(move |_| *sink.lock().unwrap() += 1)
        .build();
    let mut src = BytesMut::from(bytes);
    let mut records = Vec::new();
    let error = loop {
        match decoder.decode_eof(&mut src) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let reports = *reports.lock().unwrap();
    Outcome {
        records,
        error,
        reports,
        torn: decoder.has_incomplete_tail(),
        valid_prefix: decoder.valid_prefix_len(),
    }
}

fn index_of(log: &Log, record: &[u8]) -> usize {
    log.records
        .iter()
        .position(|r| r[..] == record[..])
        .unwrap_or_else(|| panic!("returned a record never written ({} bytes)", record.len()))
}

#[test]
fn every_truncation_is_a_clean_end_at_the_last_complete_record() {
    let log = build();
    assert!(log.bytes.len() > 3 * BLOCK_SIZE);
    for len in 0..=log.bytes.len() {
        let complete: Vec<usize> = (0..log.records.len())
            .filter(|&i| log.positions[i].end as usize <= len)
            .collect();
        let out = decode(&log.bytes[..len], Recovery::TolerateTail);
        assert!(out.error.is_none(), "truncated at {len}: {:?}", out.error);
        assert_eq!(out.reports, 0, "truncated at {len}");
        let got: Vec<usize> = out.records.iter().map(|r| index_of(&log, r)).collect();
        assert_eq!(got, complete, "truncated at {len}");
        let valid = complete.last().map_or(0, |&i| log.positions[i].end);
        assert_eq!(out.valid_prefix, valid, "truncated at {len}");
        // Past the last complete record there is either nothing, trailer padding,
        // or a torn record.
        let rest = len as u64 - valid;
        let padding = BLOCK_SIZE as u64 - valid % BLOCK_SIZE as u64;
        let only_padding = rest == 0 || (padding < HEADER_SIZE as u64 && rest <= padding);
        assert_eq!(out.torn, !only_padding, "truncated at {len}");
    }
}

/// Storage persists whole sectors: a write cut short by a crash ends at a multiple
/// of this.
const SECTOR: usize = 512;

/// The fragment whose bytes (header included) hold offset `at`, as `(start, end)`.
fn fragment_holding(log: &Log, at: usize) -> Option<(usize, usize)> {
    log.headers.iter().find_map(|&h| {
        let len = u16::from_le_bytes([log.bytes[h + 4], log.bytes[h + 5]]) as usize;
        let end = h + HEADER_SIZE + len;
        (h < at && at < end).then_some((h, end))
    })
}

/// What a crash leaves in a file preallocated with zeros: the bytes written so far,
/// then zeros (here to a block past the end). A write stops at a sector boundary, so
/// a cut there, wherever it falls, reads as the complete records then a clean end,
/// under `TolerateTail`.
#[test]
fn every_write_cut_short_at_a_sector_in_zero_filled_space_is_a_clean_end() {
    let log = build();
    let padded_len = (log.bytes.len() / BLOCK_SIZE + 2) * BLOCK_SIZE;
    for len in (0..=log.bytes.len()).step_by(SECTOR) {
        let mut bytes = log.bytes[..len].to_vec();
        bytes.resize(padded_len, 0);
        let complete: Vec<usize> = (0..log.records.len())
            .filter(|&i| log.positions[i].end as usize <= len)
            .collect();
        let out = decode(&bytes, Recovery::TolerateTail);
        assert!(out.error.is_none(), "cut at {len}: {:?}", out.error);
        assert_eq!(out.reports, 0, "cut at {len}");
        let got: Vec<usize> = out.records.iter().map(|r| index_of(&log, r)).collect();
        assert_eq!(got, complete, "cut at {len}");
        let valid = complete.last().map_or(0, |&i| log.positions[i].end);
        assert_eq!(out.valid_prefix, valid, "cut at {len}");
    }
}

/// A fragment cut short by zeros that do not begin at a sector boundary is not what
/// a crash leaves: it fails its checksum and is reported as the checksum mismatch it
/// is, even though zeros run from it to EOF (a corrupt last record whose final
/// byte is 0x00 must not pass for a torn tail). Cut at a sector boundary inside the
/// same fragment, it is a torn tail.
#[test]
fn a_fragment_cut_off_a_sector_boundary_is_damage() {
    let log = build();
    let padded_len = (log.bytes.len() / BLOCK_SIZE + 2) * BLOCK_SIZE;
    let mut checked = [0usize; 2];
    for len in (1..log.bytes.len()).step_by(7) {
        // Cuts inside a payload, just after a non-zero byte, so the zeros begin
        // exactly at the cut.
        let Some((start, end)) = fragment_holding(&log, len) else {
            continue;
        };
        if len < start + HEADER_SIZE || log.bytes[len - 1] == 0 {
            continue;
        }
        let mut bytes = log.bytes[..len].to_vec();
        bytes.resize(padded_len, 0);
        let torn = len.next_multiple_of(SECTOR) < end;
        checked[torn as usize] += 1;
        let out = decode(&bytes, Recovery::TolerateTail);
        if torn {
            assert!(out.error.is_none(), "cut at {len}: {:?}", out.error);
            assert!(out.torn, "cut at {len}");
        } else {
            match &out.error {
                Some(CodecError::Corruption { offset, kind, .. }) => {
                    assert_eq!(*offset, start as u64, "cut at {len}");
                    assert_eq!(kind.to_string(), "checksum mismatch", "cut at {len}");
                }
                other => panic!("cut at {len}: {other:?}"),
            }
            let strict = decode(&bytes, Recovery::AbsoluteConsistency);
            assert!(
                matches!(
                    strict.error,
                    Some(CodecError::Corruption {
                        kind: walcodec::CorruptionKind::ChecksumMismatch,
                        ..
                    })
                ),
                "cut at {len}: {:?}",
                strict.error
            );
        }
        // Either way, only records that were written, and every complete one.
        let complete = (0..log.records.len())
            .filter(|&i| log.positions[i].end as usize <= len)
            .count();
        assert_eq!(out.records.len(), complete, "cut at {len}");
    }
    assert!(checked[0] > 100 && checked[1] > 100, "{checked:?}");
}

/// A sector cut with anything but zeros after the cut fragment is damage, reported
/// at that fragment, not a torn tail. (Inside the fragment, data after a hole is
/// still the one unfinished write.)
#[test]
fn a_cut_fragment_followed_by_data_is_damage() {
    let log = build();
    let padded_len = (log.bytes.len() / BLOCK_SIZE + 2) * BLOCK_SIZE;
    // Inside the payload of each record's first fragment.
    for (i, p) in log.positions.iter().enumerate() {
        let payload = log.records[i].len();
        if payload < 4 {
            continue;
        }
        let start = p.start as usize;
        let fragment_len = u16::from_le_bytes([log.bytes[start + 4], log.bytes[start + 5]]);
        let fragment_end = start + HEADER_SIZE + fragment_len as usize;
        // A cut at a sector boundary, the shape a torn write has, were it not for
        // the data after it.
        let cut = (start + HEADER_SIZE + 1).next_multiple_of(SECTOR);
        if cut >= fragment_end {
            continue;
        }
        // Just past the cut fragment (a header or trailer there), and far past it.
        for stray in [fragment_end, padded_len - 1] {
            let mut bytes = log.bytes[..cut].to_vec();
            bytes.resize(padded_len, 0);
            if stray <= cut || stray >= padded_len {
                continue;
            }
            bytes[stray] = 0x5a;
            let out = decode(&bytes, Recovery::TolerateTail);
            match &out.error {
                Some(CodecError::Corruption { offset, .. }) => {
                    assert_eq!(*offset, p.start, "record {i}, stray byte at {stray}")
                }
                other => panic!("record {i}, stray byte at {stray}: {other:?}"),
            }
            assert_eq!(out.records.len(), i, "record {i}");
        }
    }
}

fn blocks_touched(p: &Position) -> std::ops::RangeInclusive<usize> {
    (p.start as usize / BLOCK_SIZE)..=((p.end as usize - 1) / BLOCK_SIZE)
}

fn check_damaged(log: &Log, at: usize, xor: u8) {
    let mut bytes = log.bytes.clone();
    bytes[at] ^= xor;
    let damaged_block = at / BLOCK_SIZE;
    for mode in MODES {
        let out = decode(&bytes, mode);
        let got: Vec<usize> = out.records.iter().map(|r| index_of(log, r)).collect();
        // Returned in order, never twice.
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{mode:?} at {at}: {got:?}"
        );
        if mode == Recovery::SkipCorrupted {
            let got: BTreeSet<usize> = got.into_iter().collect();
            for (i, p) in log.positions.iter().enumerate() {
                if !blocks_touched(p).contains(&damaged_block) {
                    assert!(
                        got.contains(&i),
                        "{mode:?}: byte {at} ^ {xor:#x} lost record {i}"
                    );
                }
            }
        } else {
            // The strict modes return a prefix of the log.
            assert!(
                got.iter().enumerate().all(|(k, &i)| k == i),
                "{mode:?} at {at}"
            );
        }
    }
}

#[test]
fn every_header_byte_damaged() {
    let log = build();
    for &header in &log.headers {
        for at in header..header + HEADER_SIZE {
            for xor in [0x01, 0x80, 0xff] {
                check_damaged(&log, at, xor);
            }
        }
    }
}

#[test]
fn sampled_payload_bytes_damaged() {
    let log = build();
    for at in (0..log.bytes.len()).step_by(211) {
        check_damaged(&log, at, 0x20);
    }
}
