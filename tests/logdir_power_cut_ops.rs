//! Simulated power loss during every durable operation of a `LogDir` besides the
//! plain appends of tests/logdir_power_cut.rs: `append_batch`, `truncate_after`
//! (within a segment and across segments, with its `TRUNCATE` marker),
//! `purge_before`, retention by bytes (after each rotation) and by age
//! (`enforce_retention`), and purged segments recycled for new ones.
//!
//! One task runs a random script of these operations on the directory power-cut
//! simulator (tests/power_support/dir.rs), on a current-thread runtime, so a seed
//! fixes the whole run: the script, every step the log takes, and every cut. The
//! test keeps a model of the log after each operation: the records it holds, each
//! at its position, and its first segment. Then it cuts the power at every step of
//! each truncation, purge and retention, and at random steps of the rest, and
//! reopens what the cut left. The log read back from its start must be exactly:
//!
//! - with no operation under way at the cut: the model after the last operation
//!   acknowledged, record by record (content and position), from its first segment;
//! - during a truncation or a purge: the model before it or after it, never a mix
//!   (the marker files decide);
//! - during an append or a batch: the model before it with a prefix of the new
//!   records (none, some or all: none was acknowledged yet), from the first segment
//!   before or after the retention that a rotation inside it may run.
//!
//! Every reopen must succeed (none is refused), and the log must take an append
//! after it. `LOGDIR_POWER_CUT_OPS_RUNS` sets the number of runs (default 4);
//! `POWER_CUT_SEED` replays one (the seed and the command are printed on failure).

use crate::power_support;
use crate::writer_support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use walcodec::testing::DirStorage;
use walcodec::{LogDir, LogPosition, WriterOptions};

use power_support::dir::{dir_image, write_image, DirOp, DirTrace, SimDir};
use power_support::{env_number, seed, start_run, ReplayOnPanic, SplitMix};
use writer_support::make_record_sized;

/// What the log holds after an operation, as the caller was told.
#[derive(Debug, Clone, Default)]
struct State {
    /// Every record kept, in order, by the position `append` gave it (just past it).
    records: Vec<(LogPosition, Vec<u8>)>,
    /// The first segment kept: records below it were purged.
    first: u64,
}

impl State {
    /// The records a reader from the start of the log gets.
    fn visible(&self, first: u64) -> Vec<(LogPosition, &[u8])> {
        self.records
            .iter()
            .filter(|(end, _)| end.segment >= first)
            .map(|(end, data)| (*end, &data[..]))
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Append,
    Batch,
    Rotate,
    Truncate,
    Purge,
    RetainAge,
}

/// One operation of the script: the steps of the trace it made, and the log
/// before and after it.
#[derive(Debug)]
struct Done {
    kind: Kind,
    /// Steps made when it was called, and when the caller saw its `Ok`.
    called: usize,
    seen: usize,
    before: usize,
    after: usize,
}

struct Run {
    describe: String,
    ops: Vec<DirOp>,
    done: Vec<Done>,
    /// The model after each operation (index 0: the new log).
    states: Vec<State>,
    recycle: usize,
    /// Segments renamed from the recycling pool to a new number.
    reused: usize,
    /// Segments a retention purged (by bytes after a rotation, or by age).
    retained: usize,
    truncations_across: usize,
}

const HOUR: Duration = Duration::from_secs(3600);

/// Runs script `n` of a test: recycling and retention by bytes take turns by `n`
/// (every four runs meet each pair), so that the default runs always cover both;
/// the rest of the configuration is drawn.
async fn run_script(rng: &mut SplitMix, dir: &Path, n: usize) -> Run {
    let max_segment_bytes = [2048, 4096][rng.range(0, 2) as usize];
    let preallocate = [0, 16 * 1024][rng.range(0, 2) as usize];
    let recycle = [0, 2][n % 2];
    let retain_bytes = [None, Some(3 * max_segment_bytes)][n / 2 % 2];
    let steps = rng.range(40, 70);
    let describe = format!(
        "max_segment_bytes {max_segment_bytes}, preallocate {preallocate}, recycle \
         {recycle}, retain_bytes {retain_bytes:?}, {steps} operations"
    );
    std::fs::create_dir(dir).unwrap();
    let (sim, trace) = SimDir::new();
    let mut options = LogDir::builder();
    options
        .max_segment_bytes(max_segment_bytes)
        .recycle_segments(recycle)
        // Never reached by a file's own age: only by the ages the script sets.
        .retain_age(HOUR)
        .writer(WriterOptions::new().preallocate(preallocate))
        .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>);
    if let Some(bytes) = retain_bytes {
        options.retain_bytes(bytes);
    }
    let log = options.open(dir).await.unwrap();
    let seen = |trace: &Mutex<DirTrace>| trace.lock().unwrap().len();

