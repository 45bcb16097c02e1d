//! Simulated power loss for a whole `LogDir`: it appends from a few tasks with small
//! segments (so it rotates often), rotates and purges, on the directory power-cut
//! simulator (tests/power_support/dir.rs). At random moments of the run the
//! directory is replaced by what a power cut could have left: of each file, its
//! synced bytes and any subset of its later pages (torn at sectors, the old or new
//! size); of the directory, its entries as of the last directory sync and any
//! subset of the creates, renames and unlinks since. Every such directory must:
//!
//! - reopen with `LogDir::open` (no `MissingSegment`, no `BadSegment`);
//! - read back, in order, every record acknowledged before the cut (`append`
//!   returned `Ok`) that an acknowledged purge did not remove, and no record of a
//!   segment such a purge removed;
//! - hold only records that were appended, each at the position `append` gave it;
//! - take a new append after them.
//!
//! tests/logdir_power_cut_ops.rs cuts the power during the other durable operations
//! (`append_batch`, `truncate_after`, retention, recycling) with an exact model.
//!
//! `LOGDIR_POWER_CUT_CUTS` sets how many cuts (default 200), `POWER_CUT_SEED`
//! replays a run's configurations and cuts (the seed and the command are printed).
//! `scripts/power-cut.sh N dir` runs N cuts.
//!
//! The tasks race each other and the writer's thread on a multi-thread runtime, so
//! a seed alone does not bring back the schedule a failing run met. What does is
//! its record: a cut that fails writes down its whole run (the configuration,
//! every step of the trace, each acknowledgement and purge with the step it was
//! seen at) with the cut and the seed of its image, and prints the command that
//! checks exactly that cut again from the record (`LOGDIR_POWER_CUT_REPLAY=file`),
//! step for step, whatever the machine does.

use crate::power_support;
use crate::writer_support;

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use walcodec::testing::DirStorage;
use walcodec::{LogDir, LogPosition, WriterOptions};

use power_support::dir::{dir_image, write_image, DirImage, DirOp, DirTrace, SimDir};
use power_support::record::{self, RecordOnPanic};
use power_support::{
    env_number, hex, scratch_dir, seed, start_run, unhex, ReplayOnPanic, SplitMix,
};
use writer_support::{make_record_sized, verify_sized};

/// Cuts drawn from each run: the run is the slow part, a cut is cheaper.
const CUTS_PER_RUN: usize = 20;

/// One run of a `LogDir` and what it acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    max_segment_bytes: u64,
    preallocate: u64,
    /// `recycle_segments`: purged files reused for new segments.
    recycle: usize,
    ops: Vec<DirOp>,
    /// Every record appended, by the position `append` returned (just past it).
    records: BTreeMap<LogPosition, Vec<u8>>,
    /// (steps made when the caller saw the `Ok`, the record's end).
    acks: Vec<(usize, LogPosition)>,
    /// (steps made when the purge was called, steps made when the caller saw the
    /// `Ok`, the segments purged).
    purges: Vec<(usize, usize, Vec<u64>)>,
    rotations: usize,
}

