//! Simulated power loss on a replica: a primary `LogDir` (small segments, so it
//! rotates; some runs preallocating, some writing into recycled files) appends from
//! a few tasks while a `Replica` on the directory power-cut simulator
//! (tests/power_support/dir.rs) syncs from it over `tokio::io::duplex` or
//! localhost TCP, sometimes over a first connection cut mid-way. Every durable end
//! the replica reports (its `durable_end` watch) is recorded with the length of the
//! replica's trace at that moment. At random moments the replica directory is
//! replaced by what a power cut could have left (of each file its synced bytes and
//! any subset of its later pages, of the directory its entries as of the last
//! directory sync and any subset of the changes since), and every such directory
//! must:
//!
//! - reopen with `Replica::open`, and, after `close`, with `LogDir::open`;
//! - hold, in each segment, a byte-identical prefix of the primary's segment of
//!   that number, ending at a record boundary;
//! - end at or past every durable end the replica reported before the cut (the
//!   replica syncs before it reports): a SIGKILL test cannot see a missing sync,
//!   the page cache survives a killed process;
//! - resume with `sync_from` and end byte-identical to the primary.
//!
//! `REPLICA_POWER_CUT_CUTS` sets how many cuts (default 120), `POWER_CUT_SEED`
//! replays a run's configuration and its cuts (the seed and the command are
//! printed). The primary's tasks, its flusher thread, the replica and the
//! connection race each other, so a seed does not fix the schedule they met: a
//! cut that fails writes down its whole run (every step of the replica's trace,
//! each durable end reported with the step it was seen at, the primary's
//! segments, and a copy of the primary's directory beside the record) with the
//! cut and its image's seed, and prints the command that checks exactly that cut
//! again from the record (`REPLICA_POWER_CUT_REPLAY=file`), step for step,
//! whatever the machine does (tests/power_support/record.rs).

use crate::power_support;
use crate::writer_support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use walcodec::testing::DirStorage;
use walcodec::{LogDir, LogPosition, Replica, WriterOptions};

use power_support::dir::{dir_image, write_image, DirImage, DirOp, DirTrace, SimDir};
use power_support::record::{self, RecordOnPanic};
use power_support::{
    env_number, hex, scratch_dir, seed, start_run, unhex, ReplayOnPanic, SplitMix,
};
use writer_support::make_record_sized;

/// Cuts drawn from each run: the run is the slow part, a cut is cheaper.
const CUTS_PER_RUN: usize = 15;

/// One run: the primary as it ended, and what the replica did and reported.
#[derive(Debug, PartialEq)]
struct Run {
    describe: String,
    primary: PathBuf,
    recycle: usize,
    /// The replica's steps.
    ops: Vec<DirOp>,
    /// (the replica's steps seen when the durable end was reported, the end).
    durable: Vec<(usize, LogPosition)>,
    /// Each primary segment the replica copies: its final bytes (its records; a
    /// preallocated or recycled file's bytes past them left out).
    segments: BTreeMap<u64, Vec<u8>>,
    /// Where records end in each segment.
    boundaries: BTreeMap<u64, BTreeSet<u64>>,
    /// The primary's end.
    end: LogPosition,
}

impl Run {
    /// `position` with the end of a whole segment taken as the start of the next
    /// (the same records), and any position before the primary's first segment
    /// (a new replica's empty segment) as the start of that one.
    fn normalize(&self, mut position: LogPosition) -> LogPosition {
        let first = *self.segments.keys().next().unwrap();
        if position.segment < first {
            position = LogPosition::new(first, 0);
        }
        while position.segment < self.end.segment
            && self.segments.get(&position.segment).map(|s| s.len() as u64) == Some(position.offset)
        {
            position = LogPosition::new(position.segment + 1, 0);
        }
        position
    }
}

/// A connection whose reading side ends after `left` bytes: a cut the replica
/// sees as the primary going away, at any byte.
struct CutAfter<C> {
    inner: C,
    left: usize,
}

