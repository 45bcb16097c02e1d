//! The integration tests, one module per behaviour (each `tests/NAME.rs`), built as one
//! test binary: linking and optimising some fifty binaries that each instantiate the
//! same LogDir, writer and Tokio code took most of CI's build time. Run one file's
//! tests with `cargo test --release --features cli --test all -- NAME::`.
//!
//! Files that need a process of their own stay separate targets (see Cargo.toml):
//! those with a counting global allocator (`hostile`, `read_ahead_reuse`,
//! `streaming_memory`), those that install a global tracing subscriber or metrics
//! recorder (`observe_tracing`, `observe_metrics`), and the format tests CI also runs
//! with the `crc-fast` backend (`interop`, `roundtrip`, `damage`, `rocksdb_reading`).
//!
//! A new test file is added here, beside its neighbours.

/// The full name of the test `$name` of the file that calls it, as the harness lists
/// it (`module::name`): for the crash tests that run one test of this binary as their
/// child process.
macro_rules! child_test_name {
    ($name:literal) => {
        format!(
            "{}::{}",
            module_path!()
                .split_once("::")
                .map_or("", |(_crate, module)| module),
            $name
        )
    };
}

// Helpers the files share, compiled once.
#[cfg(feature = "cli")]
mod cli_support;
mod common;
mod pebble_support;
mod power_support;
mod rocksdb_support;
mod writer_support;

#[path = "access_time.rs"]
mod access_time;
#[path = "api.rs"]
mod api;
#[path = "chunk_reader.rs"]
mod chunk_reader;
#[path = "chunking.rs"]
mod chunking;
#[cfg(feature = "cli")]
#[path = "cli.rs"]
mod cli;
#[cfg(feature = "cli")]
#[path = "cli_dir.rs"]
mod cli_dir;
#[cfg(feature = "cli")]
#[path = "cli_edges.rs"]
mod cli_edges;
#[cfg(feature = "cli")]
#[path = "cli_inputs.rs"]
mod cli_inputs;
#[cfg(feature = "cli")]
#[path = "cli_jobs.rs"]
mod cli_jobs;
#[cfg(feature = "cli")]
#[path = "cli_pebble.rs"]
mod cli_pebble;
#[cfg(feature = "cli")]
#[path = "cli_rocksdb.rs"]
mod cli_rocksdb;
#[path = "corruption.rs"]
mod corruption;
#[path = "docs.rs"]
mod docs;
#[path = "durability.rs"]
mod durability;
#[path = "failover.rs"]
mod failover;
#[path = "faults.rs"]
mod faults;
#[path = "fragment_layer.rs"]
mod fragment_layer;
#[path = "inspect.rs"]
mod inspect;
#[path = "layers.rs"]
mod layers;
#[path = "leader_writes.rs"]
mod leader_writes;
#[path = "log_history.rs"]
mod log_history;
#[path = "logdir.rs"]
mod logdir;
#[path = "logdir_append_batch.rs"]
mod logdir_append_batch;
#[path = "logdir_crash.rs"]
mod logdir_crash;
#[path = "logdir_faults.rs"]
mod logdir_faults;
#[path = "logdir_hold.rs"]
mod logdir_hold;
#[path = "logdir_model.rs"]
mod logdir_model;
#[path = "logdir_pebble.rs"]
mod logdir_pebble;
#[path = "logdir_power_cut.rs"]
mod logdir_power_cut;
#[path = "logdir_power_cut_ops.rs"]
mod logdir_power_cut_ops;
#[path = "logdir_recycle.rs"]
mod logdir_recycle;
#[path = "owned_items.rs"]
mod owned_items;
#[path = "pebble_reading.rs"]
mod pebble_reading;
#[path = "pebble_writer.rs"]
mod pebble_writer;
#[path = "power_cut.rs"]
mod power_cut;
#[path = "read_ahead.rs"]
mod read_ahead;
#[path = "recordio.rs"]
mod recordio;
#[path = "recovery_modes.rs"]
mod recovery_modes;
#[path = "repair.rs"]
mod repair;
#[cfg(feature = "replica-auth")]
#[path = "replica_auth.rs"]
mod replica_auth;
#[path = "replica_cancel.rs"]
mod replica_cancel;
#[path = "replica_crash.rs"]
mod replica_crash;
#[path = "replica_power_cut.rs"]
mod replica_power_cut;
#[path = "replica_rewind_power_cut.rs"]
mod replica_rewind_power_cut;
#[path = "replica_slow_peers.rs"]
mod replica_slow_peers;
#[path = "replica_sync.rs"]
mod replica_sync;
#[path = "replica_sync_crash.rs"]
mod replica_sync_crash;
#[path = "replica_tls.rs"]
mod replica_tls;
#[path = "replication.rs"]
mod replication;
#[path = "rocksdb_vectors.rs"]
mod rocksdb_vectors;
#[cfg(feature = "serde")]
#[path = "serde.rs"]
mod serde;
#[path = "short_reads.rs"]
mod short_reads;
#[path = "splits.rs"]
mod splits;
#[path = "start_offset.rs"]
mod start_offset;
#[path = "stream_end.rs"]
mod stream_end;
#[path = "streaming.rs"]
mod streaming;
#[cfg(feature = "cli")]
#[path = "streaming_cli.rs"]
mod streaming_cli;
#[path = "streaming_write.rs"]
mod streaming_write;
#[path = "tailing.rs"]
mod tailing;
#[path = "tailing_cut.rs"]
mod tailing_cut;
#[path = "tailing_in_place.rs"]
mod tailing_in_place;
#[path = "tailing_purge.rs"]
mod tailing_purge;
#[path = "tailing_rewrite.rs"]
mod tailing_rewrite;
#[path = "tailing_seam.rs"]
mod tailing_seam;
#[path = "tailing_stale_read.rs"]
mod tailing_stale_read;
#[path = "tailing_torn_tail.rs"]
mod tailing_torn_tail;
#[path = "wake_interval.rs"]
mod wake_interval;
#[path = "writer.rs"]
mod writer;
#[path = "zeroed_blocks.rs"]
mod zeroed_blocks;
