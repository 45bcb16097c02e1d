//! What `verify` and `stat` say about a log's end and about the whole log, from one
//! scan, in one wording, so the two never disagree (and agree with `repair`).
//!
//! | tail     | after the last complete record                         | status      |
//! |----------|--------------------------------------------------------|-------------|
//! | `clean`  | nothing                                                | clean       |
//! | `zeros`  | zeros only: preallocated space or block padding        | clean       |
//! | `torn`   | a record cut short (by the file's end or by zero fill) | torn tail   |
//! | `ended`  | Pebble: the EOF trailer, or an invalid chunk no later synced offset proves damage; what follows is the file's earlier use | clean |
//! | `earlier_use` | a recycled WAL's bytes from the file's earlier use (another log number, or no header of this log) | clean |
//! | `recycled_end` | a recycled WAL ended, as RocksDB ends it, at another log's fragment or a bad checksum: the earlier use, or its last write cut short over it | clean |
//!
//! A file of zeros only is an empty log whose space was preallocated: 0 records and a
//! `zeros` tail from offset 0, clean. `repair` trims those zeros (so that appends
//! land at offset 0) without calling it damage.

use clap::ValueEnum;

use crate::common::Status;
use crate::json::JsonObject;
use crate::scan::ScanEnd;

/// How `verify` and `stat` print their summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SummaryFormat {
    /// Lines of `name: value`.
    Text,
    /// One JSON object on one line (fields listed in --help).
    Json,
}

/// What follows the last complete record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    Clean,
    Zeros {
        after: u64,
        bytes: u64,
    },
    Torn {
        after: u64,
        bytes: u64,
    },
    /// Pebble: the log ended at `at` (by its EOF trailer when `trailer`), `bytes`
    /// before the file's end.
    Ended {
        at: u64,
        trailer: bool,
        bytes: u64,
    },
    /// A recycled WAL's bytes from the file's earlier use after `after`.
    EarlierUse {
        after: u64,
        bytes: u64,
    },
    /// A recycled WAL ended as RocksDB ends it, `bytes` before the file's end.
    RecycledEnd {
        after: u64,
        bytes: u64,
    },
}

impl Tail {
    /// The tail a strict (`TolerateTail`) reader saw. After damage it stopped early,
    /// so what follows is not a tail: `Clean`, and the damage is the verdict. So too
    /// when `hidden_data`: zero fill that hides data (which no reader reports) is not
    /// a tail of zeros.
    pub(crate) fn of(end: &ScanEnd, hidden_data: bool) -> Tail {
        let strict = &end.strict;
        let after = strict.valid_prefix_len;
        let bytes = end.file_len.saturating_sub(after);
        if let (Some((at, trailer)), None) = (strict.log_end, &strict.damage) {
            let bytes = end.file_len.saturating_sub(at);
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

    /// The text after `tail: `.
    pub(crate) fn describe(self) -> String {
        match self {
            Tail::Clean => "clean".to_string(),
            Tail::Zeros { after, bytes } => format!(
                "zeros after offset {after} ({bytes} bytes of preallocated space or block padding; no record lost)"
            ),
            Tail::Torn { after, bytes } => format!("torn after offset {after} ({bytes} bytes)"),
            Tail::Ended {
                at,
                trailer: true,
                bytes,
            } => format!(
                "ended at offset {at} by the EOF trailer ({bytes} bytes from it: the trailer, then the file's earlier use; no record lost)"
            ),
            Tail::Ended { at, bytes, .. } => format!(
                "ended at offset {at} ({bytes} bytes from an invalid chunk that no later synced offset proves damaged: a torn write or the file's earlier use)"
            ),
            Tail::EarlierUse { after, bytes } => format!(
                "earlier use after offset {after} ({bytes} bytes left from the recycled file's earlier use, no write of this log; no record lost)"
            ),
            Tail::RecycledEnd { after, bytes } => format!(
                "recycled end after offset {after} ({bytes} bytes of the recycled file's earlier use follow, or this log's last write cut short over them)"
            ),
        }
    }

    /// The fields `tail`, `valid_len` (the end of the last complete record a strict
    /// reader returned) and `tail_bytes`.
    pub(crate) fn json(self, object: &mut JsonObject, end: &ScanEnd) {
        let (name, bytes) = match self {
            Tail::Clean => ("clean", 0),
            Tail::Zeros { bytes, .. } => ("zeros", bytes),
            Tail::Torn { bytes, .. } => ("torn", bytes),
            Tail::Ended { bytes, .. } => ("ended", bytes),
            Tail::EarlierUse { bytes, .. } => ("earlier_use", bytes),
            Tail::RecycledEnd { bytes, .. } => ("recycled_end", bytes),
        };
        object
            .string("tail", name)
            .number("valid_len", end.strict.valid_prefix_len)
            .number("tail_bytes", bytes);
    }
}

/// The text after `result: `.
pub(crate) fn result_text(status: Status) -> &'static str {
    match status {
        Status::Clean => "clean",
        Status::Corrupt => "corrupt",
        Status::TornTail => "torn tail",
    }
}

/// The fields every JSON summary ends with: `complete`, `live`, `notes`, `result`
/// and `exit_code`.
pub(crate) fn json_end(object: &mut JsonObject, end: &ScanEnd, notes: &[String], status: Status) {
    let result = match status {
        Status::Clean => "clean",
        Status::Corrupt => "corrupt",
        Status::TornTail => "torn_tail",
    };
    object
        .boolean("complete", !end.input.capped)
        .boolean("live", end.input.change.is_some())
        .strings("notes", notes)
        .string("result", result)
        .number("exit_code", u64::from(status.code()));
}
