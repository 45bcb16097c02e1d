use super::*;
use crate::codec::encoder::LogEncoder;
use crate::format::fragment::{legacy_header, recyclable_header, Part};
use crate::format::metadata::TimestampSize;
use bytes::BytesMut;
use proptest::prelude::*;

fn rocksdb(log_number: u64) -> FragmentRules {
    FragmentRules::new(Dialect::RocksDb).log_number(log_number)
}

/// A compact rendering of a walk in RocksDB's dialect.
fn layout(bytes: &[u8], offset: u64, rules: FragmentRules) -> Vec<String> {
    Pieces::new(bytes, offset, rules)
        .map(|piece| match piece {
            Piece::Fragment {
                offset,
                fragment,
                payload,
                checksum_ok,
            } => format!(
                "{offset} t{} h{} {}{} {}{}",
                fragment.type_byte(),
                fragment.header_len(),
                payload.len(),
                fragment
                    .log_number()
                    .map(|n| format!(" log{n}"))
                    .unwrap_or_default(),
                if checksum_ok { "ok" } else { "bad" },
                if fragment.is_ignorable() {
                    " ignorable"
                } else {
                    ""
                }
            ),
            Piece::Metadata { offset, record, .. } => format!("{offset} meta {record:?}"),
            Piece::Old {
                offset,
                fragment,
                checksum_ok,
                ..
            } => format!(
                "{offset} old log{} {}",
                fragment.log_number().unwrap(),
                if checksum_ok { "ok" } else { "bad" }
            ),
            Piece::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
            Piece::ZeroFill { offset, bytes } => format!("zero {offset} {}", bytes.len()),
            Piece::BadLength { offset, bytes, .. } => {
                format!("badlen {offset} {}", bytes.len())
            }
            Piece::Skipped { offset, bytes } => format!("skip {offset} {}", bytes.len()),
            Piece::Torn { offset, bytes, .. } => format!("torn {offset} {}", bytes.len()),
        })
        .collect()
}

fn assert_tiles(bytes: &[u8], offset: u64, rules: FragmentRules) {
    let mut at = offset;
    for piece in Pieces::new(bytes, offset, rules) {
        assert_eq!(piece.offset(), at);
        assert!(!piece.is_empty());
        at = piece.end();
    }
    assert_eq!(at, offset + bytes.len() as u64);
}

fn recyclable_log(log_number: u64, sizes: &[usize]) -> BytesMut {
    let mut encoder = LogEncoder::builder().recyclable(log_number).build();
    let mut log = BytesMut::new();
    for &size in sizes {
        encoder.encode_record(&vec![size as u8; size], &mut log);
    }
    log
}

#[test]
fn leveldb_pieces_are_the_chunks() {
    let mut log = recyclable_log(3, &[10, 40_000]);
    log[20] ^= 1;
    let pieces: Vec<_> = Pieces::new(&log, 0, FragmentRules::new(Dialect::LevelDb))
        .map(|piece| (piece.offset(), piece.len()))
        .collect();
    let chunks: Vec<_> = Chunks::new(&log, 0)
        .map(|chunk| (chunk.offset(), chunk.len()))
        .collect();
    assert_eq!(pieces, chunks);
}

#[test]
fn recyclable_fragments_show_their_header_size_and_log_number() {
    // 32,768 - 11 - 32,750 = 7 bytes left: a 7-byte recyclable trailer.
    let log = recyclable_log(14, &[32_750, 5]);
    assert_eq!(
        layout(&log, 0, rocksdb(14)),
        [
            "0 t5 h11 32750 log14 ok",
            "pad 32761 7",
            "32768 t5 h11 5 log14 ok"
        ]
    );
    for trailer in 7..=10 {
        let log = recyclable_log(14, &[BLOCK_SIZE - 11 - trailer, 1]);
        assert_eq!(
            layout(&log, 0, rocksdb(14))[1],
            format!("pad {} {trailer}", BLOCK_SIZE - trailer)
        );
    }
    // Exactly 11 bytes left: an empty R-FIRST, then the rest in the next block.
    let log = recyclable_log(14, &[BLOCK_SIZE - 22, 100]);
    assert_eq!(
        layout(&log, 0, rocksdb(14))[1..],
        ["32757 t6 h11 0 log14 ok", "32768 t8 h11 100 log14 ok"]
    );
    let first = Pieces::new(&log, 0, rocksdb(14)).nth(1).unwrap();
    assert_eq!(first.fragment().unwrap().part(), Some(Part::First));
}

#[test]
fn fragments_of_another_log_are_old_whatever_their_checksum() {
    let mut log = recyclable_log(12, &[3]);
    log.extend_from_slice(&recyclable_log(8, &[3, 3, 4])[14..]);
    let mut damaged = log.clone();
    damaged[14 + 12] ^= 1;
    assert_eq!(
        layout(&log, 0, rocksdb(12)),
        ["0 t5 h11 3 log12 ok", "14 old log8 ok", "28 old log8 ok"]
    );
    assert_eq!(
        layout(&damaged, 0, rocksdb(12)),
        ["0 t5 h11 3 log12 ok", "14 old log8 bad", "28 old log8 ok"]
    );
    // Read as log 8, it is log 12's fragment that is old.
    assert_eq!(layout(&log, 0, rocksdb(8))[0], "0 old log12 ok");
}

