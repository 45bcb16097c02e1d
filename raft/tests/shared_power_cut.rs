//! Simulated power loss under a `SharedLog` with many groups writing at once
//! (the directory simulator of tests/power_support, as in power_cut.rs): every
//! directory a power cut could leave must open, and each group must hold exactly
//! what its calls finished before the cut left, plus all or nothing of its call
//! in flight; entries read back are the group's own.
//!
//! `RAFT_POWER_CUT_CUTS` sets how many cuts (default 120), `POWER_CUT_SEED`
//! replays a run (the seed is printed).

use crate::power_support;
use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use power_support::dir::{dir_image, write_image, DirOp, DirTrace, SimDir};
use power_support::SplitMix;
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

async fn run_shared(dir: &Path, seed: u64, segment_bytes: u64) -> (Vec<DirOp>, Vec<Calls>) {
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
    (ops, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_keep_every_groups_acknowledged_operations() {
    let cuts = power_support::env_number("RAFT_POWER_CUT_CUTS").unwrap_or(120) as usize;
    let seed = power_support::seed();
    eprintln!("shared log power-cut seed {seed} (replay with POWER_CUT_SEED={seed})");
    let mut rng = SplitMix::new(seed);
    let root = tempfile::tempdir().unwrap();
    let (mut done, mut runs) = (0, 0);
    while done < cuts {
        runs += 1;
        let segment_bytes = [1024, 4096, 16384][rng.range(0, 3) as usize];
        let (ops, calls) = run_shared(
            &root.path().join(format!("run{runs}")),
            rng.next_u64(),
            segment_bytes,
        )
        .await;
        for _ in 0..CUTS_PER_RUN.min(cuts - done) {
            done += 1;
            let cut = rng.range(0, ops.len() as u64 + 1) as usize;
            let image = dir_image(&ops, cut, &mut rng);
            let target = root.path().join(format!("cut{done}"));
            write_image(&image, &target);
            let shared = SharedLog::open(&target)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}, cut {done}: reopen failed: {e}"));
            for (group, calls) in calls.iter().enumerate() {
                let (model, in_flight) = expected_at(calls, cut);
                let mut store = shared.store::<TypeConfig>(group as u64).await.unwrap();
                let found = Model::read(&mut store).await;
                store.close().await.unwrap();
                let states = model.allowed(in_flight);
                assert!(
                    states.contains(&found),
                    "seed {seed}, cut {done} at step {cut} of {} (segments of {segment_bytes} \
                     bytes), group {group} with {in_flight:?} in flight holds\n{found:?}\n\
                     expected one of\n{states:?}",
                    ops.len()
                );
            }
            shared.close().await.unwrap();
            std::fs::remove_dir_all(&target).unwrap();
        }
    }
    eprintln!("shared log power cuts: {cuts} cuts over {runs} runs of {GROUPS} groups");
}
