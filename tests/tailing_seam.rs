//! A follower against every way a live file can look while a writer fills it, drawn
//! at random on the writer's storage seam: the writer runs on the power-cut
//! simulator's [`SimStorage`], and the file a [`LogTailer`] reads goes through the
//! states a reader in another process could see: every write of the trace in turn
//! (syncs change nothing a reader sees), each one possibly visible in part first
//! (a prefix of its pages, the last one possibly torn at a sector), as a read
//! racing a `write(2)` sees the page cache. Between states the follower reads none, some or all of what
//! it can. Checked: every record it yields is in the final log, at the same
//! position, in order, and once the writer has closed it yields the whole log.
//!
//! Two writers: a fresh file, growing or preallocated, in LevelDB's format; and a
//! recycled file (RocksDB's recyclable format, log number 2) written over an
//! earlier log (number 1) that it does not cut until it closes.
//!
//! `TAILING_SEAM_CASES` sets the number of cases (default 60), `TAILING_SEAM_SEED`
//! replays a run (the seed is printed).

use crate::power_support;
use crate::writer_support;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use bytes::BytesMut;
use walcodec::{
    Dialect, LogDecoder, LogDecoderBuilder, LogEncoder, LogReader, LogTailer, Position,
    WriterOptions,
};

use power_support::{env_number, start_run, Op, SimStorage, SplitMix, PAGE, SECTOR};
use writer_support::{make_record, verify};

/// The log number of the recycled file's new log; its earlier log has 1.
const LOG_NUMBER: u64 = 2;

/// One writer's trace, over the bytes the file held before it.
struct Run {
    base: Vec<u8>,
    ops: Vec<Op>,
    builder: LogDecoderBuilder,
    what: String,
}