async fn run_dir(rng: &mut SplitMix, dir: &Path) -> Run {
    let max_segment_bytes = [2048, 4096, 9000][rng.range(0, 3) as usize];
    let preallocate = [0, 0, 16 * 1024][rng.range(0, 3) as usize];
    let recycle = [0, 1, 3][rng.range(0, 3) as usize];
    let max_batch_bytes = [1 << 20, 4096, 1000][rng.range(0, 3) as usize];
    let tasks = rng.range(1, 4) as u32;
    let per_task = rng.range(5, 40) as u32;
    std::fs::create_dir(dir).unwrap();
    let (sim, trace) = SimDir::new();
    let log = LogDir::builder()
        .max_segment_bytes(max_segment_bytes)
        .recycle_segments(recycle)
        .writer(
            WriterOptions::new()
                .preallocate(preallocate)
                .max_batch_bytes(max_batch_bytes),
        )
        .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>)
        .open(dir)
        .await
        .unwrap();

    let seen = |trace: &Mutex<DirTrace>| trace.lock().unwrap().len();
    let records = Arc::new(Mutex::new(BTreeMap::new()));
    let acks = Arc::new(Mutex::new(Vec::new()));
    let purges = Arc::new(Mutex::new(Vec::new()));
    let rotations = Arc::new(Mutex::new(0));
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (log, trace) = (log.clone(), Arc::clone(&trace));
        let (records, acks) = (Arc::clone(&records), Arc::clone(&acks));
        let (purges, rotations) = (Arc::clone(&purges), Arc::clone(&rotations));
        let salt = rng.next_u64();
        handles.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for seq in 0..per_task {
                let len = 8 + (salt.rotate_left(seq) % 1500) as usize;
                let record = make_record_sized(task, seq, len);
                let end = log.append(&record).await.unwrap();
                acks.lock().unwrap().push((seen(&trace), end));
                records.lock().unwrap().insert(end, record);
                mine.push(end);
                // The first task also rotates and purges now and then.
                match (task, salt.rotate_right(seq) % 11) {
                    (0, 0) => {
                        log.rotate().await.unwrap();
                        *rotations.lock().unwrap() += 1;
                    }
                    (0, 1 | 2) => {
                        let before = mine[mine.len() / 2];
                        let called = seen(&trace);
                        let purged = log.purge_before(before).await.unwrap();
                        purges.lock().unwrap().push((called, seen(&trace), purged));
                    }
                    _ => {}
                }
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    log.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    let rotations = *rotations.lock().unwrap();
    let records = std::mem::take(&mut *records.lock().unwrap());
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    let purges = std::mem::take(&mut *purges.lock().unwrap());
    Run {
        max_segment_bytes,
        preallocate,
        recycle,
        ops,
        records,
        acks,
        purges,
        rotations,
    }
}

#[derive(Debug, Default)]
struct Tally {
    cuts: usize,
    acknowledged: usize,
    lost: usize,
    refused: Vec<String>,
    /// Images in which an entry change was lost while a later one reached the disk.
    reordered_entries: usize,
    /// Segments the images held.
    segments: usize,
    /// Unacknowledged records that reached the disk anyway and were read back.
    unacked_read: usize,
}

async fn check_cut(run: &Run, cut: usize, image: &DirImage, dir: &Path, tally: &mut Tally) {
    let names: Vec<&str> = image.files.keys().map(String::as_str).collect();
    let context = format!(
        "cut after {cut} of {} steps, {}, max_segment_bytes {}, preallocate {}, recycle {}",
        run.ops.len(),
        image.describe(),
        run.max_segment_bytes,
        run.preallocate,
        run.recycle,
    );
    tally.cuts += 1;
    tally.reordered_entries += usize::from(image.reordered);
    let segments = names.iter().filter(|n| n.ends_with(".log")).count();
    tally.segments += segments;
    // Segments of a purge acknowledged before the cut are gone; those of a purge
    // under way may be.
    let purged: HashSet<u64> = run
        .purges
        .iter()
        .filter(|&&(_, seen, _)| seen <= cut)
        .flat_map(|(_, _, segments)| segments.iter().copied())
        .collect();
    let purging: HashSet<u64> = run
        .purges
        .iter()
        .filter(|&&(called, _, _)| called <= cut)
        .flat_map(|(_, _, segments)| segments.iter().copied())
        .collect();
    let acked: Vec<LogPosition> = run
        .acks
        .iter()
        .filter(|&&(seen, end)| seen <= cut && !purging.contains(&end.segment))
        .map(|&(_, end)| end)
        .collect();

    write_image(image, dir);
    let log = match LogDir::builder()
        .recycle_segments(run.recycle)
        .open(dir)
        .await
    {
        Ok(log) => log,
        Err(e) => {
            tally.refused.push(format!("{context}: {e}"));
            panic!("{context}: reopen fails: {e}");
        }
    };
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut read = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap_or_else(|e| panic!("{context}: reading back: {e}"));
        let appended = run
            .records
            .get(&record.end)
            .unwrap_or_else(|| panic!("{context}: a record at {} was never appended", record.end));
        assert_eq!(
            &record.data[..],
            &appended[..],
            "{context}: at {}",
            record.end
        );
        assert!(verify_sized(&record.data).is_some(), "{context}");
        assert!(
            !purged.contains(&record.end.segment),
            "{context}: a record of purged segment {} came back",
            record.end.segment
        );
        read.push(record.end);
    }
    drop(reader);
    // In order (the reader gives positions in order: each must follow the last).
    assert!(read.windows(2).all(|w| w[0] < w[1]), "{context}");
    let read_set: HashSet<LogPosition> = read.iter().copied().collect();
    tally.acknowledged += acked.len();
    let lost: Vec<&LogPosition> = acked.iter().filter(|end| !read_set.contains(end)).collect();
    if !lost.is_empty() {
        tally.lost += lost.len();
        panic!(
            "{context}: {} acknowledged records lost, first at {}",
            lost.len(),
            lost[0]
        );
    }
    tally.unacked_read += read.len().saturating_sub(acked.len());

    // The log goes on after what the cut left.
    let end = log.append(b"after the cut").await.unwrap();
    if let Some(&last) = read.last() {
        assert!(end > last, "{context}");
    }
    log.close().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

