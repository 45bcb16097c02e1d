//! Pebble's WALs: the vectors Pebble wrote, our WAL-sync writer's output, and damage
//! placed around synced offsets, read by the decoder in Pebble's dialect and checked
//! against the reference reader of `pebble_support` (Pebble's reading rules).

mod common;
mod pebble_support;

use std::fs;

use bytes::BytesMut;
use common::{read_every_way, Config, Outcome};
use pebble_support::{
    data_path, expected_records, log_number, reference_read_pebble, PebbleEnd, PebbleRead, VECTORS,
};
use walcodec::{Dialect, LogEncoder, Recovery, BLOCK_SIZE};

fn pebble(recovery: Recovery, log_number: u64) -> Config {
    Config {
        recovery,
        dialect: Dialect::Pebble,
        log_number,
        ..Config::DEFAULT
    }
}

fn read(log: &[u8], recovery: Recovery, log_number: u64) -> Outcome {
    read_every_way(log, pebble(recovery, log_number))
}

/// Every vector gives Pebble's records, cleanly, in every mode and chunking, and the
/// reference reader agrees.
#[test]
fn every_vector_reads_its_records_in_every_mode() {
    for name in VECTORS {
        let log = fs::read(data_path(name)).unwrap();
        let number = log_number(name);
        let expected = expected_records(name);
        for recovery in Recovery::ALL {
            let outcome = read(&log, recovery, number);
            assert_eq!(outcome.record_vecs(), expected, "{name} {recovery}");
            assert_eq!(outcome.error, None, "{name} {recovery}");
            assert!(outcome.reports.is_empty(), "{name} {recovery}: {outcome:?}");
        }
        let reference = reference_read_pebble(&log, number);
        assert_eq!(reference.records, expected, "{name}: reference");
        assert!(
            matches!(reference.end, PebbleEnd::Eof | PebbleEnd::UnexpectedEof),
            "{name}: {reference:?}"
        );
    }
}
