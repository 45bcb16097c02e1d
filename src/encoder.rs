//! `LogEncoder`: frames records into 32 KiB blocks exactly as LevelDB's `log::Writer`.

use bytes::{BufMut, BytesMut};
use tokio_util::codec::Encoder;

use crate::format::{fragment_header, Position, RecordType, BLOCK_SIZE, HEADER_SIZE};
use crate::Error;

/// Encodes records in the LevelDB log format, byte for byte as LevelDB's writer does.
///
/// The encoder remembers where in the current block it is, so the bytes it produces
/// over many calls form one valid log however they are later split into writes.
///
/// ```
/// use bytes::BytesMut;
/// use walcodec::LogEncoder;
///
/// let mut encoder = LogEncoder::new();
/// let mut log = BytesMut::new();
/// let position = encoder.encode_record(b"foo", &mut log);
/// assert_eq!((position.start, position.end), (0, 10));
/// assert_eq!(&log[..], b"\xdd\x5f\xb3\x7a\x03\x00\x01foo");
/// ```
#[derive(Debug, Clone, Default)]
pub struct LogEncoder {
    offset: u64,
}

impl LogEncoder {
    /// An encoder for a new, empty log.
    pub fn new() -> LogEncoder {
        LogEncoder { offset: 0 }
    }

    /// An encoder that continues a log already `len` bytes long (LevelDB's
    /// `Writer(dest, dest_length)`): the next record is aligned as if this encoder had
    /// written those bytes.
    pub fn with_offset(len: u64) -> LogEncoder {
        LogEncoder { offset: len }
    }

    /// The logical length of the log so far: where the next byte will go.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Offset inside the current block.
    pub fn block_offset(&self) -> usize {
        (self.offset % BLOCK_SIZE as u64) as usize
    }

    /// How many bytes encoding a record of `len` bytes would add right now.
    pub fn encoded_len(&self, len: usize) -> usize {
        let mut block_offset = self.block_offset();
        let mut left = len;
        let mut total = 0;
        loop {
            let leftover = BLOCK_SIZE - block_offset;
            if leftover < HEADER_SIZE {
                total += leftover;
                block_offset = 0;
            }
            let fragment = left.min(BLOCK_SIZE - block_offset - HEADER_SIZE);
            total += HEADER_SIZE + fragment;
            block_offset += HEADER_SIZE + fragment;
            left -= fragment;
            if left == 0 {
                return total;
            }
        }
    }

    /// Appends one record to `dst` and returns where it sits in the log.
    #[inline]
    pub fn encode_record(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        let fragment_len = HEADER_SIZE + record.len();
        if fragment_len <= BLOCK_SIZE - self.block_offset() {
            // The common case: the record fits in the current block as one FULL
            // fragment, with no trailer before it.
            let start = self.offset;
            dst.reserve(fragment_len);
            dst.put_slice(&fragment_header(RecordType::Full, record));
            dst.put_slice(record);
            self.offset += fragment_len as u64;
            return Position {
                start,
                end: self.offset,
            };
        }
        self.encode_fragments(record, dst)
    }

    fn encode_fragments(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        dst.reserve(self.encoded_len(record.len()));
        let mut left = record;
        let mut begins = true;
        let mut start = self.offset;
        // Like LevelDB, run the loop at least once so an empty record is a
        // zero-length FULL fragment.
        loop {
            let leftover = BLOCK_SIZE - self.block_offset();
            if leftover < HEADER_SIZE {
                dst.put_bytes(0, leftover);
                self.offset += leftover as u64;
            }
            let available = BLOCK_SIZE - self.block_offset() - HEADER_SIZE;
            let fragment_len = left.len().min(available);
            let (fragment, rest) = left.split_at(fragment_len);
            let ends = rest.is_empty();
            if begins {
                start = self.offset;
            }
            let header = fragment_header(RecordType::for_fragment(begins, ends), fragment);
            dst.put_slice(&header);
            dst.put_slice(fragment);
            self.offset += (HEADER_SIZE + fragment_len) as u64;
            left = rest;
            begins = false;
            if ends {
                return Position {
                    start,
                    end: self.offset,
                };
            }
        }
    }
}

/// Records go in as byte slices: send `&record[..]` (or `record.as_ref()`) for a
/// `Vec<u8>` or [`Bytes`](bytes::Bytes). One item type, so a
/// `FramedWrite<_, LogEncoder>` is a sink of exactly one kind, and `sink.flush()`
/// and `sink.close()` need no type annotation. (The encoder copies every record
/// into the write buffer, so an owned item would save nothing.)
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use futures::SinkExt;
/// use tokio_util::codec::FramedWrite;
/// use walcodec::LogEncoder;
///
/// let mut log = Vec::new();
/// let mut sink = FramedWrite::new(&mut log, LogEncoder::new());
/// let owned: Vec<u8> = b"an owned record".to_vec();
/// sink.send(&owned[..]).await?;
/// sink.send(b"a literal".as_slice()).await?;
/// sink.close().await?;
/// # Ok(())
/// # }
/// ```
impl Encoder<&[u8]> for LogEncoder {
    type Error = Error;

    fn encode(&mut self, record: &[u8], dst: &mut BytesMut) -> Result<(), Error> {
        self.encode_record(record, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn golden_records() {
        let mut encoder = LogEncoder::new();
        let mut out = BytesMut::new();
        encoder.encode_record(b"foo", &mut out);
        encoder.encode_record(b"", &mut out);
        encoder.encode_record(b"bar", &mut out);
        assert_eq!(
            hex(&out),
            "dd5fb37a03000166 6f6f052b2843000001baeaec44030001626172".replace(' ', "")
        );
        assert_eq!(encoder.offset(), out.len() as u64);
    }

    #[test]
    fn seven_bytes_left_gives_empty_first() {
        let mut encoder = LogEncoder::with_offset((BLOCK_SIZE - 7) as u64);
        let mut out = BytesMut::new();
        let position = encoder.encode_record(b"y", &mut out);
        assert_eq!(hex(&out), "6451d0e90000025b5822d6010004".to_string() + "79");
        assert_eq!(position.start, (BLOCK_SIZE - 7) as u64);
        assert_eq!(position.end, (BLOCK_SIZE + 8) as u64);
    }

    #[test]
    fn fewer_than_seven_left_pads_a_zero_trailer() {
        for left in 1..HEADER_SIZE {
            let mut encoder = LogEncoder::with_offset((BLOCK_SIZE - left) as u64);
            let mut out = BytesMut::new();
            let position = encoder.encode_record(b"foo", &mut out);
            assert_eq!(&out[..left], &vec![0u8; left][..]);
            assert_eq!(hex(&out[left..]), "dd5fb37a030001666f6f");
            assert_eq!(position.start, BLOCK_SIZE as u64);
        }
    }

    #[test]
    fn encoded_len_matches_output() {
        for start in [
            0usize,
            1,
            100,
            BLOCK_SIZE - 8,
            BLOCK_SIZE - 7,
            BLOCK_SIZE - 6,
            BLOCK_SIZE - 1,
        ] {
            for len in [
                0usize, 1, 6, 7, 8, 32754, 32755, 32761, 32762, 65522, 100_000,
            ] {
                let mut encoder = LogEncoder::with_offset(start as u64);
                let predicted = encoder.encoded_len(len);
                let mut out = BytesMut::new();
                encoder.encode_record(&vec![7u8; len], &mut out);
                assert_eq!(predicted, out.len(), "start {start} len {len}");
            }
        }
    }
}
