//! RocksDB's metadata records: payloads of fragment types 9, 10/11 and 130/131.
//!
//! A RocksDB WAL carries, beside its logical records, small records that describe the
//! log itself. Readers never return them as records; these parsers turn their
//! payloads into values. They never allocate and never panic: a payload of the wrong
//! shape is a [`MetadataError`].
//!
//! | type    | record                     | payload                                  |
//! |---------|----------------------------|------------------------------------------|
//! | 9       | [`WalCompressionType`]     | fixed32 LE compression type              |
//! | 10, 11  | [`TimestampSizes`]         | {fixed32 LE cf id, fixed16 LE size}…     |
//! | 130, 131| [`PredecessorWalInfo`]     | 3 × fixed64 LE                           |
//!
//! ```
//! use walcodec::metadata::{PredecessorWalInfo, TimestampSizes, WalCompressionType};
//!
//! assert_eq!(WalCompressionType::parse(&[7, 0, 0, 0]), Ok(WalCompressionType::Zstd));
//!
//! let sizes = TimestampSizes::parse(&[2, 0, 0, 0, 8, 0]).unwrap();
//! let entries: Vec<_> = sizes.iter().map(|s| (s.column_family, s.timestamp_size)).collect();
//! assert_eq!(entries, [(2, 8)]);
//!
//! let info = PredecessorWalInfo { log_number: 7, size_bytes: 4096, last_sequence: 99 };
//! assert_eq!(PredecessorWalInfo::parse(&info.to_payload()), Ok(info));
//! ```

/// A metadata record as a [`LogDecoder`](crate::LogDecoder) in RocksDB's dialect
/// meets it, handed to the
/// [`on_metadata`](crate::LogDecoderBuilder::on_metadata) callback. Never returned
/// as a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetadataRecord {
    /// Type 9: how the data records after it are compressed.
    Compression(WalCompressionType),
    /// Types 10/11: the timestamp sizes of column families used by later records.
    TimestampSizes(Vec<TimestampSize>),
    /// Types 130/131: what the WAL before this one held.
    PredecessorWal(PredecessorWalInfo),
}

/// A metadata payload of the wrong shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The payload is shorter than its record needs.
    #[error("metadata record too short ({len} < {needed} bytes)")]
    TooShort {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes present.
        len: usize,
    },
    /// A timestamp-size payload whose length is not a multiple of 6.
    #[error("user-defined timestamp size record length {len} is not a multiple of 6")]
    NotWholeEntries {
        /// The payload length.
        len: usize,
    },
    /// More timestamp-size entries than one record (one block) holds.
    #[error("too many user-defined timestamp sizes for one record ({len} > {max})")]
    TooManyEntries {
        /// Entries given.
        len: usize,
        /// Entries that fit.
        max: usize,
    },
    /// A timestamp-size entry of size 0 (RocksDB records only timestamped column
    /// families).
    #[error("user-defined timestamp size 0 for column family {column_family}")]
    ZeroTimestampSize {
        /// The entry's column family.
        column_family: u32,
    },
}

/// The payload of a type-9 record: how the WAL's data fragments are compressed.
///
/// RocksDB writes it as the first record of a WAL with `wal_compression` set; only
/// `None` and `Zstd` are valid for a WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WalCompressionType {
    /// 0: no compression.
    None,
    /// 7: RocksDB's `kZSTD`: each logical record is one zstd frame over its fragments.
    Zstd,
    /// Any other RocksDB compression type (1 Snappy … 6 Xpress, …): RocksDB refuses
    /// them for WALs.
    Other(u32),
}

impl WalCompressionType {
    /// Size of the payload as written.
    pub const PAYLOAD_LEN: usize = 4;

    /// Reads a type-9 payload: a fixed32 LE. Bytes after the first four are
    /// ignored, as RocksDB's decoder does.
    pub fn parse(payload: &[u8]) -> Result<WalCompressionType, MetadataError> {
        let value = fixed32(payload, 0)?;
        Ok(match value {
            0 => WalCompressionType::None,
            7 => WalCompressionType::Zstd,
            other => WalCompressionType::Other(other),
        })
    }

    /// RocksDB's number for the type.
    pub const fn as_u32(self) -> u32 {
        match self {
            WalCompressionType::None => 0,
            WalCompressionType::Zstd => 7,
            WalCompressionType::Other(value) => value,
        }
    }

    /// The payload as written.
    pub const fn to_payload(self) -> [u8; 4] {
        self.as_u32().to_le_bytes()
    }

    /// Whether a RocksDB reader can read the WAL (`None` or `Zstd`).
    pub const fn is_supported(self) -> bool {
        matches!(self, WalCompressionType::None | WalCompressionType::Zstd)
    }
}

/// One entry of a [`TimestampSizes`] record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimestampSize {
    /// The column family id.
    pub column_family: u32,
    /// Size of its user-defined timestamps, in bytes.
    pub timestamp_size: u16,
}

impl TimestampSize {
    /// Size of one entry as written.
    pub const ENCODED_LEN: usize = 6;

    /// The entry as written.
    pub const fn to_bytes(self) -> [u8; 6] {
        let cf = self.column_family.to_le_bytes();
        let size = self.timestamp_size.to_le_bytes();
        [cf[0], cf[1], cf[2], cf[3], size[0], size[1]]
    }
}

/// The payload of a type-10/11 record: the timestamp sizes of the column families
/// that records after it use. A view over the payload; checked once, when parsed.
///
/// RocksDB also rejects a column family that appears twice in one file; that is
/// state across records, which the reader keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimestampSizes<'a> {
    payload: &'a [u8],
}

