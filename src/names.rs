//! Segment file names: `NNNNNN.log`, at least six digits, as LevelDB and RocksDB
//! name their logs.
//!
//! A leaf module: the log directory names its files with it, and [`crate::Error`]
//! names a segment in its messages, without the error module reaching into
//! `logdir`.

/// The file name of segment `number`: `000007.log`, `1234567.log`.
pub(crate) fn segment_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// The segment number a file name stands for, or `None` for any other file.
///
/// Only the canonical spelling counts (`segment_name(n) == name`), so `0000007.log`
/// and `7.log` are left alone like any other file: two names can never claim the
/// same number.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u64 = digits.parse().ok()?;
    (segment_name(number) == name).then_some(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in [0, 1, 7, 999_999, 1_000_000, u64::MAX] {
            assert_eq!(parse_segment_name(&segment_name(n)), Some(n));
        }
        assert_eq!(segment_name(7), "000007.log");
    }

    #[test]
    fn other_files_are_not_segments() {
        for name in [
            "7.log",
            "00007.log",
            "0000007.log",
            "000007.LOG",
            "000007.log.tmp",
            "LOCK",
            "00000a.log",
            "+00007.log",
            "000007",
            "99999999999999999999.log",
        ] {
            assert_eq!(parse_segment_name(name), None, "{name}");
        }
    }
}
