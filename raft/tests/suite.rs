//! openraft's own conformance suite (`openraft::testing::Suite::test_all`) on
//! `LogStore`: every case, each on a fresh directory.

use crate::support;

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use support::{MemStateMachine, TypeConfig};
use tempfile::TempDir;
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

/// A fresh store in a temporary directory (the guard keeps it until the case ends).
struct Builder {
    /// Small segments, so that the cases rotate and purge whole segments.
    max_segment_bytes: u64,
}

impl StoreBuilder<TypeConfig, LogStore<TypeConfig>, MemStateMachine, TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(TempDir, LogStore<TypeConfig>, MemStateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = LogStore::<TypeConfig>::builder()
            .log_dir(
                LogDirOptions::new()
                    .max_segment_bytes(self.max_segment_bytes)
                    .clone(),
            )
            .open(dir.path())
            .await
            .expect("open the store");
        Ok((dir, store, MemStateMachine::default()))
    }
}

#[test]
fn openraft_suite_passes() {
    Suite::test_all(Builder {
        max_segment_bytes: 64 << 20,
    })
    .unwrap();
}

#[test]
fn openraft_suite_passes_with_tiny_segments() {
    Suite::test_all(Builder {
        max_segment_bytes: 256,
    })
    .unwrap();
}