impl<C: AsyncRead + Unpin> AsyncRead for CutAfter<C> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.left == 0 {
            return Poll::Ready(Ok(()));
        }
        let want = buf.remaining().min(self.left);
        let mut limited = ReadBuf::new(buf.initialize_unfilled_to(want));
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, &mut limited) {
            Poll::Ready(Ok(())) => {
                let n = limited.filled().len();
                this.left -= n;
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<C: AsyncWrite + Unpin> AsyncWrite for CutAfter<C> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connected pair: a duplex of `buffer` bytes, or localhost TCP.
async fn connection(
    tcp: bool,
    buffer: usize,
) -> (
    Box<dyn Conn>, // the primary's end
    Box<dyn Conn>, // the replica's end
) {
    if tcp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
            listener.accept().await.unwrap().0
        });
        (Box::new(server), Box::new(client.unwrap()))
    } else {
        let (a, b) = tokio::io::duplex(buffer);
        (Box::new(a), Box::new(b))
    }
}

trait Conn: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Conn for T {}

fn record_len(rng: &mut SplitMix) -> usize {
    if rng.chance(1, 12) {
        rng.range(20_000, 45_000) as usize
    } else {
        rng.range(8, 1500) as usize
    }
}

/// Durable ends a replica reported: (its steps seen then, the end).
type Reported = Arc<Mutex<Vec<(usize, LogPosition)>>>;

/// Records every durable end `replica` reports, with the steps it had made by
/// then, until the replica is dropped.
fn watch_durable(
    replica: &Replica,
    trace: &Arc<Mutex<DirTrace>>,
) -> (Reported, tokio::task::JoinHandle<()>) {
    let mut durable_rx = replica.durable_end();
    let durable = Arc::new(Mutex::new(Vec::new()));
    let watcher = tokio::spawn({
        let (durable, trace) = (Arc::clone(&durable), Arc::clone(trace));
        async move {
            loop {
                let end = *durable_rx.borrow_and_update();
                let seen = trace.lock().unwrap().len();
                durable.lock().unwrap().push((seen, end));
                if durable_rx.changed().await.is_err() {
                    break;
                }
            }
        }
    });
    (durable, watcher)
}

/// A new replica at `path` whose file steps go to the power-cut simulator, and
/// the watch of the durable ends it reports.
async fn open_on_simulator(
    path: &Path,
) -> (
    Replica,
    Arc<Mutex<DirTrace>>,
    Reported,
    tokio::task::JoinHandle<()>,
) {
    let (sim, trace) = SimDir::new();
    let replica = Replica::open_with_storage(path, Arc::new(sim) as Arc<dyn DirStorage>)
        .await
        .unwrap();
    let (durable, watcher) = watch_durable(&replica, &trace);
    (replica, trace, durable, watcher)
}

