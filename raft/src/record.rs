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

/// Decodes an entry record in full: its log id and the entry.
pub(crate) fn decode_entry<C: RaftTypeConfig>(
    data: &[u8],
) -> Result<(LogId<C::NodeId>, C::Entry), String> {
    let (&tag, mut rest) = data.split_first().ok_or("empty record")?;
    if tag != ENTRY {
        return Err(format!("record of tag {tag} where an entry was expected"));
    }
    let log_id = take(&mut rest)?;
    let entry = take(&mut rest)?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after an entry", rest.len()));
    }
    Ok((log_id, entry))
}
