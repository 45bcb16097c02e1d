//! Simulated power loss: an `AsyncLogWriter` runs on the power-cut simulator
//! (tests/power_support), and at random moments of its run the disk is replaced by
//! what a power cut could have left (synced bytes, any subset of the pages written
//! since, torn at sectors, zeros where nothing reached the disk, the old or new size).
//! For every such image, with and without preallocation:
//!
//! - no acknowledged record is lost;
//! - a decoder in `TolerateTail` reads it to a clean end, and `AsyncLogWriter::open`
//!   reopens it, cuts the torn tail and appends after it;
//! - every record read back was appended, at the position the writer gave it, in
//!   order: a run of acknowledged records, then possibly some unacknowledged ones;
//! - a bit flipped in an acknowledged record is reported as corruption, never cut as
//!   a torn tail, and `open` refuses it;
//! - a torn tail cut by zeros has them from a sector edge inside the fragment.
//!
//! Images where a page lost comes before a page kept (reordered write-back) are
//! damage to a reader of the file when the lost page is inside a record; the
//! writer's own recovery (`AsyncLogWriter::open`) tells them from corruption by the
//! lost page's zero sector in the unsynced tail and cuts them like a torn tail: it
//! must succeed and keep every acknowledged record. See docs/reliability.md.
//!
//! `POWER_CUT_CUTS` sets how many cuts (default 300), `POWER_CUT_SEED` replays a run's
//! configuration and its cuts (the seed is printed). `scripts/power-cut.sh N` runs N
//! cuts. Several tasks on two threads race the writer's own thread, so a seed does
//! not fix the schedule they met: a cut that fails writes down its whole run (the
//! configuration, every step of the trace, every record and acknowledgement with the
//! step it was seen at) with the cut and the seed of its image, and prints the
//! command that checks exactly that cut again from the record
//! (`POWER_CUT_REPLAY=file`), step for step, whatever the machine does.

use crate::power_support;
use crate::writer_support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use walcodec::{
    AsyncLogWriter, Error, LogDecoder, Position, Recovery, WriterOptions, BLOCK_SIZE, HEADER_SIZE,
};

use power_support::record::{self, RecordOnPanic};
use power_support::{
    crash_image, env_number, hex, scratch_dir, seed, start_run, unhex, CrashImage, Op, Persist,
    ReplayOnPanic, SimStorage, SplitMix, Trace,
};
use writer_support::{make_record, read_log, verify};

/// Cuts drawn from each run of the writer: the run is the slow part, a cut is cheap.
const CUTS_PER_RUN: usize = 25;

/// One writer configuration and the records it appended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    preallocate: u64,
    max_batch_bytes: usize,
    ops: Vec<Op>,
    /// Every record, in log order.
    records: Vec<(Position, Vec<u8>)>,
    /// Acknowledgements: (operations made when the caller saw it, log offset it
    /// vouches for: every byte before it is durable).
    acks: Vec<(usize, u64)>,
}

impl Run {
    /// The log offset every byte before which was acknowledged as durable by the
    /// moment `cut`.
    fn acked_end(&self, cut: usize) -> u64 {
        self.acks
            .iter()
            .filter(|&&(seen, _)| seen <= cut)
            .map(|&(_, end)| end)
            .max()
            .unwrap_or(0)
    }
}