async fn run_replica(rng: &mut SplitMix, dir: &Path) -> Run {
    let max_segment_bytes = [2048, 4096, 9000][rng.range(0, 3) as usize];
    let preallocate = [0, 0, 16 * 1024][rng.range(0, 3) as usize];
    let recycle = [0, 0, 2][rng.range(0, 3) as usize];
    let max_batch_bytes = [1 << 20, 4096, 1000][rng.range(0, 3) as usize];
    let tasks = rng.range(1, 4) as u32;
    let per_task = rng.range(5, 30) as u32;
    let tcp = rng.chance(1, 3);
    let buffer = [512, 4096, 64 * 1024][rng.range(0, 3) as usize];
    let first_cut = rng.chance(1, 2).then(|| rng.range(0, 40_000) as usize);
    let describe = format!(
        "max_segment_bytes {max_segment_bytes}, preallocate {preallocate}, recycle \
         {recycle}, max_batch_bytes {max_batch_bytes}, {tasks} tasks, tcp {tcp}, duplex \
         buffer {buffer}, first connection cut after {first_cut:?} bytes"
    );
    let primary = dir.join("primary");
    let log = LogDir::builder()
        .max_segment_bytes(max_segment_bytes)
        .recycle_segments(recycle)
        .writer(
            WriterOptions::new()
                .preallocate(preallocate)
                .max_batch_bytes(max_batch_bytes),
        )
        .open(&primary)
        .await
        .unwrap();
    let ends = Arc::new(Mutex::new(Vec::new()));
    // Half the runs start the replica after a purge (a new replica takes the
    // primary's numbering; with recycling, later segments reuse purged files).
    if rng.chance(1, 2) {
        let mut last = LogPosition::START;
        for seq in 0..rng.range(5, 30) as u32 {
            let len = record_len(rng);
            last = log.append(make_record_sized(9, seq, len)).await.unwrap();
            ends.lock().unwrap().push(last);
        }
        log.purge_before(last).await.unwrap();
    }

    let replica_path = dir.join("replica");
    let (mut replica, trace, durable, watcher) = open_on_simulator(&replica_path).await;

    let syncing = tokio::spawn({
        let log = log.clone();
        async move {
            if let Some(left) = first_cut {
                // Cut at any byte, the handshake included: whatever either end
                // makes of it, the next connection resumes.
                let (theirs, ours) = connection(tcp, buffer).await;
                let serving = tokio::spawn({
                    let log = log.clone();
                    async move { log.serve_replica(theirs).await }
                });
                let _ = replica.sync_from(CutAfter { inner: ours, left }).await;
                let _ = serving.await.unwrap();
            }
            // Until the primary closes its log, with everything shipped.
            let (theirs, ours) = connection(tcp, buffer).await;
            let serving = tokio::spawn({
                let log = log.clone();
                async move { log.serve_replica(theirs).await }
            });
            replica.sync_from(ours).await.unwrap();
            serving.await.unwrap().unwrap();
            replica
        }
    });

    let mut handles = Vec::new();
    for task in 0..tasks {
        let (log, ends) = (log.clone(), Arc::clone(&ends));
        let mut rng = SplitMix::new(rng.next_u64());
        handles.push(tokio::spawn(async move {
            for seq in 0..per_task {
                let len = record_len(&mut rng);
                let end = log.append(make_record_sized(task, seq, len)).await.unwrap();
                ends.lock().unwrap().push(end);
                if task == 0 && rng.chance(1, 10) {
                    log.rotate().await.unwrap();
                }
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let end = log.close().await.unwrap();
    let replica = syncing.await.unwrap();
    assert_eq!(replica.end(), end, "{describe}");
    replica.close().await.unwrap();
    watcher.await.unwrap();

    let ops = trace.lock().unwrap().ops().to_vec();
    let durable = std::mem::take(&mut *durable.lock().unwrap());
    let ends = std::mem::take(&mut *ends.lock().unwrap());
    finish_run(describe, primary, recycle, ops, durable, &ends, end).await
}

/// A run from what it left: the primary's segments from its first on, each to its
/// last record (`ends`: every record's end).
async fn finish_run(
    describe: String,
    primary: PathBuf,
    recycle: usize,
    ops: Vec<DirOp>,
    durable: Vec<(usize, LogPosition)>,
    ends: &[LogPosition],
    end: LogPosition,
) -> Run {
    let reopened = LogDir::builder()
        .recycle_segments(recycle)
        .open(&primary)
        .await
        .unwrap();
    let start = reopened.start().segment;
    reopened.close().await.unwrap();
    let mut boundaries: BTreeMap<u64, BTreeSet<u64>> = (start..=end.segment)
        .map(|segment| (segment, BTreeSet::from([0])))
        .collect();
    for end in ends {
        if let Some(set) = boundaries.get_mut(&end.segment) {
            set.insert(end.offset);
        }
    }
    let segments = boundaries
        .iter()
        .map(|(&segment, ends)| {
            let mut bytes = std::fs::read(primary.join(format!("{segment:06}.log"))).unwrap();
            bytes.truncate(*ends.last().unwrap() as usize);
            (segment, bytes)
        })
        .collect();
    Run {
        describe,
        primary,
        recycle,
        ops,
        durable,
        segments,
        boundaries,
        end,
    }
}

/// The segments in `dir`, by number, with their bytes.
fn segments_in(dir: &Path) -> BTreeMap<u64, Vec<u8>> {
    let mut segments = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(number) = name
            .strip_suffix(".log")
            .and_then(|n| n.parse::<u64>().ok())
        {
            segments.insert(number, std::fs::read(entry.path()).unwrap());
        }
    }
    segments
}

#[derive(Debug, Default)]
struct Tally {
    cuts: usize,
    /// Durable ends checked against the images.
    durable_checked: usize,
    /// Images holding more than the last durable end before the cut.
    past_durable: usize,
    /// Images in which an entry change was lost while a later one reached the disk.
    reordered_entries: usize,
    segments: usize,
}

async fn check_cut(run: &Run, cut: usize, image: &DirImage, dir: &Path, tally: &mut Tally) {
    let context = format!(
        "cut after {cut} of {} steps, {}, {}",
        run.ops.len(),
        image.describe(),
        run.describe,
    );
    tally.cuts += 1;
    tally.reordered_entries += usize::from(image.reordered);
    write_image(image, dir);

    let replica = Replica::open(dir)
        .await
        .unwrap_or_else(|e| panic!("{context}: Replica::open fails: {e}"));
    let end = replica.end();
    // Each segment a byte-identical prefix of the primary's, at a record boundary.
    let held = segments_in(dir);
    tally.segments += held.len();
    for (segment, bytes) in &held {
        let Some(theirs) = run.segments.get(segment) else {
            // A new replica's own first segment, before it took the primary's
            // numbering.
            assert!(
                bytes.is_empty() && *segment < *run.segments.keys().next().unwrap(),
                "{context}: segment {segment} is not the primary's"
            );
            continue;
        };
        assert!(
            theirs.starts_with(bytes),
            "{context}: segment {segment} ({} bytes) is no prefix of the primary's ({} bytes)",
            bytes.len(),
            theirs.len()
        );
        assert!(
            run.boundaries[segment].contains(&(bytes.len() as u64)),
            "{context}: segment {segment} ends at {}, inside a record",
            bytes.len()
        );
    }
    // At or past every durable end reported before the cut.
    let reported = run
        .durable
        .iter()
        .filter(|&&(seen, _)| seen <= cut)
        .map(|&(_, end)| run.normalize(end))
        .max();
    if let Some(reported) = reported {
        tally.durable_checked += 1;
        assert!(
            run.normalize(end) >= reported,
            "{context}: the replica reopens at {end}, before {reported}, reported durable"
        );
        tally.past_durable += usize::from(run.normalize(end) > reported);
    }
    replica.close().await.unwrap();

    let log = LogDir::builder()
        .recycle_segments(run.recycle)
        .open(dir)
        .await
        .unwrap_or_else(|e| panic!("{context}: LogDir::open fails: {e}"));
    assert_eq!(log.end(), end, "{context}");
    log.close().await.unwrap();

    // A resumed sync completes byte-identical.
    let mut replica = Replica::open(dir).await.unwrap();
    let primary = LogDir::builder()
        .recycle_segments(run.recycle)
        .open(&run.primary)
        .await
        .unwrap();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let primary = primary.clone();
        async move { primary.serve_replica(a).await }
    });
    let syncing = tokio::spawn(async move {
        let end = replica.sync_from(b).await.map(|s| s.end);
        (replica, end)
    });
    let primary_end = primary.close().await.unwrap();
    serving
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{context}: resuming, the primary fails: {e}"));
    let (replica, synced) = syncing.await.unwrap();
    let synced = synced.unwrap_or_else(|e| panic!("{context}: resuming fails: {e}"));
    assert_eq!(synced, primary_end, "{context}");
    replica.close().await.unwrap();
    let held = segments_in(dir);
    assert_eq!(
        held.keys().collect::<Vec<_>>(),
        run.segments.keys().collect::<Vec<_>>(),
        "{context}: after resuming"
    );
    for (segment, bytes) in &held {
        assert!(
            bytes == &run.segments[segment],
            "{context}: after resuming, segment {segment} differs from the primary's"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

async fn power_cuts(cuts: usize, seed: u64) -> Tally {
    let (scratch, mut rng) = start_run(
        "replica power cut",
        "POWER_CUT_SEED",
        seed,
        &format!("{cuts} cuts"),
    );
    let mut tally = Tally::default();
    let mut runs = 0;
    while tally.cuts < cuts {
        let run_path = scratch.path().join(format!("run-{runs}"));
        std::fs::create_dir(&run_path).unwrap();
        let run = run_replica(&mut rng, &run_path).await;
        runs += 1;
        let entry_ends: Vec<usize> = (0..run.ops.len())
            .filter(|&i| matches!(run.ops[i], DirOp::Entry { .. }))
            .map(|i| i + 1)
            .collect();
        // Cuts after the replica reported each durable end are the ones that
        // test its promise.
        let durable_marks: Vec<usize> = run.durable.iter().map(|&(seen, _)| seen).collect();
        for _ in 0..CUTS_PER_RUN.min(cuts - tally.cuts) {
            let cut = match rng.range(0, 4) {
                0 if !entry_ends.is_empty() => {
                    entry_ends[rng.range(0, entry_ends.len() as u64) as usize]
                }
                1 | 2 => durable_marks[rng.range(0, durable_marks.len() as u64) as usize],
                _ => rng.range(0, run.ops.len() as u64 + 1) as usize,
            };
            let image_seed = rng.next_u64();
            let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
            let image_path = run_path.join("image");
            let record = RecordOnPanic::new(REPLAY, TEST, "replica-power-cut", seed, cut, |path| {
                save_run(&run, cut, image_seed, path)
            });
            check_cut(&run, cut, &image, &image_path, &mut tally).await;
            drop(record);
        }
        std::fs::remove_dir_all(&run_path).unwrap();
    }
    println!(
        "replica power cut: {} cuts of {runs} runs, {} segments in the images, {} images \
         with directory entries reordered, {} checked against a durable end ({} holding more)",
        tally.cuts,
        tally.segments,
        tally.reordered_entries,
        tally.durable_checked,
        tally.past_durable,
    );
    tally
}

/// This test's name, and the variable that replays one of its recorded cuts.
const TEST: &str = "replica_power_cut::replica_power_cuts_keep_every_durable_end";
const REPLAY: &str = "REPLICA_POWER_CUT_REPLAY";

// Tasks, the writer's thread, the replica and the connection on two threads: a
// seed replays the run's configuration and its cuts, a failing cut's record its
// schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_power_cuts_keep_every_durable_end() {
    if let Some((file, text)) = record::replayed(REPLAY, TEST) {
        let (run, cut, image_seed) = load_run(&text);
        record::say_replaying("replica power cut", cut, run.ops.len(), &file);
        let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
        let image = dir_image(&run.ops, cut, &mut SplitMix::new(image_seed));
        let mut tally = Tally::default();
        check_cut(&run, cut, &image, &scratch.path().join("image"), &mut tally).await;
        return;
    }
    let cuts = env_number("REPLICA_POWER_CUT_CUTS").unwrap_or(120) as usize;
    let seed = seed();
    let _replay = ReplayOnPanic::new("POWER_CUT_SEED", seed, TEST);
    let tally = power_cuts(cuts, seed).await;
    assert!(tally.durable_checked > 0);
}

/// A run, the cut and its image's seed as text, a line a step (see [`load_run`]);
/// the primary's directory is copied to `record` with `.primary` appended.
fn save_run(run: &Run, cut: usize, image_seed: u64, record: &Path) -> String {
    let mut copy = record.as_os_str().to_owned();
    copy.push(".primary");
    let copy = PathBuf::from(copy);
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&run.primary).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "primary {}", hex(copy.as_os_str().as_encoded_bytes())).unwrap();
    writeln!(w, "describe {}", hex(run.describe.as_bytes())).unwrap();
    writeln!(w, "recycle {}", run.recycle).unwrap();
    writeln!(w, "end {} {}", run.end.segment, run.end.offset).unwrap();
    writeln!(w, "cut {cut} {image_seed}").unwrap();
    record::write_dir_ops(w, &run.ops);
    for (seen, end) in &run.durable {
        writeln!(w, "durable {seen} {} {}", end.segment, end.offset).unwrap();
    }
    for (segment, bytes) in &run.segments {
        writeln!(w, "segment {segment} {}", hex(bytes)).unwrap();
    }
    for (segment, ends) in &run.boundaries {
        let ends: Vec<String> = ends.iter().map(u64::to_string).collect();
        writeln!(w, "boundaries {segment} {}", ends.join(",")).unwrap();
    }
    out
}

/// What [`save_run`] wrote.
fn load_run(text: &str) -> (Run, usize, u64) {
    let mut run = Run {
        describe: String::new(),
        primary: PathBuf::new(),
        recycle: 0,
        ops: Vec::new(),
        durable: Vec::new(),
        segments: BTreeMap::new(),
        boundaries: BTreeMap::new(),
        end: LogPosition::START,
    };
    let (mut cut, mut image_seed) = (0, 0);
    let n = |word: &str| -> u64 { word.parse().unwrap() };
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["primary", path] => {
                run.primary = PathBuf::from(String::from_utf8(unhex(path)).unwrap())
            }
            ["describe", text] => run.describe = String::from_utf8(unhex(text)).unwrap(),
            ["recycle", recycle] => run.recycle = n(recycle) as usize,
            ["end", segment, offset] => run.end = LogPosition::new(n(segment), n(offset)),
            ["cut", ..] => (cut, image_seed) = record::parse_cut(&words).unwrap(),
            ["durable", seen, segment, offset] => run
                .durable
                .push((n(seen) as usize, LogPosition::new(n(segment), n(offset)))),
            ["segment", segment, bytes] => {
                run.segments.insert(n(segment), unhex(bytes));
            }
            ["boundaries", segment, ends] => {
                run.boundaries
                    .insert(n(segment), ends.split(',').map(n).collect());
            }
            _ => run.ops.push(
                record::parse_dir_op(&words)
                    .unwrap_or_else(|| panic!("not a line of a recorded run: {line:?}")),
            ),
        }
    }
    (run, cut, image_seed)
}

