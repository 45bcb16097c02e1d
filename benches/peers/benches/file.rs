//! Reading and writing a large log file: walcodec beside LevelDB 1.23's own C++
//! `log::Reader` / `log::Writer`, and beside the bound (the same I/O without any
//! log format), all in one run. (rusty-leveldb 3.0.3 is no peer here: its
//! `LogReader` and `LogWriter` sit in a private module.)
//!
//! The log holds records from 50 B to 70 KB, spread evenly on a log scale (like a
//! database's WriteBatches: mostly small, most bytes in large ones), pseudo-random
//! bytes. It is written once, then read from the page cache.
//!
//! | group        | id                          | what                                              |
//! |--------------|-----------------------------|---------------------------------------------------|
//! | `file_read`  | `bound_read`                | `read` of the file in 1 MiB pieces, no decoding   |
//! |              | `walcodec_open`             | `LogReader::open(path)`, every record              |
//! |              | `walcodec_framed_read`      | `LogDecoder::framed_read(tokio::fs::File)`        |
//! |              | `walcodec_framed_read_ahead`| `LogDecoder::framed_read(ReadAhead::open(..))`    |
//! |              | `walcodec_read_ahead_256k`, `_1m` | `LogReader::open` with other chunk sizes    |
//! |              | `walcodec_framed_read_8k`   | `FramedRead::new(tokio::fs::File, ..)` (8 KiB)    |
//! |              | `leveldb_cpp`               | LevelDB 1.23 `log::Reader` over `Env::Default()`  |
//! |              | `walcodec_cli_verify_jobs1`, `_jobs2` | `walcodec verify --jobs N FILE`, a process (when `target/release/walcodec` or `WALCODEC_CLI` exists) |
//! | `file_write` | `bound_write`               | `write` of the encoded log in 1 MiB pieces        |
//! |              | `walcodec_framed_write`     | `LogEncoder::framed_write(tokio::fs::File)`, `feed` each record, `close` |
//! |              | `walcodec_append_buffered`  | `AsyncLogWriter::append_buffered` each, `close`   |
//! |              | `leveldb_cpp`               | LevelDB 1.23 `log::Writer::AddRecord` each, `Close` (no sync) |
//!
//! Throughput is the file's bytes per second. No write syncs.
//!
//! ```text
//! WALCODEC_BENCH_DIR=/dev/shm WALCODEC_BENCH_LOG_MIB=1024 \
//!   cargo bench --bench file -- --warm-up-time 1 --measurement-time 10
//! ```
//!
//! `WALCODEC_BENCH_DIR` (default: the system temp dir) holds the files; a tmpfs
//! keeps the writes off the disk. `WALCODEC_BENCH_LOG_MIB` is the log's size
//! (default 256). The LevelDB peer is built only where Debian's `libleveldb-dev`
//! 1.23 is installed (see build.rs).

use std::fs::File;
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::{SinkExt, TryStreamExt};
use tokio_util::codec::FramedRead;
use walcodec::{AsyncLogWriter, LogDecoder, LogEncoder, LogReader, ReadAhead};
use walcodec_peer_benches::file_log::{write_log, Records};

