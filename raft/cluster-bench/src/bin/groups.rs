//! Many Raft groups on one node, store level: walcodec-raft's `groups` bench
//! (`SharedLog` against a `LogStore` per group, `raft/benches/groups.rs`) with a
//! third contender side by side in the same run: one RocksDB shared by every
//! group, a key prefix per group, each append one write batch with its WAL synced
//! (`WriteOptions::set_sync(true)`), the way TiKV kept Raft logs in RocksDB before
//! raft-engine. One writer per group appends one entry at a time and awaits its
//! durability, as with the other two.
//!
//! Concurrent synced writes to one RocksDB commit as a group: the first writer
//! to reach the write queue writes the batches queued behind it to the WAL with
//! one sync. So RocksDB shares syncs across groups too; its syncs per write are
//! its own count (the statistics ticker `rocksdb.wal.synced`).
//!
//! RocksDB runs with its defaults, as the walcodec stores do with theirs: its
//! WAL preallocated with `fallocate(FALLOC_FL_KEEP_SIZE)` (1.1x the write
//! buffer), which still grows the file's size with each write (walcodec's
//! segments are preallocated with zeros written and synced, so a sync commits no
//! size); no recycled logs; `manual_wal_flush` off; one `fdatasync` per write
//! group.
//!
//! `scripts/raft-cluster-bench.sh groups` builds it with the `rocksdb` feature
//! (Debian's librocksdb) and runs it; built without the feature it runs the other
//! two and says RocksDB was skipped. `WALCODEC_BENCH_GROUPS` and
//! `WALCODEC_BENCH_DIR` as for the bench.

#[path = "../../../benches/groups.rs"]
mod harness;

use harness::Contender;

#[cfg(feature = "rocksdb")]
mod rocks_shared {
    //! The shared RocksDB contender.

    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use rocksdb::{Options, WriteBatch, WriteOptions, DB};

    use super::harness::support::entry;
    use super::harness::{drive, BoxFuture, GroupWriter, Outcome};

    /// The statistics ticker of WAL syncs (`WAL_FILE_SYNCED`).
    const WAL_SYNCED: &str = "rocksdb.wal.synced";
    /// The histogram of WAL sync times (`WAL_FILE_SYNC_MICROS`).
    const WAL_SYNC_MICROS: &str = "rocksdb.wal.file.sync.micros";

    struct Writer {
        db: Arc<DB>,
        group: u64,
    }

    /// A group's key for `index`: the group's prefix, then the index, both
    /// big-endian so that a group's entries sort together and in order.
    fn key(group: u64, index: u64) -> [u8; 16] {
        let mut key = [0; 16];
        key[..8].copy_from_slice(&group.to_be_bytes());
        key[8..].copy_from_slice(&index.to_be_bytes());
        key
    }

    impl GroupWriter for Writer {
        fn append(&mut self, index: u64) -> BoxFuture<'_, ()> {
            Box::pin(async move {
                // The entry encoded as LogStore encodes it (postcard).
                let value = postcard::to_stdvec(&entry(1, index)).unwrap();
                let mut batch = WriteBatch::default();
                batch.put(key(self.group, index), value);
                let db = Arc::clone(&self.db);
                // RocksDB's write blocks until the WAL is synced: on the blocking
                // pool, so that every group's writer can wait in RocksDB's write
                // queue at once (inline, two runtime threads would let two).
                tokio::task::spawn_blocking(move || {
                    let mut options = WriteOptions::default();
                    options.set_sync(true);
                    db.write_opt(batch, &options)
                })
                .await
                .unwrap()
                .unwrap();
            })
        }

        fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    /// The number after `field : ` on the line of `name` in RocksDB's statistics
    /// dump (`name COUNT : n` for a ticker, `name P50 : .. SUM : n` for a
    /// histogram).
    fn statistic(dump: &str, name: &str, field: &str) -> u64 {
        dump.lines()
            .find_map(|line| {
                let rest = line.strip_prefix(name)?;
                if !rest.starts_with(' ') {
                    return None;
                }
                // `FIELD : value` pairs.
                let mut tokens = rest.split_whitespace();
                while let Some(token) = tokens.next() {
                    if token == field {
                        tokens.next()?;
                        return tokens.next()?.parse().ok();
                    }
                }
                None
            })
            .unwrap_or_else(|| panic!("no {name} {field} in RocksDB's statistics"))
    }

    /// WAL syncs so far and the time spent in them.
    fn syncs(options: &Options) -> (u64, Duration) {
        let dump = options.get_statistics().expect("statistics enabled");
        (
            statistic(&dump, WAL_SYNCED, "COUNT"),
            Duration::from_micros(statistic(&dump, WAL_SYNC_MICROS, "SUM")),
        )
    }

    fn syncs_so_far(options: &std::sync::Mutex<Options>) -> (u64, Duration) {
        syncs(&options.lock().unwrap())
    }

    pub(super) async fn run(dir: &Path, groups: u64, per_group: u64) -> Outcome {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.enable_statistics();
        let db = Arc::new(DB::open(&options, dir.join(format!("rocksdb-{groups}"))).unwrap());
        let writers: Vec<Box<dyn GroupWriter>> = (0..groups)
            .map(|group| {
                Box::new(Writer {
                    db: Arc::clone(&db),
                    group,
                }) as Box<dyn GroupWriter>
            })
            .collect();
        // The statistics are read on this thread only (`Options` is not Sync).
        let syncs = std::sync::Mutex::new(options);
        let outcome = drive(writers, per_group, &|| syncs_so_far(&syncs)).await;
        // Every write is there, in its group's key range.
        for group in [0, groups - 1] {
            let last = key(group, per_group - 1);
            assert!(
                db.get(last).unwrap().is_some(),
                "group {group}'s last entry"
            );
        }
        outcome
    }
}

/// The shared RocksDB, when built with it.
#[cfg(feature = "rocksdb")]
fn rocksdb() -> Option<Contender> {
    Some(Contender {
        name: "shared RocksDB",
        run: |dir, groups, per_group| Box::pin(rocks_shared::run(dir, groups, per_group)),
    })
}

#[cfg(not(feature = "rocksdb"))]
fn rocksdb() -> Option<Contender> {
    eprintln!(
        "shared RocksDB skipped: built without the `rocksdb` feature \
         (scripts/raft-cluster-bench.sh groups builds it with Debian's librocksdb)"
    );
    None
}

fn main() {
    harness::run(rocksdb().into_iter().collect());
}
