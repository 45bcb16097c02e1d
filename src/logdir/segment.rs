//! Segment files on disk: their paths and the listing of a directory. The names
//! themselves are [`crate::names`]'s, a leaf module that error messages share.

use std::path::{Path, PathBuf};

pub(crate) use crate::names::{parse_segment_name, segment_name};

/// The path of segment `number` in `dir`.
pub(crate) fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(segment_name(number))
}

/// The segment numbers in `dir`, in order. Other files are ignored.
pub(crate) fn list_segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut numbers = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(number) = entry.file_name().to_str().and_then(parse_segment_name) {
            if entry.file_type()?.is_file() {
                numbers.push(number);
            }
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}