async fn power_cuts(cuts: usize, seed: u64) -> Tally {
    let (scratch, mut rng) = start_run(
        "logdir power cut",
        "POWER_CUT_SEED",
        seed,
        &format!("{cuts} cuts"),
    );
    let mut tally = Tally::default();
    let (mut runs, mut rotations, mut purges, mut reused, mut steps) = (0, 0, 0, 0, 0);
    while tally.cuts < cuts {
        let run_path = scratch.path().join(format!("run-{runs}"));
        // Each run draws from its own generator, so a run that takes another
        // number of steps under another schedule changes no later run.
        let mut rng = SplitMix::new(rng.next_u64());
        let run = run_dir(&mut rng, &run_path).await;
        std::fs::remove_dir_all(&run_path).unwrap();
        runs += 1;
        steps += run.ops.len();
        rotations += run.rotations;
        purges += run.purges.len();
        // A pooled file's name unlinked: the file renamed to a new segment.
        reused += run
            .ops
            .iter()
            .filter(|op| {
                matches!(op, DirOp::Entry { name, inode: None, .. } if name.ends_with(".recycle"))
            })
            .count();
        let entry_ends: Vec<usize> = (0..run.ops.len())
            .filter(|&i| matches!(run.ops[i], DirOp::Entry { .. }))
            .map(|i| i + 1)
            .collect();
        for _ in 0..CUTS_PER_RUN.min(cuts - tally.cuts) {
            // Half the cuts right after a change to the directory (a create, a
            // rename, an unlink): most steps are writes to a file, and the
            // directory's own windows are short.
            let cut = if rng.chance(1, 2) && !entry_ends.is_empty() {
                entry_ends[rng.range(0, entry_ends.len() as u64) as usize]
            } else {
                rng.range(0, run.ops.len() as u64 + 1) as usize
            };
            let image_seed = rng.next_u64();
            let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
            let image_path = scratch.path().join("image");
            let record = RecordOnPanic::new(REPLAY, TEST, "logdir-power-cut", seed, cut, |_| {
                save_run(&run, cut, image_seed)
            });
            check_cut(&run, cut, &image, &image_path, &mut tally).await;
            drop(record);
        }
    }
    println!(
        "logdir power cut: {} cuts of {runs} runs of {steps} steps ({rotations} explicit rotations, {purges} \
         purges, {reused} segments in reused files), {} segments in the images, {} images with directory entries reordered, \
         {} acknowledged records checked, {} lost, {} unacknowledged records read back, \
         {} reopens refused",
        tally.cuts,
        tally.segments,
        tally.reordered_entries,
        tally.acknowledged,
        tally.lost,
        tally.unacked_read,
        tally.refused.len(),
    );
    for refused in &tally.refused {
        println!("logdir power cut: refused: {refused}");
    }
    tally
}

