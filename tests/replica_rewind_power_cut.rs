//! Simulated power loss while a replica takes its primary's identity and while it
//! rewinds (issue 42: history and rewind on the power-cut simulator).
//!
//! A replica on the directory power-cut simulator (tests/power_support/dir.rs)
//! copies a primary `P` (small segments: the copy spans several), then `P` stops,
//! a replica `Q` that had only `P`'s first records is promoted and appends, and
//! the first replica, refused as diverged at the end of what `Q` had (`common`),
//! rewinds there: later segments deleted, one cut. The power is cut at every step
//! of the first copy up to its first synced record (the id and history adopted
//! before it), and at every step of the rewind, each cut drawn several ways (which
//! directory changes and unsynced pages reached the disk). What the cut left must:
//!
//! - reopen as a `Replica` (refusals counted and asserted zero);
//! - after a cut in the first copy: hold no id, or `P`'s id and history;
//! - after a cut in the rewind: end at its old end with every record it had, or
//!   at `common` with the records up to it, never in between (the rewind is
//!   decided by one durable replacement of `HISTORY`, which `open` finishes);
//! - then, synced from its primary (rewound again if it is still found diverged),
//!   end byte-identical to it, with its history.
//!
//! `REWIND_POWER_CUT_DRAWS` sets the images drawn per cut (default 3),
//! `POWER_CUT_SEED` replays a run (its seed is printed).

use crate::common::catch_up;
use crate::power_support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use walcodec::testing::DirStorage;
use walcodec::{DirReader, Error, LogDir, LogPosition, Replica};

use power_support::dir::{dir_image, write_image, DirOp, DirTrace, SimDir};
use power_support::{env_number, seed, start_run, ReplayOnPanic};

/// Records of sizes that cross blocks and segments.
fn record(tag: u8, i: usize) -> Vec<u8> {
    let len = [100, 5000, 20_000, 7, 33_000][i % 5];
    (0..len)
        .map(|j| (i * 11 + j) as u8 ^ tag.wrapping_mul(29))
        .collect()
}

fn small_segments() -> walcodec::LogDirOptions {
    LogDir::builder().max_segment_bytes(64 * 1024).clone()
}

async fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    let mut reader = DirReader::open(dir, LogPosition::START).await.unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    out
}

/// How many steps of `ops` come before the first sync of a segment file after
/// `HISTORY` was first linked (the first record the replica could report durable,
/// once it took the primary's identity), that sync included.
fn until_first_record_synced(ops: &[DirOp]) -> usize {
    let mut segments = std::collections::BTreeSet::new();
    let mut identity = false;
    for (i, op) in ops.iter().enumerate() {
        match op {
            DirOp::Entry {
                name,
                inode: Some(inode),
                ..
            } => {
                identity |= name == "HISTORY";
                if name.ends_with(".log") {
                    segments.insert(*inode);
                }
            }
            DirOp::File {
                inode,
                op: power_support::Op::Sync,
            } if identity && segments.contains(inode) => return i + 1,
            _ => {}
        }
    }
    panic!("no record was synced");
}

/// What the cuts found: counted, so that none is silently tolerated.
#[derive(Debug, Default)]
struct Tally {
    images: usize,
    refused: Vec<String>,
    at_old_end: usize,
    at_common: usize,
    fresh: usize,
    adopted: usize,
}

/// Syncs the replica reopened from an image with `primary` until it is a
/// byte-identical copy; `diverged`: it must first be refused as diverged at that
/// position, and is rewound there.
async fn follow(primary: &LogDir, dir: &Path, mut replica: Replica, diverged: Option<LogPosition>) {
    if let Some(common) = diverged {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn({
            let log = primary.clone();
            async move { log.serve_replica(a).await }
        });
        let refused = replica.sync_from(b).await;
        let _ = serving.await.unwrap();
        assert!(
            matches!(refused, Err(Error::ReplicaDiverged { common: at, .. }) if at == common),
            "{refused:?}"
        );
        replica.rewind(common).await.unwrap();
    }
    catch_up(primary, &mut replica).await;
    assert_eq!(replica.history(), &primary.history());
    replica.close().await.unwrap();
    assert_holds(primary, dir);
}

/// `dir` holds the live `primary`'s segments, byte for byte up to each one's end
/// (its active segment's file may run past the records), and no other.
fn assert_holds(primary: &LogDir, dir: &Path) {
    let segments = primary.segments();
    let listed = LogDir::list(dir).unwrap().segments;
    assert_eq!(
        listed.iter().map(|s| s.number).collect::<Vec<_>>(),
        segments.iter().map(|s| s.0).collect::<Vec<_>>(),
        "other segments"
    );
    for (&(number, len), copy) in segments.iter().zip(&listed) {
        let ours = std::fs::read(primary.path().join(copy.path.file_name().unwrap())).unwrap();
        let theirs = std::fs::read(&copy.path).unwrap();
        assert!(
            theirs[..] == ours[..len as usize],
            "segment {number} differs"
        );
    }
}