/// Runs a writer on the simulator: 1 to 3 tasks appending, durably or buffered
/// with syncs now and then, then a close.
async fn run_writer(rng: &mut SplitMix) -> Run {
    let recycled = rng.chance(1, 3);
    let preallocate = if recycled {
        0
    } else {
        [0, 32 * 1024, 64 * 1024 + 4096][rng.range(0, 3) as usize]
    };
    let max_batch_bytes = [1 << 20, 4096, 1000][rng.range(0, 3) as usize];
    let tasks = rng.range(1, 4) as u32;
    let per_task = rng.range(5, 40) as u32;
    let mut options = WriterOptions::new();
    options
        .preallocate(preallocate)
        .max_batch_bytes(max_batch_bytes);
    let mut builder = LogDecoder::builder();
    let base = if recycled {
        options.format(walcodec::LogFormat::leveldb().recyclable(LOG_NUMBER));
        builder.dialect(Dialect::RocksDb).log_number(LOG_NUMBER);
        earlier_log(rng.range(0, 300_000) as usize)
    } else {
        Vec::new()
    };
    let (storage, trace) = SimStorage::new();
    let log = options.from_storage(Box::new(storage), 0).unwrap();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let log = log.clone();
        let salt = rng.next_u64();
        handles.push(tokio::spawn(async move {
            for seq in 0..per_task {
                let record = make_record(task, seq);
                match (salt.rotate_left(seq) ^ u64::from(seq)) % 4 {
                    0 => {
                        log.append_buffered(&record).await.unwrap();
                    }
                    1 => {
                        log.append_buffered(&record).await.unwrap();
                        log.sync().await.unwrap();
                    }
                    _ => {
                        log.append(&record).await.unwrap();
                    }
                }
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    log.close().await.unwrap();
    let ops = trace.lock().unwrap().ops().to_vec();
    Run {
        base,
        ops,
        builder,
        what: format!(
            "recycled {recycled}, preallocate {preallocate}, max_batch_bytes \
             {max_batch_bytes}, {tasks} tasks of {per_task} records"
        ),
    }
}

/// An earlier log of about `bytes` bytes, numbered 1, in RocksDB's recyclable format.
fn earlier_log(bytes: usize) -> Vec<u8> {
    let mut encoder = LogEncoder::builder().recyclable(1).build();
    let mut log = BytesMut::new();
    let mut seq = 0;
    while log.len() < bytes {
        encoder.encode_record(&make_record(7, seq), &mut log);
        seq += 1;
    }
    log.to_vec()
}

fn write_at(file: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if file.len() < offset + data.len() {
        file.resize(offset + data.len(), 0);
    }
    file[offset..offset + data.len()].copy_from_slice(data);
}

/// The states a reader in another process can see, in order: each write of the
/// trace applied whole, some of them first in part: a prefix of it, ending at a
/// page boundary of the file or inside a page at a sector boundary.
///
/// Each state stays as long as the follower likes, as it does while a writer is
/// stalled: between its `write` calls, or inside one with a prefix of it copied
/// (the kernel copies a write's pages in file order, and stalls between pages). A
/// prefix ending at any other byte lasts only while a read races the copy, as does
/// a later page seen before an
/// earlier one lasts only while a read races that copy, which the follower's
/// second look at damage covers; it is not drawn here, since a state that stayed
/// would be damage.
fn views(run: &Run, rng: &mut SplitMix) -> Vec<Vec<u8>> {
    let mut file = run.base.clone();
    let mut views = vec![file.clone()];
    for op in &run.ops {
        match op {
            Op::Write { offset, data } => {
                let offset = *offset as usize;
                if data.len() > SECTOR && rng.chance(1, 2) {
                    // The write's pieces: a page's first sectors, then its rest.
                    let mut pieces = Vec::new();
                    let mut at = offset;
                    while at < offset + data.len() {
                        let page_end = ((at / PAGE + 1) * PAGE).min(offset + data.len());
                        // A sector boundary of the file inside the page.
                        let torn =
                            (at / SECTOR + rng.range(1, (PAGE / SECTOR) as u64) as usize) * SECTOR;
                        if torn < page_end && rng.chance(1, 3) {
                            pieces.push((at, torn));
                            pieces.push((torn, page_end));
                        } else {
                            pieces.push((at, page_end));
                        }
                        at = page_end;
                    }
                    // Shown after a few random pieces, in file order.
                    let mut partial = file.clone();
                    for &(from, to) in &pieces {
                        write_at(&mut partial, from, &data[from - offset..to - offset]);
                        if rng.chance(1, 3) {
                            views.push(partial.clone());
                        }
                    }
                }
                write_at(&mut file, offset, data);
                views.push(file.clone());
            }
            Op::SetLen(len) => {
                file.resize(*len as usize, 0);
                views.push(file.clone());
            }
            Op::Sync => {}
        }
    }
    views
}

/// The final log's records and positions, read whole from the file at `path`.
async fn final_records(run: &Run, path: &Path) -> Vec<(Position, Vec<u8>)> {
    let mut reader = LogReader::open_at(path, 0, &run.builder).await.unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        records.push((record.position, record.data.to_vec()));
    }
    records
}

/// Puts `view` in place of the file's bytes, in place (same inode), as the page
/// cache a reader sees.
fn show(file: &std::fs::File, view: &[u8]) {
    file.write_all_at(view, 0).unwrap();
    file.set_len(view.len() as u64).unwrap();
}

/// Reads one record if the follower says it has one (and then it must yield it);
/// false when it is caught up.
async fn read(
    tail: &mut LogTailer<tokio::fs::File>,
    yielded: &mut Vec<(Position, Vec<u8>)>,
    what: &str,
) -> bool {
    let caught_up = tail
        .caught_up()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if caught_up {
        return false;
    }
    let record = tokio::time::timeout(Duration::from_secs(10), tail.next_record())
        .await
        .unwrap_or_else(|_| panic!("{what}: not caught up, yet no record"))
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    yielded.push((record.position, record.data.to_vec()));
    true
}

async fn one_case(rng: &mut SplitMix, dir: &Path, case: usize) -> usize {
    let run = run_writer(rng).await;
    let views = views(&run, rng);
    let path = dir.join(format!("{case:06}.log"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    show(&file, &views[0]);
    let mut tail = LogTailer::open_at(&path, 0, &run.builder)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    let mut yielded = Vec::new();
    for (at, view) in views.iter().enumerate() {
        show(&file, view);
        for _ in 0..rng.range(0, 4) {
            if !read(
                &mut tail,
                &mut yielded,
                &format!("case {case} ({}), view {at}", run.what),
            )
            .await
            {
                break;
            }
        }
    }
    let what = format!("case {case} ({}), after the close", run.what);
    while read(&mut tail, &mut yielded, &what).await {}
    let want = final_records(&run, &path).await;
    // Caught up means no record is there: none comes after a few polls either.
    if let Ok(record) = tokio::time::timeout(Duration::from_millis(20), tail.next_record()).await {
        let record = record.map(|r| r.map(|r| r.position));
        panic!(
            "{what}: caught up after {} of {} records, yet the next read gives {record:?}",
            yielded.len(),
            want.len()
        );
    }
    assert!(
        !read(&mut tail, &mut yielded, &what).await,
        "{what}: a record past the end"
    );
    assert!(!want.is_empty());
    for (i, record) in want.iter().enumerate() {
        assert!(verify(&record.1).is_some(), "case {case}: final record {i}");
    }
    assert_eq!(
        yielded.len(),
        want.len(),
        "case {case} ({}): every record of the final log, once",
        run.what
    );
    for (i, (got, want)) in yielded.iter().zip(&want).enumerate() {
        assert_eq!(
            got.0, want.0,
            "case {case} ({}): record {i} at the final log's position",
            run.what
        );
        assert!(
            got.1 == want.1,
            "case {case} ({}): record {i}'s bytes",
            run.what
        );
    }
    drop(tail);
    std::fs::remove_file(&path).unwrap();
    views.len()
}

/// Every record the follower yields is in the final log, at its position, and
/// `caught_up` is `true` only when no complete record is there to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_yields_only_records_of_the_final_log_at_their_positions() {
    let cases = env_number("TAILING_SEAM_CASES").unwrap_or(60) as usize;
    let seed = env_number("TAILING_SEAM_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    run_cases(seed, cases).await;
}

/// The case that found `caught_up` saying `true` with records left: the follower
/// had read a preallocated block's zeros, skipped to the block's end (which leaves
/// no trace in the decoder), and at the file's end took those old zeros for what
/// the file still held, after the writer had written records over them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caught_up_reads_again_what_it_read_past_the_last_record() {
    run_cases(1795748393199759345, 1).await;
}

async fn run_cases(seed: u64, cases: usize) {
    let (dir, mut rng) = start_run(
        "tailing seam",
        "TAILING_SEAM_SEED",
        seed,
        &format!("{cases} cases"),
    );
    let mut views = 0;
    for case in 0..cases {
        views += one_case(&mut rng, dir.path(), case).await;
    }
    println!("tailing seam: {cases} cases, {views} states of the file followed");
    assert!(views > cases);
}