    let mut states = vec![State {
        records: Vec::new(),
        first: log.start().segment,
    }];
    let mut done = Vec::new();
    let (mut retained, mut truncations_across) = (0, 0);
    for seq in 0..steps as u32 {
        let mut state = states.last().unwrap().clone();
        let called = seen(&trace);
        let visible: Vec<LogPosition> = state
            .visible(state.first)
            .iter()
            .map(|&(end, _)| end)
            .collect();
        let roll = rng.range(0, 100);
        let kind = match roll {
            0..=34 => Kind::Append,
            35..=54 => Kind::Batch,
            55..=61 => Kind::Rotate,
            62..=77 if !visible.is_empty() => Kind::Truncate,
            78..=87 if !visible.is_empty() => Kind::Purge,
            88..=99 => Kind::RetainAge,
            _ => Kind::Append,
        };
        match kind {
            Kind::Append => {
                let record = make_record_sized(0, seq, rng.range(8, 1500) as usize);
                let end = log.append(&record).await.unwrap();
                state.records.push((end, record));
            }
            Kind::Batch => {
                let records: Vec<Vec<u8>> = (0..rng.range(1, 7))
                    .map(|i| make_record_sized(i as u32 + 1, seq, rng.range(8, 900) as usize))
                    .collect();
                let ranges = log.append_batch(&records).await.unwrap();
                assert_eq!(ranges.len(), records.len());
                for (range, record) in ranges.into_iter().zip(records) {
                    state.records.push((range.end, record));
                }
            }
            Kind::Rotate => {
                log.rotate().await.unwrap();
            }
            Kind::Truncate => {
                // A record's end, or now and then the start of its segment.
                let end = visible[rng.range(0, visible.len() as u64) as usize];
                let pos = if rng.chance(1, 6) {
                    LogPosition::new(end.segment, 0)
                } else {
                    end
                };
                truncations_across += usize::from(pos.segment < log.end().segment);
                log.truncate_after(pos).await.unwrap();
                assert_eq!(log.end(), pos);
                state.records.retain(|&(end, _)| end <= pos);
            }
            Kind::Purge => {
                let pos = visible[rng.range(0, visible.len() as u64) as usize];
                let purged = log.purge_before(pos).await.unwrap();
                if let Some(&last) = purged.last() {
                    assert_eq!(log.start().segment, last + 1);
                }
                assert!(purged.iter().all(|&s| s <= pos.segment), "{purged:?} {pos}");
            }
            Kind::RetainAge => {
                // The oldest few sealed segments made two hours old: retention by
                // age purges exactly those (and, with a byte limit, perhaps more).
                let sealed: Vec<u64> = log.segments().iter().map(|&(s, _)| s).collect();
                let sealed = &sealed[..sealed.len() - 1];
                let old = rng.range(0, sealed.len() as u64 + 1) as usize;
                let past = SystemTime::now() - 2 * HOUR;
                for &segment in &sealed[..old] {
                    let path = dir.join(format!("{segment:06}.log"));
                    std::fs::File::options()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_modified(past)
                        .unwrap();
                }
                let purged = log.enforce_retention().await.unwrap();
                assert!(purged.starts_with(&sealed[..old]), "{purged:?} {sealed:?}");
                if retain_bytes.is_none() {
                    assert_eq!(purged, &sealed[..old]);
                }
            }
        }
        // Retention may run inside any rotation: the log's start says where it is.
        let start = log.start().segment;
        retained += (start - state.first) as usize * usize::from(kind != Kind::Purge);
        state.first = start;
        state.records.retain(|(end, _)| end.segment >= start);
        let before = states.len() - 1;
        states.push(state);
        done.push(Done {
            kind,
            called,
            seen: seen(&trace),
            before,
            after: before + 1,
        });
    }
    log.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    let reused = ops
        .iter()
        .filter(
            |op| matches!(op, DirOp::Entry { name, inode: None, .. } if name.ends_with(".recycle")),
        )
        .count();
    Run {
        describe,
        ops,
        done,
        states,
        recycle,
        reused,
        retained,
        truncations_across,
    }
}

