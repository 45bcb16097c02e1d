use super::*;

const LEVELDB: FragmentRules = FragmentRules::new(Dialect::LevelDb);
const ROCKSDB: FragmentRules = FragmentRules::new(Dialect::RocksDb).log_number(12);

fn legacy(type_byte: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = legacy_header(type_byte, payload).to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

fn recyclable(type_byte: u8, log_number: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = recyclable_header(type_byte, log_number, payload).to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

fn fragment(parsed: Parsed) -> Fragment {
    match parsed {
        Parsed::Fragment(fragment) => fragment,
        other => panic!("not a fragment: {other:?}"),
    }
}

#[test]
fn legacy_header_is_leveldbs() {
    assert_eq!(legacy(1, b"foo"), b"\xdd\x5f\xb3\x7a\x03\x00\x01foo");
}

#[test]
fn a_legacy_fragment_in_both_dialects() {
    let bytes = legacy(1, b"foo");
    for rules in [LEVELDB, ROCKSDB] {
        let f = fragment(rules.parse(&bytes, BLOCK_SIZE));
        assert_eq!(f.fragment_type(), Some(FragmentType::Full));
        assert_eq!(f.part(), Some(Part::Full));
        assert_eq!((f.header_len(), f.len()), (7, 10));
        assert_eq!(&bytes[f.payload_range()], b"foo");
        assert_eq!(f.log_number(), None);
    }
}

#[test]
fn fewer_than_seven_bytes_left_is_a_trailer() {
    for rules in [LEVELDB, ROCKSDB] {
        for left in 1..LEGACY_HEADER_SIZE {
            assert_eq!(rules.parse(&[], left), Parsed::Trailer { len: left });
            assert_eq!(rules.parse(&[1; 20], left), Parsed::Trailer { len: left });
        }
    }
}

#[test]
fn a_header_cut_short_needs_more() {
    let bytes = legacy(1, b"foo");
    for cut in 0..LEGACY_HEADER_SIZE {
        assert_eq!(
            LEVELDB.parse(&bytes[..cut], BLOCK_SIZE),
            Parsed::Incomplete {
                needed: 7,
                header: None
            }
        );
    }
    let bytes = recyclable(5, 12, b"foo");
    for cut in 7..RECYCLABLE_HEADER_SIZE {
        assert_eq!(
            ROCKSDB.parse(&bytes[..cut], BLOCK_SIZE),
            Parsed::Incomplete {
                needed: 11,
                header: None
            }
        );
    }
}

#[test]
fn a_payload_cut_short_needs_more() {
    let bytes = recyclable(5, 12, b"hello");
    match ROCKSDB.parse(&bytes[..13], BLOCK_SIZE) {
        Parsed::Incomplete {
            needed: 16,
            header: Some(header),
        } => {
            assert_eq!(header.length, 5);
            assert_eq!(header.log_number, Some(12));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn recyclable_fragments_carry_the_log_number_in_the_checksum() {
    for (type_byte, part) in [
        (5, Part::Full),
        (6, Part::First),
        (7, Part::Middle),
        (8, Part::Last),
    ] {
        let bytes = recyclable(type_byte, 12, b"payload");
        assert_eq!(bytes.len(), 18);
        assert_eq!(&bytes[7..11], &12u32.to_le_bytes());
        let stored = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        assert_eq!(unmask(stored), crc32c::crc32c(&bytes[6..]));
        let f = fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE));
        assert_eq!(f.part(), Some(part));
        assert_eq!(f.log_number(), Some(12));
        assert_eq!(f.header_len(), 11);
        assert_eq!(&bytes[f.payload_range()], b"payload");
        assert_eq!(
            Part::for_fragment(
                part == Part::Full || part == Part::First,
                part == Part::Full || part == Part::Last
            ),
            part
        );
        assert_eq!(part.type_byte(true), type_byte);
    }
}

#[test]
fn leveldb_reads_a_recyclable_fragment_as_a_damaged_legacy_one() {
    let bytes = recyclable(5, 12, b"payload");
    match LEVELDB.parse(&bytes, BLOCK_SIZE) {
        Parsed::Defect(Defect::ChecksumMismatch {
            fragment,
            block_left,
        }) => {
            assert_eq!(fragment.header_len(), 7);
            assert_eq!(fragment.fragment_type(), None);
            assert_eq!(block_left, BLOCK_SIZE);
        }
        other => panic!("{other:?}"),
    }
    let f = fragment(LEVELDB.verify_checksums(false).parse(&bytes, BLOCK_SIZE));
    assert_eq!(f.fragment_type(), None);
    assert!(!f.is_ignorable());
}

#[test]
fn another_log_number_is_old_before_the_checksum_is_looked_at() {
    let mut bytes = recyclable(5, 10, b"stale");
    bytes[0] ^= 0xff;
    match ROCKSDB.parse(&bytes, BLOCK_SIZE) {
        Parsed::Defect(defect @ Defect::OldLogNumber { fragment }) => {
            assert_eq!(fragment.log_number(), Some(10));
            assert_eq!(defect.len(), 16);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_the_low_32_bits_of_the_log_number_are_compared() {
    let rules = FragmentRules::new(Dialect::RocksDb).log_number((1 << 32) + 12);
    let bytes = recyclable(5, (1 << 32) + 12, b"x");
    assert_eq!(&bytes[7..11], &12u32.to_le_bytes());
    fragment(rules.parse(&bytes, BLOCK_SIZE));
    fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE));
}

#[test]
fn a_recyclable_type_with_fewer_than_eleven_left_is_a_trailer() {
    let bytes = recyclable(6, 12, b"");
    for left in 7..RECYCLABLE_HEADER_SIZE {
        assert_eq!(ROCKSDB.parse(&bytes, left), Parsed::Trailer { len: left });
    }
    let f = fragment(ROCKSDB.parse(&bytes, 11));
    assert_eq!(f.part(), Some(Part::First));
    assert_eq!(f.len(), 11);
}

#[test]
fn the_zeros_a_recyclable_writer_leaves_are_zero_fill() {
    for left in 7..RECYCLABLE_HEADER_SIZE {
        assert_eq!(
            ROCKSDB.parse(&[0; 10][..left], left),
            Parsed::ZeroFill { len: left }
        );
    }
}

#[test]
fn a_zero_header_is_zero_fill_to_the_block_end() {
    for rules in [LEVELDB, ROCKSDB] {
        assert_eq!(rules.parse(&[0; 7], 1000), Parsed::ZeroFill { len: 1000 });
        // Only type and length count: a checksum left by a torn header does not.
        assert_eq!(
            rules.parse(&[9, 9, 9, 9, 0, 0, 0], 1000),
            Parsed::ZeroFill { len: 1000 }
        );
    }
}

#[test]
fn type_zero_with_a_payload_is_a_fragment_without_a_part() {
    let bytes = legacy(0, b"ab");
    let f = fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE));
    assert_eq!(f.fragment_type(), Some(FragmentType::Zero));
    assert_eq!(f.part(), None);
}

#[test]
fn a_length_past_the_block_is_bad_once_the_block_is_there() {
    let bytes = legacy(1, &[7; 100]);
    assert_eq!(
        LEVELDB.parse(&bytes[..50], 60),
        Parsed::Incomplete {
            needed: 60,
            header: LEVELDB.parse(&bytes, BLOCK_SIZE).fragment_header()
        }
    );
    match LEVELDB.parse(&bytes, 60) {
        Parsed::Defect(defect @ Defect::BadLength { header, block_left }) => {
            assert_eq!((header.length, block_left, defect.len()), (100, 60, 60));
        }
        other => panic!("{other:?}"),
    }
    let bytes = recyclable(5, 12, &[7; 100]);
    assert!(matches!(
        ROCKSDB.parse(&bytes, 110),
        Parsed::Defect(Defect::BadLength {
            block_left: 110,
            ..
        })
    ));
    fragment(ROCKSDB.parse(&bytes, 111));
}

#[test]
fn a_bad_length_comes_before_an_old_log_number() {
    let bytes = recyclable(5, 10, &[7; 100]);
    assert!(matches!(
        ROCKSDB.parse(&bytes, 110),
        Parsed::Defect(Defect::BadLength { .. })
    ));
}

#[test]
fn a_checksum_mismatch_unless_checksums_are_off() {
    for (rules, mut bytes) in [
        (LEVELDB, legacy(1, b"hello")),
        (ROCKSDB, recyclable(5, 12, b"hello")),
    ] {
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        match rules.parse(&bytes, 500) {
            Parsed::Defect(defect @ Defect::ChecksumMismatch { fragment, .. }) => {
                assert_eq!(defect.len(), 500);
                assert_eq!(defect.header(), fragment.header());
            }
            other => panic!("{other:?}"),
        }
        fragment(rules.verify_checksums(false).parse(&bytes, 500));
    }
}

#[test]
fn metadata_types_and_their_header_sizes() {
    let cases = [
        (9, FragmentType::SetCompressionType, 7),
        (10, FragmentType::UserDefinedTimestampSize, 7),
        (11, FragmentType::RecyclableUserDefinedTimestampSize, 11),
        (130, FragmentType::PredecessorWalInfo, 7),
        (131, FragmentType::RecyclablePredecessorWalInfo, 11),
    ];
    for (type_byte, fragment_type, header_size) in cases {
        let bytes = if header_size == 11 {
            recyclable(type_byte, 12, &[1; 6])
        } else {
            legacy(type_byte, &[1; 6])
        };
        let f = fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE));
        assert_eq!(f.fragment_type(), Some(fragment_type));
        assert!(fragment_type.is_metadata());
        assert_eq!(f.part(), None);
        assert_eq!(f.header_len(), header_size);
        assert_eq!(fragment_type.header_size(), header_size);
        // LevelDB knows none of them.
        assert_eq!(FragmentType::from_u8(type_byte, Dialect::LevelDb), None);
    }
}

