//! How the store's state maps to the records of a [`LogDir`](walcodec::LogDir).
//!
//! Every record is one tag byte followed by [postcard](https://docs.rs/postcard)
//! (compact binary serde: varints, no field names) of its fields:
//!
//! | tag | record      | fields                         | replay                               |
//! |-----|-------------|--------------------------------|--------------------------------------|
//! | `1` | `Entry`     | log id, the whole entry        | drops entries at or after its index, then keeps it |
//! | `2` | `Vote`      | vote                           | the vote from here on                |
//! | `3` | `Committed` | committed log id (or none)     | the committed id from here on        |
//! | `4` | `Truncate`  | first index removed            | drops entries at or after it         |
//! | `5` | `Purge`     | purged log id, vote, committed | drops entries up to it; sets all three |
//!
//! The log is append-only: a truncation is a record, not a cut, so it can never
//! take a vote written after the entries it removes with it, and it is
//! crash-atomic (one record). A purge record repeats the vote and the committed
//! id, so that the whole segments before it can be deleted without losing them:
//! what remains of the log is always a suffix that replays to the same state.

use openraft::{LogId, RaftTypeConfig, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Error;

const ENTRY: u8 = 1;
const VOTE: u8 = 2;
const COMMITTED: u8 = 3;
const TRUNCATE: u8 = 4;
const PURGE: u8 = 5;

/// One decoded record.
pub(crate) enum Record<C: RaftTypeConfig> {
    /// An entry; its log id decoded, the entry itself left encoded (replay needs
    /// only the id).
    Entry(LogId<C::NodeId>),
    Vote(Vote<C::NodeId>),
    Committed(Option<LogId<C::NodeId>>),
    Truncate(u64),
    Purge {
        purged: LogId<C::NodeId>,
        vote: Option<Vote<C::NodeId>>,
        committed: Option<LogId<C::NodeId>>,
    },
}

fn encode(tag: u8, parts: &[&dyn ErasedSerialize]) -> Result<Vec<u8>, Error> {
    let mut out = vec![tag];
    for part in parts {
        part.append_to(&mut out)?;
    }
    Ok(out)
}

/// `Serialize` is not object safe; this is the one thing `encode` needs of it.
trait ErasedSerialize {
    fn append_to(&self, out: &mut Vec<u8>) -> Result<(), Error>;
}

impl<T: Serialize> ErasedSerialize for T {
    fn append_to(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let bytes = postcard::to_stdvec(self).map_err(|e| Error::Encode(e.to_string()))?;
        out.extend_from_slice(&bytes);
        Ok(())
    }
}

pub(crate) fn entry<C: RaftTypeConfig>(
    log_id: &LogId<C::NodeId>,
    entry: &C::Entry,
) -> Result<Vec<u8>, Error> {
    encode(ENTRY, &[log_id, entry])
}

pub(crate) fn vote<C: RaftTypeConfig>(vote: &Vote<C::NodeId>) -> Result<Vec<u8>, Error> {
    encode(VOTE, &[vote])
}

pub(crate) fn committed<C: RaftTypeConfig>(
    committed: &Option<LogId<C::NodeId>>,
) -> Result<Vec<u8>, Error> {
    encode(COMMITTED, &[committed])
}

pub(crate) fn truncate(since: u64) -> Result<Vec<u8>, Error> {
    encode(TRUNCATE, &[&since])
}

pub(crate) fn purge<C: RaftTypeConfig>(
    purged: &LogId<C::NodeId>,
    vote: &Option<Vote<C::NodeId>>,
    committed: &Option<LogId<C::NodeId>>,
) -> Result<Vec<u8>, Error> {
    encode(PURGE, &[purged, vote, committed])
}

// A shared log's records ([`SharedLog`](crate::SharedLog)): the same five, each
// naming its group, with the fields a replay that does not know the group's type
// config needs (the group, an entry's index) as plain varints and every typed
// field as length-prefixed bytes, so that one pass over the log can index every
// group before anyone asks for a group's store.
const GROUP_ENTRY: u8 = 11;
const GROUP_VOTE: u8 = 12;
const GROUP_COMMITTED: u8 = 13;
const GROUP_TRUNCATE: u8 = 14;
const GROUP_PURGE: u8 = 15;
/// An entry of a group copied to the head of the log by a rewrite
/// ([`crate::space`]): the bytes of its [`GROUP_ENTRY`] record after the tag. On
/// replay it puts its entry at its index without dropping the entries after it
/// (as an appended entry does), so that any prefix of a rewrite, a power cut
/// keeps, replays to the same entries.
const GROUP_MOVED: u8 = 16;

/// What the space reclaimer needs to know of a shared log's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An entry (appended or moved): the group's index points at it while live.
    Entry,
    Vote,
    Committed,
    Truncate,
    Purge,
}

