//! A power-cut simulator on the writer's [`Storage`] seam, in the spirit of ALICE,
//! CrashMonkey and LazyFS.
//!
//! [`SimStorage`] keeps the file in memory, as a page cache would, and records every
//! write, sync and size change in a shared [`Trace`]. Afterwards [`crash_image`] turns
//! any prefix of that trace into what a disk could hold had the power failed right
//! there:
//!
//! - everything covered by a completed sync, exactly;
//! - of the writes since, any subset at 4 KiB page granularity ([`PAGE`]), a page
//!   possibly torn: only its first sectors ([`SECTOR`], 512 bytes) reached the disk;
//! - where a page did not reach the disk, what was there before: zeros in
//!   preallocated space or past the old end of the file;
//! - a file size that did, or did not, reach the disk (or something in between, as a
//!   filesystem that updates the on-disk size as write-back goes).
//!
//! Why a simulator rather than a VM with its plug pulled: it explores the reorderings
//! a real disk allows (later pages before earlier ones) thousands of times a second,
//! and any run can be replayed from its seed. The SIGKILL soak (tests/durability.rs)
//! cannot: the page cache survives a killed process.
#![allow(dead_code)]

pub mod dir;
pub mod record;

use std::io;
use std::sync::{Arc, Mutex};

use walcodec::testing::Storage;

/// The unit in which the page cache writes back: what is written or not, as a whole
/// or torn.
pub const PAGE: usize = 4096;

/// The unit a disk writes atomically: a torn page holds whole sectors.
pub const SECTOR: usize = 512;

/// A number from the environment variable `name` (a cut count, a seed), if set.
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
    })
}

/// `POWER_CUT_SEED` to replay a run, else a new seed from the clock (printed by
/// the run, so a failure can be replayed).
pub fn seed() -> u64 {
    env_number("POWER_CUT_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    })
}

/// The start of a seeded run named `name` (say "logdir power cut"): prints how to
/// replay it (`seed_env`) and how much it does (`amount`, say "120 cuts"), and
/// gives its scratch directory, named after it, and its random source.
pub fn start_run(
    name: &str,
    seed_env: &str,
    seed: u64,
    amount: &str,
) -> (tempfile::TempDir, SplitMix) {
    println!("{name}: seed {seed} (replay with {seed_env}={seed}), {amount}");
    let scratch = tempfile::Builder::new()
        .prefix(&name.replace(' ', "-"))
        .tempdir_in(scratch_dir())
        .unwrap();
    (scratch, SplitMix::new(seed))
}

/// Prints, if the run it guards panics, the exact command that replays it: the
/// seed in `seed_env` and the test's full name `test` (`module::name`).
///
/// A run that fixes its interleaving (one task, a current-thread runtime) replays
/// step for step; one with several tasks on several threads replays its
/// configuration and its cuts' draws, not always its schedule.
pub struct ReplayOnPanic {
    command: String,
}

impl ReplayOnPanic {
    pub fn new(seed_env: &str, seed: u64, test: &str) -> ReplayOnPanic {
        ReplayOnPanic {
            command: replay_command(seed_env, seed, test),
        }
    }
}

impl Drop for ReplayOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("replay this run with:\n    {}", self.command);
        }
    }
}

/// The command that runs `test` (`module::name` in this `all` test binary) again
/// with `seed_env` set to `seed`.
pub fn replay_command(seed_env: &str, seed: u64, test: &str) -> String {
    record::command(seed_env, &seed.to_string(), test)
}

/// `bytes` as hex, `-` for none: one word of a recorded run's line.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        write!(out, "{byte:02x}").unwrap();
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

