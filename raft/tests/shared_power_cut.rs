//! Simulated power loss under a `SharedLog` with many groups writing at once
//! (the directory simulator of tests/power_support, as in power_cut.rs): every
//! directory a power cut could leave must open, and each group must hold exactly
//! what its calls finished before the cut left, plus all or nothing of its call
//! in flight; entries read back are the group's own.
//!
//! `RAFT_SHARED_POWER_CUT_CUTS` sets how many cuts (default 120),
//! `POWER_CUT_SEED` replays a run's configuration and its cuts (the seed and the
//! command are printed). The groups race each other and the log's flusher thread,
//! so a seed does not fix the schedule they met: a cut that fails writes down its
//! whole run (every step of the trace, each group's calls with the steps they
//! began and returned at) with the cut and its image's seed, and prints the
//! command that checks exactly that cut again from the record
//! (`RAFT_SHARED_POWER_CUT_REPLAY=file`), step for step, whatever the machine
//! does (tests/power_support/record.rs).

use crate::power_support;
use crate::support;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use power_support::dir::{dir_image, write_image, DirOp, DirTrace, SimDir};
use power_support::record::{self, RecordOnPanic};
use power_support::{ReplayOnPanic, SplitMix};
use support::ops::{expected_at, Model, Op, Workload};
use support::TypeConfig;
use walcodec::testing::DirStorage;
use walcodec::LogDirOptions;
use walcodec_raft::SharedLog;

const GROUPS: u64 = 6;
const CUTS_PER_RUN: usize = 20;
const OPS_PER_GROUP: usize = 25;

/// Each group's calls with the trace's length when each began and returned.
type Calls = Vec<(usize, usize, Op)>;

/// One run: its segment size, the simulator's trace, each group's calls.
#[derive(Debug, PartialEq)]
struct Run {
    segment_bytes: u64,
    ops: Vec<DirOp>,
    calls: Vec<Calls>,
}

/// This test's name, and the variable that replays one of its recorded cuts.
const TEST: &str = "shared_power_cut::power_cuts_keep_every_groups_acknowledged_operations";
const REPLAY: &str = "RAFT_SHARED_POWER_CUT_REPLAY";

async fn run_shared(dir: &Path, seed: u64, segment_bytes: u64) -> Run {
    std::fs::create_dir(dir).unwrap();
    let (sim, trace) = SimDir::new();
    let shared = SharedLog::builder()
        .log_dir(
            LogDirOptions::new()
                .max_segment_bytes(segment_bytes)
                .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>),
        )
        // Small, so that segments are deleted and groups rewritten while the
        // groups write at once.
        .rewrite_threshold(4 << 10)
        .open(dir)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for group in 0..GROUPS {
        let mut store = shared.store::<TypeConfig>(group).await.unwrap();
        let trace = Arc::clone(&trace);
        tasks.push(tokio::spawn(async move {
            let seen = |trace: &Mutex<DirTrace>| trace.lock().unwrap().len();
            let mut model = Model::default();
            let mut workload = Workload::new(seed ^ group.wrapping_mul(0x9E37), &model);
            let mut calls = Vec::new();
            for _ in 0..OPS_PER_GROUP {
                let op = workload.next(&model);
                let begin = seen(&trace);
                op.execute(&mut store, &model).await;
                calls.push((begin, seen(&trace), op));
                model.apply(&op);
            }
            store.close().await.unwrap();
            calls
        }));
    }
    let mut calls = Vec::new();
    for task in tasks {
        calls.push(task.await.unwrap());
    }
    shared.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    Run {
        segment_bytes,
        ops,
        calls,
    }
}

// Several groups on two threads, racing the log's flusher thread: a seed replays
// the run's configuration and its cuts, a failing cut's record its schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_keep_every_groups_acknowledged_operations() {
    if let Some((file, text)) = record::replayed(REPLAY, TEST) {
        let (run, cut, image_seed) = load_run(&text);
        record::say_replaying("shared log power cut", cut, run.ops.len(), &file);
        let root = tempfile::tempdir_in(power_support::scratch_dir()).unwrap();
        let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
        check_cut(&run, cut, &image, &root.path().join("image"), 0, 0).await;
        return;
    }
    let cuts = power_support::env_number("RAFT_SHARED_POWER_CUT_CUTS").unwrap_or(120) as usize;
    let seed = power_support::seed();
    let _replay = ReplayOnPanic::new("POWER_CUT_SEED", seed, TEST);
    let (root, mut rng) = power_support::start_run(
        "shared log power cut",
        "POWER_CUT_SEED",
        seed,
        &format!("{cuts} cuts"),
    );
    let (mut done, mut runs) = (0, 0);
    while done < cuts {
        runs += 1;
        let segment_bytes = [1024, 4096, 16384][rng.range(0, 3) as usize];
        let run = run_shared(
            &root.path().join(format!("run{runs}")),
            rng.next_u64(),
            segment_bytes,
        )
        .await;
        for _ in 0..CUTS_PER_RUN.min(cuts - done) {
            done += 1;
            let cut = rng.range(0, run.ops.len() as u64 + 1) as usize;
            let image_seed = rng.next_u64();
            let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
            let record =
                RecordOnPanic::new(REPLAY, TEST, "raft-shared-power-cut", seed, cut, |_| {
                    save_run(&run, cut, image_seed)
                });
            let target = root.path().join(format!("cut{done}"));
            check_cut(&run, cut, &image, &target, seed, done).await;
            drop(record);
        }
    }
    eprintln!("shared log power cuts: {cuts} cuts over {runs} runs of {GROUPS} groups");
}