/// A recorded run reads back as it was (its primary a copy), and its cut checks
/// the same: what a failing cut's replay relies on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_its_cut() {
    let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
    let run_path = scratch.path().join("run");
    std::fs::create_dir(&run_path).unwrap();
    let run = run_replica(&mut SplitMix::new(42), &run_path).await;
    let cut = run.durable.last().unwrap().0;
    let text = save_run(&run, cut, 7, &scratch.path().join("record"));
    let (mut loaded, loaded_cut, image_seed) = load_run(&text);
    assert_eq!((loaded_cut, image_seed), (cut, 7));
    assert_eq!(loaded.primary, scratch.path().join("record.primary"));
    // The primary's copy holds what it did.
    assert_eq!(segments_in(&loaded.primary), segments_in(&run.primary));
    let copy = std::mem::replace(&mut loaded.primary, run.primary.clone());
    assert_eq!(loaded, run);
    loaded.primary = copy;
    std::fs::remove_dir_all(&run.primary).unwrap();
    let image = dir_image(&loaded.ops, cut, &mut SplitMix::new(image_seed));
    assert_eq!(
        image.files,
        dir_image(&run.ops, cut, &mut SplitMix::new(7)).files
    );
    let mut tally = Tally::default();
    check_cut(
        &loaded,
        cut,
        &image,
        &scratch.path().join("image"),
        &mut tally,
    )
    .await;
    assert_eq!((tally.cuts, tally.durable_checked), (1, 1));
}

