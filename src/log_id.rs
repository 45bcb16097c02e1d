//! [`LogId`]: which log a directory holds a copy of.

use std::fmt;
use std::io;
use std::str::FromStr;

/// A log's identity: 128 random bits made when the log is created, kept in its
/// directory. Two directories with the same id are
/// copies of one log; with different ids, of two logs.
///
/// Displays as 32 lowercase hex digits and parses back; with the `serde` feature
/// it is that string in human-readable formats, a `u128` in binary ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogId(u128);

impl LogId {
    /// The id as a number.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    /// The id `value` (as [`as_u128`](Self::as_u128) gives it).
    pub fn from_u128(value: u128) -> LogId {
        LogId(value)
    }
}

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for LogId {
    type Err = io::Error;

    fn from_str(s: &str) -> Result<LogId, io::Error> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(invalid(format!("not a log id (32 hex digits): {s:.40?}")));
        }
        u128::from_str_radix(s, 16)
            .map(LogId)
            .map_err(|e| invalid(e.to_string()))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for LogId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            self.0.serialize(serializer)
        }
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for LogId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
            text.parse().map_err(serde::de::Error::custom)
        } else {
            u128::deserialize(deserializer).map(LogId)
        }
    }
}

fn invalid(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}