#[derive(Debug, Default)]
struct Tally {
    cuts: usize,
    /// Cuts during a truncation, a purge or a retention.
    cuts_in_decisions: usize,
    /// Cuts during an append that read back some of its records but not all.
    partial_appends: usize,
    records_checked: usize,
    refused: usize,
    /// The kinds of operation some cut fell during.
    kinds_cut: Vec<Kind>,
}

/// A log a cut may leave: its first segment and its records from there.
type Candidate = (u64, Vec<(LogPosition, Vec<u8>)>);

/// The logs a cut after `cut` steps may leave, and when the cut fell.
fn candidates(run: &Run, cut: usize) -> (String, Vec<Candidate>) {
    let visible = |state: &State, first: u64| -> Candidate {
        let records = state
            .visible(first)
            .into_iter()
            .map(|(end, data)| (end, data.to_vec()))
            .collect();
        (first, records)
    };
    let under_way = run.done.iter().position(|d| d.called < cut && cut < d.seen);
    let Some(index) = under_way else {
        // The last operation acknowledged by then (or the new log).
        let last = run.done.iter().rposition(|d| d.seen <= cut);
        let state = &run.states[last.map_or(0, |i| run.done[i].after)];
        return (
            format!("after operation {last:?}"),
            vec![visible(state, state.first)],
        );
    };
    let op = &run.done[index];
    let (before, after) = (&run.states[op.before], &run.states[op.after]);
    let mut out = Vec::new();
    for first in [before.first, after.first] {
        match op.kind {
            Kind::Append | Kind::Batch => {
                // The new records: those of `after` past the ones it kept of `before`.
                let kept = before
                    .records
                    .iter()
                    .filter(|(end, _)| end.segment >= after.first)
                    .count();
                let new = &after.records[kept..];
                for n in 0..=new.len() {
                    let mut state = before.clone();
                    state.records.extend(new[..n].iter().cloned());
                    out.push(visible(&state, first));
                }
            }
            _ => {
                out.push(visible(before, first));
                out.push(visible(after, first));
            }
        }
    }
    (format!("during operation {index} ({:?})", op.kind), out)
}

async fn check_cut(run: &Run, cut: usize, rng: &mut SplitMix, dir: &Path, tally: &mut Tally) {
    let image = dir_image(&run.ops, cut, rng);
    let (when, candidates) = candidates(run, cut);
    let context = format!(
        "cut after {cut} of {} steps, {when}, {}, {}",
        run.ops.len(),
        image.describe(),
        run.describe
    );
    tally.cuts += 1;
    write_image(&image, dir);
    let log = match LogDir::builder()
        .recycle_segments(run.recycle)
        .open(dir)
        .await
    {
        Ok(log) => log,
        Err(e) => {
            tally.refused += 1;
            panic!("{context}: reopen refused: {e}");
        }
    };
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut read = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap_or_else(|e| panic!("{context}: reading back: {e}"));
        read.push((record.end, record.data.to_vec()));
    }
    drop(reader);
    let start = log.start().segment;
    let matched = candidates.iter().find(|(first, records)| {
        *first == start
            && records.len() == read.len()
            && records.iter().zip(&read).all(|(a, b)| a == b)
    });
    let Some((_, records)) = matched else {
        let got: Vec<String> = read
            .iter()
            .map(|(end, data)| format!("{end} ({} bytes)", data.len()))
            .collect();
        let wanted: Vec<String> = candidates
            .iter()
            .map(|(first, records)| {
                let ends: Vec<String> = records.iter().map(|(e, _)| e.to_string()).collect();
                format!("from segment {first}: {ends:?}")
            })
            .collect();
        panic!(
            "{context}: read back from segment {start}: {got:?}\nbut the log could only \
             hold one of:\n{}",
            wanted.join("\n")
        );
    };
    tally.records_checked += records.len();
    let fullest = candidates.iter().map(|(_, r)| r.len()).max().unwrap_or(0);
    let emptiest = candidates.iter().map(|(_, r)| r.len()).min().unwrap_or(0);
    if candidates.len() > 2 && records.len() != fullest && records.len() != emptiest {
        tally.partial_appends += 1;
    }

    // The log goes on after what the cut left, and reads it back after the rest.
    let end = log.append(b"after the cut").await.unwrap();
    if let Some((last, _)) = read.last() {
        assert!(end > *last, "{context}");
    }
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut again = Vec::new();
    while let Some(record) = reader.next_record().await {
        again.push(record.unwrap().end);
    }
    drop(reader);
    let mut expected: Vec<LogPosition> = read.iter().map(|(end, _)| *end).collect();
    expected.push(end);
    assert_eq!(again, expected, "{context}: after the append");
    log.close().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