/// The group and kind of a shared log's record, read off its first bytes.
pub(crate) fn group_kind(data: &[u8]) -> Option<(u64, Kind)> {
    let (&tag, mut rest) = data.split_first()?;
    let kind = match tag {
        GROUP_ENTRY | GROUP_MOVED => Kind::Entry,
        GROUP_VOTE => Kind::Vote,
        GROUP_COMMITTED => Kind::Committed,
        GROUP_TRUNCATE => Kind::Truncate,
        GROUP_PURGE => Kind::Purge,
        _ => return None,
    };
    Some((take_varint(&mut rest).ok()?, kind))
}

/// The moved copy of the entry record `record` (a [`GROUP_ENTRY`] or
/// [`GROUP_MOVED`] record); `None` for any other record.
pub(crate) fn moved(record: &[u8]) -> Option<Vec<u8>> {
    let (&tag, rest) = record.split_first()?;
    if tag != GROUP_ENTRY && tag != GROUP_MOVED {
        return None;
    }
    let mut out = Vec::with_capacity(record.len());
    out.push(GROUP_MOVED);
    out.extend_from_slice(rest);
    Some(out)
}

/// The postcard bytes of `value`.
pub(crate) fn to_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(value).map_err(|e| Error::Encode(e.to_string()))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A varint off the front of `bytes` (at most 10 bytes, no overflow).
fn take_varint(bytes: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        let part = u64::from(byte & 0x7f);
        if i == 9 && part > 1 {
            return Err("varint overflows 64 bits".into());
        }
        value |= part << (7 * i);
        if byte & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(value);
        }
    }
    Err("truncated varint".into())
}

/// Length-prefixed bytes off the front of `bytes`.
fn take_bytes<'a>(bytes: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = take_varint(bytes)?;
    let len = usize::try_from(len).map_err(|_| "length overflows")?;
    if len > bytes.len() {
        return Err(format!("{len} bytes announced, {} left", bytes.len()));
    }
    let (taken, rest) = bytes.split_at(len);
    *bytes = rest;
    Ok(taken)
}

fn group_header(tag: u8, group: u64) -> Vec<u8> {
    let mut out = vec![tag];
    put_varint(&mut out, group);
    out
}

/// An entry of `group`: its index, its leader id, the entry.
pub(crate) fn group_entry<C: RaftTypeConfig>(
    group: u64,
    log_id: &LogId<C::NodeId>,
    entry: &C::Entry,
) -> Result<Vec<u8>, Error> {
    let mut out = group_header(GROUP_ENTRY, group);
    put_varint(&mut out, log_id.index);
    put_bytes(&mut out, &to_bytes(&log_id.leader_id)?);
    entry.append_to(&mut out)?;
    Ok(out)
}

/// The vote of `group` (as an `Option`, the way a purge carries it).
pub(crate) fn group_vote<C: RaftTypeConfig>(
    group: u64,
    vote: &Vote<C::NodeId>,
) -> Result<Vec<u8>, Error> {
    let mut out = group_header(GROUP_VOTE, group);
    put_bytes(&mut out, &to_bytes(&Some(vote))?);
    Ok(out)
}

pub(crate) fn group_committed<C: RaftTypeConfig>(
    group: u64,
    committed: &Option<LogId<C::NodeId>>,
) -> Result<Vec<u8>, Error> {
    let mut out = group_header(GROUP_COMMITTED, group);
    put_bytes(&mut out, &to_bytes(committed)?);
    Ok(out)
}

pub(crate) fn group_truncate(group: u64, since: u64) -> Vec<u8> {
    let mut out = group_header(GROUP_TRUNCATE, group);
    put_varint(&mut out, since);
    out
}

pub(crate) fn group_purge<C: RaftTypeConfig>(
    group: u64,
    purged: &LogId<C::NodeId>,
    vote: &Option<Vote<C::NodeId>>,
    committed: &Option<LogId<C::NodeId>>,
) -> Result<Vec<u8>, Error> {
    let mut out = group_header(GROUP_PURGE, group);
    put_varint(&mut out, purged.index);
    put_bytes(&mut out, &to_bytes(&purged.leader_id)?);
    put_bytes(&mut out, &to_bytes(vote)?);
    put_bytes(&mut out, &to_bytes(committed)?);
    Ok(out)
}

/// A purge record of `group` from its fields' bytes (a rewrite's copy of a
/// group's state).
pub(crate) fn group_purge_raw(
    group: u64,
    index: u64,
    leader: &[u8],
    vote: &[u8],
    committed: &[u8],
) -> Vec<u8> {
    let mut out = group_header(GROUP_PURGE, group);
    put_varint(&mut out, index);
    put_bytes(&mut out, leader);
    put_bytes(&mut out, vote);
    put_bytes(&mut out, committed);
    out
}

/// A vote record of `group` from the bytes of its `Option<Vote>`.
pub(crate) fn group_vote_raw(group: u64, vote: &[u8]) -> Vec<u8> {
    let mut out = group_header(GROUP_VOTE, group);
    put_bytes(&mut out, vote);
    out
}

/// A committed record of `group` from the bytes of its `Option<LogId>`.
pub(crate) fn group_committed_raw(group: u64, committed: &[u8]) -> Vec<u8> {
    let mut out = group_header(GROUP_COMMITTED, group);
    put_bytes(&mut out, committed);
    out
}

