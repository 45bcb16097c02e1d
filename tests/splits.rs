//! Splits for parallel processing: any partition of a log into byte ranges yields
//! every record exactly once, each from the range holding its first fragment.

use bytes::BytesMut;
use proptest::prelude::*;
use walcodec::{block_start, split_ranges, LogDecoder, LogEncoder, LogReader, BLOCK_SIZE};

fn build_log(sizes: &[usize]) -> (BytesMut, Vec<u64>) {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let starts = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut record = (i as u32).to_le_bytes().to_vec();
            record.resize(n.max(4), (i % 251) as u8);
            encoder.encode_record(&record, &mut log).start
        })
        .collect();
    (log, starts)
}

async fn read_range(log: &[u8], start: u64, end: u64) -> Vec<(u32, u64)> {
    let decoder = LogDecoder::builder()
        .start_offset(start)
        .end_offset(end)
        .build();
    let from = (block_start(start) as usize).min(log.len());
    let mut reader = LogReader::new(&log[from..], decoder).with_read_size(5000);
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.expect("clean log");
        assert!(record.position.start >= start && record.position.start < end);
        let id = u32::from_le_bytes(record.data[..4].try_into().unwrap());
        out.push((id, record.position.start));
    }
    out
}

fn sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![
            0usize..64,
            32750usize..32770,
            1000usize..20000,
            60000usize..100000,
        ],
        1..25,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_partition_yields_every_record_once(
        sizes in sizes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let (log, starts) = build_log(&sizes);
        let len = log.len() as u64;
        let mut bounds: Vec<u64> = cuts.iter().map(|c| c.index(len as usize + 1) as u64).collect();
        bounds.extend([0, len]);
        bounds.sort_unstable();
        bounds.dedup();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut seen = Vec::new();
        for pair in bounds.windows(2) {
            seen.extend(runtime.block_on(read_range(&log, pair[0], pair[1])));
        }
        let expected: Vec<(u32, u64)> = starts.iter().enumerate().map(|(i, &s)| (i as u32, s)).collect();
        prop_assert_eq!(seen, expected);
    }
}

#[tokio::test]
async fn even_splits_of_a_big_log() {
    let sizes: Vec<usize> = (0..400).map(|i| (i * 7919) % 70000).collect();
    let (log, starts) = build_log(&sizes);
    assert!(log.len() > 100 * BLOCK_SIZE);
    for parts in [1, 2, 3, 7, 16, 64] {
        let mut seen = Vec::new();
        for range in split_ranges(log.len() as u64, parts) {
            seen.extend(read_range(&log, range.start, range.end).await);
        }
        let ids: Vec<u32> = seen.iter().map(|r| r.0).collect();
        assert_eq!(
            ids,
            (0..starts.len() as u32).collect::<Vec<_>>(),
            "{parts} parts"
        );
    }
}

/// A split reader stops reading soon after its end: it does not drain the source.
#[tokio::test]
async fn split_stops_reading_after_its_end() {
    let sizes: Vec<usize> = vec![100; 3000];
    let (log, _) = build_log(&sizes);
    let decoder = LogDecoder::builder().end_offset(1000).build();
    let mut reader = LogReader::new(&log[..], decoder).with_read_size(BLOCK_SIZE);
    let mut count = 0;
    while let Some(record) = reader.next_record().await {
        record.unwrap();
        count += 1;
    }
    assert_eq!(count, 10); // records at 0, 107, ..., 963
    assert!(reader.decoder().offset() <= 2 * BLOCK_SIZE as u64);
}

/// Splits over a real file, read concurrently in tasks with `open_range`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_splits_of_a_file_match_a_sequential_read() {
    let sizes: Vec<usize> = (0..300).map(|i| (i * 104729) % 50000).collect();
    let (log, starts) = build_log(&sizes);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.log");
    std::fs::write(&path, &log).unwrap();

    let tasks: Vec<_> = split_ranges(log.len() as u64, 5)
        .into_iter()
        .map(|range| {
            let path = path.clone();
            tokio::spawn(async move {
                let mut reader = LogReader::open_range(&path, range, &LogDecoder::builder())
                    .await
                    .unwrap();
                let mut starts = Vec::new();
                while let Some(record) = reader.next_record().await {
                    starts.push(record.unwrap().position.start);
                }
                starts
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(task.await.unwrap());
    }
    assert_eq!(seen, starts);
}
