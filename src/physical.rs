//! The physical layout of a log: its fragments, trailers, zero fill and damage, as
//! they sit in the bytes.
//!
//! [`LogDecoder`](crate::LogDecoder) hands out logical records. A tool that inspects,
//! verifies or repairs a log also needs to see how those records are laid out, and why
//! a reader drops what it drops. [`Chunks`] cuts a slice of a log into [`Chunk`]s that
//! tile it exactly (every byte belongs to one chunk), reading the bytes the way the
//! decoder does:
//!
//! | chunk       | covers                                              | a reader            |
//! |-------------|-----------------------------------------------------|---------------------|
//! | `Fragment`  | a header and its payload                            | uses it if `checksum_ok` |
//! | `Trailer`   | the last 1 to 6 bytes of a block                    | skips them          |
//! | `ZeroFill`  | a type-0, length-0 header up to the block's end     | skips them silently |
//! | `BadLength` | a header whose length runs past the block, to its end | reports "bad record length" |
//! | `Skipped`   | the rest of a block after a checksum mismatch       | drops it with the fragment |
//! | `Torn`      | a fragment cut by the end of the input              | a torn tail         |
//!
//! The end of the slice is taken as the end of the log, so feed whole blocks (or the
//! whole log): a fragment never crosses a block boundary, so a complete block never
//! yields a `Torn` chunk.
//!
//! ```
//! use bytes::BytesMut;
//! use walcodec::physical::{Chunk, Chunks};
//! use walcodec::{LogEncoder, RecordType};
//!
//! let mut log = BytesMut::new();
//! let mut encoder = LogEncoder::new();
//! encoder.encode_record(b"hello", &mut log);
//! encoder.encode_record(&[7u8; 40_000], &mut log);
//!
//! let types: Vec<_> = Chunks::new(&log, 0)
//!     .filter_map(|chunk| match chunk {
//!         Chunk::Fragment { offset, header, checksum_ok: true, .. } => {
//!             Some((offset, header.record_type()))
//!         }
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(
//!     types,
//!     [
//!         (0, Some(RecordType::Full)),
//!         (12, Some(RecordType::First)),
//!         (32768, Some(RecordType::Last)),
//!     ]
//! );
//! ```

use crate::format::{fragment_crc, unmask, RecordType, BLOCK_SIZE, HEADER_SIZE};

/// A fragment header as stored: nothing in it is checked yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The stored (masked) checksum.
    pub checksum: u32,
    /// The payload length.
    pub length: u16,
    /// The type byte; see [`Header::record_type`].
    pub type_byte: u8,
}

impl Header {
    /// Reads a header from the first [`HEADER_SIZE`] bytes of `bytes`; `None` when
    /// there are fewer.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let header: &[u8; HEADER_SIZE] = bytes.get(..HEADER_SIZE)?.try_into().ok()?;
        Some(Header {
            checksum: u32::from_le_bytes([header[0], header[1], header[2], header[3]]),
            length: u16::from_le_bytes([header[4], header[5]]),
            type_byte: header[6],
        })
    }

    /// The record type, or `None` for a type byte LevelDB does not define.
    pub fn record_type(&self) -> Option<RecordType> {
        RecordType::from_u8(self.type_byte)
    }

    /// Whether this is what preallocated (zero-filled) space reads as: type 0 and
    /// length 0. Readers skip the rest of the block after it.
    pub fn is_zero_fill(&self) -> bool {
        self.type_byte == RecordType::Zero.as_u8() && self.length == 0
    }

    /// Whether the stored checksum matches `payload`.
    pub fn checksum_matches(&self, payload: &[u8]) -> bool {
        fragment_crc(self.type_byte, payload) == unmask(self.checksum)
    }
}

