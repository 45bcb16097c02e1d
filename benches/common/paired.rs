//! The paired tables' machinery, shared by `rocksdb.rs` and `pebble.rs`: two decoders
//! of the same records take turns for `ROUNDS` rounds, and the median per-round ratio
//! is what a noisy machine cannot skew.
#![allow(dead_code)] // each bench uses its own subset

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use walcodec::LogDecoderBuilder;

use crate::common::{pseudo_random_records, BYTES_PER_ITERATION};

/// Rounds of a paired measurement; the median is the middle one.
pub const ROUNDS: usize = 21;
/// About how long each side runs in a round.
pub const ROUND_TIME: Duration = Duration::from_millis(60);

/// Decodes the whole log, returning the bytes decoded (so nothing is optimized away).
pub fn decode_all(mut src: BytesMut, builder: &LogDecoderBuilder) -> usize {
    let mut decoder = builder.build();
    let mut total = 0;
    while let Some(record) = decoder.decode_eof(&mut src).expect("a clean log") {
        total += record.len();
    }
    total
}

/// Records of 3/4 to 5/4 of `size`, about `BYTES_PER_ITERATION` in all: no fixed
/// stride between fragments, as in a real log.
pub fn spread_records(size: usize) -> Vec<Vec<u8>> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ size as u64;
    let mut total = 0;
    let mut sizes = Vec::new();
    while total < BYTES_PER_ITERATION {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = size * 3 / 4 + (state % (size as u64 / 2 + 1)) as usize;
        total += len;
        sizes.push(len);
    }
    pseudo_random_records(size * 5 / 4, sizes.len(), state)
        .into_iter()
        .zip(sizes)
        .map(|(mut record, len)| {
            record.truncate(len);
            record
        })
        .collect()
}

/// The time of `iters` runs of `run`, each on a fresh copy of `log` made before the
/// clock starts (as criterion's `iter_batched` does).
pub fn timed(iters: usize, log: &[u8], run: &mut dyn FnMut(BytesMut) -> usize) -> Duration {
    let copies: Vec<BytesMut> = (0..iters).map(|_| BytesMut::from(log)).collect();
    let start = Instant::now();
    for copy in copies {
        black_box(run(copy));
    }
    start.elapsed()
}

/// The median over `ROUNDS` of (reference time / candidate time), each round running
/// both sides for about `ROUND_TIME`, in turns.
pub fn paired(
    reference: &mut dyn FnMut() -> Duration,
    candidate: &mut dyn FnMut() -> Duration,
) -> f64 {
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|_| reference().as_secs_f64() / candidate().as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
}

/// How many runs of a side fill about `ROUND_TIME`, from one run.
pub fn iters_for(one_run: Duration) -> usize {
    (ROUND_TIME.as_secs_f64() / one_run.as_secs_f64().max(1e-6)).clamp(1.0, 1000.0) as usize
}
