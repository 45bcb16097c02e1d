use super::*;
use crate::format::fragment::RECYCLABLE_HEADER_SIZE;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn golden_records() {
    let mut encoder = LogEncoder::new();
    let mut out = BytesMut::new();
    encoder.encode_record(b"foo", &mut out);
    encoder.encode_record(b"", &mut out);
    encoder.encode_record(b"bar", &mut out);
    assert_eq!(
        hex(&out),
        "dd5fb37a03000166 6f6f052b2843000001baeaec44030001626172".replace(' ', "")
    );
    assert_eq!(encoder.offset(), out.len() as u64);
}

#[test]
fn seven_bytes_left_gives_empty_first() {
    let mut encoder = LogEncoder::with_offset((BLOCK_SIZE - 7) as u64);
    let mut out = BytesMut::new();
    let position = encoder.encode_record(b"y", &mut out);
    assert_eq!(hex(&out), "6451d0e90000025b5822d6010004".to_string() + "79");
    assert_eq!(position.start, (BLOCK_SIZE - 7) as u64);
    assert_eq!(position.end, (BLOCK_SIZE + 8) as u64);
}

#[test]
fn fewer_than_seven_left_pads_a_zero_trailer() {
    for left in 1..HEADER_SIZE {
        let mut encoder = LogEncoder::with_offset((BLOCK_SIZE - left) as u64);
        let mut out = BytesMut::new();
        let position = encoder.encode_record(b"foo", &mut out);
        assert_eq!(&out[..left], &vec![0u8; left][..]);
        assert_eq!(hex(&out[left..]), "dd5fb37a030001666f6f");
        assert_eq!(position.start, BLOCK_SIZE as u64);
    }
}

#[test]
fn encoded_len_matches_output() {
    for start in [
        0usize,
        1,
        100,
        BLOCK_SIZE - 8,
        BLOCK_SIZE - 7,
        BLOCK_SIZE - 6,
        BLOCK_SIZE - 1,
    ] {
        for len in [
            0usize, 1, 6, 7, 8, 32754, 32755, 32761, 32762, 65522, 100_000,
        ] {
            let mut encoder = LogEncoder::with_offset(start as u64);
            let predicted = encoder.encoded_len(len);
            let mut out = BytesMut::new();
            encoder.encode_record(&vec![7u8; len], &mut out);
            assert_eq!(predicted, out.len(), "start {start} len {len}");
        }
    }
}

fn recyclable(offset: u64) -> LogEncoder {
    LogEncoder::builder().recyclable(12).offset(offset).build()
}

#[test]
fn recyclable_fragments_carry_the_log_number() {
    let mut out = BytesMut::new();
    let position = recyclable(0).encode_record(b"foo", &mut out);
    assert_eq!((position.start, position.end), (0, 14));
    assert_eq!(&out[4..], b"\x03\x00\x05\x0c\x00\x00\x00foo");
    let crc = crate::format::unmask(u32::from_le_bytes(out[..4].try_into().unwrap()));
    assert_eq!(crc, crc32c::crc32c(&out[6..]));
}

#[test]
fn fewer_than_eleven_left_pads_a_recyclable_trailer() {
    for left in 1..RECYCLABLE_HEADER_SIZE {
        let mut out = BytesMut::new();
        let position = recyclable((BLOCK_SIZE - left) as u64).encode_record(b"foo", &mut out);
        assert_eq!(&out[..left], &vec![0u8; left][..], "{left}");
        assert_eq!(out[left + 6], 5);
        assert_eq!(position.start, BLOCK_SIZE as u64);
    }
}

#[test]
fn eleven_left_gives_an_empty_recyclable_first() {
    let mut out = BytesMut::new();
    let position = recyclable((BLOCK_SIZE - 11) as u64).encode_record(b"y", &mut out);
    assert_eq!(position.start, (BLOCK_SIZE - 11) as u64);
    assert_eq!(&out[4..11], b"\x00\x00\x06\x0c\x00\x00\x00");
    assert_eq!(&out[15..22], b"\x01\x00\x08\x0c\x00\x00\x00");
    assert_eq!(out.len(), 11 + 12);
    // An empty record there is one empty R-FULL.
    let mut out = BytesMut::new();
    recyclable((BLOCK_SIZE - 11) as u64).encode_record(b"", &mut out);
    assert_eq!((out.len(), out[6]), (11, 5));
}

#[test]
fn recyclable_encoded_len_matches_output() {
    for start in [
        0usize,
        100,
        BLOCK_SIZE - 12,
        BLOCK_SIZE - 11,
        BLOCK_SIZE - 10,
        BLOCK_SIZE - 1,
    ] {
        for len in [0usize, 1, 10, 11, 32757, 32758, 65514, 100_000] {
            let mut encoder = recyclable(start as u64);
            let predicted = encoder.encoded_len(len);
            let mut out = BytesMut::new();
            encoder.encode_record(&vec![7u8; len], &mut out);
            assert_eq!(predicted, out.len(), "start {start} len {len}");
        }
    }
}