/// Runs a writer on the simulator: tasks appending one at a time, in batches and
/// buffered, with explicit syncs, then a close.
async fn run_writer(rng: &mut SplitMix) -> Run {
    let preallocate = [0, 0, 32 * 1024, 64 * 1024 + 4096][rng.range(0, 4) as usize];
    let max_batch_bytes = [1 << 20, 4096, 1000][rng.range(0, 3) as usize];
    let tasks = rng.range(1, 5) as u32;
    let per_task = rng.range(5, 40) as u32;
    let (storage, trace) = SimStorage::new();
    let log = WriterOptions::new()
        .preallocate(preallocate)
        .max_batch_bytes(max_batch_bytes)
        .from_storage(Box::new(storage), 0)
        .unwrap();

    let records = Arc::new(Mutex::new(Vec::new()));
    let acks = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (log, trace) = (log.clone(), Arc::clone(&trace));
        let (records, acks) = (Arc::clone(&records), Arc::clone(&acks));
        let salt = rng.next_u64();
        handles.push(tokio::spawn(async move {
            let seen = |trace: &Mutex<Trace>| trace.lock().unwrap().len();
            let mut last_end = 0;
            let mut seq = 0;
            while seq < per_task {
                let record = make_record(task, seq);
                match (salt.rotate_left(seq) ^ u64::from(seq)) % 8 {
                    0 => {
                        let batch: Vec<_> = (seq..(seq + 3).min(per_task))
                            .map(|s| make_record(task, s))
                            .collect();
                        let positions = log.append_batch(&batch).await.unwrap();
                        let observed = seen(&trace);
                        last_end = positions.last().unwrap().end;
                        acks.lock().unwrap().push((observed, last_end));
                        seq += batch.len() as u32;
                        records
                            .lock()
                            .unwrap()
                            .extend(positions.into_iter().zip(batch));
                        continue;
                    }
                    1 | 2 => {
                        let position = log.append_buffered(&record).await.unwrap();
                        last_end = position.end;
                        records.lock().unwrap().push((position, record));
                    }
                    3 => {
                        let position = log.append_buffered(&record).await.unwrap();
                        records.lock().unwrap().push((position, record));
                        log.sync().await.unwrap();
                        let observed = seen(&trace);
                        last_end = position.end;
                        acks.lock().unwrap().push((observed, last_end));
                    }
                    _ => {
                        let position = log.append(&record).await.unwrap();
                        let observed = seen(&trace);
                        last_end = position.end;
                        acks.lock().unwrap().push((observed, last_end));
                        records.lock().unwrap().push((position, record));
                    }
                }
                seq += 1;
            }
            last_end
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let len = log.close().await.unwrap();
    let closed_at = trace.lock().unwrap().len();
    acks.lock().unwrap().push((closed_at, len));

    let mut records = std::mem::take(&mut *records.lock().unwrap());
    records.sort_by_key(|(position, _)| position.start);
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    let ops = trace.lock().unwrap().ops().to_vec();
    Run {
        preallocate,
        max_batch_bytes,
        ops,
        records,
        acks,
    }
}

/// Decodes a whole image in memory: the records, and whether it ended cleanly.
fn decode(bytes: &[u8], recovery: Recovery) -> (Vec<(Position, Bytes)>, Result<u64, Error>) {
    // A file's image: what the cut tore is a torn tail.
    let mut decoder = LogDecoder::builder()
        .recovery(recovery)
        .input(walcodec::LogInput::File)
        .build();
    let mut buf = BytesMut::from(bytes);
    let mut records = Vec::new();
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(data)) => {
                let position = decoder.last_record().unwrap();
                records.push((position, data));
            }
            Ok(None) => return (records, Ok(decoder.valid_prefix_len())),
            Err(e) => return (records, Err(e.into())),
        }
    }
}

/// What the cuts came to.
#[derive(Debug, Default)]
struct Tally {
    cuts: usize,
    acknowledged: usize,
    lost: usize,
    /// Cuts where the records read back skip some unacknowledged record but not a
    /// later one (a page lost before a page kept, in the last unsynced batch).
    gaps: usize,
    reordered: usize,
    torn_tails_cut: usize,
    /// Torn tails that are a fragment cut short by zeros to EOF.
    zero_cuts: usize,
    flips: usize,
    /// Reordered images a reader reports as damage (the first fragment that lost a
    /// page is followed by more log) and the writer's recovery cut, with their shape.
    recovered: Vec<String>,
    /// Flips the format cannot see, passed over for another record: the flipped
    /// record's payload ends in zeros from a sector edge on, with only zeros after
    /// it, as a torn write's would.
    ambiguous_flips: usize,
    /// Reordered images the writer's recovery refused (safely) as damage, each of
    /// the one shape docs/reliability.md allows.
    refused: Vec<String>,
    /// Images with records to flip where every candidate flip was ambiguous.
    unflipped: usize,
}

