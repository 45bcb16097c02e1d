//! A property test of LogDir against a model (a list of records and the segments
//! holding them): random sequences of append, rotate, purge_before, truncate_after
//! and close + reopen; after each sequence, reading from every checkpoint yields
//! exactly the records the model has after it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use walcodec::{LogDir, LogDirOptions, LogPosition};

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Rotate,
    /// Purge before the checkpoint of the record at this fraction of the model.
    Purge(u8),
    /// Truncate after the record at this fraction of the model.
    Truncate(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..3000).prop_map(Op::Append),
        1 => Just(Op::Rotate),
        1 => any::<u8>().prop_map(Op::Purge),
        1 => any::<u8>().prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Default)]
struct Model {
    /// Records kept, in order: their checkpoint and payload.
    records: Vec<(LogPosition, Vec<u8>)>,
    /// Segments kept and their lengths; the last is active.
    segments: BTreeMap<u64, u64>,
}

impl Model {
    fn active(&self) -> u64 {
        *self.segments.keys().next_back().unwrap()
    }

    fn end(&self) -> LogPosition {
        let active = self.active();
        LogPosition::new(active, self.segments[&active])
    }

    fn pick(&self, fraction: u8) -> Option<usize> {
        (!self.records.is_empty()).then(|| fraction as usize * (self.records.len() - 1) / 255)
    }
}

/// Small segments; `recycle` purged files reused for new segments.
fn options(recycle: usize) -> LogDirOptions {
    let mut options = LogDir::builder();
    options
        .max_segment_bytes(8 * 1024)
        .recycle_segments(recycle);
    options
}

async fn check_reads(log: &LogDir, model: &Model) {
    let mut checkpoints = vec![LogPosition::START];
    checkpoints.extend(model.records.iter().map(|r| r.0));
    for (i, &from) in checkpoints.iter().enumerate() {
        let mut reader = log.read_from(from).unwrap();
        let mut got = Vec::new();
        while let Some(record) = reader.next_record().await {
            let record = record.unwrap();
            got.push((record.end, record.data.to_vec()));
        }
        assert_eq!(got, model.records[i..], "reading from {from}");
    }
}

async fn run(ops: Vec<Op>, recycle: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = options(recycle).open(dir.path()).await.unwrap();
    let mut model = Model::default();
    model.segments.insert(1, 0);
    let mut counter = 0u32;
    for op in ops {
        match op {
            Op::Append(len) => {
                counter += 1;
                let data: Vec<u8> = (0..len).map(|i| (i as u32 ^ counter) as u8).collect();
                let end = log.append(&data).await.unwrap();
                let active = model.active();
                assert!(end.segment == active || end.segment == active + 1, "{end}");
                model.segments.insert(end.segment, end.offset);
                assert!(end > model.records.last().map_or(LogPosition::START, |r| r.0));
                model.records.push((end, data));
            }
            Op::Rotate => {
                let next = log.rotate().await.unwrap();
                assert_eq!(next, model.active() + 1);
                model.segments.insert(next, 0);
            }
            Op::Purge(fraction) => {
                let Some(i) = model.pick(fraction) else {
                    continue;
                };
                let pos = model.records[i].0;
                let purged = log.purge_before(pos).await.unwrap();
                let active = model.active();
                let expected: Vec<u64> = model
                    .segments
                    .iter()
                    .take_while(|(&s, &len)| s != active && LogPosition::new(s, len) <= pos)
                    .map(|(&s, _)| s)
                    .collect();
                assert_eq!(purged, expected);
                for s in &purged {
                    model.segments.remove(s);
                }
                let first = *model.segments.keys().next().unwrap();
                model.records.retain(|r| r.0.segment >= first);
            }
            Op::Truncate(fraction) => {
                let Some(i) = model.pick(fraction) else {
                    continue;
                };
                let pos = model.records[i].0;
                log.truncate_after(pos).await.unwrap();
                model.records.truncate(i + 1);
                model.segments.retain(|&s, _| s <= pos.segment);
                model.segments.insert(pos.segment, pos.offset);
            }
            Op::Reopen => {
                log.close().await.unwrap();
                log = options(recycle).open(dir.path()).await.unwrap();
            }
        }
        assert_eq!(log.end(), model.end());
        let segments: BTreeMap<u64, u64> = log.segments().into_iter().collect();
        assert_eq!(segments, model.segments);
    }
    check_reads(&log, &model).await;
    log.close().await.unwrap();
    let log = options(recycle).open(dir.path()).await.unwrap();
    assert_eq!(log.end(), model.end());
    check_reads(&log, &model).await;
    log.close().await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn logdir_matches_its_model(
        ops in proptest::collection::vec(op(), 1..60),
        recycle in prop_oneof![Just(0usize), Just(2)],
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops, recycle));
    }
}