/// One piece of a log's physical layout. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// A complete fragment: header and payload.
    Fragment {
        /// Log offset of the header.
        offset: u64,
        /// The header.
        header: Header,
        /// The payload (`header.length` bytes).
        payload: &'a [u8],
        /// Whether the stored checksum matches. A reader drops a fragment whose
        /// checksum does not match, and the rest of its block (the next chunk,
        /// [`Chunk::Skipped`], unless the fragment ends the block).
        checksum_ok: bool,
    },
    /// Bytes at the end of a block too few to hold a header (1 to 6). Writers fill
    /// them with zeros.
    Trailer {
        /// Log offset of the first trailer byte.
        offset: u64,
        /// The trailer bytes present.
        bytes: &'a [u8],
    },
    /// A type-0, length-0 header (what preallocated space reads as) and everything
    /// after it up to the end of the block, which readers skip without a report.
    ZeroFill {
        /// Log offset of the zero header.
        offset: u64,
        /// The header and the rest of the block. Anything but zeros here is data a
        /// reader silently loses.
        bytes: &'a [u8],
    },
    /// A header whose length runs past the end of its (complete) block, and the rest
    /// of the block, which readers drop as "bad record length".
    BadLength {
        /// Log offset of the header.
        offset: u64,
        /// The header.
        header: Header,
        /// The header and the rest of the block.
        bytes: &'a [u8],
    },
    /// The rest of a block after a fragment whose checksum did not match: readers
    /// drop it with that fragment.
    Skipped {
        /// Log offset of the first byte after the damaged fragment.
        offset: u64,
        /// The bytes up to the end of the block (or of the input).
        bytes: &'a [u8],
    },
    /// A fragment cut by the end of the input: a header shorter than
    /// [`HEADER_SIZE`], or a payload shorter than the header says. In a log on disk
    /// this is a torn tail: the writer stopped mid-write.
    Torn {
        /// Log offset of the incomplete fragment.
        offset: u64,
        /// Its header, when all of it is there.
        header: Option<Header>,
        /// The bytes present.
        bytes: &'a [u8],
    },
}

impl Chunk<'_> {
    /// Log offset of the chunk's first byte.
    pub fn offset(&self) -> u64 {
        match *self {
            Chunk::Fragment { offset, .. }
            | Chunk::Trailer { offset, .. }
            | Chunk::ZeroFill { offset, .. }
            | Chunk::BadLength { offset, .. }
            | Chunk::Skipped { offset, .. }
            | Chunk::Torn { offset, .. } => offset,
        }
    }

    /// How many bytes of the log the chunk covers (a fragment's header included).
    pub fn len(&self) -> u64 {
        let len = match *self {
            Chunk::Fragment { payload, .. } => HEADER_SIZE + payload.len(),
            Chunk::Trailer { bytes, .. }
            | Chunk::ZeroFill { bytes, .. }
            | Chunk::BadLength { bytes, .. }
            | Chunk::Skipped { bytes, .. }
            | Chunk::Torn { bytes, .. } => bytes.len(),
        };
        len as u64
    }

    /// Whether the chunk covers no bytes; never true of a chunk [`Chunks`] yields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Log offset just past the chunk.
    pub fn end(&self) -> u64 {
        self.offset() + self.len()
    }
}

/// Cuts a slice of a log into [`Chunk`]s. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Chunks<'a> {
    bytes: &'a [u8],
    offset: u64,
    /// The previous fragment failed its checksum: the rest of its block is dropped.
    skip_rest_of_block: bool,
}