/// Checks one cut; panics with everything needed to replay it.
async fn check_cut(run: &Run, cut: usize, image: &CrashImage, dir: &Path, tally: &mut Tally) {
    let context = format!(
        "cut after {cut} of {} ops, {:?}, synced {} cached {} on disk {} bytes, \
         reordered {}, preallocate {}, batch {}",
        run.ops.len(),
        image.persist,
        image.synced_len,
        image.cached.len(),
        image.bytes.len(),
        image.reordered,
        run.preallocate,
        run.max_batch_bytes,
    );
    let index_at: HashMap<u64, usize> = run
        .records
        .iter()
        .enumerate()
        .map(|(i, (position, _))| (position.start, i))
        .collect();

    let (read, end) = decode(&image.bytes, Recovery::TolerateTail);

    // Every record read back is one appended, where the writer put it, in order.
    let mut indices = Vec::with_capacity(read.len());
    for (position, data) in &read {
        let index = *index_at
            .get(&position.start)
            .unwrap_or_else(|| panic!("{context}: a record at {position:?} was never appended"));
        let (appended_at, appended) = &run.records[index];
        assert_eq!(position, appended_at, "{context}");
        assert_eq!(
            &data[..],
            &appended[..],
            "{context}: not the record appended"
        );
        assert!(verify(data).is_some(), "{context}");
        if let Some(&previous) = indices.last() {
            assert!(index > previous, "{context}: out of order at {position:?}");
        }
        indices.push(index);
    }
    // Every acknowledged record is there, as the run the log starts with.
    let acked_end = run.acked_end(cut);
    let acked = run
        .records
        .iter()
        .take_while(|(position, _)| position.end <= acked_end)
        .count();
    let kept = indices
        .iter()
        .enumerate()
        .take_while(|&(i, &j)| i == j)
        .count();
    tally.cuts += 1;
    tally.acknowledged += acked;
    if kept < acked {
        tally.lost += acked - kept;
        panic!(
            "{context}: acknowledged records lost: {acked} acknowledged up to {acked_end}, \
             {kept} read back in order"
        );
    }
    if kept < indices.len() {
        tally.gaps += 1;
    }
    tally.reordered += usize::from(image.reordered);
    let valid_len = match end {
        Ok(len) => len,
        // A page lost before a page kept, inside one record's bytes, reads as a
        // checksum mismatch with more log after it: damage to a reader of the file,
        // but the writer's own recovery sees the lost page (a zero sector) in what
        // can be its unsynced tail, and cuts there like a torn tail.
        Err(e) if image.reordered => {
            tally
                .recovered
                .push(format!("{context}, lost {:?}: {e}", image.lost));
            read.last().map_or(0, |(position, _)| position.end)
        }
        Err(e) => panic!("{context}: TolerateTail fails: {e}"),
    };

    // Reopening cuts the tail, and what is appended then reads back after the rest.
    let path = dir.join(format!("cut-{cut}.log"));
    std::fs::write(&path, &image.bytes).unwrap();
    let reopened = match WriterOptions::new()
        .preallocate(run.preallocate)
        .open(&path)
        .await
    {
        Ok(reopened) => reopened,
        // The one refusal docs/reliability.md allows (about 1 cut in 20,000): a
        // reordered image whose lost pages recovery could not tell from corruption.
        // Each is checked to be exactly that: reordered, the damage past every
        // acknowledged record (all read back above) and over a page that did not
        // reach the disk, and the file left as it was. With `POWER_CUT_STRICT=1`
        // any refusal fails.
        Err(e @ Error::Corruption { offset, bytes, .. })
            if image.reordered
                && offset >= acked_end
                && image
                    .lost
                    .iter()
                    .any(|&(from, to)| from < offset + bytes.max(1) && to > offset)
                && !strict() =>
        {
            assert_eq!(std::fs::read(&path).unwrap(), image.bytes, "{context}");
            tally
                .refused
                .push(format!("{context}, lost {:?}: {e}", image.lost));
            std::fs::remove_file(&path).unwrap();
            return check_flip(run, image, &read, acked, cut, dir, &context, tally).await;
        }
        Err(e) => panic!(
            "{context}: reopen fails (reordered {}, lost {:?}): {e}",
            image.reordered, image.lost
        ),
    };
    assert_eq!(reopened.stats().len, valid_len, "{context}");
    if image.reordered && valid_len < image.bytes.len() as u64 {
        // Whatever recovery cut, the acknowledged records stayed.
        assert!(
            valid_len >= acked_end,
            "{context}: reopen cut acknowledged records"
        );
    }
    tally.torn_tails_cut += usize::from(valid_len < image.bytes.len() as u64);
    if !image.reordered {
        if let Some((fragment, zeros, end)) = zero_cut(image, valid_len as usize) {
            // The shape the decoder accepts as torn by zero fill (issue 17, finding 2):
            // zeros from a sector edge inside the fragment to EOF.
            let edge = zeros.next_multiple_of(power_support::SECTOR);
            assert!(
                edge > fragment && edge < end,
                "{context}: fragment {fragment}..{end} cut by zeros from {zeros}, \
                 no sector edge among them"
            );
            tally.zero_cuts += 1;
        }
    }
    let marker = make_record(u32::MAX, cut as u32);
    reopened.append(&marker).await.unwrap();
    reopened.close().await.unwrap();
    let after = read_log(&path, false).await;
    assert_eq!(after.len(), read.len() + 1, "{context}: after reopen");
    assert!(after[..read.len()]
        .iter()
        .zip(&read)
        .all(|(a, b)| a.0 == b.0 && a.1 == b.1));
    assert_eq!(after.last().unwrap().1, marker, "{context}");
    std::fs::remove_file(&path).unwrap();

    check_flip(run, image, &read, acked, cut, dir, &context, tally).await;
}

