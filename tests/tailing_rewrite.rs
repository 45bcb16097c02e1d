//! Followers behind a writer that cuts its log and writes it again
//! ([`LogDir::truncate_after`], or a file cut and rewritten in place): whatever
//! they hand out is a record that was appended, byte for byte; a rewrite under a
//! record they are putting together is an error, never a record.
//!
//! A follower reads a file in pieces, and a record may span two of them: the
//! start of it read before the rewrite, the rest after. Joined, they make a record
//! nobody wrote. The first tests are the case that found it; the last draws
//! rewrites at random points while followers of every kind (a `DirReader` in
//! another process, one in the writer's, a `LogTailer` of one file) are behind,
//! reading at every speed. `TAILING_REWRITE_CASES` sets its number of cases
//! (default 24), `TAILING_REWRITE_SEED` replays a run (the seed is printed).

use crate::power_support;
use crate::writer_support;

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use bytes::BytesMut;
use walcodec::{
    DirReader, Error, LogChange, LogDir, LogEncoder, LogPosition, LogTailer, WriterOptions,
};

use power_support::{env_number, start_run, SplitMix};
use writer_support::{make_record_sized, verify_sized};

const RECORD_BYTES: usize = 40 * 1024;

/// The case: 20 records of 40 KiB, a follower in another process that
/// returned record 0 and holds the first part of record 1 from the same read; the
/// writer cuts the log after record 0 and appends 20 other records. The follower's
/// next read gets the end of a new record: joined to the old start, it made a
/// 40,960-byte record nobody wrote, and the follower went on as if nothing
/// happened. Now it fails, at a byte after what it returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_follower_never_joins_records_across_a_rewrite() {
    for preallocate in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = WriterOptions::new();
        if !preallocate {
            writer.preallocate(0);
        }
        let log = LogDir::builder()
            .writer(writer)
            .open(dir.path())
            .await
            .unwrap();
        let mut ends = Vec::new();
        for i in 0..20 {
            ends.push(
                log.append(make_record_sized(1, i, RECORD_BYTES))
                    .await
                    .unwrap(),
            );
        }
        let mut follower = DirReader::open(dir.path(), LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(Duration::from_millis(1));
        let first = follower.next_record().await.unwrap().unwrap();
        assert_eq!(first.data, make_record_sized(1, 0, RECORD_BYTES));
        assert_eq!(first.end, ends[0]);

        log.truncate_after(ends[0]).await.unwrap();
        for i in 0..20 {
            log.append(make_record_sized(2, i, RECORD_BYTES))
                .await
                .unwrap();
        }
        let next = tokio::time::timeout(Duration::from_secs(10), follower.next_record())
            .await
            .expect("the follower answers")
            .expect("a follower ends only after an error");
        match next {
            Err(Error::TruncatedUnderReader { position, reader }) => {
                assert!(
                    ends[0] <= position && position < reader,
                    "preallocate {preallocate}: rewritten at {position}, read to {reader}"
                );
            }
            Ok(record) => panic!(
                "preallocate {preallocate}: a record of {} bytes after the rewrite, \
                 written as {:?}",
                record.data.len(),
                verify_sized(&record.data)
                    .filter(|&(task, seq)| record.data
                        == make_record_sized(task, seq, record.data.len())),
            ),
            Err(e) => panic!("preallocate {preallocate}: {e}"),
        }
        assert!(follower.next_record().await.is_none(), "an error ends it");
        log.close().await.unwrap();
    }
}

/// The same with a [`LogTailer`] of one file, rewritten in place as a writer that
/// cuts its file and appends again does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_tailer_never_joins_records_across_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let old: Vec<Vec<u8>> = (0..20)
        .map(|i| make_record_sized(1, i, RECORD_BYTES))
        .collect();
    let (bytes, ends) = encode(&old);
    std::fs::write(&path, &bytes).unwrap();
    let mut tail = LogTailer::open(&path)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    let first = tail.next_record().await.unwrap().unwrap();
    assert_eq!(first.data, old[0]);
    assert_eq!(first.position.end, ends[0]);

    let mut new = vec![old[0].clone()];
    new.extend((0..20).map(|i| make_record_sized(2, i, RECORD_BYTES)));
    let (rewritten, _) = encode(&new);
    rewrite(&path, &rewritten, ends[0]);
    let next = tokio::time::timeout(Duration::from_secs(10), tail.next_record())
        .await
        .expect("the tailer answers")
        .expect("a tailer ends only after an error");
    match next {
        Err(Error::LogChanged(LogChange::Rewritten { offset })) => {
            assert!(ends[0] <= offset, "rewritten at {offset}");
        }
        Ok(record) => panic!(
            "a record of {} bytes at {:?} after the rewrite",
            record.data.len(),
            record.position
        ),
        Err(e) => panic!("{e}"),
    }
}

