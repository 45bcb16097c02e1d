//! The benchmark's own checks: the comparison stores are real log stores
//! (openraft's conformance suite), and a run of each store is a working cluster
//! whose figures count what was written.

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use tempfile::TempDir;

use super::*;
use crate::state_machine::StateMachine;

struct Memory;

impl StoreBuilder<TypeConfig, memory::MemLogStore, StateMachine, ()> for Memory {
    async fn build(&self) -> Result<((), memory::MemLogStore, StateMachine), StorageError<NodeId>> {
        Ok(((), memory::MemLogStore::default(), StateMachine::default()))
    }
}

#[test]
fn memory_store_passes_openraft_suite() {
    Suite::test_all(Memory).unwrap();
}

#[cfg(feature = "rocksdb")]
struct Rocks;

#[cfg(feature = "rocksdb")]
impl StoreBuilder<TypeConfig, rocks::RocksLogStore, StateMachine, TempDir> for Rocks {
    async fn build(
        &self,
    ) -> Result<(TempDir, rocks::RocksLogStore, StateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = rocks::RocksLogStore::open(dir.path()).expect("open RocksDB");
        Ok((dir, store, StateMachine::default()))
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_store_passes_openraft_suite() {
    Suite::test_all(Rocks).unwrap();
}

/// A run of every store: each write and each command counted once, and every node
/// has applied every entry when the run ends.
#[test]
fn a_run_counts_every_write_on_every_store() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for kind in Kind::all() {
        let dir = TempDir::new().unwrap();
        let outcome = runtime
            .block_on(run(kind, dir.path(), 4, 3, 40))
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(outcome.writes, 40, "{kind}");
        assert_eq!(outcome.commands, 120, "{kind}");
        assert!(outcome.p50 <= outcome.p99, "{kind}");
        assert!(outcome.p99 <= outcome.elapsed, "{kind}");
    }
}
