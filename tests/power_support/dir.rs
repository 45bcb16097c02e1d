//! The power-cut simulator for a whole directory: a [`LogDir`](walcodec::LogDir)'s
//! segments, its marker files, and the directory entries that name them.
//!
//! [`SimDir`] sits on the `DirStorage` seam. The `LogDir` works on a real directory
//! (its recovery, readers and purges read real files), and every step it takes is
//! also recorded in a [`DirTrace`]: each file's writes, size changes and syncs (by
//! inode, as a disk keeps them), and each change to the directory (a name linked
//! to an inode by a create, moved by a rename, unlinked) with the directory syncs.
//! [`dir_image`] turns any prefix of the trace into a directory a power cut could
//! leave:
//!
//! - the entries covered by a completed directory sync, exactly;
//! - of the entry changes since, none, all, a prefix, or any subset (a later unlink
//!   on disk, an earlier one not), each applied whole (a rename moves its name or
//!   does not);
//! - in each file the directory then names, what [`crash_image`] makes of that
//!   file's own operations: its synced bytes, any subset of its later pages, torn
//!   at sectors, the old or new size. A file's sync never makes its name durable.
//!
//! Writes to a file outside the writer's storage (a marker's contents, a segment
//! cut by a truncation) are taken when the file is synced: the file as it then is
//! on the real disk, compared with what the trace holds.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use walcodec::testing::{DirStorage, FileStorage, Storage};

use super::{crash_image, Op, SplitMix};

/// One step of a directory's life, in the order the `LogDir` made it. Files are
/// named by the simulator's own inode numbers, never reused (the file system
/// reuses a deleted file's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirOp {
    /// An operation on the file with this inode.
    File { inode: u64, op: Op },
    /// `name` now names `inode` (or nothing): a create, an unlink, or one half of a
    /// rename; `group` ties the halves of a rename together.
    Entry {
        name: String,
        inode: Option<u64>,
        group: usize,
    },
    /// A completed directory sync: every entry change before it is durable.
    DirSync,
}

/// Every step made through a [`SimDir`], and what each file holds as the page
/// cache would.
#[derive(Debug, Default)]
pub struct DirTrace {
    ops: Vec<DirOp>,
    /// Each inode's contents as the trace has them (to find changes made outside).
    cached: BTreeMap<u64, Vec<u8>>,
    groups: usize,
    /// The simulator's inode of each real inode in use.
    inodes: BTreeMap<u64, u64>,
}

impl DirTrace {
    /// How many steps were made so far: a moment a power cut can happen at.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn ops(&self) -> &[DirOp] {
        &self.ops
    }

    /// A new file with real inode `real`: a fresh simulated inode.
    fn new_inode(&mut self, real: u64) -> u64 {
        let inode = self.cached.len() as u64 + 1;
        self.cached.insert(inode, Vec::new());
        self.inodes.insert(real, inode);
        inode
    }

    fn inode(&self, real: u64) -> u64 {
        *self
            .inodes
            .get(&real)
            .expect("a file the directory storage created")
    }

    fn file_op(&mut self, inode: u64, op: Op) {
        let cached = self.cached.entry(inode).or_default();
        match &op {
            Op::Write { offset, data } => {
                let end = *offset as usize + data.len();
                if cached.len() < end {
                    cached.resize(end, 0);
                }
                cached[*offset as usize..end].copy_from_slice(data);
            }
            Op::SetLen(len) => cached.resize(*len as usize, 0),
            Op::Sync => {}
        }
        self.ops.push(DirOp::File { inode, op });
    }

    fn entries(&mut self, changes: &[(String, Option<u64>)]) {
        self.groups += 1;
        for (name, inode) in changes {
            self.ops.push(DirOp::Entry {
                name: name.clone(),
                inode: *inode,
                group: self.groups,
            });
        }
    }

    /// Brings the trace's copy of `inode` in line with `now` (the real file) by the
    /// writes and size change that make one into the other.
    fn catch_up(&mut self, inode: u64, now: &[u8]) {
        let cached = self.cached.get(&inode).cloned().unwrap_or_default();
        if now.len() < cached.len() {
            self.file_op(inode, Op::SetLen(now.len() as u64));
        }
        let common = cached.len().min(now.len());
        let first = (0..common).find(|&i| cached[i] != now[i]).unwrap_or(common);
        if first < now.len() {
            self.file_op(
                inode,
                Op::Write {
                    offset: first as u64,
                    data: now[first..].to_vec(),
                },
            );
        }
    }
}

