//! The fragment layer draws the same lines as today's readers: a walk built on
//! `walcodec::fragment` reproduces `physical::Chunks` exactly, chunk for chunk, on
//! LevelDB logs with any damage. This is the contract phase 2 relies on to put
//! `Chunks` (and the decoder) on the fragment layer without changing behaviour.
//! `physical::Pieces`, the walk in RocksDB's dialect, reproduces the `chunks.txt` of
//! every RocksDB vector, line for line to its end (old bytes after the live log
//! included), with one difference of rule, checked for what it is: after a
//! fragment whose checksum fails, readers drop the rest of its block (the walk's
//! `Skipped`), where that file's tool goes on reading headers in it.

use bytes::BytesMut;
use proptest::prelude::*;
use walcodec::fragment::{Defect, FragmentRules, Parsed};
use walcodec::physical::{Chunk, Chunks, Piece, Pieces};
use walcodec::{Dialect, LogEncoder, BLOCK_SIZE};

/// `physical::Chunks`, written on the fragment layer.
fn chunks_via_fragments(bytes: &[u8], start: u64) -> Vec<Chunk<'_>> {
    let rules = FragmentRules::new(Dialect::LevelDb);
    let mut out = Vec::new();
    let mut pos = 0;
    let offset_of = |pos: usize| start + pos as u64;
    while pos < bytes.len() {
        let offset = offset_of(pos);
        let block_left = BLOCK_SIZE - (offset % BLOCK_SIZE as u64) as usize;
        let rest = &bytes[pos..];
        let in_block = block_left.min(rest.len());
        match rules.parse(rest, block_left) {
            Parsed::Trailer { .. } => {
                out.push(Chunk::Trailer {
                    offset,
                    bytes: &rest[..in_block],
                });
                pos += in_block;
            }
            Parsed::ZeroFill { .. } => {
                out.push(Chunk::ZeroFill {
                    offset,
                    bytes: &rest[..in_block],
                });
                pos += in_block;
            }
            Parsed::Incomplete { header, .. } => {
                out.push(Chunk::Torn {
                    offset,
                    header,
                    bytes: rest,
                });
                pos = bytes.len();
            }
            Parsed::Defect(Defect::BadLength { header, block_left }) => {
                out.push(Chunk::BadLength {
                    offset,
                    header,
                    bytes: &rest[..block_left],
                });
                pos += block_left;
            }
            Parsed::Fragment(fragment) => {
                out.push(Chunk::Fragment {
                    offset,
                    header: fragment.header(),
                    payload: &rest[fragment.payload_range()],
                    checksum_ok: true,
                });
                pos += fragment.len();
            }
            Parsed::Defect(Defect::ChecksumMismatch { fragment, .. }) => {
                out.push(Chunk::Fragment {
                    offset,
                    header: fragment.header(),
                    payload: &rest[fragment.payload_range()],
                    checksum_ok: false,
                });
                pos += fragment.len();
                // The rest of the block goes with it.
                let left = block_left - fragment.len();
                if left > 0 && pos < bytes.len() {
                    let skipped = left.min(bytes.len() - pos);
                    out.push(Chunk::Skipped {
                        offset: offset_of(pos),
                        bytes: &bytes[pos..pos + skipped],
                    });
                    pos += skipped;
                }
            }
            Parsed::Defect(Defect::OldLogNumber { .. }) => unreachable!("LevelDB has none"),
        }
    }
    out
}

fn log_of(sizes: &[usize], start: u64) -> BytesMut {
    let mut encoder = LogEncoder::with_offset(start);
    let mut log = BytesMut::new();
    for (i, &len) in sizes.iter().enumerate() {
        let record: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
        encoder.encode_record(&record, &mut log);
    }
    log
}

#[test]
fn the_leveldb_vectors_walk_the_same() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut paths = vec![
        root.join("leveldb-db/wal/000003.log"),
        root.join("rocksdb-wal/default/000004.log"),
    ];
    for entry in std::fs::read_dir(root.join("writers")).unwrap() {
        paths.push(entry.unwrap().path().join("000001.log"));
    }
    for path in paths {
        let log = std::fs::read(&path).unwrap();
        assert_eq!(
            chunks_via_fragments(&log, 0),
            Chunks::new(&log, 0).collect::<Vec<_>>(),
            "{}",
            path.display()
        );
    }
}

