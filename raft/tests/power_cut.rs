//! Simulated power loss under a `LogStore`: it runs random storage operations
//! (append, vote, committed, truncate, purge) one after another with small
//! segments, on walcodec's directory power-cut simulator (the core crate's
//! tests/power_support: of each file its synced bytes and any subset of its later
//! pages, torn at sectors; of the directory its entries as of the last directory
//! sync and any subset of the changes since). A SIGKILL keeps the page cache; this
//! does not. At random moments of each run the directory is replaced by what a
//! power cut could have left there, and every such directory must reopen and hold
//! exactly what the calls finished before the cut left, plus all or nothing of the
//! call in flight (a prefix of an append's entries).
//!
//! `RAFT_POWER_CUT_CUTS` sets how many cuts (default 200), `POWER_CUT_SEED`
//! replays a run step for step (the seed and the command are printed): one task
//! calls the store on a current-thread runtime and waits for each call, so the
//! seed fixes the interleaving too (the store's writer task and the log's flusher
//! thread only ever hold one call), which
//! [`a_seed_replays_its_run_step_for_step`] checks.

use crate::power_support;
use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use power_support::dir::{dir_image, write_image, DirOp, DirTrace, SimDir};
use power_support::ReplayOnPanic;
use support::ops::{expected_at, Model, Op, Workload};
use support::TypeConfig;
use walcodec::testing::DirStorage;
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

/// Cuts drawn from each run: the run is the slow part, a cut is cheaper.
const CUTS_PER_RUN: usize = 20;
const OPS_PER_RUN: usize = 80;

/// One run: the simulator's trace, and each call with the trace's length when
/// it began and when it returned.
struct Run {
    ops: Vec<DirOp>,
    calls: Vec<(usize, usize, Op)>,
}

async fn run_store(dir: &Path, seed: u64, segment_bytes: u64) -> Run {
    std::fs::create_dir(dir).unwrap();
    let (sim, trace) = SimDir::new();
    let mut store = LogStore::<TypeConfig>::builder()
        .log_dir(
            LogDirOptions::new()
                .max_segment_bytes(segment_bytes)
                .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>)
                .clone(),
        )
        .open(dir)
        .await
        .unwrap();
    let seen = |trace: &Mutex<DirTrace>| trace.lock().unwrap().len();
    let mut model = Model::default();
    let mut workload = Workload::new(seed, &model);
    let mut calls = Vec::new();
    for _ in 0..OPS_PER_RUN {
        let op = workload.next(&model);
        let begin = seen(&trace);
        op.execute(&mut store, &model).await;
        calls.push((begin, seen(&trace), op));
        model.apply(&op);
    }
    store.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    Run { ops, calls }
}

// A current-thread runtime: with one task calling, the seed fixes the run.
#[tokio::test]
async fn power_cuts_keep_every_acknowledged_operation() {
    let cuts = power_support::env_number("RAFT_POWER_CUT_CUTS").unwrap_or(200) as usize;
    let seed = power_support::seed();
    let _replay = ReplayOnPanic::new(
        "POWER_CUT_SEED",
        seed,
        "power_cut::power_cuts_keep_every_acknowledged_operation",
    );
    let (root, mut rng) = power_support::start_run(
        "raft power cut",
        "POWER_CUT_SEED",
        seed,
        &format!("{cuts} cuts"),
    );
    let (mut done, mut in_flight_landed, mut reordered) = (0, 0, 0);
    let mut run_number = 0;
    while done < cuts {
        run_number += 1;
        let segment_bytes = [1024, 2048, 8192][rng.range(0, 3) as usize];
        let run = run_store(
            &root.path().join(format!("run{run_number}")),
            rng.next_u64(),
            segment_bytes,
        )
        .await;
        for _ in 0..CUTS_PER_RUN.min(cuts - done) {
            done += 1;
            let cut = rng.range(0, run.ops.len() as u64 + 1) as usize;
            let image = dir_image(&run.ops, cut, &mut rng);
            reordered += usize::from(image.reordered);
            let target = root.path().join(format!("cut{done}"));
            write_image(&image, &target);
            let (model, in_flight) = expected_at(&run.calls, cut);
            let mut store = LogStore::<TypeConfig>::open(&target)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}, cut {done}: reopen failed: {e}"));
            let found = Model::read(&mut store).await;
            store.close().await.unwrap();
            let states = model.allowed(in_flight);
            assert!(
                states.contains(&found),
                "seed {seed}, cut {done} at step {cut} of {} (segments of {segment_bytes} \
                 bytes), {in_flight:?} in flight: the store holds\n{found:?}\nexpected one \
                 of\n{states:?}",
                run.ops.len()
            );
            in_flight_landed += usize::from(found != model);
            std::fs::remove_dir_all(&target).unwrap();
        }
    }
    eprintln!(
        "raft power cuts: {cuts} cuts over {run_number} runs, {in_flight_landed} with the call \
         in flight landed, {reordered} with directory changes reordered"
    );
}

/// The same seed twice gives the same run: every step the storage saw (each
/// write with its bytes, each sync, create, rename and unlink, in order) and each
/// call at the same steps. What makes a failing seed replay its cut exactly.
#[tokio::test]
async fn a_seed_replays_its_run_step_for_step() {
    let root = tempfile::tempdir().unwrap();
    let first = run_store(&root.path().join("first"), 42, 1024).await;
    let second = run_store(&root.path().join("second"), 42, 1024).await;
    assert!(first.ops.len() > OPS_PER_RUN);
    power_support::record::assert_same_steps(&first.ops, &second.ops);
    let steps = |run: &Run| -> Vec<(usize, usize)> {
        run.calls
            .iter()
            .map(|&(begin, end, _)| (begin, end))
            .collect()
    };
    assert_eq!(steps(&first), steps(&second));
}
