//! The fragment layer on any bytes: every answer stays inside the block and the
//! input, `Incomplete` asks for more than it was given, and a walk of the whole input
//! as a log always makes progress. The payloads go through the WriteBatch and
//! metadata parsers too, which must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walcodec::fragment::{FragmentRules, FragmentType, Parsed};
use walcodec::metadata::{PredecessorWalInfo, TimestampSizes, WalCompressionType};
use walcodec::write_batch::WriteBatch;
use walcodec::{Dialect, BLOCK_SIZE};

fn check(rules: &FragmentRules, bytes: &[u8], block_left: usize) -> Parsed {
    let parsed = rules.parse(bytes, block_left);
    match parsed {
        Parsed::Fragment(fragment) => {
            assert!(fragment.len() <= block_left && fragment.len() <= bytes.len());
            assert_eq!(fragment.payload_range().end, fragment.len());
            assert!(fragment.header_len() == 7 || fragment.header_len() == 11);
        }
        Parsed::Trailer { len } => assert!(len == block_left && len < 11),
        Parsed::ZeroFill { len } => assert_eq!(len, block_left),
        Parsed::Incomplete { needed, .. } => {
            assert!(needed > bytes.len() && needed <= block_left);
        }
        Parsed::Defect(defect) => assert!(defect.len() <= block_left && !defect.is_empty()),
    }
    parsed
}

fn payload_parsers(fragment_type: Option<FragmentType>, payload: &[u8], dialect: Dialect) {
    match fragment_type {
        Some(FragmentType::SetCompressionType) => {
            let _ = WalCompressionType::parse(payload);
        }
        Some(FragmentType::UserDefinedTimestampSize)
        | Some(FragmentType::RecyclableUserDefinedTimestampSize) => {
            if let Ok(sizes) = TimestampSizes::parse(payload) {
                assert_eq!(sizes.iter().count(), sizes.len());
            }
        }
        Some(FragmentType::PredecessorWalInfo)
        | Some(FragmentType::RecyclablePredecessorWalInfo) => {
            let _ = PredecessorWalInfo::parse(payload);
        }
        _ => {
            if let Ok(batch) = WriteBatch::parse(payload, dialect) {
                let _ = batch.to_ldb_string(true);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: dialect, checksums, log number; bytes 1..3: the first position's
    // offset in its block; the rest: the log.
    if data.len() < 3 {
        return;
    }
    let dialect = if data[0] & 1 == 0 {
        Dialect::LevelDb
    } else {
        Dialect::RocksDb
    };
    let rules = FragmentRules::new(dialect)
        .verify_checksums(data[0] & 2 == 0)
        .log_number(u64::from(data[0] >> 2));
    let start = usize::from(u16::from_le_bytes([data[1], data[2]])) % BLOCK_SIZE;
    let log = &data[3..];

    let mut pos = 0;
    while pos < log.len() {
        let block_left = BLOCK_SIZE - (start + pos) % BLOCK_SIZE;
        let step = match check(&rules, &log[pos..], block_left) {
            Parsed::Fragment(fragment) => {
                let payload = &log[pos..][fragment.payload_range()];
                payload_parsers(fragment.fragment_type(), payload, dialect);
                fragment.len()
            }
            Parsed::Trailer { len } | Parsed::ZeroFill { len } => len,
            Parsed::Defect(defect) => defect.len(),
            Parsed::Incomplete { .. } => break,
        };
        assert!(step > 0);
        pos += step;
    }
});