#[test]
fn leveldb_format_is_the_default() {
    assert_eq!(LogEncoder::<[u8]>::new().format(), LogFormat::leveldb());
    let mut a = BytesMut::new();
    let mut b = BytesMut::new();
    for record in [&b"x"[..], &[9u8; 70_000][..], b""] {
        LogEncoder::new().encode_record(record, &mut a);
        LogEncoder::builder().build().encode_record(record, &mut b);
    }
    assert_eq!(a, b);
}

/// No record encodes to more than its format's bound, wherever it starts and
/// whatever its size.
#[test]
fn max_encoded_len_bounds_every_format() {
    let formats = [
        LogFormat::leveldb(),
        LogFormat::leveldb().recyclable(3),
        #[cfg(feature = "zstd")]
        LogFormat::leveldb().zstd(),
        #[cfg(feature = "zstd")]
        LogFormat::leveldb().recyclable(3).zstd(),
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for format in formats {
        for start in [
            0u64,
            5,
            7,
            11,
            100,
            BLOCK_SIZE as u64 - 12,
            BLOCK_SIZE as u64 - 3,
        ] {
            for len in [
                0usize, 1, 10, 32_750, 32_757, 32_761, 32_768, 65_530, 200_000,
            ] {
                let mut encoder = LogEncoder::builder().format(format).offset(start).build();
                let mut dst = BytesMut::new();
                encoder.encode_record(&noise[..len], &mut dst);
                assert!(
                    dst.len() <= format.max_encoded_len(len),
                    "{format:?} at {start}, {len} bytes: {} > {}",
                    dst.len(),
                    format.max_encoded_len(len)
                );
            }
        }
    }
}

#[cfg(feature = "zstd")]
mod compressed {
    use super::*;
    use crate::format::fragment::{FragmentRules, Parsed};

    fn fragments(log: &[u8], format: LogFormat) -> Vec<(usize, u8, usize)> {
        let rules =
            FragmentRules::new(Dialect::RocksDb).log_number(format.log_number().unwrap_or(0));
        let mut pos = 0;
        let mut out = Vec::new();
        while pos < log.len() {
            match rules.parse(&log[pos..], BLOCK_SIZE - pos % BLOCK_SIZE) {
                Parsed::Fragment(f) => {
                    out.push((pos, f.type_byte(), f.len() - f.header_len()));
                    pos += f.len();
                }
                Parsed::Trailer { len } | Parsed::ZeroFill { len } => pos += len,
                other => panic!("{other:?} at {pos}"),
            }
        }
        out
    }

    #[test]
    fn a_compression_record_first_then_one_frame_per_record() {
        for format in [
            LogFormat::leveldb().zstd(),
            LogFormat::leveldb().recyclable(3).zstd(),
        ] {
            let mut encoder = LogEncoder::builder().format(format).build();
            let mut log = BytesMut::new();
            let first = encoder.encode_record(&[b'a'; 1000], &mut log);
            let empty = encoder.encode_record(b"", &mut log);
            assert_eq!(first.start, 11);
            assert_eq!(&log[4..11], b"\x04\x00\x09\x07\x00\x00\x00");
            let frags = fragments(&log, format);
            assert_eq!(frags[0], (0, 9, 4));
            let full = if format.log_number().is_some() { 5 } else { 1 };
            assert_eq!(frags[1].1, full);
            // An empty record: an empty FULL, no frame.
            assert_eq!(frags[2], (empty.start as usize, full, 0));
            let start = first.start as usize + format.header_size();
            let frame = &log[start..start + frags[1].2];
            assert_eq!(zstd::stream::decode_all(frame).unwrap(), vec![b'a'; 1000]);
            // The frame declares its size and carries a checksum.
            assert!(matches!(
                zstd::zstd_safe::get_frame_content_size(frame),
                Ok(Some(1000))
            ));
            assert!(frame[4] & 0x04 != 0, "checksum flag");
        }
    }

    #[test]
    fn fragments_restart_at_each_chunk_of_compressor_output() {
        // Incompressible: the frame is larger than the record, over 3 blocks.
        let mut record = vec![0u8; 70_000];
        let mut x = 0x9e37_79b9u32;
        for byte in &mut record {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *byte = (x >> 24) as u8;
        }
        let format = LogFormat::leveldb().zstd();
        let mut encoder = LogEncoder::builder().format(format).build();
        let mut log = BytesMut::new();
        encoder.encode_record(b"small", &mut log);
        encoder.encode_record(&record, &mut log);
        let frags = fragments(&log, format);
        let types: Vec<u8> = frags.iter().map(|f| f.1).collect();
        assert_eq!(types, [9, 1, 2, 3, 3, 3, 4]);
        // The first chunk (32761 bytes) ends inside block 1, where a new
        // fragment starts for the second chunk.
        let first_chunk: usize = frags[2].2 + frags[3].2;
        assert_eq!(first_chunk, BLOCK_SIZE - 7);
        assert_eq!(
            frags[4].0 % BLOCK_SIZE,
            frags[3].0 % BLOCK_SIZE + 7 + frags[3].2
        );
        assert!(encoder.encoded_len(record.len()) >= log.len() - frags[2].0);
        let frame: Vec<u8> = frags[2..]
            .iter()
            .flat_map(|&(pos, _, len)| log[pos + 7..pos + 7 + len].to_vec())
            .collect();
        assert_eq!(zstd::stream::decode_all(&frame[..]).unwrap(), record);
    }

    #[test]
    fn a_clone_compresses_the_same() {
        let mut encoder = LogEncoder::builder().zstd().build();
        let mut a = BytesMut::new();
        encoder.encode_record(b"one", &mut a);
        let mut clone = encoder.clone();
        let mut b = a.clone();
        encoder.encode_record(&[5; 5000], &mut a);
        clone.encode_record(&[5; 5000], &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn a_metadata_record_follows_the_compression_record() {
        let info = PredecessorWalInfo {
            log_number: 1,
            size_bytes: 2,
            last_sequence: 3,
        };
        let mut encoder = LogEncoder::builder().zstd().recyclable(5).build();
        let mut out = BytesMut::new();
        let position = encoder.encode_predecessor_wal_info(&info, &mut out);
        assert_eq!((out[6], position.start, out[11 + 6]), (9, 11, 131));
        let record = encoder.encode_record(b"data", &mut out);
        assert_eq!(
            (record.start, out[record.start as usize + 6]),
            (position.end, 5)
        );
    }

    #[test]
    fn resuming_a_compressed_log_writes_no_second_compression_record() {
        let mut out = BytesMut::new();
        LogEncoder::builder()
            .zstd()
            .offset(500)
            .build()
            .encode_record(b"x", &mut out);
        assert_eq!(out[6], 1);
    }
}

#[test]
fn metadata_records_are_whole_in_one_block() {
    use crate::format::fragment::{FragmentRules, FragmentType, Parsed};
    let info = PredecessorWalInfo {
        log_number: 7,
        size_bytes: 100,
        last_sequence: 9,
    };
    for (format, fragment_type) in [
        (LogFormat::leveldb(), FragmentType::PredecessorWalInfo),
        (
            LogFormat::leveldb().recyclable(12),
            FragmentType::RecyclablePredecessorWalInfo,
        ),
    ] {
        let header_size = format.header_size();
        // Exactly room for it, then one byte short: the rest of the block is zeros.
        for (left, padded) in [(header_size + 24, 0), (header_size + 23, header_size + 23)] {
            let mut encoder = LogEncoder::builder()
                .format(format)
                .offset((BLOCK_SIZE - left) as u64)
                .build();
            let mut out = BytesMut::new();
            let position = encoder.encode_predecessor_wal_info(&info, &mut out);
            assert_eq!(position.start, (BLOCK_SIZE - left + padded) as u64);
            assert!(out[..padded].iter().all(|&b| b == 0));
            // After zero fill the record starts the next block.
            let block_left = if padded > 0 { BLOCK_SIZE } else { left };
            let rules = FragmentRules::new(Dialect::RocksDb).log_number(12);
            let Parsed::Fragment(f) = rules.parse(&out[padded..], block_left) else {
                panic!("no fragment after {padded} bytes");
            };
            assert_eq!(f.fragment_type(), Some(fragment_type));
            let payload = &out[padded..][f.payload_range()];
            assert_eq!(PredecessorWalInfo::parse(payload), Ok(info));
        }
    }
}

#[test]
fn timestamp_sizes_are_checked_before_writing() {
    let mut encoder = recyclable(0);
    let mut out = BytesMut::new();
    let sizes = [TimestampSize {
        column_family: 3,
        timestamp_size: 8,
    }];
    let position = encoder.encode_timestamp_sizes(&sizes, &mut out).unwrap();
    assert_eq!((position.start, position.end, out[6]), (0, 17, 11));
    let zero = [TimestampSize {
        column_family: 4,
        timestamp_size: 0,
    }];
    assert_eq!(
        encoder.encode_timestamp_sizes(&zero, &mut out),
        Err(MetadataError::ZeroTimestampSize { column_family: 4 })
    );
    let many = vec![sizes[0]; 5459];
    assert!(encoder.encode_timestamp_sizes(&many, &mut out).is_ok());
    let too_many = vec![sizes[0]; 5460];
    assert_eq!(
        encoder.encode_timestamp_sizes(&too_many, &mut out),
        Err(MetadataError::TooManyEntries {
            len: 5460,
            max: 5459
        })
    );
    assert_eq!(encoder.offset(), out.len() as u64);
}