/// [`DirStorage`] that does every step on the real file system and records it.
#[derive(Debug, Clone)]
pub struct SimDir {
    trace: Arc<Mutex<DirTrace>>,
}

impl SimDir {
    pub fn new() -> (SimDir, Arc<Mutex<DirTrace>>) {
        let trace = Arc::new(Mutex::new(DirTrace::default()));
        (
            SimDir {
                trace: Arc::clone(&trace),
            },
            trace,
        )
    }
}

fn inode_of(file: &File) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.ino())
}

fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

impl DirStorage for SimDir {
    fn create(&self, path: &Path) -> io::Result<File> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        let real = inode_of(&file)?;
        let mut trace = self.trace.lock().unwrap();
        let inode = trace.new_inode(real);
        trace.entries(&[(name_of(path), Some(inode))]);
        Ok(file)
    }

    fn sync_file(&self, file: &File) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let real = inode_of(file)?;
        let mut now = vec![0; file.metadata()?.len() as usize];
        if file.read_exact_at(&mut now, 0).is_err() {
            // A file opened for writing only (a segment `truncate_after` cuts): read
            // it through a descriptor of its own.
            use std::os::fd::AsRawFd;
            now = std::fs::read(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        }
        let mut trace = self.trace.lock().unwrap();
        let inode = trace.inode(real);
        trace.catch_up(inode, &now);
        trace.file_op(inode, Op::Sync);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        self.trace.lock().unwrap().ops.push(DirOp::DirSync);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)?;
        self.trace.lock().unwrap().entries(&[(name_of(path), None)]);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let real = std::fs::metadata(from)?.ino();
        std::fs::rename(from, to)?;
        let mut trace = self.trace.lock().unwrap();
        let inode = trace.inode(real);
        trace.entries(&[(name_of(to), Some(inode)), (name_of(from), None)]);
        Ok(())
    }

    fn storage(&self, mut file: File) -> Box<dyn Storage> {
        use std::io::Seek;
        let inode = self.trace.lock().unwrap().inode(inode_of(&file).unwrap());
        let position = file.stream_position().unwrap();
        Box::new(SimFileStorage {
            inner: FileStorage::new(file),
            inode,
            position,
            trace: Arc::clone(&self.trace),
        })
    }
}

/// The writer's storage on a segment: the real file, every call recorded.
struct SimFileStorage {
    inner: FileStorage,
    inode: u64,
    position: u64,
    trace: Arc<Mutex<DirTrace>>,
}

impl Storage for SimFileStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.trace.lock().unwrap().file_op(
            self.inode,
            Op::Write {
                offset: self.position,
                data: buf[..n].to_vec(),
            },
        );
        self.position += n as u64;
        Ok(n)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()?;
        self.trace.lock().unwrap().file_op(self.inode, Op::Sync);
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)?;
        self.position = len;
        let mut trace = self.trace.lock().unwrap();
        trace.file_op(self.inode, Op::SetLen(len));
        trace.file_op(self.inode, Op::Sync);
        Ok(())
    }

    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        self.inner.preallocate(from, to)?;
        let mut trace = self.trace.lock().unwrap();
        trace.file_op(
            self.inode,
            Op::Write {
                offset: from,
                data: vec![0; (to - from) as usize],
            },
        );
        trace.file_op(self.inode, Op::Sync);
        Ok(())
    }
}

/// Which of the entry changes since the last directory sync reached the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryPersist {
    None,
    All,
    /// The first few, in the order they were made.
    InOrder,
    /// Each on its own (a rename's two halves together).
    AnySubset,
}

/// A directory after a cut: each file's name and bytes.
#[derive(Debug, Clone)]
pub struct DirImage {
    pub files: BTreeMap<String, Vec<u8>>,
    pub persist: EntryPersist,
    /// Entry changes since the last directory sync, and how many reached the disk.
    pub unsynced_entries: usize,
    pub kept_entries: usize,
    /// Some entry change was lost while a later one reached the disk.
    pub reordered: bool,
}