/// What [`hex`] wrote.
pub fn unhex(text: &str) -> Vec<u8> {
    if text == "-" {
        return Vec::new();
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Where a run's real files go: tmpfs when there is one, where its real syncs
/// cost nothing (the simulator, not the disk, decides what survives).
pub fn scratch_dir() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// One recorded storage operation, in the order the writer made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Bytes written at `offset` (possibly past the end: the gap reads as zeros).
    Write { offset: u64, data: Vec<u8> },
    /// The file's length set, growing with zeros or shrinking.
    SetLen(u64),
    /// A completed `fdatasync`/`fsync`: everything before it is on disk.
    Sync,
}

/// Every operation made on a [`SimStorage`], shared with the test that reads it.
#[derive(Debug, Default)]
pub struct Trace {
    ops: Vec<Op>,
}

impl Trace {
    /// How many operations were made so far: a moment a power cut can happen at.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// The operations made so far.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
}

/// An in-memory file under an [`AsyncLogWriter`](walcodec::AsyncLogWriter) that
/// records what the writer does to it.
#[derive(Debug)]
pub struct SimStorage {
    /// The file as the writer sees it (the page cache).
    file: Vec<u8>,
    /// Where the next write goes.
    position: u64,
    trace: Arc<Mutex<Trace>>,
}

impl SimStorage {
    /// An empty file, and the trace its operations go to.
    pub fn new() -> (SimStorage, Arc<Mutex<Trace>>) {
        let trace = Arc::new(Mutex::new(Trace::default()));
        let storage = SimStorage {
            file: Vec::new(),
            position: 0,
            trace: Arc::clone(&trace),
        };
        (storage, trace)
    }

    fn record(&self, op: Op) {
        self.trace.lock().unwrap().ops.push(op);
    }
}

impl Storage for SimStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let offset = self.position;
        write_at(&mut self.file, offset, buf);
        self.position += buf.len() as u64;
        self.record(Op::Write {
            offset,
            data: buf.to_vec(),
        });
        Ok(buf.len())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.record(Op::Sync);
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        // As `FileStorage`: set the length, then sync it; a cut may fall in between.
        self.file.resize(len as usize, 0);
        self.position = len;
        self.record(Op::SetLen(len));
        self.record(Op::Sync);
        Ok(())
    }

    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        // As `FileStorage`: zeros written, then a data sync; a cut may fall in between.
        let zeros = vec![0; (to - from) as usize];
        write_at(&mut self.file, from, &zeros);
        self.record(Op::Write {
            offset: from,
            data: zeros,
        });
        self.record(Op::Sync);
        Ok(())
    }
}

fn write_at(file: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if file.len() < end {
        file.resize(end, 0);
    }
    file[offset as usize..end].copy_from_slice(data);
}

fn apply(file: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { offset, data } => write_at(file, *offset, data),
        Op::SetLen(len) => file.resize(*len as usize, 0),
        Op::Sync => {}
    }
}

/// Which of the pages written since the last sync reached the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// None of them.
    None,
    /// All of them.
    All,
    /// The first few in file order, the next one torn at a sector: write-back in
    /// order, cut midway.
    InOrder,
    /// Each page on its own: written, not written or torn. Later pages may reach the
    /// disk before earlier ones.
    AnySubset,
}

/// What the disk holds after a cut, and how it was chosen.
#[derive(Debug, Clone)]
pub struct CrashImage {
    /// The file's bytes after the cut.
    pub bytes: Vec<u8>,
    /// The file's length covered by the last completed sync.
    pub synced_len: u64,
    /// What the page cache held at the cut: the file as the writer last saw it.
    pub cached: Vec<u8>,
    pub persist: Persist,
    /// Whether some page written since the last sync did not reach the disk (or only
    /// in part) while a later one did: the reordering only a power cut shows.
    pub reordered: bool,
    /// Byte ranges written since the last sync that did not reach the disk (merged).
    pub lost: Vec<(u64, u64)>,
}

/// A small, seedable generator (SplitMix64): no dependency, same sequence everywhere.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.range(0, den) < num
    }
}

