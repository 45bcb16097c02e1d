//! A follower in another process (`DirReader::open(..).follow()`, which pins no
//! segment) whose consumer purges the log up to what it returned, as a checkpoint
//! does: the segment it is reading may go (deleted, or renamed into the pool of
//! files to recycle) right after it returned its last record. Nothing it had not
//! returned went, so it goes on with the next segment; only a purge past its
//! position fails it, with `Error::Purged`.
//!
//! The interleaving is driven, not left to luck: the writer appends in batches, the
//! follower reads what is there, and the purge runs between two of its reads, at
//! the place each test names (a segment's end, the end of a segment's first record,
//! the middle of a segment), with and without recycling and preallocation.

use crate::power_support;
use crate::writer_support;

use std::time::Duration;

use walcodec::{DirReader, Error, LogDir, LogPosition, WriterOptions};

use power_support::{scratch_dir, SplitMix};
use writer_support::make_record_sized;

const SEGMENT_BYTES: u64 = 256 * 1024;

/// Where the follower is when its consumer purges up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// It returned a sealed segment's last record: the purge takes that segment.
    SegmentEnd,
    /// It returned a segment's first record: the purge takes the one before.
    SegmentStart,
    /// It returned a record in the middle of a segment.
    MidSegment,
}

/// A log of 256 KiB segments, with `recycle` files kept for reuse, preallocated or
/// growing.
async fn open_log(dir: &std::path::Path, recycle: usize, preallocate: bool) -> LogDir {
    let mut writer = WriterOptions::new();
    if !preallocate {
        writer.preallocate(0);
    }
    LogDir::builder()
        .max_segment_bytes(SEGMENT_BYTES)
        .recycle_segments(recycle)
        .writer(writer)
        .open(dir)
        .await
        .unwrap()
}

fn follower_of(log: &LogDir) -> impl std::future::Future<Output = DirReader> + '_ {
    async move {
        DirReader::open(log.path(), LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(Duration::from_millis(1))
    }
}

/// Record `i` of a run: 1 to 6 KiB, drawn from the run's seed.
fn record(seed: u64, i: u32) -> Vec<u8> {
    let mut rng = SplitMix::new(seed ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    make_record_sized(0, i, rng.range(1024, 6 * 1024) as usize)
}

/// Whether the record whose end is `ends[i]` is at `place` (the log holds the
/// records ending at `ends`).
fn at_place(ends: &[LogPosition], i: usize, place: Place) -> bool {
    match place {
        // Sealed: the next record is in a later segment.
        Place::SegmentEnd => ends
            .get(i + 1)
            .is_some_and(|next| next.segment > ends[i].segment),
        Place::SegmentStart => i > 0 && ends[i].segment > ends[i - 1].segment,
        Place::MidSegment => {
            i > 0
                && ends
                    .get(i + 1)
                    .is_some_and(|next| next.segment == ends[i].segment)
                && ends[i - 1].segment == ends[i].segment
                && i % 5 == 0
        }
    }
}

/// One run: `records` appended in batches, the follower reading all there is after
/// each, and purging up to its position each time it stands at `place`. It must
/// return every record, in order, and never fail. Returns how many purges took a
/// segment.
async fn run(seed: u64, recycle: usize, preallocate: bool, place: Place) -> usize {
    let what = format!("seed {seed}, recycle {recycle}, preallocate {preallocate}, {place:?}");
    let dir = tempfile::tempdir_in(scratch_dir()).unwrap();
    let log = open_log(dir.path(), recycle, preallocate).await;
    let mut follower = follower_of(&log).await;
    let mut ends = Vec::new();
    let mut returned = 0usize;
    let mut purges = 0;
    let records = 600u32;
    let mut batch = SplitMix::new(seed);
    while ends.len() < records as usize {
        for _ in 0..batch.range(1, 60) {
            let i = ends.len() as u32;
            ends.push(log.append(record(seed, i)).await.unwrap());
        }
        loop {
            match follower.caught_up().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => panic!("{what}: after {returned} records: {e}"),
            }
            let got = tokio::time::timeout(Duration::from_secs(10), follower.next_record())
                .await
                .expect("not caught up, yet no record")
                .expect("a follower ends only after an error")
                .unwrap_or_else(|e| panic!("{what}: after {returned} records: {e}"));
            assert_eq!(
                got.data,
                record(seed, returned as u32),
                "{what}: record {returned}"
            );
            assert_eq!(got.end, ends[returned], "{what}: record {returned}'s end");
            assert_eq!(follower.position(), got.end);
            if at_place(&ends, returned, place) {
                let purged = log.purge_before(follower.position()).await.unwrap();
                if place == Place::SegmentEnd {
                    assert_eq!(
                        purged.last(),
                        Some(&got.end.segment),
                        "{what}: the purge took the segment just finished"
                    );
                }
                purges += usize::from(!purged.is_empty());
            }
            returned += 1;
        }
    }
    assert_eq!(returned, ends.len(), "{what}: every record");
    drop(follower);
    log.close().await.unwrap();
    purges
}