fn bench_dir() -> PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn log_bytes() -> usize {
    std::env::var("WALCODEC_BENCH_LOG_MIB")
        .ok()
        .and_then(|mib| mib.parse::<usize>().ok())
        .unwrap_or(256)
        << 20
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn file_read(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let path = dir.path().join("000001.log");
    let records = Records::new(log_bytes());
    let expected = records.spans.len();
    let len = write_log(&records, &path);
    drop(records);
    let rt = runtime();

    let mut group = c.benchmark_group("file_read");
    group.throughput(Throughput::Bytes(len));
    group.sample_size(10);

    group.bench_function("bound_read", |b| {
        // Aligned as walcodec's chunks are: a read into memory a few bytes past the
        // source's alignment costs several times more on some CPUs (see
        // `walcodec::CHUNK_ALIGN`), which would make the bound a slow one.
        let mut memory = vec![0u8; (1 << 20) + walcodec::CHUNK_ALIGN];
        let pad = (memory.as_ptr() as usize).wrapping_neg() % walcodec::CHUNK_ALIGN;
        let buffer = &mut memory[pad..pad + (1 << 20)];
        b.iter(|| {
            let mut file = File::open(&path).unwrap();
            let mut total = 0;
            loop {
                match file.read(buffer).unwrap() {
                    0 => break,
                    n => total += black_box(&buffer[..n]).len(),
                }
            }
            assert_eq!(total as u64, len);
        })
    });

    group.bench_function("walcodec_open", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut reader = LogReader::open(&path).await.unwrap();
                let mut n = 0;
                while let Some(record) = reader.next_record().await {
                    black_box(record.unwrap());
                    n += 1;
                }
                assert_eq!(n, expected);
            })
        })
    });

    group.bench_function("walcodec_framed_read", |b| {
        b.iter(|| {
            rt.block_on(async {
                let file = tokio::fs::File::open(&path).await.unwrap();
                let n = LogDecoder::framed_read(file)
                    .try_fold(0, |n, record| {
                        black_box(record);
                        async move { Ok(n + 1) }
                    })
                    .await
                    .unwrap();
                assert_eq!(n, expected);
            })
        })
    });

    group.bench_function("walcodec_framed_read_ahead", |b| {
        b.iter(|| {
            rt.block_on(async {
                let source = ReadAhead::open(&path, 0).await.unwrap();
                let n = LogDecoder::framed_read(source)
                    .try_fold(0, |n, record| {
                        black_box(record);
                        async move { Ok(n + 1) }
                    })
                    .await
                    .unwrap();
                assert_eq!(n, expected);
            })
        })
    });

    for (name, chunk_bytes) in [("256k", 256 << 10), ("1m", 1 << 20)] {
        group.bench_function(format!("walcodec_read_ahead_{name}"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let source = ReadAhead::builder()
                        .chunk_bytes(chunk_bytes)
                        .open(&path, 0)
                        .await
                        .unwrap();
                    let mut reader = LogReader::from_read_ahead(source, LogDecoder::new());
                    let mut n = 0;
                    while let Some(record) = reader.next_record().await {
                        black_box(record.unwrap());
                        n += 1;
                    }
                    assert_eq!(n, expected);
                })
            })
        });
    }

    group.bench_function("walcodec_framed_read_8k", |b| {
        b.iter(|| {
            rt.block_on(async {
                let file = tokio::fs::File::open(&path).await.unwrap();
                let n = FramedRead::new(file, LogDecoder::new())
                    .try_fold(0, |n, record| {
                        black_box(record);
                        async move { Ok(n + 1) }
                    })
                    .await
                    .unwrap();
                assert_eq!(n, expected);
            })
        })
    });

    #[cfg(leveldb_cpp)]
    group.bench_function("leveldb_cpp", |b| {
        b.iter(|| assert_eq!(leveldb_cpp::read(&path), expected))
    });

    // The command-line tool, when it is built: `walcodec verify` (layout, records,
    // reports and verdict of the whole log) with one thread and with two.
    if let Some(cli) = walcodec_cli() {
        for jobs in ["1", "2"] {
            group.bench_function(format!("walcodec_cli_verify_jobs{jobs}"), |b| {
                b.iter(|| {
                    let output = std::process::Command::new(&cli)
                        .args(["verify", "--jobs", jobs])
                        .arg(&path)
                        .output()
                        .unwrap();
                    assert!(output.status.success(), "{output:?}");
                    let text = String::from_utf8_lossy(&output.stdout);
                    assert!(text.starts_with(&format!("records: {expected} ")), "{text}");
                })
            });
        }
    }

    group.finish();
}

/// The `walcodec` binary: `WALCODEC_CLI`, or the repository's release build
/// (`cargo build --release --features cli`).
fn walcodec_cli() -> Option<PathBuf> {
    let path = std::env::var_os("WALCODEC_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/walcodec")
        });
    path.exists().then_some(path)
}