#[test]
fn metadata_records_are_parsed() {
    let mut log = legacy_header(9, &[7, 0, 0, 0]).to_vec();
    log.extend_from_slice(&[7, 0, 0, 0]);
    let mut encoder = LogEncoder::builder().recyclable(5).offset(11).build();
    let mut rest = BytesMut::new();
    encoder
        .encode_timestamp_sizes(
            &[TimestampSize {
                column_family: 2,
                timestamp_size: 8,
            }],
            &mut rest,
        )
        .unwrap();
    let info = PredecessorWalInfo {
        log_number: 4,
        size_bytes: 4096,
        last_sequence: 99,
    };
    encoder.encode_predecessor_wal_info(&info, &mut rest);
    encoder.encode_record(b"data", &mut rest);
    log.extend_from_slice(&rest);

    let pieces: Vec<_> = Pieces::new(&log, 0, rocksdb(5)).collect();
    assert_eq!(pieces.len(), 4);
    match pieces[0] {
        Piece::Metadata {
            fragment, record, ..
        } => {
            assert_eq!(fragment.header_len(), 7);
            assert_eq!(record, Ok(Metadata::Compression(WalCompressionType::Zstd)));
        }
        other => panic!("{other:?}"),
    }
    match pieces[1] {
        Piece::Metadata {
            fragment,
            record: Ok(Metadata::TimestampSizes(sizes)),
            ..
        } => {
            assert_eq!(fragment.type_byte(), 11);
            assert_eq!(fragment.header_len(), 11);
            let entries: Vec<_> = sizes
                .iter()
                .map(|s| (s.column_family, s.timestamp_size))
                .collect();
            assert_eq!(entries, [(2, 8)]);
        }
        other => panic!("{other:?}"),
    }
    match pieces[2] {
        Piece::Metadata {
            fragment, record, ..
        } => {
            assert_eq!(fragment.type_byte(), 131);
            assert_eq!(record, Ok(Metadata::PredecessorWal(info)));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        pieces[3],
        Piece::Fragment {
            checksum_ok: true,
            ..
        }
    ));
    // LevelDB knows none of them: type 9 is a fragment of an unknown type.
    let first = Pieces::new(&log, 0, FragmentRules::new(Dialect::LevelDb))
        .next()
        .unwrap();
    assert!(matches!(
        first,
        Piece::Fragment { fragment, checksum_ok: true, .. } if fragment.fragment_type().is_none()
    ));
}

#[test]
fn a_malformed_metadata_payload_is_an_error_not_a_panic() {
    let mut log = legacy_header(130, &[1, 2, 3]).to_vec();
    log.extend_from_slice(&[1, 2, 3]);
    match Pieces::new(&log, 0, rocksdb(1)).next().unwrap() {
        Piece::Metadata { record, .. } => {
            assert_eq!(record, Err(MetadataError::TooShort { needed: 24, len: 3 }))
        }
        other => panic!("{other:?}"),
    }
    // With a bad checksum it is only a damaged fragment.
    log[7] ^= 1;
    assert_eq!(layout(&log, 0, rocksdb(1)), ["0 t130 h7 3 bad"]);
}

#[test]
fn unknown_types_with_bit_7_are_ignorable() {
    let mut log = legacy_header(200, b"meta").to_vec();
    log.extend_from_slice(b"meta");
    let mut recyclable = recyclable_header(5, 1, b"x").to_vec();
    recyclable.push(b'x');
    log.extend_from_slice(&recyclable);
    assert_eq!(
        layout(&log, 0, rocksdb(1)),
        ["0 t200 h7 4 ok ignorable", "11 t5 h11 1 log1 ok"]
    );
}

proptest! {
    #[test]
    fn any_bytes_are_tiled_in_rocksdb_without_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2 * BLOCK_SIZE),
        start_block in 0u64..3,
        log_number in 0u64..3,
    ) {
        assert_tiles(&bytes, start_block * BLOCK_SIZE as u64, rocksdb(log_number));
    }

    #[test]
    fn damaged_recycled_logs_are_tiled_and_agree_block_by_block(
        lens in proptest::collection::vec(0usize..40_000, 1..6),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut log = recyclable_log(9, &lens);
        for (at, value) in flips {
            let at = at.index(log.len());
            log[at] = value;
        }
        let log = &log[..cut.index(log.len() + 1)];
        assert_tiles(log, 0, rocksdb(9));
        let mut by_block = Vec::new();
        for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
            by_block.extend(layout(block, (i * BLOCK_SIZE) as u64, rocksdb(9)));
        }
        prop_assert_eq!(by_block, layout(log, 0, rocksdb(9)));
    }
}
