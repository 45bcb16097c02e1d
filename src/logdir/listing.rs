//! [`LogDir::list`](crate::LogDir::list): the segment files of a log directory as a
//! reader finds them, for tools that inspect a directory without opening it.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use super::recovery::{parse_purged, PURGED_FILE};
use super::segment::{list_segments, segment_path};
use crate::error::Error;
use crate::position::LogPosition;

/// One segment file of a log directory, as [`LogDir::list`](crate::LogDir::list)
/// found it.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentInfo {
    /// The segment's number (its file is `NNNNNN.log`).
    pub number: u64,
    /// The segment's file.
    pub path: PathBuf,
    /// The file's length in bytes when it was listed.
    pub len: u64,
}

/// The segments of a log directory, in order, and the numbers missing between
/// them; from [`LogDir::list`](crate::LogDir::list).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentList {
    /// The segments a reader would read, oldest first: every `NNNNNN.log` file
    /// after the last segment purged. The last one is the active segment when a
    /// writer has the directory open.
    pub segments: Vec<SegmentInfo>,
    /// The end of the last segment purged, from the `PURGED` file
    /// ([`LogPosition::START`] when nothing was purged).
    pub purged_through: LogPosition,
}

impl SegmentList {
    /// The runs of numbers missing between the first segment and the last, in
    /// order (empty when the segments are consecutive). A reader stops at the first
    /// with [`Error::MissingSegment`].
    pub fn holes(&self) -> Vec<RangeInclusive<u64>> {
        self.segments
            .windows(2)
            .filter(|pair| pair[1].number != pair[0].number + 1)
            .map(|pair| pair[0].number + 1..=pair[1].number - 1)
            .collect()
    }

    /// `Ok` when the segments are consecutive; [`Error::MissingSegment`] naming the
    /// first number missing otherwise, as [`LogDir::open`](crate::LogDir::open)
    /// and a reader report it.
    pub fn check(&self) -> Result<(), Error> {
        match self.holes().first() {
            Some(hole) => Err(Error::MissingSegment {
                segment: *hole.start(),
            }),
            None => Ok(()),
        }
    }

    /// The sum of the segments' lengths.
    pub fn total_bytes(&self) -> u64 {
        self.segments.iter().map(|segment| segment.len).sum()
    }
}

/// See [`LogDir::list`](crate::LogDir::list).
pub(crate) fn list(dir: &Path) -> Result<SegmentList, Error> {
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a log directory", dir.display()),
        )));
    }
    let purged_through = match std::fs::read_to_string(dir.join(PURGED_FILE)) {
        Ok(text) => parse_purged(&text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LogPosition::START,
        Err(e) => return Err(e.into()),
    };
    let mut segments = Vec::new();
    // Segments a crash kept from a purge are not part of the log (the writer's
    // `open` deletes them), as `DirReader::open` skips them.
    for number in list_segments(dir)?
        .into_iter()
        .filter(|&number| number > purged_through.segment)
    {
        let path = segment_path(dir, number);
        let len = match std::fs::metadata(&path) {
            Ok(metadata) => metadata.len(),
            // Purged between the listing and now: no longer part of the log.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        segments.push(SegmentInfo { number, path, len });
    }
    Ok(SegmentList {
        segments,
        purged_through,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(numbers: &[u64]) -> SegmentList {
        SegmentList {
            segments: numbers
                .iter()
                .map(|&number| SegmentInfo {
                    number,
                    path: PathBuf::from(crate::names::segment_name(number)),
                    len: 10,
                })
                .collect(),
            purged_through: LogPosition::START,
        }
    }

    #[test]
    fn holes_are_runs_of_missing_numbers() {
        assert!(listed(&[]).holes().is_empty());
        assert!(listed(&[4, 5, 6]).holes().is_empty());
        assert_eq!(listed(&[3, 4, 6, 9]).holes(), vec![5..=5, 7..=8]);
        assert!(matches!(
            listed(&[3, 4, 6, 9]).check(),
            Err(Error::MissingSegment { segment: 5 })
        ));
        assert_eq!(listed(&[3, 4, 6]).total_bytes(), 30);
    }
}
