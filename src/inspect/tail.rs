//! What follows a log's last complete record, as a strict reader saw it.

use super::{Inspection, StrictEnd};

/// What follows the last complete record of a log: a checker's verdict on its end.
///
/// | tail | after the last complete record | the log is |
/// |---|---|---|
/// | `Clean` | nothing (or damage stopped the strict reader first: see [`StrictEnd::damage`]) | whole |
/// | `Zeros` | zeros only: preallocated space or block padding | whole |
/// | `Torn` | a record cut short (by the file's end or by zero fill) | torn: its last write was cut |
/// | `Ended` | Pebble: the EOF trailer, or an invalid chunk no later synced offset proves damage; what follows is the file's earlier use | whole |
/// | `EarlierUse` | a recycled WAL's bytes from the file's earlier use (another log number, or no header of this log) | whole |
/// | `RecycledEnd` | a recycled WAL ended, as RocksDB ends it, at another log's fragment or a bad checksum: the earlier use, or its last write cut short over it | whole |
///
/// A file of zeros only is an empty log whose space was preallocated: 0 records and a
/// `Zeros` tail from offset 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Nothing follows (or damage ended the strict read before the end).
    Clean,
    /// Zeros follow.
    Zeros {
        /// The end of the last complete record.
        after: u64,
        /// The zeros' length, to the end of the read.
        bytes: u64,
    },
    /// The last record is cut short.
    Torn {
        /// The end of the last complete record.
        after: u64,
        /// The bytes of the record cut short, to the end of the read.
        bytes: u64,
    },
    /// Pebble: the log ended at `at`, `bytes` before the end of the read.
    Ended {
        /// Where the log ended.
        at: u64,
        /// Whether by its EOF trailer.
        trailer: bool,
        /// The bytes from there to the end of the read.
        bytes: u64,
    },
    /// A recycled WAL's bytes from the file's earlier use follow.
    EarlierUse {
        /// The end of the last complete record.
        after: u64,
        /// The bytes left from the earlier use.
        bytes: u64,
    },
    /// A recycled WAL ended as RocksDB ends it, `bytes` before the end of the read.
    RecycledEnd {
        /// The end of the last complete record.
        after: u64,
        /// The bytes from there to the end of the read.
        bytes: u64,
    },
}

impl Tail {
    /// The tail a strict reader saw (`strict`) of a log read up to `read_to`. After
    /// damage it stopped early, so what follows is not a tail: `Clean`, and the
    /// damage is the verdict. So too when `hidden_data`: zero fill that hides data
    /// (which no reader reports) is not a tail of zeros.
    pub fn of(strict: &StrictEnd, read_to: u64, hidden_data: bool) -> Tail {
        let after = strict.valid_prefix_len;
        let bytes = read_to.saturating_sub(after);
        if let (Some((at, trailer)), None) = (strict.log_end, &strict.damage) {
            let bytes = read_to.saturating_sub(at);
            return Tail::Ended { at, trailer, bytes };
        }
        if strict.earlier_use {
            Tail::EarlierUse { after, bytes }
        } else if strict.recycled_end && strict.damage.is_none() && bytes > 0 {
            Tail::RecycledEnd { after, bytes }
        } else if strict.incomplete_tail {
            Tail::Torn { after, bytes }
        } else if strict.damage.is_none() && !hidden_data && bytes > 0 {
            Tail::Zeros { after, bytes }
        } else {
            Tail::Clean
        }
    }
}

impl Inspection {
    /// The tail of the log read ([`Tail::of`] its strict verdict), where zero fill
    /// that hides data, if the walk found any, is no tail of zeros.
    pub fn tail(&self) -> Tail {
        Tail::of(
            &self.strict,
            self.read_to,
            self.layout.hidden_zero_fills > 0,
        )
    }
}