/// Writes the image of the cut after `cut` steps to `target`, and checks that
/// every group holds what its calls before the cut left (cut number `done` of
/// the run with seed `seed`, for the message).
async fn check_cut(
    run: &Run,
    cut: usize,
    image: &power_support::dir::DirImage,
    target: &Path,
    seed: u64,
    done: usize,
) {
    write_image(image, target);
    let shared = SharedLog::open(target)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}, cut {done}: reopen failed: {e}"));
    for (group, calls) in run.calls.iter().enumerate() {
        let (model, in_flight) = expected_at(calls, cut);
        let mut store = shared.store::<TypeConfig>(group as u64).await.unwrap();
        let found = Model::read(&mut store).await;
        store.close().await.unwrap();
        let states = model.allowed(in_flight);
        assert!(
            states.contains(&found),
            "seed {seed}, cut {done} at step {cut} of {} (segments of {} bytes), group \
             {group} with {in_flight:?} in flight holds\n{found:?}\nexpected one of\n{states:?}",
            run.ops.len(),
            run.segment_bytes,
        );
    }
    shared.close().await.unwrap();
    std::fs::remove_dir_all(target).unwrap();
}

/// A run, the cut and its image's seed as text, a line a step (see [`load_run`]).
fn save_run(run: &Run, cut: usize, image_seed: u64) -> String {
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "config {}", run.segment_bytes).unwrap();
    writeln!(w, "cut {cut} {image_seed}").unwrap();
    record::write_dir_ops(w, &run.ops);
    for (group, calls) in run.calls.iter().enumerate() {
        for (begin, end, op) in calls {
            writeln!(w, "call {group} {begin} {end} {}", op.line()).unwrap();
        }
    }
    out
}

/// What [`save_run`] wrote.
fn load_run(text: &str) -> (Run, usize, u64) {
    let mut run = Run {
        segment_bytes: 0,
        ops: Vec::new(),
        calls: Vec::new(),
    };
    let (mut cut, mut image_seed) = (0, 0);
    let n = |word: &str| -> usize { word.parse().unwrap() };
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["config", segment_bytes] => run.segment_bytes = segment_bytes.parse().unwrap(),
            ["cut", ..] => (cut, image_seed) = record::parse_cut(&words).unwrap(),
            ["call", group, begin, end, ..] => {
                let group = n(group);
                if run.calls.len() <= group {
                    run.calls.resize_with(group + 1, Vec::new);
                }
                let op = Op::parse(&words[4..]).unwrap();
                run.calls[group].push((n(begin), n(end), op));
            }
            _ => run.ops.push(
                record::parse_dir_op(&words)
                    .unwrap_or_else(|| panic!("not a line of a recorded run: {line:?}")),
            ),
        }
    }
    (run, cut, image_seed)
}

/// A recorded run reads back as it was, and its cut checks the same: what a
/// failing cut's replay relies on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_its_cut() {
    let root = tempfile::tempdir_in(power_support::scratch_dir()).unwrap();
    let run = run_shared(&root.path().join("run"), 42, 1024).await;
    let cut = run.ops.len() * 2 / 3;
    let text = save_run(&run, cut, 7);
    let (loaded, loaded_cut, image_seed) = load_run(&text);
    assert_eq!((loaded_cut, image_seed), (cut, 7));
    assert_eq!(loaded, run);
    let image = dir_image(&loaded.ops, cut, &mut SplitMix::new(image_seed));
    assert_eq!(
        image.files,
        dir_image(&run.ops, cut, &mut SplitMix::new(7)).files
    );
    check_cut(&loaded, cut, &image, &root.path().join("image"), 42, 1).await;
}