#[test]
fn unknown_types_with_bit_7_are_ignorable_in_rocksdb_only() {
    let bytes = legacy(200, b"meta");
    let f = fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE));
    assert_eq!(f.fragment_type(), None);
    assert!(f.is_ignorable());
    assert!(!fragment(LEVELDB.parse(&bytes, BLOCK_SIZE)).is_ignorable());
    let bytes = legacy(12, b"meta");
    assert!(!fragment(ROCKSDB.parse(&bytes, BLOCK_SIZE)).is_ignorable());
}

#[test]
fn type_bytes_round_trip() {
    for byte in 0..=255u8 {
        for dialect in [Dialect::LevelDb, Dialect::RocksDb] {
            if let Some(t) = FragmentType::from_u8(byte, dialect) {
                assert_eq!(t.as_u8(), byte);
                assert_eq!(t.is_recyclable(), is_recyclable_type(byte, dialect));
                if let Some(part) = t.part() {
                    assert_eq!(part.type_byte(t.is_recyclable()), byte);
                }
            }
        }
    }
    assert_eq!(Part::Last.type_byte(false), FragmentType::Last.as_u8());
}

#[test]
fn never_panics_on_any_short_input() {
    let bytes = recyclable(6, 12, &[3; 40]);
    for rules in [LEVELDB, ROCKSDB, ROCKSDB.verify_checksums(false)] {
        for left in 1..=60 {
            for cut in 0..=bytes.len() {
                let _ = rules.parse(&bytes[..cut], left);
            }
        }
    }
}

#[test]
fn sniffing_the_start_of_a_log() {
    let leveldb = legacy(1, b"hello");
    assert_eq!(
        sniff(&leveldb),
        Sniffed {
            dialect: Dialect::LevelDb,
            log_number: None,
            compressed: false
        }
    );
    let recycled = recyclable(8, 77, b"tail");
    assert_eq!(sniff(&recycled).log_number, Some(77));
    // A damaged recyclable header says nothing.
    let mut damaged = recycled.clone();
    damaged[12] ^= 1;
    assert_eq!(sniff(&damaged).dialect, Dialect::LevelDb);
    let mut compressed = legacy(9, &[7, 0, 0, 0]);
    let sniffed = sniff(&compressed);
    assert_eq!(
        (sniffed.dialect, sniffed.compressed, sniffed.log_number),
        (Dialect::RocksDb, true, None)
    );
    compressed.extend_from_slice(&recyclable(5, 3, b"frame"));
    assert_eq!(sniff(&compressed).log_number, Some(3));
    for cut in 0..compressed.len() {
        let _ = sniff(&compressed[..cut]);
    }
    assert_eq!(sniff(&[0; 100]).dialect, Dialect::LevelDb);
}