/// A shared log's record, decoded as far as replay can without the group's type
/// config: typed fields stay postcard bytes.
pub(crate) enum GroupRecord<'a> {
    Entry {
        index: u64,
        leader: &'a [u8],
    },
    /// An entry a rewrite moved: replaces the entry at its index, keeps the
    /// entries after it.
    Moved {
        index: u64,
        leader: &'a [u8],
    },
    /// postcard of `Option<Vote>`.
    Vote(&'a [u8]),
    /// postcard of `Option<LogId>`.
    Committed(&'a [u8]),
    Truncate(u64),
    Purge {
        index: u64,
        leader: &'a [u8],
        vote: &'a [u8],
        committed: &'a [u8],
    },
}

/// Decodes a shared log's record: its group and what replay needs of it.
pub(crate) fn decode_group(data: &[u8]) -> Result<(u64, GroupRecord<'_>), String> {
    let (&tag, mut rest) = data.split_first().ok_or("empty record")?;
    let rest = &mut rest;
    if !(GROUP_ENTRY..=GROUP_MOVED).contains(&tag) {
        return Err(format!("record of tag {tag} in a shared log"));
    }
    let group = take_varint(rest)?;
    let record = match tag {
        GROUP_ENTRY => {
            let index = take_varint(rest)?;
            let leader = take_bytes(rest)?;
            // The entry's body follows.
            return Ok((group, GroupRecord::Entry { index, leader }));
        }
        GROUP_MOVED => {
            let index = take_varint(rest)?;
            let leader = take_bytes(rest)?;
            return Ok((group, GroupRecord::Moved { index, leader }));
        }
        GROUP_VOTE => GroupRecord::Vote(take_bytes(rest)?),
        GROUP_COMMITTED => GroupRecord::Committed(take_bytes(rest)?),
        GROUP_TRUNCATE => GroupRecord::Truncate(take_varint(rest)?),
        _ => GroupRecord::Purge {
            index: take_varint(rest)?,
            leader: take_bytes(rest)?,
            vote: take_bytes(rest)?,
            committed: take_bytes(rest)?,
        },
    };
    if !rest.is_empty() {
        return Err(format!("{} bytes after a record of tag {tag}", rest.len()));
    }
    Ok((group, record))
}

/// A log id from a record's index and the postcard bytes of its leader id.
pub(crate) fn log_id_from<C: RaftTypeConfig>(
    index: u64,
    leader: &[u8],
) -> Result<LogId<C::NodeId>, String> {
    let leader = postcard::from_bytes(leader).map_err(|e| e.to_string())?;
    Ok(LogId {
        leader_id: leader,
        index,
    })
}

/// A typed field of a shared log's record, from its postcard bytes.
pub(crate) fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| e.to_string())
}

/// Takes one value off the front of `bytes`.
fn take<T: DeserializeOwned>(bytes: &mut &[u8]) -> Result<T, String> {
    let (value, rest) = postcard::take_from_bytes::<T>(bytes).map_err(|e| e.to_string())?;
    *bytes = rest;
    Ok(value)
}

/// Decodes a record for replay (an entry's body is skipped).
pub(crate) fn decode<C: RaftTypeConfig>(data: &[u8]) -> Result<Record<C>, String> {
    let (&tag, mut rest) = data.split_first().ok_or("empty record")?;
    let record = match tag {
        ENTRY => Record::Entry(take(&mut rest)?),
        VOTE => Record::Vote(take(&mut rest)?),
        COMMITTED => Record::Committed(take(&mut rest)?),
        TRUNCATE => Record::Truncate(take(&mut rest)?),
        PURGE => Record::Purge {
            purged: take(&mut rest)?,
            vote: take(&mut rest)?,
            committed: take(&mut rest)?,
        },
        other => return Err(format!("unknown record tag {other}")),
    };
    // An entry's body follows its id; every other record ends here.
    if tag != ENTRY && !rest.is_empty() {
        return Err(format!("{} bytes after a record of tag {tag}", rest.len()));
    }
    Ok(record)
}

/// Decodes an entry record in full: its log id and the entry. `group` is the
/// group of a shared log's store (whose entry records name it), `None` for a
/// store of its own.
pub(crate) fn decode_entry<C: RaftTypeConfig>(
    group: Option<u64>,
    data: &[u8],
) -> Result<(LogId<C::NodeId>, C::Entry), String> {
    let (&tag, mut rest) = data.split_first().ok_or("empty record")?;
    let log_id = match (tag, group) {
        (ENTRY, None) => take(&mut rest)?,
        (GROUP_ENTRY | GROUP_MOVED, Some(group)) => {
            let found = take_varint(&mut rest)?;
            if found != group {
                return Err(format!(
                    "an entry of group {found} where group {group}'s was expected"
                ));
            }
            let index = take_varint(&mut rest)?;
            let leader = take_bytes(&mut rest)?;
            log_id_from::<C>(index, leader)?
        }
        _ => return Err(format!("record of tag {tag} where an entry was expected")),
    };
    let entry = take(&mut rest)?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after an entry", rest.len()));
    }
    Ok((log_id, entry))
}