#[tokio::test]
async fn power_cuts_while_a_replica_adopts_an_identity_and_rewinds() {
    let seed = seed();
    let draws = env_number("REWIND_POWER_CUT_DRAWS").unwrap_or(3) as usize;
    let _replay = ReplayOnPanic::new(
        "POWER_CUT_SEED",
        seed,
        "replica_rewind_power_cut::power_cuts_while_a_replica_adopts_an_identity_and_rewinds",
    );
    let (scratch, mut rng) = start_run(
        "replica rewind power cut",
        "POWER_CUT_SEED",
        seed,
        &format!("{draws} images per cut"),
    );
    let root = scratch.path();
    let (p_dir, q_dir, r_dir) = (root.join("p"), root.join("q"), root.join("r"));

    let p = small_segments().open(&p_dir).await.unwrap();
    for i in 0..12 {
        p.append(record(0, i)).await.unwrap();
    }
    let mut q = Replica::open(&q_dir).await.unwrap();
    catch_up(&p, &mut q).await;
    let common = q.end();
    for i in 12..40 {
        p.append(record(0, i)).await.unwrap();
    }
    let (sim, trace): (SimDir, Arc<Mutex<DirTrace>>) = SimDir::new();
    let mut r = Replica::open_with_storage(&r_dir, Arc::new(sim) as Arc<dyn DirStorage>)
        .await
        .unwrap();
    catch_up(&p, &mut r).await;
    let old_end = r.end();
    assert!(
        old_end.segment >= common.segment + 2,
        "the rewind spans segments"
    );
    let adopting = until_first_record_synced(trace.lock().unwrap().ops());

    // P goes away; Q takes over and appends; R is refused as diverged, and rewinds.
    let q = q.promote_with(&small_segments()).await.unwrap();
    for i in 0..6 {
        q.append(record(1, i)).await.unwrap();
    }
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let q = q.clone();
        async move { q.serve_replica(a).await }
    });
    let refused = r.sync_from(b).await;
    let _ = serving.await.unwrap();
    assert!(
        matches!(refused, Err(Error::ReplicaDiverged { common: at, .. }) if at == common),
        "{refused:?}"
    );
    let before = trace.lock().unwrap().len();
    r.rewind(common).await.unwrap();
    let after = trace.lock().unwrap().len();
    r.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    let all: Vec<Vec<u8>> = (0..40).map(|i| record(0, i)).collect();

    let mut tally = Tally::default();
    let cuts = (0..=adopting).chain(before..=after);
    for cut in cuts {
        for draw in 0..draws {
            let image = dir_image(&ops, cut, &mut rng);
            let dir = root.join(format!("cut-{cut}-{draw}"));
            write_image(&image, &dir);
            tally.images += 1;
            let what = format!("cut at step {cut} (draw {draw}): {}", image.describe());
            // The last one is the one that failed (the harness shows a failed test's
            // output).
            println!("{what}");
            let replica = match Replica::open(&dir).await {
                Ok(replica) => replica,
                Err(e) => {
                    tally.refused.push(format!("{what}: {e}"));
                    continue;
                }
            };
            if cut <= adopting {
                // Taking P's identity: none of it, or all of it.
                match replica.log_id() {
                    None => tally.fresh += 1,
                    Some(id) => {
                        assert_eq!(id, p.log_id(), "{what}");
                        assert_eq!(replica.history(), &p.history(), "{what}");
                        tally.adopted += 1;
                    }
                }
                let records = read_all(&dir).await;
                assert!(all.starts_with(&records), "{what}: not P's records");
                follow(&p, &dir, replica, None).await;
            } else {
                let end = replica.end();
                let records = read_all(&dir).await;
                if end == old_end {
                    assert_eq!(records, all, "{what}: at its old end, records differ");
                    tally.at_old_end += 1;
                    follow(&q, &dir, replica, Some(common)).await;
                } else {
                    assert_eq!(end, common, "{what}: rewound part of the way");
                    assert_eq!(records, all[..12], "{what}");
                    tally.at_common += 1;
                    follow(&q, &dir, replica, None).await;
                }
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    println!("{tally:?}");
    assert!(tally.refused.is_empty(), "refused: {:#?}", tally.refused);
    // Both sides of each operation were reached: the cuts are not vacuous.
    assert!(tally.fresh > 0 && tally.adopted > 0, "{tally:?}");
    assert!(tally.at_old_end > 0 && tally.at_common > 0, "{tally:?}");
    p.close().await.unwrap();
    q.close().await.unwrap();
}