/// Flips one bit in the payload of an acknowledged record that has more log after it
/// on disk: that is damage, which a reader must report and `open` must refuse, never
/// cut as if it were a torn tail.
#[allow(clippy::too_many_arguments)]
async fn check_flip(
    run: &Run,
    image: &CrashImage,
    read: &[(Position, Bytes)],
    acked: usize,
    cut: usize,
    dir: &Path,
    context: &str,
    tally: &mut Tally,
) {
    // The records read back whose first fragment's payload is not empty.
    let candidates: Vec<usize> = (0..acked.min(read.len()))
        .filter(|&i| {
            let start = run.records[i].0.start;
            first_payload(start, run.records[i].1.len()).is_some()
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    // Every other time the last acknowledged record: the one a torn tail follows,
    // so the one a reader could mistake for torn. A flip the format cannot tell
    // from a torn write (below) is passed over for the next candidate.
    let first_pick = if cut % 2 == 0 {
        candidates.len() - 1
    } else {
        (cut * 7919 + acked) % candidates.len()
    };
    for i in 0..candidates.len() {
        let pick = candidates[(first_pick + i) % candidates.len()];
        if flip_one(run, image, pick, cut, dir, context, tally).await {
            return;
        }
        tally.ambiguous_flips += 1;
    }
    tally.unflipped += 1;
}

/// Flips a bit of the acknowledged record `pick` in `image` and checks it is
/// reported and refused; false (nothing checked) when the flip leaves the shape of
/// a torn write, which the format cannot tell from one.
async fn flip_one(
    run: &Run,
    image: &CrashImage,
    pick: usize,
    cut: usize,
    dir: &Path,
    context: &str,
    tally: &mut Tally,
) -> bool {
    let (position, record) = &run.records[pick];
    let (from, len) = first_payload(position.start, record.len()).unwrap();
    let at = from + (cut * 31 % len) as u64;
    let mut bytes = image.bytes.clone();
    bytes[at as usize] ^= 1 << (cut % 8);
    let context = format!("{context}; bit {} flipped at {at} in {position:?}", cut % 8);

    let (damaged, end) = decode(&bytes, Recovery::TolerateTail);
    let fragment_end = (from + len as u64) as usize;
    match zero_cut_shape(&bytes, from as usize, fragment_end) {
        // The shape a write cut short at a sector edge in preallocated space leaves:
        // the format cannot tell this flip from a torn tail.
        ZeroCut::AtSector => return false,
        // A payload that merely ends in 0x00 before zeros to EOF is no torn write
        // (issue 17, finding 2): the flip must be reported like any other.
        ZeroCut::Unaligned | ZeroCut::No => {}
    }
    assert!(
        matches!(end, Err(Error::Corruption { .. })),
        "{context}: passed off as torn: {end:?}"
    );
    assert!(
        damaged.len() <= pick,
        "{context}: the damaged record read back"
    );
    let path = dir.join(format!("flip-{cut}.log"));
    std::fs::write(&path, &bytes).unwrap();
    match AsyncLogWriter::open(&path).await {
        Err(Error::Corruption { .. }) => {}
        other => panic!("{context}: reopen: {other:?}"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "{context}: file changed"
    );
    std::fs::remove_file(&path).unwrap();
    tally.flips += 1;
    true
}

/// The fragment after `valid_len` whose bytes run into zeros that last to EOF, if
/// the tail is one: (its offset, where the zeros begin, where it would end).
/// Fragments that reached the disk whole are passed over, even when their last
/// bytes happen to be zeros.
fn zero_cut(image: &CrashImage, valid_len: usize) -> Option<(usize, usize, usize)> {
    let bytes = &image.bytes;
    let zeros = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if zeros <= valid_len || zeros == bytes.len() {
        return None;
    }
    let mut at = valid_len;
    loop {
        let block_left = BLOCK_SIZE - at % BLOCK_SIZE;
        if block_left < HEADER_SIZE {
            at += block_left;
            continue;
        }
        if at + HEADER_SIZE > zeros {
            // Zeros inside a header: a torn header, not a payload.
            return None;
        }
        let len = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]) as usize;
        let end = at + HEADER_SIZE + len;
        let whole = bytes
            .get(at..end)
            .is_some_and(|on_disk| image.cached.get(at..end) == Some(on_disk));
        if end > zeros && !whole {
            return Some((at, zeros, end));
        }
        if end >= bytes.len() {
            return None;
        }
        at = end;
    }
}

/// How a fragment (payload `from..to`) could look cut short by zeros.
#[derive(Debug, PartialEq)]
enum ZeroCut {
    /// Not at all: something but zeros follows it, or its payload does not end in 0.
    No,
    /// Its payload runs into zeros to EOF from a 512-byte sector edge inside it:
    /// what a torn write in preallocated space leaves (the payload's own zeros may
    /// come just before the edge).
    AtSector,
    /// Its payload ends in zeros that run to EOF but begin off a sector edge.
    Unaligned,
}

fn zero_cut_shape(bytes: &[u8], from: usize, to: usize) -> ZeroCut {
    if bytes[to..].iter().any(|&b| b != 0) || bytes[to - 1] != 0 {
        return ZeroCut::No;
    }
    let zeros_from = bytes[from..to]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(from, |i| from + i + 1);
    if (zeros_from as u64).next_multiple_of(power_support::SECTOR as u64) < to as u64 {
        ZeroCut::AtSector
    } else {
        ZeroCut::Unaligned
    }
}

/// Offset and length of the payload of the first fragment of a record that starts at
/// `start` (where the writer put it: a header fits there) and holds `len` bytes.
fn first_payload(start: u64, len: usize) -> Option<(u64, usize)> {
    let room = BLOCK_SIZE - (start as usize % BLOCK_SIZE) - HEADER_SIZE;
    let n = len.min(room);
    (n > 0).then_some((start + HEADER_SIZE as u64, n))
}

async fn power_cuts(cuts: usize, seed: u64) -> Tally {
    let (dir, mut rng) = start_run("power cut", "POWER_CUT_SEED", seed, &format!("{cuts} cuts"));
    let mut tally = Tally::default();
    let mut by_persist: HashMap<&'static str, usize> = HashMap::new();
    while tally.cuts < cuts {
        let run = run_writer(&mut rng).await;
        for _ in 0..CUTS_PER_RUN.min(cuts - tally.cuts) {
            let cut = rng.range(0, run.ops.len() as u64 + 1) as usize;
            let image_seed = rng.next_u64();
            let image = crash_image(&run.ops, cut, &mut SplitMix::new(image_seed));
            *by_persist.entry(persist_name(image.persist)).or_default() += 1;
            let record = RecordOnPanic::new(REPLAY, TEST, "power-cut", seed, cut, |_| {
                save_run(&run, cut, image_seed)
            });
            check_cut(&run, cut, &image, dir.path(), &mut tally).await;
            drop(record);
        }
    }
    println!(
        "power cut: {} cuts ({by_persist:?}), {} acknowledged records checked, {} lost, \
         {} reordered images ({} damage to a reader, cut by the writer's recovery, {} \
         refused as the docs allow), {} with a \
         gap among unacknowledged records, {} torn tails cut on reopen ({} a fragment cut by \
         zeros from a sector edge), {} bit flips reported as corruption and refused, {} \
         images with no flip checked",
        tally.cuts,
        tally.acknowledged,
        tally.lost,
        tally.reordered,
        tally.recovered.len(),
        tally.refused.len(),
        tally.gaps,
        tally.torn_tails_cut,
        tally.zero_cuts,
        tally.flips,
        tally.unflipped,
    );
    println!(
        "power cut: {} bit flips the format cannot tell from a torn write, passed over",
        tally.ambiguous_flips,
    );
    for refused in &tally.refused {
        println!("power cut: refused: {refused}");
    }
    for recovered in tally.recovered.iter().take(3) {
        println!("power cut: recovered: {recovered}");
    }
    tally
}

/// Whether every reordered image must reopen (`POWER_CUT_STRICT=1`, for soaks).
fn strict() -> bool {
    std::env::var("POWER_CUT_STRICT").is_ok_and(|v| v == "1")
}

fn persist_name(persist: Persist) -> &'static str {
    match persist {
        Persist::None => "none",
        Persist::All => "all",
        Persist::InOrder => "in order",
        Persist::AnySubset => "any subset",
    }
}