/// What the disk could hold had the power failed after the first `cut` operations of
/// `ops`, one of the possibilities drawn with `rng`.
pub fn crash_image(ops: &[Op], cut: usize, rng: &mut SplitMix) -> CrashImage {
    let ops = &ops[..cut];
    let last_sync = ops.iter().rposition(|op| matches!(op, Op::Sync));
    let (synced_ops, unsynced_ops) = match last_sync {
        Some(i) => (&ops[..i], &ops[i + 1..]),
        None => (&ops[..0], ops),
    };
    let mut durable = Vec::new();
    for op in synced_ops {
        apply(&mut durable, op);
    }
    let mut cached = durable.clone();
    for op in unsynced_ops {
        apply(&mut cached, op);
    }

    let persist = match rng.range(0, 4) {
        0 => Persist::None,
        1 => Persist::All,
        2 => Persist::InOrder,
        _ => Persist::AnySubset,
    };

    // The on-disk size: the old one, the new one, or (growing) one at a page
    // boundary in between.
    let (lo, hi) = (
        durable.len().min(cached.len()),
        durable.len().max(cached.len()),
    );
    let len = match (persist, rng.range(0, 3)) {
        (Persist::None, _) | (_, 0) => durable.len(),
        (Persist::All, _) | (_, 1) => cached.len(),
        _ => (rng.range(lo as u64, hi as u64 + 1) as usize)
            .next_multiple_of(PAGE)
            .min(hi),
    };

    // Pages the unsynced writes touched, in file order.
    let mut dirty: Vec<usize> = unsynced_ops
        .iter()
        .filter_map(|op| match op {
            Op::Write { offset, data } if !data.is_empty() => {
                let first = *offset as usize / PAGE;
                let last = (*offset as usize + data.len() - 1) / PAGE;
                Some(first..=last)
            }
            _ => None,
        })
        .flatten()
        .collect();
    dirty.sort_unstable();
    dirty.dedup();

    // Sectors of each dirty page that reach the disk: 0 (none) to PAGE / SECTOR (all).
    let whole = PAGE / SECTOR;
    let stop = rng.range(0, dirty.len() as u64 + 1) as usize;
    let sectors: Vec<usize> = (0..dirty.len())
        .map(|i| match persist {
            Persist::None => 0,
            Persist::All => whole,
            Persist::InOrder if i < stop => whole,
            Persist::InOrder if i == stop => rng.range(0, whole as u64) as usize,
            Persist::InOrder => 0,
            Persist::AnySubset => match rng.range(0, 3) {
                0 => 0,
                1 => whole,
                _ => rng.range(1, whole as u64) as usize,
            },
        })
        .collect();

    let mut bytes = durable.clone();
    bytes.resize(len, 0);
    for (&page, &count) in dirty.iter().zip(&sectors) {
        let from = page * PAGE;
        let to = (from + count * SECTOR).min(len).min(cached.len());
        if from < to {
            bytes[from..to].copy_from_slice(&cached[from..to]);
        }
    }
    // Reordered: a page that lost bytes the writer wrote before a page that kept some
    // (zeros written over zeros count as neither).
    let mut lost_before = false;
    let mut lost: Vec<(u64, u64)> = Vec::new();
    let mut reordered = false;
    for (&page, &count) in dirty.iter().zip(&sectors) {
        let from = page * PAGE;
        let to = (from + PAGE).min(cached.len());
        if from >= to {
            continue;
        }
        let kept_to = (from + count * SECTOR).min(len).min(to);
        let kept_data = from < kept_to && cached[from..kept_to].iter().any(|&b| b != 0);
        reordered |= lost_before && kept_data;
        let on_disk = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let first_lost = (from..to).find(|&i| on_disk(i) != cached[i]);
        if let Some(first) = first_lost {
            lost_before = true;
            match lost.last_mut() {
                Some((_, end)) if *end == first as u64 => *end = to as u64,
                _ => lost.push((first as u64, to as u64)),
            }
        }
    }
    CrashImage {
        bytes,
        synced_len: durable.len() as u64,
        cached,
        persist,
        reordered,
        lost,
    }
}
