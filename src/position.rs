//! [`LogPosition`]: a point in a whole segmented log.

use std::fmt;
use std::str::FromStr;

/// A point in a [`LogDir`](crate::LogDir): a segment number and a byte offset in
/// that segment's file.
///
/// Positions order as the log does: by segment, then by offset. The position
/// [`append`](crate::LogDir::append) returns is just past the record, a checkpoint:
/// reading from it yields the records after this one. `LogPosition::START`
/// (`000000:0`) reads from the oldest record still kept.
///
/// Displays as `000007:1234` (the segment as its file is named) and parses back:
///
/// ```
/// use walcodec::LogPosition;
///
/// let position: LogPosition = "000007:1234".parse().unwrap();
/// assert_eq!(position, LogPosition { segment: 7, offset: 1234 });
/// assert_eq!(position.to_string(), "000007:1234");
/// assert!(position < LogPosition { segment: 8, offset: 0 });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition {
    /// The segment's number (its file is `NNNNNN.log`).
    pub segment: u64,
    /// Bytes from the start of the segment's file.
    pub offset: u64,
}

impl LogPosition {
    /// The start of the log: reading from it yields the oldest record kept. Segment
    /// numbers start at 1, so no record ever sits at this position.
    pub const START: LogPosition = LogPosition {
        segment: 0,
        offset: 0,
    };

    /// The position `offset` bytes into `segment`.
    pub const fn new(segment: u64, offset: u64) -> LogPosition {
        LogPosition { segment, offset }
    }
}

impl fmt::Display for LogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:06}:{}", self.segment, self.offset)
    }
}

/// Why a string is not a [`LogPosition`]: it must read `SEGMENT:OFFSET`, two
/// decimal numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePositionError {
    input: String,
}

impl fmt::Display for ParsePositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid log position {:?}: expected SEGMENT:OFFSET, e.g. 000007:1234",
            self.input
        )
    }
}

impl std::error::Error for ParsePositionError {}

impl FromStr for LogPosition {
    type Err = ParsePositionError;

    fn from_str(s: &str) -> Result<LogPosition, ParsePositionError> {
        let err = || ParsePositionError {
            input: s.chars().take(64).collect(),
        };
        let (segment, offset) = s.split_once(':').ok_or_else(err)?;
        let number = |part: &str| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            part.parse::<u64>().map_err(|_| err())
        };
        Ok(LogPosition {
            segment: number(segment)?,
            offset: number(offset)?,
        })
    }
}

/// A position is the string `000007:1234` in human-readable formats (JSON, TOML,
/// YAML: what a service's own state file holds), and the pair `(segment, offset)`
/// in binary ones.
#[cfg(feature = "serde")]
impl serde::Serialize for LogPosition {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            (self.segment, self.offset).serialize(serializer)
        }
    }
}

/// The string `000007:1234` (any number of segment digits) in human-readable
/// formats, the pair `(segment, offset)` in binary ones.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for LogPosition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            struct Text;
            impl serde::de::Visitor<'_> for Text {
                type Value = LogPosition;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a log position SEGMENT:OFFSET, e.g. 000007:1234")
                }

                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<LogPosition, E> {
                    text.parse().map_err(E::custom)
                }
            }
            deserializer.deserialize_str(Text)
        } else {
            let (segment, offset) = <(u64, u64)>::deserialize(deserializer)?;
            Ok(LogPosition { segment, offset })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        for position in [
            LogPosition::START,
            LogPosition::new(7, 1234),
            LogPosition::new(1_234_567, u64::MAX),
        ] {
            assert_eq!(position.to_string().parse::<LogPosition>(), Ok(position));
        }
        assert_eq!(LogPosition::new(1_234_567, 0).to_string(), "1234567:0");
    }

    #[test]
    fn bad_input_is_an_error() {
        for bad in [
            "",
            ":",
            "7",
            "7:",
            ":7",
            "a:1",
            "1:-1",
            "+1:2",
            "1:2:3",
            " 1:2",
            "99999999999999999999:0",
        ] {
            assert!(bad.parse::<LogPosition>().is_err(), "{bad:?}");
        }
    }
}