/// This test's name, and the variable that replays one of its recorded cuts.
const TEST: &str = "power_cut::power_cuts_lose_no_acknowledged_record";
const REPLAY: &str = "POWER_CUT_REPLAY";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_lose_no_acknowledged_record() {
    if let Some((file, text)) = record::replayed(REPLAY, TEST) {
        let (run, cut, image_seed) = load_run(&text);
        record::say_replaying("power cut", cut, run.ops.len(), &file);
        let scratch = tempfile::tempdir_in(scratch_dir()).unwrap();
        let image = crash_image(&run.ops, cut, &mut SplitMix::new(image_seed));
        let mut tally = Tally::default();
        check_cut(&run, cut, &image, scratch.path(), &mut tally).await;
        assert_eq!((tally.cuts, tally.lost), (1, 0));
        return;
    }
    let cuts = env_number("POWER_CUT_CUTS").unwrap_or(300) as usize;
    let seed = seed();
    let _replay = ReplayOnPanic::new("POWER_CUT_SEED", seed, TEST);
    let tally = power_cuts(cuts, seed).await;
    assert_eq!(tally.lost, 0);
    assert!(tally.acknowledged > 0);
    // Flips were checked, not all passed over.
    assert!(tally.flips > 0, "no bit flip checked");
}

/// A run, the cut and its image's seed as text, a line a step (see [`load_run`]).
fn save_run(run: &Run, cut: usize, image_seed: u64) -> String {
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "config {} {}", run.preallocate, run.max_batch_bytes).unwrap();
    writeln!(w, "cut {cut} {image_seed}").unwrap();
    for op in &run.ops {
        writeln!(w, "{}", record::op_line(op)).unwrap();
    }
    for (position, data) in &run.records {
        writeln!(
            w,
            "record {} {} {}",
            position.start,
            position.end,
            hex(data)
        )
        .unwrap();
    }
    for (seen, end) in &run.acks {
        writeln!(w, "ack {seen} {end}").unwrap();
    }
    out
}