/// A piece as `chunks.txt` of the RocksDB vectors prints it, without the type's name.
/// Pieces that file's tool has no line for are given lines of their own (`skipped`,
/// `zerofill`, `torn`), which the comparison below treats as the rules say.
fn chunks_txt_line(piece: &Piece<'_>) -> String {
    let block = BLOCK_SIZE as u64;
    let fragment_line = |offset: u64, fragment: walcodec::fragment::Fragment, ok: bool| {
        format!(
            "{offset} blk={}/{} type={} len={} crc={}{}",
            offset / block,
            offset % block,
            fragment.type_byte(),
            fragment.header().length,
            if ok { "ok" } else { "BAD" },
            fragment
                .log_number()
                .map(|n| format!(" log={n}"))
                .unwrap_or_default()
        )
    };
    match *piece {
        Piece::Fragment {
            offset,
            fragment,
            checksum_ok,
            ..
        }
        | Piece::Old {
            offset,
            fragment,
            checksum_ok,
            ..
        } => fragment_line(offset, fragment, checksum_ok),
        Piece::Metadata {
            offset, fragment, ..
        } => fragment_line(offset, fragment, true),
        // logchunks.py knows only the legacy rule: 7 to 10 bytes are "zeros".
        Piece::Trailer { offset, bytes } if bytes.len() >= 7 => {
            format!("zeros {offset} {}", bytes.len())
        }
        Piece::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
        // Old payload bytes where a header should be: its length runs past the block.
        Piece::BadLength {
            offset,
            header,
            bytes,
        } => format!(
            "badlen {offset} {} payload claimed={} type={}",
            bytes.len(),
            header.length,
            header.type_byte
        ),
        Piece::Skipped { offset, bytes } => format!("skipped {offset} {}", bytes.len()),
        Piece::ZeroFill { offset, bytes } => format!("zerofill {offset} {}", bytes.len()),
        Piece::Torn { offset, bytes, .. } => format!("torn {offset} {}", bytes.len()),
        _ => format!("{piece:?}"),
    }
}

#[test]
fn rocksdb_vectors_walk_as_their_chunks_txt() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rocksdb-wal");
    let (mut walked, mut lines_compared, mut skipped) = (0, 0, 0);
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        if !case.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&case).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let Some(number) = name.strip_suffix(".log") else {
                continue;
            };
            let log_number: u64 = number.parse().unwrap();
            let log = std::fs::read(&path).unwrap();
            let rules = FragmentRules::new(Dialect::RocksDb).log_number(log_number);
            let expected = std::fs::read_to_string(format!("{}.chunks.txt", path.display()))
                .unwrap()
                .lines()
                // Without the type names: ours are not that tool's.
                .map(|line| match (line.find('('), line.find(')')) {
                    (Some(open), Some(close)) => format!("{}{}", &line[..open], &line[close + 1..]),
                    _ => line.to_string(),
                })
                .collect::<Vec<_>>();
            let mut lines: Vec<String> = Pieces::new(&log, 0, rules)
                .map(|piece| chunks_txt_line(&piece))
                .collect();
            lines.push(format!("size {}", log.len()));
            assert_eq!(
                lines.len(),
                expected.len(),
                "{}: {lines:#?}",
                path.display()
            );
            for (line, want) in lines.iter().zip(&expected) {
                match line.strip_prefix("skipped ") {
                    // The rest of a block after a fragment whose checksum failed: the
                    // tool reads a header there, and finds none that fits (a `badlen`
                    // over the same bytes, to the block's end).
                    Some(span) => {
                        assert!(
                            want.starts_with(&format!("badlen {span} ")),
                            "{}: {line} where the tool has {want}",
                            path.display()
                        );
                        skipped += 1;
                    }
                    None => assert_eq!(line, want, "{}", path.display()),
                }
            }
            lines_compared += lines.len();
            walked += 1;
        }
    }
    assert_eq!(walked, 10);
    assert_eq!(
        skipped, 1,
        "the one fragment with a bad checksum, in recycle-zstd-torn"
    );
    // Every line of every chunks.txt.
    assert_eq!(lines_compared, 70 + 3 + 7 + 4 + 9 + 7 + 13 + 13 + 23 + 26);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn damaged_logs_walk_the_same(
        sizes in prop::collection::vec(prop_oneof![0usize..40, 0usize..70_000], 1..8),
        start_in_block in prop_oneof![Just(0usize), 0usize..BLOCK_SIZE],
        damage in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        zeros in prop::collection::vec((any::<usize>(), 1usize..40_000), 0..3),
        cut in any::<usize>(),
    ) {
        let start = (BLOCK_SIZE + start_in_block) as u64;
        let mut log = log_of(&sizes, start).to_vec();
        for (at, byte) in damage {
            if !log.is_empty() {
                let at = at % log.len();
                log[at] = byte;
            }
        }
        // Zeroed runs: preallocated space, torn writes.
        for (at, len) in zeros {
            if !log.is_empty() {
                let at = at % log.len();
                let end = (at + len).min(log.len());
                log[at..end].fill(0);
            }
        }
        let cut = if log.is_empty() { 0 } else { cut % (log.len() + 1) };
        let log = &log[..cut];
        prop_assert_eq!(
            chunks_via_fragments(log, start),
            Chunks::new(log, start).collect::<Vec<_>>()
        );
    }
}