// Several tasks on two threads, racing the writer's own thread: a seed replays each
// run's configuration and its cuts, not the schedule the tasks met; a failing cut's
// record (see the module docs) replays that schedule step for step.
/// This test's name, and the variable that replays one of its recorded cuts.
const TEST: &str = "logdir_power_cut::logdir_power_cuts_lose_no_acknowledged_record";
const REPLAY: &str = "LOGDIR_POWER_CUT_REPLAY";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logdir_power_cuts_lose_no_acknowledged_record() {
    if let Some((file, text)) = record::replayed(REPLAY, TEST) {
        let (run, cut, image_seed) = load_run(&text);
        record::say_replaying("logdir power cut", cut, run.ops.len(), &file);
        let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
        let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
        let mut tally = Tally::default();
        check_cut(&run, cut, &image, &scratch.path().join("image"), &mut tally).await;
        return;
    }
    let cuts = env_number("LOGDIR_POWER_CUT_CUTS").unwrap_or(200) as usize;
    let seed = seed();
    let _replay = ReplayOnPanic::new("POWER_CUT_SEED", seed, TEST);
    let tally = power_cuts(cuts, seed).await;
    assert_eq!(tally.lost, 0);
    assert!(tally.refused.is_empty(), "{:#?}", tally.refused);
    assert!(tally.acknowledged > 0);
}

/// The directory simulator itself: names are as durable as the last directory
/// sync, a file's sync does not make its name durable, and an unlink not synced may
/// be undone while a later one stays.
#[test]
fn the_directory_simulator_keeps_synced_entries_only() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, trace) = SimDir::new();
    let a = sim.create(&dir.path().join("a")).unwrap();
    sim.sync_file(&a).unwrap();
    let b = sim.create(&dir.path().join("b")).unwrap();
    sim.sync_dir(dir.path()).unwrap();
    let c = sim.create(&dir.path().join("c")).unwrap();
    sim.sync_file(&c).unwrap();
    sim.remove(&dir.path().join("a")).unwrap();
    sim.remove(&dir.path().join("b")).unwrap();
    drop((a, b, c));
    let ops = trace.lock().unwrap().ops().to_vec();
    let mut rng = SplitMix::new(7);
    let mut shapes = HashSet::new();
    for _ in 0..500 {
        let image = dir_image(&ops, ops.len(), &mut rng);
        let names: Vec<String> = image.files.keys().cloned().collect();
        shapes.insert(names);
    }
    // Every subset of {c created, a unlinked, b unlinked}.
    assert_eq!(shapes.len(), 8, "{shapes:?}");
    let image = dir_image(&ops, 4, &mut rng);
    assert_eq!(
        image.files.keys().cloned().collect::<Vec<_>>(),
        vec!["a".to_string(), "b".to_string()]
    );
}

/// A purge deletes its segments oldest first and then syncs the directory; until
/// that sync, a power cut may keep a later deletion and lose an earlier one. Before
/// the purge made where it ends durable first (and `open` finished it), that left a
/// hole: `open` failed with `MissingSegment`.
#[tokio::test]
async fn a_cut_that_keeps_a_later_deletion_of_a_purge_leaves_no_hole() {
    let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
    let dir = scratch.path().join("log");
    std::fs::create_dir(&dir).unwrap();
    let (sim, trace) = SimDir::new();
    let log = LogDir::builder()
        .max_segment_bytes(1024)
        .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>)
        .open(&dir)
        .await
        .unwrap();
    let mut ends = Vec::new();
    for seq in 0..40 {
        ends.push(log.append(make_record_sized(1, seq, 200)).await.unwrap());
    }
    let checkpoint = ends[20];
    let purged = log.purge_before(checkpoint).await.unwrap();
    assert!(purged.len() >= 3, "{purged:?}");
    log.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    // The cut just before the purge's last directory sync.
    let cut = ops
        .iter()
        .rposition(|op| matches!(op, DirOp::DirSync))
        .unwrap();
    let first_purged = format!("{:06}.log", purged[0]);
    let keep = |change: &power_support::dir::EntryChange| change.name != first_purged;
    let image =
        power_support::dir::dir_image_keeping(&ops, cut, Some(&keep), &mut SplitMix::new(1));
    assert!(image.files.contains_key(&first_purged));
    assert!(!image.files.contains_key(&format!("{:06}.log", purged[1])));

    let image_path = scratch.path().join("image");
    write_image(&image, &image_path);
    let reopened = LogDir::open(&image_path).await.unwrap();
    assert_eq!(reopened.start().segment, purged.last().unwrap() + 1);
    let mut reader = reopened.read_from(checkpoint).unwrap();
    let mut read = Vec::new();
    while let Some(record) = reader.next_record().await {
        read.push(record.unwrap().end);
    }
    assert_eq!(read, ends[21..]);
    drop(reader);
    reopened.close().await.unwrap();
    // Its leftover was deleted, so a reader elsewhere sees no hole either.
    assert!(!image_path.join(&first_purged).exists());
}