/// What [`save_run`] wrote.
fn load_run(text: &str) -> (Run, usize, u64) {
    let mut run = Run {
        preallocate: 0,
        max_batch_bytes: 0,
        ops: Vec::new(),
        records: Vec::new(),
        acks: Vec::new(),
    };
    let (mut cut, mut image_seed) = (0, 0);
    let n = |word: &str| -> u64 { word.parse().unwrap() };
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["config", preallocate, batch] => {
                run.preallocate = n(preallocate);
                run.max_batch_bytes = n(batch) as usize;
            }
            ["cut", ..] => (cut, image_seed) = record::parse_cut(&words).unwrap(),
            ["write", ..] | ["setlen", ..] | ["sync"] => {
                run.ops.push(record::parse_op(&words).unwrap())
            }
            ["record", start, end, data] => run.records.push((
                Position {
                    start: n(start),
                    end: n(end),
                },
                unhex(data),
            )),
            ["ack", seen, end] => run.acks.push((n(seen) as usize, n(end))),
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
    let run = run_writer(&mut SplitMix::new(42)).await;
    assert!(!run.acks.is_empty());
    let cut = run.ops.len() * 2 / 3;
    let text = save_run(&run, cut, 7);
    let (loaded, loaded_cut, image_seed) = load_run(&text);
    assert_eq!((loaded_cut, image_seed), (cut, 7));
    assert_eq!(loaded, run);
    let image = crash_image(&loaded.ops, cut, &mut SplitMix::new(image_seed));
    let again = crash_image(&run.ops, cut, &mut SplitMix::new(7));
    assert_eq!(image.bytes, again.bytes);
    let mut tally = Tally::default();
    check_cut(&loaded, cut, &image, scratch.path(), &mut tally).await;
    assert_eq!((tally.cuts, tally.lost), (1, 0));
}

