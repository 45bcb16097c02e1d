//! What a decoder in a tolerant mode reports when it skips damage. The metric names are
//! listed in one place, [`crate::observe`].

use std::path::Path;

use crate::decoder::error::Corruption;
use crate::decoder::Recovery;

/// A decoder in a tolerant mode dropped a damaged piece of its log: the decoder
/// named `log`, reading `file` (when it reads a file it knows).
#[inline]
#[allow(unused_variables)]
pub(crate) fn damage(corruption: &Corruption, recovery: Recovery, log: &str, file: Option<&Path>) {
    #[cfg(feature = "metrics")]
    {
        crate::observe::describe_metrics();
        metrics::counter!("walcodec_corruptions_skipped_total", "log" => log.to_string())
            .increment(1);
        metrics::counter!("walcodec_damaged_bytes_skipped_total", "log" => log.to_string())
            .increment(corruption.bytes());
    }
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "walcodec",
        log,
        file = %file.map_or(std::borrow::Cow::Borrowed(""), |f| f.to_string_lossy()),
        offset = corruption.offset(),
        bytes = corruption.bytes(),
        kind = ?corruption.kind(),
        reason = corruption.reason(),
        recovery = %recovery,
        "damaged log bytes skipped"
    );
}
