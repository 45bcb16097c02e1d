//! Records read as streams (`LogReader::next_record_reader`): the same records as
//! whole-record reading under any chunking, damage in the first, a middle and the
//! last fragment in every recovery mode, torn tails, readers dropped part way.

use crate::common;

use std::io;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use walcodec::{
    Corruption, CorruptionKind, LogDecoder, LogEncoder, LogReader, Recovery, BLOCK_SIZE,
    HEADER_SIZE,
};

/// How one streamed record ended.
#[derive(Clone, PartialEq, Eq)]
enum Ended {
    /// Read to EOF: its bytes and where it sits.
    Complete { start: u64, end: u64, data: Vec<u8> },
    /// Failed part way after handing out `read` bytes.
    Failed {
        start: u64,
        read: usize,
        kind: io::ErrorKind,
        corruption: Option<CorruptionKind>,
    },
}

/// Records print as length and crc, so failures stay readable.
impl std::fmt::Debug for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Complete { start, end, data } => write!(
                f,
                "Complete({start}..{end}, {}B/{:08x})",
                data.len(),
                crc32c::crc32c(data)
            ),
            Ended::Failed {
                start,
                read,
                kind,
                corruption,
            } => write!(f, "Failed({start}, read {read}, {kind:?}, {corruption:?})"),
        }
    }
}

/// Records as length and crc, to compare readably.
fn sums<T: AsRef<[u8]>>(records: &[T]) -> Vec<(usize, u32)> {
    records
        .iter()
        .map(|r| (r.as_ref().len(), crc32c::crc32c(r.as_ref())))
        .collect()
}

/// Everything a streamed read of a log produced.
#[derive(Debug, Default)]
struct Streamed {
    records: Vec<Ended>,
    reports: Vec<Report>,
    /// The error `next_record_reader` returned, if any (then the log ends).
    error: Option<String>,
}

impl Streamed {
    fn complete(&self) -> Vec<Vec<u8>> {
        self.records
            .iter()
            .filter_map(|r| match r {
                Ended::Complete { data, .. } => Some(data.clone()),
                Ended::Failed { .. } => None,
            })
            .collect()
    }

    fn failures(&self) -> Vec<&Ended> {
        self.records
            .iter()
            .filter(|r| matches!(r, Ended::Failed { .. }))
            .collect()
    }
}

/// Reads every record of `log` through `next_record_reader`, the log in random
/// chunks (`seed`, `max_chunk`) and each record in random read sizes.
async fn stream_read(log: &[u8], config: Config, seed: u64, max_chunk: usize) -> Streamed {
    let (decoder, reports) = config.build();
    let source = ChunkedReader::new(Bytes::copy_from_slice(log), seed, max_chunk);
    let mut reader = LogReader::new(source, decoder);
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let mut out = Streamed::default();
    loop {
        let mut record = match reader.next_record_reader().await {
            None => break,
            Some(Err(e)) => {
                out.error = Some(e.to_string());
                break;
            }
            Some(Ok(record)) => record,
        };
        let start = record.start();
        let mut data = Vec::new();
        let mut chunk = vec![0u8; 70_000];
        let ended = loop {
            let want = rng.range(1, chunk.len());
            match record.read(&mut chunk[..want]).await {
                Ok(0) => {
                    assert!(record.is_complete());
                    let position = record.position().expect("complete");
                    assert_eq!(position.start, start);
                    assert_eq!(record.bytes_read(), data.len() as u64);
                    break Ended::Complete {
                        start,
                        end: position.end,
                        data,
                    };
                }
                Ok(n) => data.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    assert!(!record.is_complete());
                    // The error stays.
                    let again = record.read(&mut chunk).await.unwrap_err();
                    assert_eq!(again.kind(), e.kind());
                    let corruption = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<Corruption>())
                        .map(Corruption::kind);
                    break Ended::Failed {
                        start,
                        read: data.len(),
                        kind: e.kind(),
                        corruption,
                    };
                }
            }
        };
        out.records.push(ended);
    }
    if out.error.is_some() {
        // An error ends the log.
        assert!(reader.next_record_reader().await.is_none());
    }
    out.reports = std::mem::take(&mut *reports.lock().unwrap());
    out
}

fn stream_read_blocking(log: &[u8], config: Config, seed: u64, max_chunk: usize) -> Streamed {
    futures::executor::block_on(stream_read(log, config, seed, max_chunk))
}

