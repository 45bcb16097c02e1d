use super::*;
use crate::codec::encoder::LogEncoder;
use bytes::BytesMut;
use proptest::prelude::*;

fn encode(records: &[Vec<u8>]) -> BytesMut {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log
}

/// A compact rendering of a walk, to compare layouts at a glance.
fn layout(bytes: &[u8], offset: u64) -> Vec<String> {
    Chunks::new(bytes, offset)
        .map(|chunk| match chunk {
            Chunk::Fragment {
                offset,
                header,
                payload,
                checksum_ok,
            } => format!(
                "{offset} t{} {} {}",
                header.type_byte,
                payload.len(),
                if checksum_ok { "ok" } else { "bad" }
            ),
            Chunk::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
            Chunk::ZeroFill { offset, bytes } => format!("zero {offset} {}", bytes.len()),
            Chunk::BadLength {
                offset,
                header,
                bytes,
            } => format!("badlen {offset} {} {}", header.length, bytes.len()),
            Chunk::Skipped { offset, bytes } => format!("skip {offset} {}", bytes.len()),
            Chunk::Torn {
                offset,
                header,
                bytes,
            } => format!("torn {offset} {} {}", header.is_some(), bytes.len()),
        })
        .collect()
}

fn assert_tiles(bytes: &[u8], offset: u64) {
    let mut at = offset;
    for chunk in Chunks::new(bytes, offset) {
        assert_eq!(chunk.offset(), at);
        assert!(!chunk.is_empty());
        at = chunk.end();
    }
    assert_eq!(at, offset + bytes.len() as u64);
}

#[test]
fn layout_of_the_format_documents_example() {
    let log = encode(&[vec![b'a'; 1000], vec![b'b'; 97270], vec![b'c'; 8000]]);
    assert_eq!(
        layout(&log, 0),
        [
            "0 t1 1000 ok",
            "1007 t2 31754 ok",
            "32768 t3 32761 ok",
            "65536 t4 32755 ok",
            "pad 98298 6",
            "98304 t1 8000 ok",
        ]
    );
}

#[test]
fn fragments_reassemble_into_the_records() {
    let records: Vec<Vec<u8>> = [0usize, 1, 32754, 0, 32761, 100_000, 6, 7]
        .iter()
        .enumerate()
        .map(|(i, &len)| vec![i as u8; len])
        .collect();
    let log = encode(&records);
    let mut rebuilt = Vec::new();
    let mut open = Vec::new();
    for chunk in Chunks::new(&log, 0) {
        match chunk {
            Chunk::Fragment {
                header,
                payload,
                checksum_ok: true,
                ..
            } => {
                open.extend_from_slice(payload);
                match FragmentType::from_u8(header.type_byte, Dialect::LevelDb) {
                    Some(FragmentType::Full) | Some(FragmentType::Last) => {
                        rebuilt.push(std::mem::take(&mut open))
                    }
                    Some(FragmentType::First) | Some(FragmentType::Middle) => {}
                    other => panic!("unexpected type {other:?}"),
                }
            }
            Chunk::Trailer { bytes, .. } => assert!(bytes.iter().all(|&b| b == 0)),
            other => panic!("unexpected chunk {other:?}"),
        }
    }
    assert_eq!(rebuilt, records);
}

#[test]
fn block_by_block_walk_equals_whole_walk() {
    let log = encode(&[
        vec![1; 50_000],
        vec![2; 32_755],
        vec![3; 10],
        vec![4; 70_000],
    ]);
    let whole = layout(&log, 0);
    let mut by_block = Vec::new();
    for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
        by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
    }
    assert_eq!(by_block, whole);
}

#[test]
fn checksum_mismatch_drops_the_rest_of_the_block() {
    let mut log = encode(&[b"foo".to_vec(), b"bar".to_vec(), vec![9; 40_000]]);
    log[8] ^= 1; // a payload byte of "foo"
    assert_eq!(
        layout(&log, 0),
        [
            "0 t1 3 bad",
            "skip 10 32758",
            "32768 t4 7259 ok", // the LAST of the 40,000-byte record
        ]
    );
}

#[test]
fn bad_checksum_that_ends_a_block_skips_nothing() {
    let mut log = encode(&[vec![5; BLOCK_SIZE - HEADER_SIZE], b"x".to_vec()]);
    log[100] ^= 0x80;
    assert_eq!(layout(&log, 0), ["0 t1 32761 bad", "32768 t1 1 ok"]);
}

#[test]
fn length_past_a_complete_block_is_bad_length() {
    let mut log = encode(&[b"foo".to_vec(), vec![1; 40_000]]);
    log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
    assert_eq!(
        layout(&log, 0),
        ["badlen 0 60000 32768", "32768 t4 7249 ok"]
    );
}

#[test]
fn length_past_the_end_of_a_partial_block_is_torn() {
    let mut log = encode(&[b"foo".to_vec()]);
    log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
    assert_eq!(layout(&log, 0), ["torn 0 true 10"]);
}

#[test]
fn torn_header_and_torn_payload() {
    let log = encode(&[b"foo".to_vec(), b"barbaz".to_vec()]);
    assert_eq!(layout(&log[..14], 0), ["0 t1 3 ok", "torn 10 false 4"]);
    assert_eq!(layout(&log[..20], 0), ["0 t1 3 ok", "torn 10 true 10"]);
}