/// The simulator itself: a cut right after a sync keeps exactly the synced bytes when
/// no later page reached the disk, and a torn page keeps whole sectors.
#[test]
fn the_simulator_keeps_synced_bytes_and_tears_at_sectors() {
    let ops = vec![
        Op::Write {
            offset: 0,
            data: vec![1; 5000],
        },
        Op::Sync,
        Op::Write {
            offset: 5000,
            data: vec![2; 9000],
        },
    ];
    let mut rng = SplitMix::new(1);
    let mut shapes = std::collections::HashSet::new();
    for _ in 0..2000 {
        let image = crash_image(&ops, 3, &mut rng);
        assert_eq!(image.synced_len, 5000);
        assert_eq!(&image.bytes[..5000], &[1; 5000][..]);
        // Within a page, zeros begin where the synced bytes end or at a sector
        // edge, and run to the page's end: never a 2 past a zero inside a page.
        for (index, page) in image.bytes.chunks(power_support::PAGE).enumerate() {
            if let Some(zero) = page.iter().position(|&b| b == 0) {
                let at = index * power_support::PAGE + zero;
                assert!(at % power_support::SECTOR == 0 || at == 5000, "{at}");
                assert!(page[zero..].iter().all(|&b| b == 0));
            }
        }
        shapes.insert((image.bytes.len(), image.reordered));
        assert!(image.bytes.len() <= 14000);
    }
    assert!(shapes.len() > 5, "{shapes:?}");
    assert!(shapes.iter().any(|&(_, reordered)| reordered));
    // Before the first sync nothing is guaranteed; after all ops everything may be.
    let image = crash_image(&ops, 0, &mut rng);
    assert!(image.bytes.is_empty());
}
