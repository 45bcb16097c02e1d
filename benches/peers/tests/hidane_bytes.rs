//! walcodec's encoder and hidane-core's `export::log::Writer` implement the same
//! format, so they must write the same bytes for any sequence of records; and each
//! reads back what the other wrote.

use bytes::BytesMut;
use futures::TryStreamExt;
use hidane_core::export::log as hidane;
use tokio_util::codec::FramedRead;
use walcodec::{LogDecoder, LogEncoder, BLOCK_SIZE, HEADER_SIZE};

fn walcodec_log(records: &[Vec<u8>]) -> Vec<u8> {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log.to_vec()
}

fn hidane_log(records: &[Vec<u8>]) -> Vec<u8> {
    hidane::write_all(records.iter().map(Vec::as_slice))
}

fn assert_same_bytes(records: &[Vec<u8>], what: &str) {
    let ours = walcodec_log(records);
    let theirs = hidane_log(records);
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths differ");
    if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {at}");
    }
}

/// Deterministic pseudo-random bytes (xorshift), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn empty_log_and_empty_records_match() {
    assert_same_bytes(&[], "no records");
    assert_same_bytes(&[Vec::new()], "one empty record");
    assert_same_bytes(&vec![Vec::new(); 10_000], "ten thousand empty records");
}

#[test]
fn every_size_around_a_block_boundary_matches() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let max_payload = BLOCK_SIZE - HEADER_SIZE;
    for size in max_payload - 20..=max_payload + 8 {
        let records = [rng.bytes(size), rng.bytes(9), rng.bytes(size), Vec::new()];
        assert_same_bytes(&records, &format!("records of {size} bytes"));
    }
}

#[test]
fn every_trailer_length_matches() {
    // A first record that leaves 0..=8 bytes in the block, then records that start
    // in the trailer zone, exactly at a block's end, or with room for only a header.
    let mut rng = Rng(0x0bad_cafe_f00d_d00d);
    for left in 0..=HEADER_SIZE + 1 {
        let first = rng.bytes(BLOCK_SIZE - HEADER_SIZE - left);
        for next in [0, 1, 7, 100, BLOCK_SIZE, 3 * BLOCK_SIZE + 5] {
            let records = [first.clone(), rng.bytes(next), rng.bytes(3)];
            assert_same_bytes(&records, &format!("{left} bytes left, then {next}"));
        }
    }
}

#[test]
fn random_mixes_of_small_and_huge_records_match() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..20 {
        let count = 1 + (rng.next() % 300) as usize;
        let records: Vec<Vec<u8>> = (0..count)
            .map(|_| {
                let len = match rng.next() % 10 {
                    0 => (rng.next() % (300 * 1024)) as usize,
                    1..=3 => (rng.next() % (40 * 1024)) as usize,
                    _ => (rng.next() % 200) as usize,
                };
                rng.bytes(len)
            })
            .collect();
        assert_same_bytes(&records, &format!("round {round}"));
    }
}

#[tokio::test]
async fn each_reads_what_the_other_wrote() {
    let mut rng = Rng(0x5151_5151_5151_5151);
    let records: Vec<Vec<u8>> = [0, 1, 100, 32_761, 32_762, 70_000, 5, 1 << 20]
        .into_iter()
        .map(|len| rng.bytes(len))
        .collect();

    let theirs = hidane_log(&records);
    let read: Vec<_> = FramedRead::new(&theirs[..], LogDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(read, records);

    let ours = walcodec_log(&records);
    let read: Vec<Vec<u8>> = hidane::records(&ours)
        .map(|record| record.unwrap().into_owned())
        .collect();
    assert_eq!(read, records);
}
