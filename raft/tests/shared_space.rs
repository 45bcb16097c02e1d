//! Space of a `SharedLog`: segments no group needs go, a lagging group is
//! rewritten rather than pinning the disk, and neither loses anything: a seeded
//! model of groups that purge beside one that lags, with reopens (the
//! directory's bytes stay bounded; each group holds exactly what its calls left);
//! the same with rewrites off, where the lagging group pins every segment;
//! power cuts at every step of a run with rewrites and deletions (a rewrite cut
//! anywhere, a crash between a rewrite and the deletion it allows).

use crate::power_support;
use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use power_support::dir::{dir_image, write_image, DirImage, DirOp, DirTrace, SimDir};
use power_support::{Op as FileOp, SplitMix};
use support::ops::{expected_at, Model, Op, Workload};
use support::TypeConfig;
use walcodec::testing::DirStorage;
use walcodec::LogDirOptions;
use walcodec_raft::{LogStore, SharedLog, SpaceStats};

const SEGMENT: u64 = 4096;
const THRESHOLD: u64 = 24 << 10;
/// The group that lags: a vote and some entries at the start, an entry now and
/// then, never a purge.
const LAGGING: u64 = 1000;

/// The bytes of the directory's sealed segment files (the active one, the
/// last, is preallocated). The log's writer may delete a segment while this
/// looks (it reclaims space after each batch, on its own task): a file gone
/// between the listing and its size holds nothing.
fn dir_bytes(dir: &Path) -> u64 {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| {
            let len = match e.metadata() {
                Ok(metadata) => metadata.len(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
                Err(error) => panic!("{error}"),
            };
            Some((e.file_name().to_string_lossy().into_owned(), len))
        })
        .collect();
    files.sort();
    files.pop();
    files.iter().map(|(_, len)| len).sum()
}

/// One group's calls: its model and what draws its next call.
struct Driven {
    group: u64,
    model: Model,
    workload: Workload,
    calls: u64,
}

impl Driven {
    fn new(group: u64, seed: u64) -> Driven {
        let model = Model::default();
        Driven {
            group,
            workload: Workload::new(seed ^ group.wrapping_mul(0x9E37_79B9), &model),
            model,
            calls: 0,
        }
    }

    /// The next call: a lagging group's, or a random one of a group that purges
    /// down to a dozen entries once it holds more than two dozen.
    fn next(&mut self) -> Option<Op> {
        self.calls += 1;
        let next = self.model.last().map_or(0, |l| l.index + 1);
        if self.group == LAGGING {
            return match self.calls {
                1 => Some(Op::Vote { term: 1, node: 1 }),
                2..=5 => Some(Op::Append {
                    term: 1,
                    first: next,
                    n: 8,
                }),
                c if c % 40 == 0 => Some(Op::Append {
                    term: 1,
                    first: next,
                    n: 1,
                }),
                _ => None,
            };
        }
        if self.model.entries.len() > 24 {
            let (&index, id) = self.model.entries.iter().rev().nth(12).unwrap();
            return Some(Op::Purge {
                term: id.leader_id.term,
                index,
            });
        }
        Some(self.workload.next(&self.model))
    }
}

fn options(segment: u64) -> LogDirOptions {
    let mut options = LogDirOptions::new();
    options.max_segment_bytes(segment);
    options
}

async fn check_all(shared: &SharedLog, driven: &[Driven], when: &str) {
    for d in driven {
        let mut store = shared.store::<TypeConfig>(d.group).await.unwrap();
        let found = Model::read(&mut store).await;
        store.close().await.unwrap();
        assert_eq!(found, d.model, "group {} {when}", d.group);
    }
}

/// Runs `groups` groups and the lagging one for `epochs` openings of the log of
/// `rounds` rounds each (every group's call of a round at once), checking every
/// group after each reopen; the most bytes the directory held after a round, and
/// the stats of each opening.
async fn run_model(
    dir: &Path,
    seed: u64,
    threshold: u64,
    groups: u64,
    epochs: usize,
    rounds: usize,
) -> (u64, Vec<SpaceStats>) {
    let mut driven: Vec<Driven> = (0..groups)
        .chain([LAGGING])
        .map(|g| Driven::new(g, seed))
        .collect();
    let mut max_bytes = 0;
    let mut stats = Vec::new();
    for epoch in 0..epochs {
        let shared = SharedLog::builder()
            .log_dir(&options(SEGMENT))
            .rewrite_threshold(threshold)
            .open(dir)
            .await
            .unwrap();
        check_all(
            &shared,
            &driven,
            &format!("at reopen {epoch} (seed {seed})"),
        )
        .await;
        let mut stores: Vec<LogStore<TypeConfig>> = Vec::new();
        for d in &driven {
            stores.push(shared.store::<TypeConfig>(d.group).await.unwrap());
        }
        for _ in 0..rounds {
            join_all(
                driven
                    .iter_mut()
                    .zip(stores.iter_mut())
                    .map(|(d, store)| async move {
                        if let Some(op) = d.next() {
                            op.execute(store, &d.model).await;
                            d.model.apply(&op);
                        }
                    }),
            )
            .await;
            max_bytes = max_bytes.max(dir_bytes(dir));
        }
        for mut store in stores {
            store.close().await.unwrap();
        }
        stats.push(shared.space_stats());
        shared.close().await.unwrap();
    }
    let shared = SharedLog::open(dir).await.unwrap();
    check_all(&shared, &driven, &format!("at the end (seed {seed})")).await;
    shared.close().await.unwrap();
    (max_bytes, stats)
}