/// Purges at the follower's own position, at each kind of place, in many runs:
/// the follower goes on to the next segment whenever the one it finished goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_goes_on_when_the_segment_it_finished_is_purged() {
    let mut purges = 0;
    for seed in 0..3u64 {
        for (recycle, preallocate) in [(4, true), (4, false), (0, true), (0, false)] {
            for place in [Place::SegmentEnd, Place::SegmentStart, Place::MidSegment] {
                purges += run(seed, recycle, preallocate, place).await;
            }
        }
    }
    // Each run crosses some ten segments and purges at most places it stops at.
    assert!(purges >= 3 * 4 * 3 * 5, "{purges} purges took segments");
}

/// A purge past the follower's position took records it had not returned: it
/// returns what it still can of them in order, then fails with `Error::Purged`,
/// never skipping in silence to a later segment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_fails_with_purged_when_unread_records_went() {
    for (recycle, preallocate) in [(4, true), (4, false), (0, true), (0, false)] {
        let what = format!("recycle {recycle}, preallocate {preallocate}");
        let dir = tempfile::tempdir_in(scratch_dir()).unwrap();
        let log = open_log(dir.path(), recycle, preallocate).await;
        let seed = 7;
        let mut ends = Vec::new();
        for i in 0..400 {
            ends.push(log.append(record(seed, i)).await.unwrap());
        }
        assert!(ends.last().unwrap().segment >= 4, "{what}: enough segments");
        // Reads into segment 2, stopping in its middle.
        let mut follower = follower_of(&log).await;
        let second = ends
            .iter()
            .position(|end| end.segment == ends[0].segment + 2);
        let stop = second.unwrap() + 3;
        for i in 0..=stop {
            let got = follower.next_record().await.unwrap().unwrap();
            assert_eq!(got.end, ends[i], "{what}");
        }
        // The consumer purges past its follower: through segment 3's last record.
        let segment_3 = ends[0].segment + 3;
        let through = *ends.iter().rfind(|end| end.segment == segment_3).unwrap();
        let purged = log.purge_before(through).await.unwrap();
        assert!(purged.contains(&segment_3), "{what}: {purged:?}");
        let mut next = stop + 1;
        let error = loop {
            let got = tokio::time::timeout(Duration::from_secs(10), follower.next_record())
                .await
                .expect("the follower answers")
                .expect("a follower ends only after an error");
            match got {
                Ok(got) => {
                    assert_eq!(got.end, ends[next], "{what}: in order, none skipped");
                    assert_eq!(got.data, record(seed, next as u32), "{what}");
                    next += 1;
                }
                Err(e) => break e,
            }
        };
        match error {
            Error::Purged { segment } => {
                assert!(
                    segment > ends[stop].segment - 1 && segment <= segment_3,
                    "{what}"
                );
            }
            e => panic!("{what}: {e}"),
        }
        assert!(
            ends[next].segment <= segment_3 + 1 && ends[next - 1] <= through,
            "{what}: it stopped where records were lost"
        );
        drop(follower);
        log.close().await.unwrap();
    }
}