impl<'a> Chunks<'a> {
    /// Walks `bytes`, which sit at log offset `offset`: a block start, or any offset
    /// where a fragment or a trailer begins. The end of `bytes` is taken as the end
    /// of the log.
    pub fn new(bytes: &'a [u8], offset: u64) -> Chunks<'a> {
        Chunks {
            bytes,
            offset,
            skip_rest_of_block: false,
        }
    }

    /// Log offset of the next chunk: how far the walk has gone.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        self.offset += n as u64;
        taken
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Chunk<'a>;

    fn next(&mut self) -> Option<Chunk<'a>> {
        if self.bytes.is_empty() {
            return None;
        }
        let offset = self.offset;
        let block_left = BLOCK_SIZE - (offset % BLOCK_SIZE as u64) as usize;
        let in_block = block_left.min(self.bytes.len());

        if std::mem::take(&mut self.skip_rest_of_block) {
            let bytes = self.take(in_block);
            return Some(Chunk::Skipped { offset, bytes });
        }
        if block_left < HEADER_SIZE {
            let bytes = self.take(in_block);
            return Some(Chunk::Trailer { offset, bytes });
        }
        let Some(header) = Header::parse(self.bytes) else {
            let bytes = self.take(self.bytes.len());
            return Some(Chunk::Torn {
                offset,
                header: None,
                bytes,
            });
        };
        // The order of these checks is the decoder's, so the walk and the decoder
        // agree on what each byte is.
        if header.is_zero_fill() {
            let bytes = self.take(in_block);
            return Some(Chunk::ZeroFill { offset, bytes });
        }
        let fragment_len = HEADER_SIZE + header.length as usize;
        if fragment_len > block_left && self.bytes.len() >= block_left {
            let bytes = self.take(block_left);
            return Some(Chunk::BadLength {
                offset,
                header,
                bytes,
            });
        }
        if fragment_len > self.bytes.len() {
            let bytes = self.take(self.bytes.len());
            return Some(Chunk::Torn {
                offset,
                header: Some(header),
                bytes,
            });
        }
        let fragment = self.take(fragment_len);
        let payload = &fragment[HEADER_SIZE..];
        let checksum_ok = header.checksum_matches(payload);
        self.skip_rest_of_block = !checksum_ok && self.offset % BLOCK_SIZE as u64 != 0;
        Some(Chunk::Fragment {
            offset,
            header,
            payload,
            checksum_ok,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LogEncoder;
    use bytes::BytesMut;
    use proptest::prelude::*;

    fn encode(records: &[Vec<u8>]) -> BytesMut {
        let mut log = BytesMut::new();
        let mut encoder = LogEncoder::new();
        for record in records {
            encoder.encode_record(record, &mut log);
        }
        log
    }

    /// A compact rendering of a walk, to compare layouts at a glance.
    fn layout(bytes: &[u8], offset: u64) -> Vec<String> {
        Chunks::new(bytes, offset)
            .map(|chunk| match chunk {
                Chunk::Fragment {
                    offset,
                    header,
                    payload,
                    checksum_ok,
                } => format!(
                    "{offset} t{} {} {}",
                    header.type_byte,
                    payload.len(),
                    if checksum_ok { "ok" } else { "bad" }
                ),
                Chunk::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
                Chunk::ZeroFill { offset, bytes } => format!("zero {offset} {}", bytes.len()),
                Chunk::BadLength {
                    offset,
                    header,
                    bytes,
                } => format!("badlen {offset} {} {}", header.length, bytes.len()),
                Chunk::Skipped { offset, bytes } => format!("skip {offset} {}", bytes.len()),
                Chunk::Torn {
                    offset,
                    header,
                    bytes,
                } => format!("torn {offset} {} {}", header.is_some(), bytes.len()),
            })
            .collect()
    }

    fn assert_tiles(bytes: &[u8], offset: u64) {
        let mut at = offset;
        for chunk in Chunks::new(bytes, offset) {
            assert_eq!(chunk.offset(), at);
            assert!(!chunk.is_empty());
            at = chunk.end();
        }
        assert_eq!(at, offset + bytes.len() as u64);
    }

    #[test]
    fn layout_of_the_format_documents_example() {
        let log = encode(&[vec![b'a'; 1000], vec![b'b'; 97270], vec![b'c'; 8000]]);
        assert_eq!(
            layout(&log, 0),
            [
                "0 t1 1000 ok",
                "1007 t2 31754 ok",
                "32768 t3 32761 ok",
                "65536 t4 32755 ok",
                "pad 98298 6",
                "98304 t1 8000 ok",
            ]
        );
    }

    #[test]
    fn fragments_reassemble_into_the_records() {
        let records: Vec<Vec<u8>> = [0usize, 1, 32754, 0, 32761, 100_000, 6, 7]
            .iter()
            .enumerate()
            .map(|(i, &len)| vec![i as u8; len])
            .collect();
        let log = encode(&records);
        let mut rebuilt = Vec::new();
        let mut open = Vec::new();
        for chunk in Chunks::new(&log, 0) {
            match chunk {
                Chunk::Fragment {
                    header,
                    payload,
                    checksum_ok: true,
                    ..
                } => {
                    open.extend_from_slice(payload);
                    match header.record_type() {
                        Some(RecordType::Full) | Some(RecordType::Last) => {
                            rebuilt.push(std::mem::take(&mut open))
                        }
                        Some(RecordType::First) | Some(RecordType::Middle) => {}
                        other => panic!("unexpected type {other:?}"),
                    }
                }
                Chunk::Trailer { bytes, .. } => assert!(bytes.iter().all(|&b| b == 0)),
                other => panic!("unexpected chunk {other:?}"),
            }
        }
        assert_eq!(rebuilt, records);
    }

    #[test]
    fn block_by_block_walk_equals_whole_walk() {
        let log = encode(&[
            vec![1; 50_000],
            vec![2; 32_755],
            vec![3; 10],
            vec![4; 70_000],
        ]);
        let whole = layout(&log, 0);
        let mut by_block = Vec::new();
        for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
            by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
        }
        assert_eq!(by_block, whole);
    }

    #[test]
    fn checksum_mismatch_drops_the_rest_of_the_block() {
        let mut log = encode(&[b"foo".to_vec(), b"bar".to_vec(), vec![9; 40_000]]);
        log[8] ^= 1; // a payload byte of "foo"
        assert_eq!(
            layout(&log, 0),
            [
                "0 t1 3 bad",
                "skip 10 32758",
                "32768 t4 7259 ok", // the LAST of the 40,000-byte record
            ]
        );
    }

    #[test]
    fn bad_checksum_that_ends_a_block_skips_nothing() {
        let mut log = encode(&[vec![5; BLOCK_SIZE - HEADER_SIZE], b"x".to_vec()]);
        log[100] ^= 0x80;
        assert_eq!(layout(&log, 0), ["0 t1 32761 bad", "32768 t1 1 ok"]);
    }

    #[test]
    fn length_past_a_complete_block_is_bad_length() {
        let mut log = encode(&[b"foo".to_vec(), vec![1; 40_000]]);
        log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert_eq!(
            layout(&log, 0),
            ["badlen 0 60000 32768", "32768 t4 7249 ok"]
        );
    }

    #[test]
    fn length_past_the_end_of_a_partial_block_is_torn() {
        let mut log = encode(&[b"foo".to_vec()]);
        log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert_eq!(layout(&log, 0), ["torn 0 true 10"]);
    }

    #[test]
    fn torn_header_and_torn_payload() {
        let log = encode(&[b"foo".to_vec(), b"barbaz".to_vec()]);
        assert_eq!(layout(&log[..14], 0), ["0 t1 3 ok", "torn 10 false 4"]);
        assert_eq!(layout(&log[..20], 0), ["0 t1 3 ok", "torn 10 true 10"]);
    }

    #[test]
    fn zero_fill_runs_to_the_block_end() {
        let mut log = encode(&[b"foo".to_vec()]);
        log.resize(BLOCK_SIZE, 0);
        let tail = encode(&[b"next".to_vec()]);
        log.extend_from_slice(&tail);
        assert_eq!(
            layout(&log, 0),
            ["0 t1 3 ok", "zero 10 32758", "32768 t1 4 ok"]
        );
        // At EOF the zero fill ends with the input.
        assert_eq!(layout(&log[..1000], 0), ["0 t1 3 ok", "zero 10 990"]);
    }

    #[test]
    fn trailer_cut_by_eof() {
        let mut log = encode(&[vec![0; BLOCK_SIZE - HEADER_SIZE - 4]]);
        assert_eq!(log.len(), BLOCK_SIZE - 4);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok"]);
        log.extend_from_slice(&[0, 0]);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 2"]);
        log.extend_from_slice(&[0, 0]);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 4"]);
    }

    #[test]
    fn walk_from_a_later_block() {
        let log = encode(&[vec![1; 40_000], b"z".to_vec()]);
        let from = BLOCK_SIZE;
        assert_eq!(
            layout(&log[from..], from as u64),
            ["32768 t4 7239 ok", "40014 t1 1 ok"]
        );
    }

    /// What the decoder counts, from the walk: the two must read bytes alike. The
    /// last value is whether the walk ends torn (the decoder then has an incomplete
    /// tail; it may also have one the walk cannot see, a FIRST with no LAST).
    fn decoder_counts_from_walk(log: &[u8]) -> (u64, u64, u64, bool) {
        let (mut fragments, mut trailer, mut zero_fill, mut torn) = (0, 0, 0, false);
        for chunk in Chunks::new(log, 0) {
            match chunk {
                Chunk::Fragment {
                    checksum_ok: true, ..
                } => fragments += 1,
                Chunk::Trailer { .. } => trailer += chunk.len(),
                Chunk::ZeroFill { .. } => zero_fill += chunk.len(),
                Chunk::Torn { .. } => torn = true,
                _ => {}
            }
        }
        (fragments, trailer, zero_fill, torn)
    }

    fn decoder_counts(log: &[u8]) -> (u64, u64, u64, bool) {
        use tokio_util::codec::Decoder;
        let mut decoder = crate::LogDecoder::builder()
            .recovery(crate::Recovery::SkipCorrupted)
            .build();
        let mut buffer = BytesMut::from(log);
        while let Some(_record) = decoder.decode_eof(&mut buffer).unwrap() {}
        let stats = decoder.stats();
        (
            stats.fragments,
            stats.trailer_bytes,
            stats.zero_fill_bytes,
            decoder.has_incomplete_tail(),
        )
    }

    fn assert_walk_agrees_with_decoder(log: &[u8]) {
        let (walk, decoded) = (decoder_counts_from_walk(log), decoder_counts(log));
        assert_eq!((walk.0, walk.1, walk.2), (decoded.0, decoded.1, decoded.2));
        assert!(!walk.3 || decoded.3, "a torn walk is an incomplete tail");
    }

    proptest! {
        #[test]
        fn any_bytes_are_tiled_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK_SIZE),
            start_block in 0u64..4,
        ) {
            assert_tiles(&bytes, start_block * BLOCK_SIZE as u64);
        }

        #[test]
        fn damaged_logs_are_tiled_and_agree_block_by_block(
            lens in proptest::collection::vec(0usize..50_000, 1..8),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8; n]).collect();
            let mut log = encode(&records);
            for (at, value) in flips {
                let at = at.index(log.len());
                log[at] = value;
            }
            let log = &log[..cut.index(log.len() + 1)];
            assert_tiles(log, 0);
            let mut by_block = Vec::new();
            for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
                by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
            }
            prop_assert_eq!(by_block, layout(log, 0));
            assert_walk_agrees_with_decoder(log);
        }

        #[test]
        fn walk_and_decoder_agree_on_zero_filled_and_trailing_logs(
            lens in proptest::collection::vec(0usize..40_000, 1..6),
            zeros in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..40_000), 0..3),
            tail_zeros in 0usize..70_000,
        ) {
            let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8 | 1; n]).collect();
            let mut log = encode(&records);
            for (at, len) in zeros {
                let at = at.index(log.len());
                let end = (at + len).min(log.len());
                log[at..end].fill(0);
            }
            log.resize(log.len() + tail_zeros, 0);
            assert_tiles(&log, 0);
            assert_walk_agrees_with_decoder(&log);
        }
    }
}