fn file_write(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let records = Records::new(log_bytes());
    let reference = dir.path().join("reference.log");
    let len = write_log(&records, &reference);
    let encoded = std::fs::read(&reference).unwrap();
    std::fs::remove_file(&reference).unwrap();
    let rt = runtime();

    let mut group = c.benchmark_group("file_write");
    group.throughput(Throughput::Bytes(len));
    group.sample_size(10);

    // Each iteration writes a new file; removing it is outside the timed region.
    let timed = |write: &mut dyn FnMut(&Path)| -> Duration {
        let path = dir.path().join("000001.log");
        let start = Instant::now();
        write(&path);
        let elapsed = start.elapsed();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
        std::fs::remove_file(&path).unwrap();
        elapsed
    };

    group.bench_function("bound_write", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    timed(&mut |path| {
                        let mut file = File::create(path).unwrap();
                        for piece in encoded.chunks(1 << 20) {
                            file.write_all(piece).unwrap();
                        }
                    })
                })
                .sum()
        })
    });

    group.bench_function("walcodec_framed_write", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    timed(&mut |path| {
                        rt.block_on(async {
                            let file = tokio::fs::File::create(path).await.unwrap();
                            let mut sink = LogEncoder::framed_write(file);
                            for record in records.iter() {
                                sink.feed(record).await.unwrap();
                            }
                            sink.close().await.unwrap();
                        })
                    })
                })
                .sum()
        })
    });

    group.bench_function("walcodec_append_buffered", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    timed(&mut |path| {
                        rt.block_on(async {
                            let writer = AsyncLogWriter::create(path).await.unwrap();
                            for record in records.iter() {
                                writer.append_buffered(record).await.unwrap();
                            }
                            writer.close().await.unwrap();
                        })
                    })
                })
                .sum()
        })
    });

    #[cfg(leveldb_cpp)]
    group.bench_function("leveldb_cpp", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| timed(&mut |path| leveldb_cpp::write(path, records.iter())))
                .sum()
        })
    });

    group.finish();
}

/// LevelDB 1.23's `log::Reader` and `log::Writer`, through cpp/leveldb_log.cc.
#[cfg(leveldb_cpp)]
mod leveldb_cpp {
    use std::ffi::{c_char, c_int, c_void, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    // The C++ objects are bundled into this package's library (build.rs), which
    // the bench links only when it names it.
    extern crate walcodec_peer_benches as _;

    extern "C" {
        fn walcodec_peer_leveldb_read(path: *const c_char, bytes: *mut u64) -> i64;
        fn walcodec_peer_leveldb_writer_create(path: *const c_char) -> *mut c_void;
        fn walcodec_peer_leveldb_writer_add(
            writer: *mut c_void,
            data: *const c_char,
            len: usize,
        ) -> c_int;
        fn walcodec_peer_leveldb_writer_close(writer: *mut c_void) -> c_int;
    }

    fn c_path(path: &Path) -> CString {
        CString::new(path.as_os_str().as_bytes()).unwrap()
    }

    /// Reads every record; returns how many.
    pub(crate) fn read(path: &Path) -> usize {
        let path = c_path(path);
        let mut bytes = 0;
        // SAFETY: a NUL-terminated path and a valid out pointer.
        let records = unsafe { walcodec_peer_leveldb_read(path.as_ptr(), &mut bytes) };
        assert!(records >= 0, "LevelDB's reader failed or dropped bytes");
        std::hint::black_box(bytes);
        records as usize
    }

    /// Writes `records` to a new log at `path`, without sync.
    pub(crate) fn write<'a>(path: &Path, records: impl Iterator<Item = &'a [u8]>) {
        let path = c_path(path);
        // SAFETY: the writer is used only between create and close, on this thread,
        // with slices that outlive each call.
        unsafe {
            let writer = walcodec_peer_leveldb_writer_create(path.as_ptr());
            assert!(!writer.is_null());
            for record in records {
                let status =
                    walcodec_peer_leveldb_writer_add(writer, record.as_ptr().cast(), record.len());
                assert_eq!(status, 0);
            }
            assert_eq!(walcodec_peer_leveldb_writer_close(writer), 0);
        }
    }
}

criterion_group!(benches, file_read, file_write);
criterion_main!(benches);