/// A run, the cut and its image's seed as text, a line a step (see [`load_run`]).
fn save_run(run: &Run, cut: usize, image_seed: u64) -> String {
    let mut out = String::new();
    let w = &mut out;
    writeln!(
        w,
        "config {} {} {} {}",
        run.max_segment_bytes, run.preallocate, run.recycle, run.rotations
    )
    .unwrap();
    writeln!(w, "cut {cut} {image_seed}").unwrap();
    record::write_dir_ops(w, &run.ops);
    for (end, data) in &run.records {
        writeln!(w, "record {} {} {}", end.segment, end.offset, hex(data)).unwrap();
    }
    for (seen, end) in &run.acks {
        writeln!(w, "ack {seen} {} {}", end.segment, end.offset).unwrap();
    }
    for (called, seen, segments) in &run.purges {
        let segments: Vec<String> = segments.iter().map(u64::to_string).collect();
        writeln!(w, "purge {called} {seen} {}", segments.join(",")).unwrap();
    }
    out
}

/// What [`save_run`] wrote.
fn load_run(text: &str) -> (Run, usize, u64) {
    let mut run = Run {
        max_segment_bytes: 0,
        preallocate: 0,
        recycle: 0,
        ops: Vec::new(),
        records: BTreeMap::new(),
        acks: Vec::new(),
        purges: Vec::new(),
        rotations: 0,
    };
    let (mut cut, mut image_seed) = (0, 0);
    let n = |word: &str| -> u64 { word.parse().unwrap() };
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["config", segment, preallocate, recycle, rotations] => {
                run.max_segment_bytes = n(segment);
                run.preallocate = n(preallocate);
                run.recycle = n(recycle) as usize;
                run.rotations = n(rotations) as usize;
            }
            ["cut", ..] => (cut, image_seed) = record::parse_cut(&words).unwrap(),
            ["file", ..] | ["entry", ..] | ["dirsync"] => {
                run.ops.push(record::parse_dir_op(&words).unwrap())
            }
            ["record", segment, offset, data] => {
                run.records
                    .insert(LogPosition::new(n(segment), n(offset)), unhex(data));
            }
            ["ack", seen, segment, offset] => run
                .acks
                .push((n(seen) as usize, LogPosition::new(n(segment), n(offset)))),
            ["purge", called, seen, segments] => run.purges.push((
                n(called) as usize,
                n(seen) as usize,
                segments
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(n)
                    .collect(),
            )),
            _ => panic!("not a line of a recorded run: {line:?}"),
        }
    }
    (run, cut, image_seed)
}

/// A recorded run reads back as it was, and its cut checks the same: what a
/// failing cut's replay relies on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_its_cut() {
    let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
    let mut rng = SplitMix::new(42);
    let run = run_dir(&mut rng, &scratch.path().join("run")).await;
    assert!(!run.acks.is_empty());
    let cut = run.ops.len() * 2 / 3;
    let text = save_run(&run, cut, 7);
    let (loaded, loaded_cut, image_seed) = load_run(&text);
    assert_eq!((loaded_cut, image_seed), (cut, 7));
    assert_eq!(loaded, run);
    let image = dir_image(&loaded.ops, cut, &mut SplitMix::new(image_seed));
    let again = dir_image(&run.ops, cut, &mut SplitMix::new(7));
    assert_eq!(image.files, again.files);
    let mut tally = Tally::default();
    check_cut(
        &loaded,
        cut,
        &image,
        &scratch.path().join("image"),
        &mut tally,
    )
    .await;
    assert_eq!((tally.cuts, tally.lost), (1, 0));
}