async fn power_cuts(runs: usize, seed: u64) -> Tally {
    let (scratch, mut rng) = start_run(
        "logdir power cut ops",
        "POWER_CUT_SEED",
        seed,
        &format!("{runs} runs"),
    );
    let _replay = ReplayOnPanic::new(
        "POWER_CUT_SEED",
        seed,
        "logdir_power_cut_ops::power_cuts_during_truncation_retention_and_batches",
    );
    let mut tally = Tally::default();
    let (mut kinds, mut reused, mut retained, mut across) = (Vec::new(), 0, 0, 0);
    for n in 0..runs {
        let run_path = scratch.path().join(format!("run-{n}"));
        let run = run_script(&mut rng, &run_path, n).await;
        std::fs::remove_dir_all(&run_path).unwrap();
        kinds.extend(run.done.iter().map(|d| d.kind));
        reused += run.reused;
        retained += run.retained;
        across += run.truncations_across;
        let image_path = scratch.path().join("image");
        // Every step of the operations that decide what the log holds; a few
        // random ones of the rest.
        let mut cuts = Vec::new();
        for op in &run.done {
            match op.kind {
                Kind::Truncate | Kind::Purge | Kind::RetainAge => {
                    tally.cuts_in_decisions += op.seen - op.called + 1;
                    cuts.extend(op.called..=op.seen);
                }
                Kind::Append | Kind::Batch | Kind::Rotate => {
                    if !rng.chance(1, 3) {
                        continue;
                    }
                    cuts.push(rng.range(op.called as u64, op.seen as u64 + 1) as usize);
                }
            }
            if !tally.kinds_cut.contains(&op.kind) {
                tally.kinds_cut.push(op.kind);
            }
        }
        cuts.push(run.ops.len());
        for cut in cuts {
            check_cut(&run, cut, &mut rng, &image_path, &mut tally).await;
        }
    }
    let count = |k: Kind| kinds.iter().filter(|&&x| x == k).count();
    println!(
        "logdir power cut ops: {} cuts ({} during truncations, purges and retentions, {} \
         appends read back in part) of {runs} runs ({} appends, {} batches, {} rotations, {} \
         truncations ({across} across segments), {} purges, {} retentions by age, {retained} \
         segments purged by retention, {reused} segments in reused files), {} records \
         checked, {} reopens refused",
        tally.cuts,
        tally.cuts_in_decisions,
        tally.partial_appends,
        count(Kind::Append),
        count(Kind::Batch),
        count(Kind::Rotate),
        count(Kind::Truncate),
        count(Kind::Purge),
        count(Kind::RetainAge),
        tally.records_checked,
        tally.refused,
    );
    tally
}

#[tokio::test(flavor = "current_thread")]
async fn power_cuts_during_truncation_retention_and_batches() {
    let runs = env_number("LOGDIR_POWER_CUT_OPS_RUNS").unwrap_or(4) as usize;
    let tally = power_cuts(runs, seed()).await;
    assert_eq!(tally.refused, 0);
    assert!(tally.cuts_in_decisions > 0 && tally.records_checked > 0);
    // Every durable operation met a cut (or runs too few to say).
    if runs >= 4 {
        for kind in [Kind::Batch, Kind::Truncate, Kind::Purge, Kind::RetainAge] {
            assert!(tally.kinds_cut.contains(&kind), "no cut during {kind:?}");
        }
    }
}