/// Streams `log` through every chunking and checks what it gives against whole-record
/// reading in the same mode: the same complete records, the same reports, and an
/// error (or a failed record) wherever whole reading ends in an error.
fn stream_every_way(log: &[u8], config: Config) -> (Streamed, Outcome) {
    let whole = decode_whole(log, config);
    let mut first = None;
    for (seed, max_chunk) in CHUNKINGS {
        if max_chunk == 1 && log.len() > 256 * 1024 {
            continue;
        }
        let streamed = stream_read_blocking(log, config, seed, max_chunk);
        assert_eq!(
            sums(&streamed.complete()),
            sums(&whole.record_vecs()),
            "complete records (chunks up to {max_chunk}, {:?})",
            config.recovery
        );
        assert_eq!(streamed.reports, whole.reports, "reports");
        if whole.error.is_some() {
            assert!(
                streamed.error.is_some() || !streamed.failures().is_empty(),
                "whole reading failed ({:?}) but streaming did not",
                whole.error
            );
        }
        match &first {
            None => first = Some(streamed),
            Some(first) => {
                assert_eq!(first.records, streamed.records, "chunkings differ");
                assert_eq!(first.error, streamed.error, "chunkings differ");
            }
        }
    }
    (first.expect("one chunking at least"), whole)
}

fn big(len: usize, seed: u64) -> Vec<u8> {
    patterned(len, seed)
}

#[test]
fn records_stream_as_whole_reading_returns_them() {
    let records: Vec<Vec<u8>> = [
        0usize, 1, 100, 32_754, 32_755, 32_761, 32_762, 100_000, 0, 7, 250_000, 3,
    ]
    .iter()
    .enumerate()
    .map(|(i, &len)| big(len, i as u64))
    .collect();
    let log = encode_all(&records);
    for recovery in Recovery::ALL {
        let (streamed, _) = stream_every_way(&log, Config::with_recovery(recovery));
        assert_eq!(sums(&streamed.complete()), sums(&records));
        assert!(streamed.failures().is_empty());
        assert_eq!(streamed.error, None);
    }
}

