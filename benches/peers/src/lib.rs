//! Helpers of the benches and examples (see Cargo.toml): the log the file benches read.

pub mod file_log {
    //! The log of the file benches (benches/file.rs) and of `scripts/cli-speed.sh`
    //! (examples/file_log.rs): records from 50 B to 70 KB, spread evenly on a log
    //! scale (like a database's WriteBatches: mostly small, most bytes in large
    //! ones), pseudo-random bytes.

    use std::fs::File;
    use std::io::Write;
    use std::path::Path;

    use bytes::BytesMut;
    use walcodec::LogEncoder;

    /// The records, as offsets into one pool of pseudo-random bytes: a 1 GiB log needs
    /// no 1 GiB of records in memory.
    pub struct Records {
        pool: Vec<u8>,
        /// Where each record is in the pool, and its length.
        pub spans: Vec<(usize, usize)>,
    }

    const MIN_RECORD: f64 = 50.0;
    const MAX_RECORD: f64 = 70_000.0;

    impl Records {
        /// Records enough for a log of `log_bytes`.
        pub fn new(log_bytes: usize) -> Records {
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let pool: Vec<u8> = (0..(4 << 20) + MAX_RECORD as usize)
                .map(|_| next() as u8)
                .collect();
            let mut spans = Vec::new();
            let mut total = 0;
            while total < log_bytes {
                let unit = (next() >> 11) as f64 / (1u64 << 53) as f64;
                let len = (MIN_RECORD * (MAX_RECORD / MIN_RECORD).powf(unit)) as usize;
                let start = next() as usize % (4 << 20);
                spans.push((start, len));
                // A fragment header per block, roughly.
                total += len + 7 + len / 32768 * 7;
            }
            Records { pool, spans }
        }

        /// The records, in order.
        pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
            self.spans
                .iter()
                .map(|&(start, len)| &self.pool[start..start + len])
        }
    }

    /// Writes the log with walcodec's encoder: the file every reader reads.
    pub fn write_log(records: &Records, path: &Path) -> u64 {
        let mut file = File::create(path).unwrap();
        let mut encoder = LogEncoder::new();
        let mut buffer = BytesMut::with_capacity(2 << 20);
        for record in records.iter() {
            encoder.encode_record(record, &mut buffer);
            if buffer.len() >= 1 << 20 {
                file.write_all(&buffer).unwrap();
                buffer.clear();
            }
        }
        file.write_all(&buffer).unwrap();
        file.metadata().unwrap().len()
    }
}
