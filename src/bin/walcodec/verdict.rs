//! What `verify` and `stat` say about a log's end and about the whole log, from one
//! scan, in one wording, so the two never disagree (and agree with `repair`).
//!
//! The tails themselves, and what each means, are `walcodec::inspect::Tail`'s.
//!
//! A file of zeros only is an empty log whose space was preallocated: 0 records and a
//! `zeros` tail from offset 0, clean. `repair` trims those zeros (so that appends
//! land at offset 0) without calling it damage.

use clap::ValueEnum;
use walcodec::inspect::Tail;

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

/// The words for a log's tail (`walcodec::inspect::Tail`).
pub(crate) trait TailText {
    /// The text after `tail: `.
    fn describe(self) -> String;
    /// The fields `tail`, `valid_len` and `tail_bytes`.
    fn json(self, object: &mut JsonObject, end: &ScanEnd);
}

/// The tail `walcodec::inspect::Tail::of` finds from `end`'s strict verdict.
pub(crate) fn tail_of(end: &ScanEnd, hidden_data: bool) -> Tail {
    Tail::of(&end.strict, end.file_len, hidden_data)
}

impl TailText for Tail {
    fn describe(self) -> String {
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

    /// `valid_len` is the end of the last complete record a strict reader returned.
    fn json(self, object: &mut JsonObject, end: &ScanEnd) {
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