#[test]
fn zero_fill_runs_to_the_block_end() {
    let mut log = encode(&[b"foo".to_vec()]);
    log.resize(BLOCK_SIZE, 0);
    let tail = encode(&[b"next".to_vec()]);
    log.extend_from_slice(&tail);
    assert_eq!(
        layout(&log, 0),
        ["0 t1 3 ok", "zero 10 32758", "32768 t1 4 ok"]
    );
    // At EOF the zero fill ends with the input.
    assert_eq!(layout(&log[..1000], 0), ["0 t1 3 ok", "zero 10 990"]);
}

#[test]
fn trailer_cut_by_eof() {
    let mut log = encode(&[vec![0; BLOCK_SIZE - HEADER_SIZE - 4]]);
    assert_eq!(log.len(), BLOCK_SIZE - 4);
    assert_eq!(layout(&log, 0), ["0 t1 32757 ok"]);
    log.extend_from_slice(&[0, 0]);
    assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 2"]);
    log.extend_from_slice(&[0, 0]);
    assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 4"]);
}

#[test]
fn walk_from_a_later_block() {
    let log = encode(&[vec![1; 40_000], b"z".to_vec()]);
    let from = BLOCK_SIZE;
    assert_eq!(
        layout(&log[from..], from as u64),
        ["32768 t4 7239 ok", "40014 t1 1 ok"]
    );
}

/// What the decoder counts, from the walk: the two must read bytes alike. The
/// last value is whether the walk ends torn (the decoder then has an incomplete
/// tail; it may also have one the walk cannot see, a FIRST with no LAST).
fn decoder_counts_from_walk(log: &[u8]) -> (u64, u64, u64, bool) {
    let (mut fragments, mut trailer, mut zero_fill, mut torn) = (0, 0, 0, false);
    for chunk in Chunks::new(log, 0) {
        match chunk {
            Chunk::Fragment {
                checksum_ok: true, ..
            } => fragments += 1,
            Chunk::Trailer { .. } => trailer += chunk.len(),
            Chunk::ZeroFill { .. } => zero_fill += chunk.len(),
            Chunk::Torn { .. } => torn = true,
            _ => {}
        }
    }
    (fragments, trailer, zero_fill, torn)
}

fn decoder_counts(log: &[u8]) -> (u64, u64, u64, bool) {
    use tokio_util::codec::Decoder;
    let mut decoder = crate::decoder::LogDecoder::builder()
        .recovery(crate::decoder::Recovery::SkipCorrupted)
        .input(crate::decoder::LogInput::File)
        .build();
    let mut buffer = BytesMut::from(log);
    while let Some(_record) = decoder.decode_eof(&mut buffer).unwrap() {}
    let stats = decoder.stats();
    (
        stats.fragments,
        stats.trailer_bytes,
        stats.zero_fill_bytes,
        decoder.has_incomplete_tail(),
    )
}

fn assert_walk_agrees_with_decoder(log: &[u8]) {
    let (walk, decoded) = (decoder_counts_from_walk(log), decoder_counts(log));
    assert_eq!((walk.0, walk.1, walk.2), (decoded.0, decoded.1, decoded.2));
    assert!(!walk.3 || decoded.3, "a torn walk is an incomplete tail");
}

/// Preallocated zeros that end a few bytes into a block: those bytes are a
/// header cut short for both (found by the property test below).
#[test]
fn zeros_ending_a_few_bytes_into_a_block_are_torn_for_both() {
    let records: Vec<Vec<u8>> = [7044usize, 36978, 14813, 21889]
        .iter()
        .map(|&n| vec![n as u8 | 1; n])
        .collect();
    let mut log = encode(&records);
    for spill in 1..HEADER_SIZE {
        log.resize(4 * BLOCK_SIZE + spill, 0);
        assert!(decoder_counts_from_walk(&log).3, "{spill} bytes: torn walk");
        assert_walk_agrees_with_decoder(&log);
    }
}

proptest! {
    #[test]
    fn any_bytes_are_tiled_without_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK_SIZE),
        start_block in 0u64..4,
    ) {
        assert_tiles(&bytes, start_block * BLOCK_SIZE as u64);
    }

    #[test]
    fn damaged_logs_are_tiled_and_agree_block_by_block(
        lens in proptest::collection::vec(0usize..50_000, 1..8),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8; n]).collect();
        let mut log = encode(&records);
        for (at, value) in flips {
            let at = at.index(log.len());
            log[at] = value;
        }
        let log = &log[..cut.index(log.len() + 1)];
        assert_tiles(log, 0);
        let mut by_block = Vec::new();
        for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
            by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
        }
        prop_assert_eq!(by_block, layout(log, 0));
        assert_walk_agrees_with_decoder(log);
    }

    #[test]
    fn walk_and_decoder_agree_on_zero_filled_and_trailing_logs(
        lens in proptest::collection::vec(0usize..40_000, 1..6),
        zeros in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..40_000), 0..3),
        tail_zeros in 0usize..70_000,
    ) {
        let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8 | 1; n]).collect();
        let mut log = encode(&records);
        for (at, len) in zeros {
            let at = at.index(log.len());
            let end = (at + len).min(log.len());
            log[at..end].fill(0);
        }
        log.resize(log.len() + tail_zeros, 0);
        assert_tiles(&log, 0);
        assert_walk_agrees_with_decoder(&log);
    }
}