impl<'a> TimestampSizes<'a> {
    /// Checks a type-10/11 payload: whole 6-byte entries, none of size 0.
    pub fn parse(payload: &'a [u8]) -> Result<TimestampSizes<'a>, MetadataError> {
        if payload.len() % TimestampSize::ENCODED_LEN != 0 {
            return Err(MetadataError::NotWholeEntries { len: payload.len() });
        }
        let sizes = TimestampSizes { payload };
        if let Some(zero) = sizes.iter().find(|entry| entry.timestamp_size == 0) {
            return Err(MetadataError::ZeroTimestampSize {
                column_family: zero.column_family,
            });
        }
        Ok(sizes)
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = TimestampSize> + 'a {
        self.payload
            .chunks_exact(TimestampSize::ENCODED_LEN)
            .map(|entry| TimestampSize {
                column_family: u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]),
                timestamp_size: u16::from_le_bytes([entry[4], entry[5]]),
            })
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.payload.len() / TimestampSize::ENCODED_LEN
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }
}

/// The payload of a type-130/131 record: what the WAL before this one held, so a
/// reader can tell a missing or cut WAL (RocksDB's `track_and_verify_wals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PredecessorWalInfo {
    /// The previous WAL's log number.
    pub log_number: u64,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The last sequence number it recorded.
    pub last_sequence: u64,
}

impl PredecessorWalInfo {
    /// Size of the payload as written.
    pub const PAYLOAD_LEN: usize = 24;

    /// Reads a type-130/131 payload: three fixed64 LE. Bytes after the first 24 are
    /// ignored, as RocksDB's decoder does.
    pub fn parse(payload: &[u8]) -> Result<PredecessorWalInfo, MetadataError> {
        if payload.len() < Self::PAYLOAD_LEN {
            return Err(MetadataError::TooShort {
                needed: Self::PAYLOAD_LEN,
                len: payload.len(),
            });
        }
        Ok(PredecessorWalInfo {
            log_number: fixed64(payload, 0)?,
            size_bytes: fixed64(payload, 8)?,
            last_sequence: fixed64(payload, 16)?,
        })
    }

    /// The payload as written.
    pub fn to_payload(&self) -> [u8; 24] {
        let mut payload = [0; 24];
        payload[..8].copy_from_slice(&self.log_number.to_le_bytes());
        payload[8..16].copy_from_slice(&self.size_bytes.to_le_bytes());
        payload[16..].copy_from_slice(&self.last_sequence.to_le_bytes());
        payload
    }
}

fn fixed32(payload: &[u8], at: usize) -> Result<u32, MetadataError> {
    match payload.get(at..at + 4) {
        Some(bytes) => Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        None => Err(MetadataError::TooShort {
            needed: at + 4,
            len: payload.len(),
        }),
    }
}

fn fixed64(payload: &[u8], at: usize) -> Result<u64, MetadataError> {
    let low = fixed32(payload, at)?;
    let high = fixed32(payload, at + 4)?;
    Ok(u64::from(low) | u64::from(high) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_type_is_a_fixed32() {
        assert_eq!(
            WalCompressionType::parse(&[0, 0, 0, 0]),
            Ok(WalCompressionType::None)
        );
        assert_eq!(
            WalCompressionType::parse(&[7, 0, 0, 0, 99]),
            Ok(WalCompressionType::Zstd)
        );
        assert_eq!(
            WalCompressionType::parse(&[1, 0, 0, 1]),
            Ok(WalCompressionType::Other(0x0100_0001))
        );
        assert!(!WalCompressionType::Other(1).is_supported());
        assert_eq!(WalCompressionType::Zstd.to_payload(), [7, 0, 0, 0]);
        for len in 0..4 {
            assert_eq!(
                WalCompressionType::parse(&[7; 3][..len]),
                Err(MetadataError::TooShort { needed: 4, len })
            );
        }
    }

    #[test]
    fn timestamp_sizes_are_whole_six_byte_entries() {
        let mut payload = Vec::new();
        for (cf, size) in [(0u32, 8u16), (0x0102_0304, 16)] {
            payload.extend_from_slice(
                &TimestampSize {
                    column_family: cf,
                    timestamp_size: size,
                }
                .to_bytes(),
            );
        }
        let sizes = TimestampSizes::parse(&payload).unwrap();
        assert_eq!(sizes.len(), 2);
        let entries: Vec<_> = sizes
            .iter()
            .map(|e| (e.column_family, e.timestamp_size))
            .collect();
        assert_eq!(entries, [(0, 8), (0x0102_0304, 16)]);
        for cut in 1..6 {
            assert_eq!(
                TimestampSizes::parse(&payload[..12 - cut]),
                Err(MetadataError::NotWholeEntries { len: 12 - cut })
            );
        }
        assert!(TimestampSizes::parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_zero_timestamp_size_is_rejected() {
        assert_eq!(
            TimestampSizes::parse(&[1, 0, 0, 0, 8, 0, 5, 0, 0, 0, 0, 0]),
            Err(MetadataError::ZeroTimestampSize { column_family: 5 })
        );
    }

    #[test]
    fn predecessor_info_is_three_fixed64() {
        let info = PredecessorWalInfo {
            log_number: 0x0102_0304_0506_0708,
            size_bytes: 1 << 40,
            last_sequence: u64::MAX,
        };
        let payload = info.to_payload();
        assert_eq!(&payload[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(PredecessorWalInfo::parse(&payload), Ok(info));
        for len in 0..24 {
            assert_eq!(
                PredecessorWalInfo::parse(&payload[..len]),
                Err(MetadataError::TooShort { needed: 24, len })
            );
        }
        assert_eq!(
            MetadataError::TooShort { needed: 24, len: 3 }.to_string(),
            "metadata record too short (3 < 24 bytes)"
        );
    }
}