impl DirImage {
    /// What a failure message says of the image: its entries and files.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.files.keys().map(String::as_str).collect();
        format!(
            "entries {:?} ({} of {} since the last directory sync), files {names:?}",
            self.persist, self.kept_entries, self.unsynced_entries
        )
    }
}

/// What the directory could hold had the power failed after the first `cut` steps
/// of `ops`, one of the possibilities drawn with `rng`.
pub fn dir_image(ops: &[DirOp], cut: usize, rng: &mut SplitMix) -> DirImage {
    dir_image_keeping(ops, cut, None, rng)
}

/// An entry change since the last directory sync: the name it changes, and
/// whether it links a file there (a create, a rename's target) or unlinks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryChange {
    pub name: String,
    pub links: bool,
}

/// As [`dir_image`], with the entry changes since the last directory sync that
/// reach the disk chosen by `keep` (given each change; a rename is kept when both
/// its halves are) instead of drawn.
pub fn dir_image_keeping(
    ops: &[DirOp],
    cut: usize,
    keep: Option<&dyn Fn(&EntryChange) -> bool>,
    rng: &mut SplitMix,
) -> DirImage {
    let ops = &ops[..cut];
    let last_sync = ops.iter().rposition(|op| matches!(op, DirOp::DirSync));
    let mut entries: BTreeMap<String, u64> = BTreeMap::new();
    let set = |entries: &mut BTreeMap<String, u64>, name: &str, inode: Option<u64>| match inode {
        Some(inode) => {
            entries.insert(name.to_string(), inode);
        }
        None => {
            entries.remove(name);
        }
    };
    let synced = last_sync.map_or(0, |i| i + 1);
    for op in &ops[..synced] {
        if let DirOp::Entry { name, inode, .. } = op {
            set(&mut entries, name, *inode);
        }
    }
    let unsynced: Vec<(&str, Option<u64>, usize)> = ops[synced..]
        .iter()
        .filter_map(|op| match op {
            DirOp::Entry { name, inode, group } => Some((name.as_str(), *inode, *group)),
            _ => None,
        })
        .collect();
    let mut groups: Vec<usize> = unsynced.iter().map(|e| e.2).collect();
    groups.dedup();
    let persist = match rng.range(0, 4) {
        0 => EntryPersist::None,
        1 => EntryPersist::All,
        2 => EntryPersist::InOrder,
        _ => EntryPersist::AnySubset,
    };
    let stop = rng.range(0, groups.len() as u64 + 1) as usize;
    let kept: Vec<bool> = (0..groups.len())
        .map(|i| match (keep, persist) {
            (Some(keep), _) => {
                unsynced
                    .iter()
                    .filter(|e| e.2 == groups[i])
                    .all(|&(name, inode, _)| {
                        keep(&EntryChange {
                            name: name.to_string(),
                            links: inode.is_some(),
                        })
                    })
            }
            (None, EntryPersist::None) => false,
            (None, EntryPersist::All) => true,
            (None, EntryPersist::InOrder) => i < stop,
            (None, EntryPersist::AnySubset) => rng.chance(1, 2),
        })
        .collect();
    let reordered = kept
        .iter()
        .position(|&k| !k)
        .is_some_and(|lost| kept[lost..].contains(&true));
    for (name, inode, group) in &unsynced {
        let index = groups.iter().position(|g| g == group).unwrap();
        if kept[index] {
            set(&mut entries, name, *inode);
        }
    }

    let mut files = BTreeMap::new();
    for (name, inode) in entries {
        let file_ops: Vec<Op> = ops
            .iter()
            .filter_map(|op| match op {
                DirOp::File { inode: i, op } if *i == inode => Some(op.clone()),
                _ => None,
            })
            .collect();
        let image = crash_image(&file_ops, file_ops.len(), rng);
        files.insert(name, image.bytes);
    }
    DirImage {
        files,
        persist,
        unsynced_entries: groups.len(),
        kept_entries: kept.iter().filter(|&&k| k).count(),
        reordered,
    }
}

/// Writes `image` as the directory `dir` (which must not exist).
pub fn write_image(image: &DirImage, dir: &Path) {
    std::fs::create_dir(dir).unwrap();
    for (name, bytes) in &image.files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