/// A replica far behind copies many MiB at a stretch, the primary sending as
/// fast as it can: the bytes it writes between two syncs must stay within what
/// recovery takes for a tail lost since the last sync. With 8 MiB between syncs
/// (and recovery's window about 5 MiB), a cut that lost a page early in that
/// stretch while later ones reached the disk left a segment that `Replica::open`
/// refused as damaged (`BadSegment`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_far_behind_syncs_within_the_recovery_window() {
    let scratch = tempfile::Builder::new()
        .prefix("replica-power-cut")
        .tempdir_in(scratch_dir())
        .unwrap();
    let primary = scratch.path().join("primary");
    let log = LogDir::builder()
        .max_segment_bytes(64 << 20)
        .open(&primary)
        .await
        .unwrap();
    let mut ends = Vec::new();
    for chunk in 0..12u32 {
        let records: Vec<Vec<u8>> = (0..256)
            .map(|seq| make_record_sized(chunk, seq, 4000 + (seq as usize * 37) % 300))
            .collect();
        let batch = log.append_batch(records.iter()).await.unwrap();
        ends.extend(batch.iter().map(|range| range.end));
    }
    let replica_path = scratch.path().join("replica");
    let (mut replica, trace, durable, watcher) = open_on_simulator(&replica_path).await;
    let (a, b) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let syncing = tokio::spawn(async move {
        replica.sync_from(b).await.unwrap();
        replica
    });
    let end = log.close().await.unwrap();
    serving.await.unwrap().unwrap();
    let replica = syncing.await.unwrap();
    assert_eq!(replica.end(), end);
    replica.close().await.unwrap();
    watcher.await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    let durable = std::mem::take(&mut *durable.lock().unwrap());
    let run = finish_run(
        "a replica far behind".into(),
        primary,
        0,
        ops,
        durable,
        &ends,
        end,
    )
    .await;

    // The cut just before the sync that ends the longest stretch of writes.
    let (mut longest, mut cut, mut unsynced) = (0, 0, 0);
    for (i, op) in run.ops.iter().enumerate() {
        match op {
            DirOp::File {
                op: power_support::Op::Write { data, .. },
                ..
            } => unsynced += data.len(),
            DirOp::File {
                op: power_support::Op::Sync,
                ..
            } => {
                if unsynced > longest {
                    (longest, cut) = (unsynced, i);
                }
                unsynced = 0;
            }
            _ => {}
        }
    }
    println!("replica power cut: at most {longest} bytes written between two syncs");
    let DirOp::File { inode, .. } = run.ops[cut] else {
        unreachable!()
    };
    // What the disk may hold then: everything but the first page written since the
    // last sync (a later page reached the disk before it).
    let mut rng = SplitMix::new(seed());
    let mut image = dir_image(&run.ops, cut, &mut rng);
    let name = run.ops[..cut]
        .iter()
        .rev()
        .find_map(|op| match op {
            DirOp::Entry {
                name,
                inode: Some(i),
                ..
            } if *i == inode => Some(name.clone()),
            _ => None,
        })
        .unwrap();
    let (mut cached, mut synced) = (Vec::new(), 0);
    for op in &run.ops[..cut] {
        match op {
            DirOp::File { inode: i, op } if *i == inode => match op {
                power_support::Op::Write { offset, data } => {
                    let end = *offset as usize + data.len();
                    cached.resize(cached.len().max(end), 0);
                    cached[*offset as usize..end].copy_from_slice(data);
                }
                power_support::Op::SetLen(len) => cached.resize(*len as usize, 0),
                power_support::Op::Sync => synced = cached.len(),
            },
            _ => {}
        }
    }
    let lost = synced.next_multiple_of(power_support::PAGE);
    cached[lost..lost + power_support::PAGE].fill(0);
    image.files.insert(name, cached);
    let mut tally = Tally::default();
    check_cut(&run, cut, &image, &scratch.path().join("image"), &mut tally).await;
    assert_eq!(tally.durable_checked, 1);
}