/// The log of `records`, and the end of each.
fn encode(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let ends = records
        .iter()
        .map(|record| encoder.encode_record(record, &mut log).end)
        .collect();
    (log.to_vec(), ends)
}

/// What a writer that cuts its file at `at` and appends again leaves: the file
/// cut there, then `log`'s bytes after it written in place (same inode).
fn rewrite(path: &Path, log: &[u8], at: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(at).unwrap();
    file.write_all_at(&log[at as usize..], at).unwrap();
}

/// Which follower a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `DirReader::open(..).follow()`: reads the files, as in another process.
    DirFiles,
    /// `LogDir::read_from(..).follow()`: in the writer's process.
    DirInProcess,
    /// `LogTailer::open`: one file, cut and written in place.
    Tailer,
}

/// A follower of any kind, read the same way.
enum Follower {
    Dir(DirReader),
    Tail(LogTailer<tokio::fs::File>),
}

impl Follower {
    async fn caught_up(&mut self) -> Result<bool, Error> {
        match self {
            Follower::Dir(reader) => reader.caught_up().await,
            Follower::Tail(tail) => tail.caught_up().await,
        }
    }

    /// The next record, which `caught_up` said is there: its bytes and its end
    /// (segment 0 for a tailer's file).
    async fn next(&mut self) -> Result<(Vec<u8>, LogPosition), Error> {
        let next = match self {
            Follower::Dir(reader) => {
                let next = reader.next_record();
                tokio::time::timeout(Duration::from_secs(10), next)
                    .await
                    .expect("not caught up, yet no record")
                    .expect("a record")
                    .map(|r| (r.data.to_vec(), r.end))
            }
            Follower::Tail(tail) => {
                let next = tail.next_record();
                tokio::time::timeout(Duration::from_secs(10), next)
                    .await
                    .expect("not caught up, yet no record")
                    .expect("a record")
                    .map(|r| (r.data.to_vec(), LogPosition::new(0, r.position.end)))
            }
        };
        next
    }
}

/// The writer of a case: a `LogDir`, or one file the test writes as a writer
/// would (appends at the end, a rewrite cuts it and appends again).
enum Writer {
    Dir(LogDir),
    File {
        path: std::path::PathBuf,
        records: Vec<Vec<u8>>,
        encoder: LogEncoder,
        log: BytesMut,
    },
}

impl Writer {
    /// Appends `record`; returns its end.
    async fn append(&mut self, record: Vec<u8>) -> LogPosition {
        match self {
            Writer::Dir(log) => log.append(&record).await.unwrap(),
            Writer::File {
                path,
                records,
                encoder,
                log,
            } => {
                let before = log.len();
                let end = encoder.encode_record(&record, log).end;
                records.push(record);
                let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
                file.write_all_at(&log[before..], before as u64).unwrap();
                LogPosition::new(0, end)
            }
        }
    }

    /// Cuts the log after its first `keep` records, whose ends are `ends`.
    async fn truncate(&mut self, ends: &[LogPosition], keep: usize) {
        match self {
            Writer::Dir(log) => {
                let at = match keep {
                    0 => LogPosition::new(log.segments()[0].0, 0),
                    _ => ends[keep - 1],
                };
                log.truncate_after(at).await.unwrap();
            }
            Writer::File {
                path,
                records,
                encoder,
                log,
            } => {
                records.truncate(keep);
                *encoder = LogEncoder::new();
                log.clear();
                for record in records.iter() {
                    encoder.encode_record(record, log);
                }
                let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
                file.set_len(log.len() as u64).unwrap();
            }
        }
    }
}