/// The bound on the directory's bytes with rewrites: the threshold, plus what
/// one look may leave above it (the active segment, the one sealed since, a
/// segment's slack) and the live records of the groups.
const BOUND: u64 = THRESHOLD + 4 * SEGMENT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_group_is_rewritten_and_the_directory_stays_bounded() {
    let seed = power_support::seed();
    eprintln!("shared space seed {seed} (replay with POWER_CUT_SEED={seed})");
    let dir = tempfile::tempdir().unwrap();
    let (max_bytes, stats) = run_model(dir.path(), seed, THRESHOLD, 6, 4, 120).await;
    eprintln!("most bytes {max_bytes} (bound {BOUND}); {stats:#?}");
    assert!(
        max_bytes <= BOUND,
        "seed {seed}: the directory held {max_bytes} bytes, over {BOUND}"
    );
    let rewrites: u64 = stats.iter().map(|s| s.rewrites).sum();
    let deleted: u64 = stats.iter().map(|s| s.deleted_segments).sum();
    assert!(
        rewrites > 0,
        "seed {seed}: the lagging group was never rewritten"
    );
    assert!(deleted > 0, "seed {seed}: no segment deleted");
    for s in &stats {
        assert!(
            s.write_amplification() <= 2.0,
            "seed {seed}: write amplification over 2: {s}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rewrites_the_lagging_group_pins_every_segment() {
    let seed = power_support::seed();
    let dir = tempfile::tempdir().unwrap();
    let (max_bytes, stats) = run_model(dir.path(), seed, u64::MAX, 6, 2, 120).await;
    assert!(stats.iter().all(|s| s.rewrites == 0));
    // The case above would fail without rewrites: its bound is broken here.
    assert!(
        max_bytes > BOUND,
        "seed {seed}: {max_bytes} bytes without rewrites, within {BOUND}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_no_group_needs_go_without_rewrites() {
    // Every group purges: nothing pins, so the log stays small with rewrites off.
    let seed = power_support::seed();
    let dir = tempfile::tempdir().unwrap();
    let shared = SharedLog::builder()
        .log_dir(&options(SEGMENT))
        .rewrite_threshold(u64::MAX)
        .open(dir.path())
        .await
        .unwrap();
    let mut driven: Vec<Driven> = (0..4).map(|g| Driven::new(g, seed)).collect();
    let mut stores = Vec::new();
    for d in &driven {
        stores.push(shared.store::<TypeConfig>(d.group).await.unwrap());
    }
    let mut max_bytes = 0;
    for _ in 0..400 {
        join_all(
            driven
                .iter_mut()
                .zip(stores.iter_mut())
                .map(|(d, store)| async move {
                    let op = d.next().unwrap();
                    op.execute(store, &d.model).await;
                    d.model.apply(&op);
                }),
        )
        .await;
        max_bytes = max_bytes.max(dir_bytes(dir.path()));
    }
    for mut store in stores {
        store.close().await.unwrap();
    }
    let stats = shared.space_stats();
    shared.close().await.unwrap();
    assert!(stats.deleted_segments > 0, "{stats}");
    assert!(
        max_bytes <= 8 * SEGMENT,
        "seed {seed}: {max_bytes} bytes; {stats}"
    );
    let shared = SharedLog::open(dir.path()).await.unwrap();
    check_all(&shared, &driven, &format!("after reopen (seed {seed})")).await;
    shared.close().await.unwrap();
}

/// Each group's calls, with the trace's length when each began and returned.
type Calls = BTreeMap<u64, Vec<(usize, usize, Op)>>;

/// A run of a few groups and the lagging one, call after call, on the power-cut
/// simulator; the trace, the calls, and the trace's lengths when the first
/// rewrite began and when the deletion after it ended.
async fn run_traced(dir: &Path, seed: u64) -> (Vec<DirOp>, Calls, usize, usize) {
    std::fs::create_dir(dir).unwrap();
    let (sim, trace) = SimDir::new();
    let shared = SharedLog::builder()
        .log_dir(options(1024).dir_storage(Arc::new(sim) as Arc<dyn DirStorage>))
        .rewrite_threshold(6 << 10)
        .open(dir)
        .await
        .unwrap();
    let seen = |trace: &Mutex<DirTrace>| trace.lock().unwrap().len();
    let mut driven: Vec<Driven> = (0..3)
        .chain([LAGGING])
        .map(|g| Driven::new(g, seed))
        .collect();
    let mut stores = Vec::new();
    for d in &driven {
        stores.push(shared.store::<TypeConfig>(d.group).await.unwrap());
    }
    let mut calls = Calls::new();
    let (mut rewrite_began, mut deleted_after) = (None, None);
    // The trace's length when the stats were last read.
    // (A rewrite counted at one look may have begun before the look before.)
    let (mut checked, mut checked_before) = (0, 0);
    let mut before = shared.space_stats();
    let mut round = 0;
    while deleted_after.is_none() || round < 200 {
        round += 1;
        assert!(
            round < 2000,
            "seed {seed}: no rewrite and deletion after it"
        );
        for (d, store) in driven.iter_mut().zip(stores.iter_mut()) {
            let Some(op) = d.next() else { continue };
            let begin = seen(&trace);
            op.execute(store, &d.model).await;
            let done = seen(&trace);
            d.model.apply(&op);
            calls.entry(d.group).or_default().push((begin, done, op));
            let after = shared.space_stats();
            // The writer works between calls too: the window runs from before the
            // last look at the stats before the rewrite to the look after the
            // deletion.
            let now = seen(&trace);
            if rewrite_began.is_none() && after.rewrites > before.rewrites {
                rewrite_began = Some(checked_before);
            }
            if rewrite_began.is_some()
                && deleted_after.is_none()
                && after.deleted_segments > before.deleted_segments
            {
                deleted_after = Some(now);
            }
            checked_before = checked;
            checked = now;
            before = after;
        }
    }
    for mut store in stores {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    (ops, calls, rewrite_began.unwrap(), deleted_after.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_at_every_step_of_a_rewrite_and_its_deletion() {
    let seed = power_support::seed();
    eprintln!("shared space power-cut seed {seed} (replay with POWER_CUT_SEED={seed})");
    let mut rng = SplitMix::new(seed);
    let root = tempfile::tempdir().unwrap();
    let (ops, calls, began, deleted) = run_traced(&root.path().join("run"), seed).await;
    // Every step from the call that made the first rewrite to the end of the
    // one whose deletion followed it; a sample of the rest.
    let cuts: Vec<usize> = (0..=ops.len())
        .filter(|&cut| (began..=deleted).contains(&cut) || rng.chance(1, 40))
        .collect();
    let check = |image: DirImage, cut: usize, n: String| {
        let target = root.path().join(n);
        let calls = &calls;
        let ops = &ops;
        async move {
            write_image(&image, &target);
            let shared = SharedLog::open(&target).await.unwrap_or_else(|e| {
                panic!(
                    "seed {seed}: cut at step {cut} of {}: reopen failed: {e}",
                    ops.len()
                )
            });
            for (&group, calls) in calls {
                let (model, in_flight) = expected_at(calls, cut);
                let mut store = shared.store::<TypeConfig>(group).await.unwrap();
                let found = Model::read(&mut store).await;
                store.close().await.unwrap();
                let states = model.allowed(in_flight);
                assert!(
                    states.contains(&found),
                    "seed {seed}: cut at step {cut} of {} (rewrite from {began}, deletion \
                     by {deleted}; {}), group {group} with {in_flight:?} in flight holds\n\
                     {found:?}\nexpected one of\n{states:?}",
                    ops.len(),
                    image.describe()
                );
            }
            shared.close().await.unwrap();
            std::fs::remove_dir_all(&target).unwrap();
        }
    };
    for (n, &cut) in cuts.iter().enumerate() {
        check(dir_image(&ops, cut, &mut rng), cut, format!("cut{n}")).await;
    }
    // The rewrite's write cut short: the directory as it was before it, with a
    // prefix of the write on disk, at every sector boundary (a disk writes whole
    // sectors). The write is the one holding the lagging group's first moved
    // entry: the record's tag (16) then the group (1000 as a varint).
    let moved: &[u8] = &[16, 0xE8, 0x07];
    let mut partial = 0;
    for (i, op) in ops.iter().enumerate().take(deleted).skip(began) {
        let DirOp::File {
            inode,
            op: FileOp::Write { offset, data },
        } = op
        else {
            continue;
        };
        if !data.windows(moved.len()).any(|w| w == moved) {
            continue;
        }
        let Some(name) = ops[..i].iter().rev().find_map(|op| match op {
            DirOp::Entry {
                name,
                inode: Some(linked),
                ..
            } if linked == inode => Some(name.clone()),
            _ => None,
        }) else {
            continue;
        };
        let offset = *offset as usize;
        let first = (512 - offset % 512) % 512;
        for k in (first..data.len()).step_by(512) {
            let mut image = dir_image(&ops, i, &mut rng);
            let Some(file) = image.files.get_mut(&name) else {
                continue;
            };
            if file.len() < offset + k {
                file.resize(offset + k, 0);
            }
            file[offset..offset + k].copy_from_slice(&data[..k]);
            partial += 1;
            check(image, i + 1, format!("partial{partial}")).await;
        }
    }
    assert!(
        partial > 0,
        "seed {seed}: the rewrite's write was not found"
    );
    eprintln!(
        "shared space power cuts: {} cuts, steps {began} to {deleted} of {} all cut, \
         the rewrite cut short at {partial} sectors",
        cuts.len(),
        ops.len()
    );
}
