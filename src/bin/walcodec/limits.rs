//! The bounds every command takes (`--max-record-bytes`, `--max-input-bytes`).

use walcodec::LogDecoder;

/// Bounds that apply to every command.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Limits {
    /// The largest record read or written. A larger one in a log is reported as damage
    /// ("record too large"); it bounds the memory a damaged or hostile log can take.
    /// Streamed records (`cat --record`, `write --stream`) are not bounded by it.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = LogDecoder::DEFAULT_MAX_RECORD_BYTES)]
    pub(crate) max_record_bytes: usize,
    /// Stop reading the input at this offset. A regular file is read up to the length
    /// it had when opened and a pipe or `-` (stdin) until it is closed; a character
    /// device such as /dev/zero may never end, so it is read only with this bound.
    #[arg(long, global = true, value_name = "BYTES")]
    pub(crate) max_input_bytes: Option<u64>,
}