async fn one_case(rng: &mut SplitMix, dir: &Path, case: usize) -> (usize, usize) {
    let kind = [Kind::DirFiles, Kind::DirInProcess, Kind::Tailer][rng.range(0, 3) as usize];
    let preallocate = rng.chance(1, 2);
    let recycle = rng.chance(1, 2);
    let path = dir.join(format!("case{case:04}"));
    std::fs::create_dir(&path).unwrap();
    let what = format!("case {case} ({kind:?}, preallocate {preallocate}, recycle {recycle})");
    let mut writer = match kind {
        Kind::Tailer => {
            let file = path.join("000001.log");
            std::fs::write(&file, b"").unwrap();
            Writer::File {
                path: file,
                records: Vec::new(),
                encoder: LogEncoder::new(),
                log: BytesMut::new(),
            }
        }
        Kind::DirFiles | Kind::DirInProcess => {
            let mut options = WriterOptions::new();
            if !preallocate {
                options.preallocate(0);
            }
            let log = LogDir::builder()
                .max_segment_bytes(256 * 1024)
                .recycle_segments(if recycle { 2 } else { 0 })
                .writer(options)
                .open(&path)
                .await
                .unwrap();
            Writer::Dir(log)
        }
    };
    let open = |writer: &Writer| {
        let path = path.clone();
        let log = match writer {
            Writer::Dir(log) => Some(log.clone()),
            Writer::File { .. } => None,
        };
        async move {
            match kind {
                Kind::DirFiles => Follower::Dir(
                    DirReader::open(&path, LogPosition::START)
                        .await
                        .unwrap()
                        .follow()
                        .with_poll_interval(Duration::from_millis(1)),
                ),
                Kind::DirInProcess => {
                    Follower::Dir(log.unwrap().read_from(LogPosition::START).unwrap().follow())
                }
                Kind::Tailer => Follower::Tail(
                    LogTailer::open(path.join("000001.log"))
                        .await
                        .unwrap()
                        .with_poll_interval(Duration::from_millis(1)),
                ),
            }
        }
    };
    // Every record ever appended, by its (generation, sequence) tag: its length.
    let mut appended: HashMap<(u32, u32), usize> = HashMap::new();
    // The ends of the records the log holds now, in order.
    let mut ends: Vec<LogPosition> = Vec::new();
    let mut generation = 0u32;
    let mut seq = 0u32;
    let mut follower = open(&writer).await;
    let mut last_end: Option<LogPosition> = None;
    let (mut returned, mut errors) = (0, 0);
    for _step in 0..rng.range(8, 20) {
        // The writer: appends, and now and then a rewrite at a random record's end.
        if !ends.is_empty() && rng.chance(1, 3) {
            let keep = rng.range(0, ends.len() as u64 + 1) as usize;
            writer.truncate(&ends, keep).await;
            ends.truncate(keep);
            generation += 1;
            seq = 0;
        }
        for _ in 0..rng.range(1, 8) {
            let len = match rng.range(0, 4) {
                0 => rng.range(8, 200),
                1 => rng.range(200, 5_000),
                _ => rng.range(20_000, 90_000),
            } as usize;
            let record = make_record_sized(generation, seq, len);
            appended.insert((generation, seq), len);
            seq += 1;
            ends.push(writer.append(record).await);
        }
        // The follower: none, some or all of what is there.
        let reads = [0, 1, 2, 5, usize::MAX][rng.range(0, 5) as usize];
        let mut read = 0;
        while read < reads {
            let next = match follower.caught_up().await {
                Ok(true) => break,
                Ok(false) => follower.next().await,
                Err(e) => Err(e),
            };
            match next {
                Ok((data, end)) => {
                    let tag = verify_sized(&data)
                        .filter(|tag| appended.get(tag) == Some(&data.len()))
                        .unwrap_or_else(|| {
                            panic!("{what}: a record of {} bytes nobody appended", data.len())
                        });
                    assert!(
                        data == make_record_sized(tag.0, tag.1, data.len()),
                        "{what}: record {tag:?} is not the one appended"
                    );
                    assert!(
                        last_end.is_none_or(|last| last < end),
                        "{what}: records out of order"
                    );
                    last_end = Some(end);
                    returned += 1;
                    read += 1;
                }
                Err(
                    Error::TruncatedUnderReader { .. }
                    | Error::LogChanged(
                        LogChange::Rewritten { .. }
                        | LogChange::Shrunk { .. }
                        | LogChange::Replaced
                        | LogChange::Removed,
                    ),
                ) => {
                    // What a rewrite under a follower is: it starts again.
                    errors += 1;
                    follower = open(&writer).await;
                    last_end = None;
                    break;
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }
    if let Writer::Dir(log) = writer {
        drop(follower);
        log.close().await.unwrap();
    }
    (returned, errors)
}

/// Rewrites at random points while followers of every kind are behind, each
/// reading none, some or all of what is there between the writer's steps: every
/// record a follower returns is one that was appended, byte for byte, in order
/// since it (re)started; a rewrite under it is an error it starts again after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_behind_rewrites_return_only_records_that_were_appended() {
    let cases = env_number("TAILING_REWRITE_CASES").unwrap_or(24) as usize;
    let seed = env_number("TAILING_REWRITE_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let (dir, mut rng) = start_run(
        "tailing rewrite",
        "TAILING_REWRITE_SEED",
        seed,
        &format!("{cases} cases"),
    );
    let (mut returned, mut errors) = (0, 0);
    for case in 0..cases {
        let (r, e) = one_case(&mut rng, dir.path(), case).await;
        returned += r;
        errors += e;
    }
    println!("tailing rewrite: {returned} records returned, {errors} rewrites met");
    assert!(returned > cases);
}