#[test]
fn positions_are_those_of_whole_reading() {
    let records: Vec<Vec<u8>> = (0..20).map(|i| big(i * 9_000, i as u64)).collect();
    let log = encode_all(&records);
    let streamed = stream_read_blocking(&log, Config::DEFAULT, 1, 5000);
    let whole: Vec<_> = futures::executor::block_on(async {
        let mut reader = LogReader::new(&log[..], LogDecoder::new());
        let mut positions = Vec::new();
        while let Some(record) = reader.next_record().await {
            let record = record.unwrap();
            positions.push((record.position.start, record.position.end));
        }
        positions
    });
    let streamed: Vec<_> = streamed
        .records
        .iter()
        .map(|r| match r {
            Ended::Complete { start, end, .. } => (*start, *end),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(streamed, whole);
}

/// A log of a small record, a record of five fragments, and a small record: the
/// fragments of the middle one start at these offsets.
fn five_fragment_log() -> (Vec<Vec<u8>>, Vec<u8>, [usize; 5]) {
    let records = vec![big(1000, 1), big(4 * BLOCK_SIZE, 2), big(500, 3)];
    let log = encode_all(&records);
    let first = 1000 + HEADER_SIZE;
    let fragments = [
        first,
        BLOCK_SIZE,
        2 * BLOCK_SIZE,
        3 * BLOCK_SIZE,
        4 * BLOCK_SIZE,
    ];
    (records, log, fragments)
}

#[test]
fn damage_in_first_middle_and_last_fragment_in_every_mode() {
    let (records, clean, fragments) = five_fragment_log();
    for (which, &at) in [("first", 0usize), ("middle", 2), ("last", 4)]
        .iter()
        .map(|(name, i)| (name, &fragments[*i]))
    {
        let mut log = clean.clone();
        log[at + HEADER_SIZE + 10] ^= 0x55; // a payload byte
        let fragment_index = fragments.iter().position(|&f| f == at).unwrap();
        // The bytes handed out before the damaged fragment: its checksum is checked
        // before any of its bytes are.
        let handed: usize = fragments[..fragment_index]
            .iter()
            .map(|&f| {
                let block_end = (f / BLOCK_SIZE + 1) * BLOCK_SIZE;
                block_end - f - HEADER_SIZE
            })
            .sum();
        for recovery in Recovery::ALL {
            let (streamed, whole) = stream_every_way(&log, Config::with_recovery(recovery));
            let context = format!("damage in the {which} fragment, {recovery}");
            assert_eq!(
                sums(&streamed.complete()[..1]),
                sums(&records[..1]),
                "{context}"
            );
            let failed = streamed.failures();
            if *which == "first" {
                // Never handed out: nothing of the record is read.
                assert!(failed.is_empty(), "{context}: {failed:?}");
                match recovery {
                    Recovery::TolerateTail | Recovery::AbsoluteConsistency => {
                        assert!(streamed.error.is_some(), "{context}")
                    }
                    _ => assert_eq!(streamed.error, None, "{context}"),
                }
            } else {
                assert_eq!(failed.len(), 1, "{context}: {streamed:?}");
                let Ended::Failed {
                    start,
                    read,
                    kind,
                    corruption,
                } = failed[0].clone()
                else {
                    unreachable!()
                };
                assert_eq!(start, fragments[0] as u64, "{context}");
                assert_eq!(read, handed, "{context}");
                assert_eq!(kind, io::ErrorKind::InvalidData, "{context}");
                let expected = match recovery {
                    Recovery::TolerateTail | Recovery::AbsoluteConsistency => {
                        CorruptionKind::ChecksumMismatch
                    }
                    _ => CorruptionKind::ErrorInMiddleOfRecord,
                };
                assert_eq!(corruption, Some(expected), "{context}");
                assert_eq!(streamed.error, None, "{context}");
            }
            match recovery {
                // LevelDB's reader goes on with the next block: the small record
                // after is read, unless it shares the damaged fragment's block.
                Recovery::SkipCorrupted if *which == "last" => {
                    assert_eq!(sums(&streamed.complete()), sums(&records[..1]), "{context}");
                    assert!(!whole.reports.is_empty());
                }
                Recovery::SkipCorrupted => {
                    assert_eq!(
                        sums(&streamed.complete()),
                        sums(&[&records[0], &records[2]]),
                        "{context}"
                    );
                    assert!(!whole.reports.is_empty());
                }
                _ => assert_eq!(sums(&streamed.complete()), sums(&records[..1]), "{context}"),
            }
        }
    }
}

#[test]
fn torn_tail_mid_record_is_unexpected_eof() {
    let (records, clean, fragments) = five_fragment_log();
    // Cut inside the third fragment's payload, and right after the second fragment.
    for cut in [
        fragments[2] + HEADER_SIZE + 100,
        fragments[2],
        fragments[2] + 3,
    ] {
        let log = &clean[..cut];
        for recovery in Recovery::ALL {
            let (streamed, _) = stream_every_way(log, Config::with_recovery(recovery));
            let context = format!("cut at {cut}, {recovery}");
            assert_eq!(sums(&streamed.complete()), sums(&records[..1]), "{context}");
            let failed = streamed.failures();
            assert_eq!(failed.len(), 1, "{context}");
            let Ended::Failed {
                kind, corruption, ..
            } = failed[0]
            else {
                unreachable!()
            };
            assert_eq!(*kind, io::ErrorKind::UnexpectedEof, "{context}");
            assert_eq!(
                *corruption,
                Some(CorruptionKind::TruncatedTail),
                "{context}"
            );
            assert_eq!(streamed.error, None, "{context}");
        }
    }
}

#[tokio::test]
async fn reader_dropped_half_way_then_next_record_intact() {
    let records = vec![big(200_000, 1), big(5, 2), big(90_000, 3), big(40, 4)];
    let log = encode_all(&records);
    let mut reader = LogReader::new(&log[..], LogDecoder::new());

    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    let mut half = vec![0u8; 100_000];
    record.read_exact(&mut half).await.unwrap();
    assert!(half == records[0][..100_000]);
    assert!(!record.is_complete());
    drop(record);

    let mut next = Vec::new();
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    record.read_to_end(&mut next).await.unwrap();
    assert!(next == records[1]);
    drop(record);

    // Dropped after its first fill: whole-record reading goes on after it.
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    assert!(!record.fill_buf().await.unwrap().is_empty());
    drop(record);
    let last = reader.next_record().await.unwrap().unwrap();
    assert!(last.data == records[3]);
    assert!(reader.next_record_reader().await.is_none());
}

#[tokio::test]
async fn whole_record_reading_takes_over_a_record_begun_by_a_failed_stream() {
    // A FIRST with no LAST, then a fragmented record: the stream of the first fails
    // when the second begins, and `next_record` reads the second whole.
    let mut log = encode_all(&[big(50_000, 1)]);
    log.truncate(BLOCK_SIZE);
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    let mut tail = bytes::BytesMut::new();
    let second = big(70_000, 2);
    encoder.encode_record(&second, &mut tail);
    log.extend_from_slice(&tail);

    let (decoder, reports) = Config::LEVELDB.build();
    let mut reader = LogReader::new(&log[..], decoder);
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    let mut sink = Vec::new();
    let error = record.read_to_end(&mut sink).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    drop(record);
    let next = reader.next_record().await.unwrap().unwrap();
    assert!(next.data == second);
    assert_eq!(
        reports.lock().unwrap()[0].reason,
        "partial record without end"
    );
}

#[tokio::test]
async fn streamed_records_are_not_bounded_by_max_record_bytes_unless_asked() {
    let records = vec![big(300_000, 1), big(10, 2)];
    let log = encode_all(&records);
    let decoder = LogDecoder::builder().max_record_bytes(100_000).build();
    let mut reader = LogReader::new(&log[..], decoder);
    let mut data = Vec::new();
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    record.read_to_end(&mut data).await.unwrap();
    assert!(data == records[0]);
    drop(record);

    let decoder = LogDecoder::builder().max_record_bytes(100_000).build();
    let mut reader = LogReader::new(&log[..], decoder).with_max_streamed_record_bytes(200_000);
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    let error = record.read_to_end(&mut Vec::new()).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    let corruption = error
        .get_ref()
        .unwrap()
        .downcast_ref::<Corruption>()
        .unwrap();
    assert_eq!(corruption.kind(), CorruptionKind::RecordTooLarge);
}

#[tokio::test]
async fn empty_first_then_full_is_passed_over_as_whole_reading_does() {
    // An old writer's quirk: an empty FIRST in a block's last 7 bytes, then a FULL.
    let filler = big(BLOCK_SIZE - 2 * HEADER_SIZE, 9);
    let mut log = encode_all(std::slice::from_ref(&filler));
    log.extend_from_slice(&walcodec::fragment::legacy_header(
        walcodec::fragment::FragmentType::First.as_u8(),
        b"",
    ));
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    let mut rest = bytes::BytesMut::new();
    encoder.encode_record(b"after", &mut rest);
    log.extend_from_slice(&rest);
    for recovery in Recovery::ALL {
        let (streamed, whole) = stream_every_way(&log, Config::with_recovery(recovery));
        assert_eq!(sums(&streamed.complete()), sums(&whole.record_vecs()));
        assert_eq!(sums(&streamed.complete()), sums(&[&filler[..], b"after"]));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random records with random damage: streaming agrees with whole-record
    /// reading in every mode, under every chunking.
    #[test]
    fn damaged_logs_stream_as_they_read_whole(
        lens in proptest::collection::vec(0usize..80_000, 1..6),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let records: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &len)| big(len, i as u64)).collect();
        let mut log = encode_all(&records);
        for (at, mask) in flips {
            let at = at.index(log.len());
            log[at] ^= mask;
        }
        if let Some(cut) = cut {
            let cut = cut.index(log.len() + 1);
            log.truncate(cut);
        }
        for recovery in Recovery::ALL {
            stream_every_way(&log, Config::with_recovery(recovery));
        }
    }
}

#[tokio::test]
async fn reader_dropped_before_damage_then_skip_corrupted_resumes_as_leveldb() {
    let (records, mut log, fragments) = five_fragment_log();
    log[fragments[2] + HEADER_SIZE + 10] ^= 0x55;
    let (decoder, reports) = Config::LEVELDB.build();
    let mut reader = LogReader::new(&log[..], decoder);

    let mut first = Vec::new();
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    record.read_to_end(&mut first).await.unwrap();
    assert!(first == records[0]);
    drop(record);

    // Dropped after one fragment: its rest (and the damage in it) is passed over.
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    assert_eq!(record.start(), fragments[0] as u64);
    assert!(!record.fill_buf().await.unwrap().is_empty());
    drop(record);

    let mut last = Vec::new();
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    record.read_to_end(&mut last).await.unwrap();
    assert!(last == records[2]);
    drop(record);
    assert!(reader.next_record_reader().await.is_none());

    // The same reports as a whole-record read of the log.
    let whole = decode_whole(&log, Config::LEVELDB);
    assert_eq!(*reports.lock().unwrap(), whole.reports);
}
