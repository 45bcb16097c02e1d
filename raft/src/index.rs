//! A group's index of entries, compact: what a store knows of each entry (its
//! leader id, where its record is, its record while it is one of the latest)
//! without a heap allocation or a tree node per entry.
//!
//! A group's entries follow each other from its first index, so the index is a
//! few runs and one small fixed-size slot per entry:
//! - leader ids as runs (`(first index, leader id)`): a term changes rarely, so a
//!   few thousand entries share a handful of runs;
//! - the records of durable entries as [`Spot`]s, 8 bytes each (the record's
//!   offset from the start of its [`Run`] and its length), the runs saying
//!   which segment and from which offset: one run per segment a group wrote in,
//!   a new one only where an offset does not fit;
//! - the records of the latest entries (not yet durable, or cached for readers)
//!   in a queue beside them, bounded by the cache's bytes.
//!
//! A position that fits no run (a record longer than 4 GiB, one a rewrite moved
//! into the middle of the index while replaying) goes to a side map until the
//! spots are rebuilt ([`Index::compact`]).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use walcodec::LogPosition;

/// The length of a [`Spot`] whose position is in [`Index::odd`].
const ODD: u32 = u32::MAX;

/// Where a durable entry's record is, relative to the [`Run`] covering it.
#[derive(Debug, Clone, Copy)]
struct Spot {
    /// Bytes from the run's base offset to the record's start.
    delta: u32,
    /// The record's length in the log (`ODD`: see [`Index::odd`]).
    len: u32,
}

/// The entries from `from` on (up to the next run) have records in `segment`,
/// at offsets from `base`.
#[derive(Debug, Clone, Copy)]
struct Run {
    from: u64,
    segment: u64,
    base: u64,
}

/// The record of one of the latest entries, kept in memory.
#[derive(Debug, Clone)]
struct Held {
    /// Tags the append that wrote it (see [`Index::keep`]).
    seq: u64,
    record: Arc<[u8]>,
}

/// What the index holds of one entry.
#[derive(Debug)]
pub(crate) struct Got<'a, L> {
    /// Its leader id.
    pub(crate) leader: &'a L,
    /// Where its record is, once durable.
    pub(crate) at: Option<Range<LogPosition>>,
    /// Its record, when in memory (not yet durable, or one of the latest).
    pub(crate) record: Option<&'a Arc<[u8]>>,
}

/// The entries of a group, `len` of them from index `first`, each with a
/// leader id of type `L` (the decoded `CommittedLeaderId` of a store, or its
/// encoded bytes while the type config is unknown).
///
/// The durable entries come first (`spots`, from `first`); the entries
/// appended and not yet durable follow. The records of the entries from
/// `held_from` to the end are in memory (`held`): the pending ones, and before
/// them the latest durable ones (the cache, `cached_bytes` of them).
#[derive(Debug, Clone)]
pub(crate) struct Dense<L> {
    first: u64,
    len: u64,
    leaders: Vec<(u64, L)>,
    spots: VecDeque<Spot>,
    runs: VecDeque<Run>,
    /// Positions that fit no run, by index.
    odd: BTreeMap<u64, Range<LogPosition>>,
    held: VecDeque<Held>,
    held_from: u64,
    cached_bytes: usize,
}

impl<L> Default for Dense<L> {
    fn default() -> Self {
        Dense {
            first: 0,
            len: 0,
            leaders: Vec::new(),
            spots: VecDeque::new(),
            runs: VecDeque::new(),
            odd: BTreeMap::new(),
            held: VecDeque::new(),
            held_from: 0,
            cached_bytes: 0,
        }
    }
}

impl<L: Clone + PartialEq> Dense<L> {
    /// Whether it holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first entry's index.
    pub(crate) fn first(&self) -> Option<u64> {
        (self.len > 0).then_some(self.first)
    }

    /// The last entry's index.
    pub(crate) fn last(&self) -> Option<u64> {
        (self.len > 0).then(|| self.first + (self.len - 1))
    }

    /// The index after the last entry (meaningless when empty).
    fn end(&self) -> u64 {
        self.first.saturating_add(self.len)
    }

    /// The index after the last durable entry.
    fn durable_end(&self) -> u64 {
        self.first + self.spots.len() as u64
    }

    fn contains(&self, index: u64) -> bool {
        index >= self.first && index - self.first < self.len
    }

    /// The leader id of the entry at `index`.
    pub(crate) fn leader(&self, index: u64) -> Option<&L> {
        if !self.contains(index) {
            return None;
        }
        let run = self.leaders.partition_point(|(from, _)| *from <= index);
        self.leaders.get(run.checked_sub(1)?).map(|(_, l)| l)
    }

    /// Where the record of the durable entry at `index` is.
    pub(crate) fn position(&self, index: u64) -> Option<Range<LogPosition>> {
        let k = usize::try_from(index.checked_sub(self.first)?).ok()?;
        let spot = *self.spots.get(k)?;
        if spot.len == ODD {
            return self.odd.get(&index).cloned();
        }
        let run = self.runs.partition_point(|r| r.from <= index);
        let run = self.runs.get(run.checked_sub(1)?)?;
        Some(Self::decode(run, spot))
    }

    fn decode(run: &Run, spot: Spot) -> Range<LogPosition> {
        let start = run.base.saturating_add(u64::from(spot.delta));
        LogPosition::new(run.segment, start)
            ..LogPosition::new(run.segment, start.saturating_add(u64::from(spot.len)))
    }

    /// What the index holds of the entry at `index`.
    pub(crate) fn get(&self, index: u64) -> Option<Got<'_, L>> {
        let leader = self.leader(index)?;
        let record = index
            .checked_sub(self.held_from)
            .and_then(|k| self.held.get(usize::try_from(k).ok()?))
            .map(|held| &held.record);
        Some(Got {
            leader,
            at: self.position(index),
            record,
        })
    }

    /// The durable entries, in index order, with where their records are.
    pub(crate) fn positions(&self) -> impl Iterator<Item = (u64, Range<LogPosition>)> + '_ {
        let mut run = 0;
        self.spots.iter().enumerate().map(move |(k, &spot)| {
            let index = self.first + k as u64;
            if spot.len == ODD {
                return (index, self.odd[&index].clone());
            }
            while self.runs.get(run + 1).is_some_and(|r| r.from <= index) {
                run += 1;
            }
            (index, Self::decode(&self.runs[run], spot))
        })
    }

    /// Empties it.
    fn clear(&mut self) {
        *self = Dense::default();
    }

    /// Starts an empty index at `first`.
    fn start_at(&mut self, first: u64) {
        self.clear();
        self.first = first;
        self.held_from = first;
    }

    fn push_leader(&mut self, index: u64, leader: L) {
        if self.leaders.last().is_none_or(|(_, l)| *l != leader) {
            self.leaders.push((index, leader));
        }
    }

    /// The spot of a record at `at` for the entry at `index`, relative to
    /// `run`, if it fits.
    fn fit(run: &Run, at: &Range<LogPosition>) -> Option<Spot> {
        if run.segment != at.start.segment || at.end.segment != at.start.segment {
            return None;
        }
        let delta = u32::try_from(at.start.offset.checked_sub(run.base)?).ok()?;
        let len = u32::try_from(at.end.offset.checked_sub(at.start.offset)?).ok()?;
        (len != ODD).then_some(Spot { delta, len })
    }

    /// The entry at `durable_end` is durable at `at`.
    fn push_spot(&mut self, index: u64, at: &Range<LogPosition>) {
        debug_assert_eq!(index, self.durable_end());
        let spot = match self.runs.back().and_then(|run| Self::fit(run, at)) {
            Some(spot) => spot,
            None => {
                let run = Run {
                    from: index,
                    segment: at.start.segment,
                    base: at.start.offset,
                };
                match Self::fit(&run, at) {
                    Some(spot) => {
                        self.runs.push_back(run);
                        spot
                    }
                    None => {
                        self.odd.insert(index, at.clone());
                        Spot { delta: 0, len: ODD }
                    }
                }
            }
        };
        self.spots.push_back(spot);
    }

    /// Drops the entries at and after `index`.
    pub(crate) fn truncate(&mut self, index: u64) {
        if self.len == 0 || index >= self.end() {
            return;
        }
        if index <= self.first {
            self.clear();
            return;
        }
        let durable_end = self.durable_end();
        self.len = index - self.first;
        self.spots.truncate(self.len as usize);
        while self.runs.back().is_some_and(|r| r.from >= index) {
            self.runs.pop_back();
        }
        drop(self.odd.split_off(&index));
        let kept = self.leaders.partition_point(|(from, _)| *from < index);
        self.leaders.truncate(kept);
        if index <= self.held_from {
            self.held.clear();
            self.held_from = index;
            self.cached_bytes = 0;
        } else {
            let kept = (index - self.held_from) as usize;
            for (k, held) in self.held.drain(kept..).enumerate() {
                if index + (k as u64) < durable_end {
                    self.cached_bytes -= held.record.len();
                }
            }
        }
    }

    /// Drops the entries up to `index` (inclusive).
    pub(crate) fn purge(&mut self, index: u64) {
        let Some(last) = self.last() else {
            return;
        };
        if index >= last {
            self.clear();
            return;
        }
        if index < self.first {
            return;
        }
        let first = index + 1;
        let durable_end = self.durable_end();
        let dropped = first - self.first;
        let spots = (dropped as usize).min(self.spots.len());
        self.spots.drain(..spots);
        if self.spots.is_empty() {
            self.runs.clear();
        }
        while self.runs.get(1).is_some_and(|r| r.from <= first) {
            self.runs.pop_front();
        }
        self.odd = self.odd.split_off(&first);
        let run = self.leaders.partition_point(|(from, _)| *from <= first);
        self.leaders.drain(..run.saturating_sub(1));
        if self.held_from < first {
            let gone = ((first - self.held_from) as usize).min(self.held.len());
            for (k, held) in self.held.drain(..gone).enumerate() {
                if self.held_from + (k as u64) < durable_end {
                    self.cached_bytes -= held.record.len();
                }
            }
            self.held_from = first;
        }
        self.first = first;
        self.len -= dropped;
    }

    /// Appends entries not yet durable, from `first` (the end of the index,
    /// which the caller checked, or anywhere when it is empty), each with its
    /// record, tagged `seq`.
    fn append(&mut self, first: u64, entries: impl IntoIterator<Item = (L, Arc<[u8]>)>, seq: u64) {
        if self.len == 0 {
            self.start_at(first);
        }
        debug_assert_eq!(first, self.end());
        for (leader, record) in entries {
            let index = self.end();
            self.push_leader(index, leader);
            self.held.push_back(Held { seq, record });
            self.len += 1;
        }
    }

    /// The entry at `index`, appended with tag `seq`, is durable at `at` (if
    /// the index still holds it: a truncation may have replaced it): its record
    /// stays in memory, and the oldest records kept go back to being read from
    /// the log once more than `cache` bytes are kept.
    pub(crate) fn keep(&mut self, index: u64, seq: u64, at: Range<LogPosition>, cache: usize) {
        // Appends become durable in call order: the next to is the first
        // pending entry.
        if index != self.durable_end() || index >= self.end() {
            return;
        }
        let Some(held) = self.held.get((index - self.held_from) as usize) else {
            return;
        };
        if held.seq != seq {
            return;
        }
        let bytes = held.record.len();
        self.push_spot(index, &at);
        self.cached_bytes += bytes;
        while self.cached_bytes > cache && self.held_from < self.durable_end() {
            if let Some(held) = self.held.pop_front() {
                self.cached_bytes -= held.record.len();
            }
            self.held_from += 1;
        }
    }

    /// Replay of an entry record: drops the entries at and after `index`, then
    /// puts the entry, durable at `at`; `index` is at most the end (the caller
    /// checked).
    fn put(&mut self, index: u64, leader: L, at: &Range<LogPosition>) {
        self.truncate(index);
        if self.len == 0 {
            self.start_at(index);
        }
        debug_assert!(self.held.is_empty(), "replay holds no records");
        self.push_leader(index, leader);
        self.push_spot(index, at);
        self.len += 1;
        self.held_from = self.end();
    }

    /// Replay of a rewrite's copy of a durable entry it holds: the entry at
    /// `index` is at `at` now, the entries after it staying.
    fn put_moved(&mut self, index: u64, leader: L, at: &Range<LogPosition>) {
        if index < self.first || index >= self.durable_end() {
            return;
        }
        if self.leader(index) != Some(&leader) {
            self.set_leader(index, leader);
        }
        self.set_position(index, at);
    }

    /// Gives the entry at `index` (held) the leader id `leader`, splitting its
    /// run.
    fn set_leader(&mut self, index: u64, leader: L) {
        let run = self.leaders.partition_point(|(from, _)| *from <= index) - 1;
        let next = self
            .leaders
            .get(run + 1)
            .map_or(self.end(), |(from, _)| *from);
        let old = self.leaders[run].1.clone();
        if index + 1 < next {
            self.leaders.insert(run + 1, (index + 1, old));
        }
        if self.leaders[run].0 == index {
            self.leaders[run].1 = leader;
        } else {
            self.leaders.insert(run + 1, (index, leader));
        }
    }

    /// The durable entry at `index` is at `at` now.
    fn set_position(&mut self, index: u64, at: &Range<LogPosition>) {
        let k = (index - self.first) as usize;
        let run = self.runs.partition_point(|r| r.from <= index);
        let fitted = run
            .checked_sub(1)
            .and_then(|run| Self::fit(&self.runs[run], at));
        match fitted {
            Some(spot) => {
                self.odd.remove(&index);
                self.spots[k] = spot;
            }
            None => {
                self.odd.insert(index, at.clone());
                self.spots[k] = Spot { delta: 0, len: ODD };
            }
        }
    }

    /// Each entry `(index, from, to)` that is still durable at `from` is at `to`
    /// now.
    pub(crate) fn moved(&mut self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]) {
        for (index, from, to) in moves {
            if self.position(*index).as_ref() == Some(from) {
                self.set_position(*index, to);
            }
        }
        self.compact();
    }

    /// Rebuilds the spots and runs when positions went to the side map (a
    /// rewrite moved entries), and gives back the room growth left over.
    fn compact(&mut self) {
        if !self.odd.is_empty() {
            let positions: Vec<Range<LogPosition>> = self.positions().map(|(_, at)| at).collect();
            self.spots.clear();
            self.runs.clear();
            self.odd.clear();
            for (k, at) in positions.iter().enumerate() {
                self.push_spot(self.first + k as u64, at);
            }
        }
        self.spots.shrink_to_fit();
        self.runs.shrink_to_fit();
        self.leaders.shrink_to_fit();
    }

    /// The same index with each leader id mapped by `f` (once per run).
    pub(crate) fn map_leaders<M, E>(
        &self,
        mut f: impl FnMut(u64, &L) -> Result<M, E>,
    ) -> Result<Dense<M>, E> {
        let leaders = self
            .leaders
            .iter()
            .map(|(from, l)| Ok((*from, f(*from, l)?)))
            .collect::<Result<Vec<_>, E>>()?;
        Ok(Dense {
            first: self.first,
            len: self.len,
            leaders,
            spots: self.spots.clone(),
            runs: self.runs.clone(),
            odd: self.odd.clone(),
            held: self.held.clone(),
            held_from: self.held_from,
            cached_bytes: self.cached_bytes,
        })
    }
}

/// One entry of a [`Index::Sparse`] index.
#[derive(Debug, Clone)]
pub(crate) struct Slot<L> {
    leader: L,
    /// Where its record is, once durable.
    at: Option<Range<LogPosition>>,
    /// Its record while not yet durable.
    pending: Option<Held>,
}

/// A group's index: [`Dense`] while its entries follow each other (always,
/// for a log Raft writes), else a map by index, as a replay meets an entry
/// past the end or before the first one (a rewrite's copies of entries whose
/// older segments a crash kept), or as a store is asked to append past its
/// last entry (openraft's own test suite does). [`compact`](Self::compact)
/// turns a map whose entries follow each other back into a dense index.
#[derive(Debug, Clone)]
pub(crate) enum Index<L> {
    /// Consecutive entries, durable ones first: 8 bytes an entry.
    Dense(Dense<L>),
    /// Anything else: a tree node an entry.
    Sparse(BTreeMap<u64, Slot<L>>),
}

impl<L> Default for Index<L> {
    fn default() -> Self {
        Index::Dense(Dense::default())
    }
}

impl<L: Clone + PartialEq> Index<L> {
    /// The same entries as a map.
    fn sparse(&mut self) -> &mut BTreeMap<u64, Slot<L>> {
        if let Index::Dense(dense) = self {
            let mut map = BTreeMap::new();
            if let (Some(first), Some(last)) = (dense.first(), dense.last()) {
                for index in first..=last {
                    let Some(got) = dense.get(index) else {
                        continue;
                    };
                    let pending = match (&got.at, got.record) {
                        (None, Some(record)) => {
                            let k = (index - dense.held_from) as usize;
                            Some(Held {
                                seq: dense.held[k].seq,
                                record: Arc::clone(record),
                            })
                        }
                        _ => None,
                    };
                    let slot = Slot {
                        leader: got.leader.clone(),
                        at: got.at.clone(),
                        pending,
                    };
                    map.insert(index, slot);
                }
            }
            *self = Index::Sparse(map);
        }
        match self {
            Index::Sparse(map) => map,
            Index::Dense(_) => unreachable!("made sparse above"),
        }
    }

    /// Whether it holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Index::Dense(d) => d.is_empty(),
            Index::Sparse(map) => map.is_empty(),
        }
    }

    /// The first entry's index.
    pub(crate) fn first(&self) -> Option<u64> {
        match self {
            Index::Dense(d) => d.first(),
            Index::Sparse(map) => map.keys().next().copied(),
        }
    }

    /// The last entry's index.
    pub(crate) fn last(&self) -> Option<u64> {
        match self {
            Index::Dense(d) => d.last(),
            Index::Sparse(map) => map.keys().next_back().copied(),
        }
    }

    /// Where the entries stop following each other: the index expected and
    /// the one found.
    pub(crate) fn gap(&self) -> Option<(u64, u64)> {
        match self {
            Index::Dense(_) => None,
            Index::Sparse(map) => map
                .keys()
                .zip(map.keys().skip(1))
                .find(|(a, b)| a.checked_add(1) != Some(**b))
                .map(|(a, b)| (a.saturating_add(1), *b)),
        }
    }

    /// The leader id of the entry at `index`.
    pub(crate) fn leader(&self, index: u64) -> Option<&L> {
        match self {
            Index::Dense(d) => d.leader(index),
            Index::Sparse(map) => map.get(&index).map(|slot| &slot.leader),
        }
    }

    /// Where the record of the durable entry at `index` is.
    pub(crate) fn position(&self, index: u64) -> Option<Range<LogPosition>> {
        match self {
            Index::Dense(d) => d.position(index),
            Index::Sparse(map) => map.get(&index)?.at.clone(),
        }
    }

    /// The entries from `start` on, in index order.
    pub(crate) fn entries_from(
        &self,
        start: u64,
    ) -> Box<dyn Iterator<Item = (u64, Got<'_, L>)> + '_> {
        match self {
            Index::Dense(d) => match d.last() {
                Some(last) => Box::new(
                    (start.max(d.first)..=last)
                        .filter_map(move |index| Some((index, d.get(index)?))),
                ),
                None => Box::new(std::iter::empty()),
            },
            Index::Sparse(map) => Box::new(map.range(start..).map(|(&index, slot)| {
                let got = Got {
                    leader: &slot.leader,
                    at: slot.at.clone(),
                    record: slot.pending.as_ref().map(|held| &held.record),
                };
                (index, got)
            })),
        }
    }

    /// The durable entries up to the first one not yet durable, in index
    /// order, with where their records are.
    pub(crate) fn positions(&self) -> Box<dyn Iterator<Item = (u64, Range<LogPosition>)> + '_> {
        match self {
            Index::Dense(d) => Box::new(d.positions()),
            Index::Sparse(map) => Box::new(
                map.iter()
                    .map_while(|(&index, slot)| Some((index, slot.at.clone()?))),
            ),
        }
    }

    /// Whether the durable entries' records are not in log order.
    pub(crate) fn is_scattered(&self) -> bool {
        let mut previous: Option<LogPosition> = None;
        for (_, at) in self.positions() {
            if previous.is_some_and(|p| p > at.start) {
                return true;
            }
            previous = Some(at.start);
        }
        false
    }

    /// Drops the entries at and after `index`.
    pub(crate) fn truncate(&mut self, index: u64) {
        match self {
            Index::Dense(d) => d.truncate(index),
            Index::Sparse(map) => drop(map.split_off(&index)),
        }
    }

    /// Drops the entries up to `index` (inclusive).
    pub(crate) fn purge(&mut self, index: u64) {
        match self {
            Index::Dense(d) => d.purge(index),
            Index::Sparse(map) => match index.checked_add(1) {
                Some(next) => *map = map.split_off(&next),
                None => map.clear(),
            },
        }
        if let Index::Sparse(_) = self {
            self.compact();
        }
    }

    /// Appends entries not yet durable from `first` (after truncating there),
    /// each with its record, tagged `seq`.
    pub(crate) fn append(
        &mut self,
        first: u64,
        entries: impl IntoIterator<Item = (L, Arc<[u8]>)>,
        seq: u64,
    ) {
        self.truncate(first);
        if let Index::Dense(d) = self {
            if d.is_empty() || first == d.end() {
                d.append(first, entries, seq);
                return;
            }
        }
        let map = self.sparse();
        for ((leader, record), index) in entries.into_iter().zip(first..) {
            let pending = Some(Held { seq, record });
            map.insert(
                index,
                Slot {
                    leader,
                    at: None,
                    pending,
                },
            );
        }
    }

    /// The entry at `index`, appended with tag `seq`, is durable at `at` (if
    /// the index still holds it): see [`Dense::keep`]. (A sparse index keeps no
    /// durable record in memory.)
    pub(crate) fn keep(&mut self, index: u64, seq: u64, at: Range<LogPosition>, cache: usize) {
        match self {
            Index::Dense(d) => d.keep(index, seq, at, cache),
            Index::Sparse(map) => {
                if let Some(slot) = map.get_mut(&index) {
                    if slot.pending.as_ref().is_some_and(|held| held.seq == seq) {
                        slot.pending = None;
                        slot.at = Some(at);
                    }
                }
            }
        }
    }

    /// Replay of an entry record: drops the entries at and after `index`, then
    /// puts the entry, durable at `at`.
    pub(crate) fn put(&mut self, index: u64, leader: L, at: &Range<LogPosition>) {
        if let Index::Dense(d) = self {
            if d.is_empty() || index <= d.end() {
                d.put(index, leader, at);
                return;
            }
        }
        let map = self.sparse();
        drop(map.split_off(&index));
        map.insert(
            index,
            Slot {
                leader,
                at: Some(at.clone()),
                pending: None,
            },
        );
    }

    /// Replay of a rewrite's copy: the entry at `index` is at `at` now, the
    /// entries after it staying.
    pub(crate) fn put_moved(&mut self, index: u64, leader: L, at: &Range<LogPosition>) {
        if let Index::Dense(d) = self {
            if d.is_empty() || index == d.end() {
                d.put(index, leader, at);
                return;
            }
            if index >= d.first && index < d.durable_end() {
                d.put_moved(index, leader, at);
                return;
            }
        }
        self.sparse().insert(
            index,
            Slot {
                leader,
                at: Some(at.clone()),
                pending: None,
            },
        );
    }

    /// Each entry `(index, from, to)` that is still durable at `from` is at `to`
    /// now.
    pub(crate) fn moved(&mut self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]) {
        match self {
            Index::Dense(d) => d.moved(moves),
            Index::Sparse(map) => {
                for (index, from, to) in moves {
                    if let Some(slot) = map.get_mut(index) {
                        if slot.at.as_ref() == Some(from) {
                            slot.at = Some(to.clone());
                        }
                    }
                }
            }
        }
    }

    /// Makes the index dense again when its entries follow each other (the
    /// durable ones first), and gives back the room growth left over.
    pub(crate) fn compact(&mut self) {
        let map = match self {
            Index::Dense(d) => {
                d.compact();
                return;
            }
            Index::Sparse(map) => map,
        };
        if map
            .keys()
            .zip(map.keys().skip(1))
            .any(|(a, b)| a.checked_add(1) != Some(*b))
        {
            return;
        }
        let durable = map.values().take_while(|slot| slot.at.is_some()).count();
        if map
            .values()
            .skip(durable)
            .any(|slot| slot.pending.is_none())
        {
            return;
        }
        let mut dense = Dense::default();
        if let Some(&first) = map.keys().next() {
            dense.start_at(first);
        }
        for (k, (index, slot)) in std::mem::take(map).into_iter().enumerate() {
            dense.push_leader(index, slot.leader);
            match (slot.at, slot.pending) {
                (Some(at), _) if k < durable => dense.push_spot(index, &at),
                (_, Some(held)) => dense.held.push_back(held),
                _ => unreachable!("checked above"),
            }
            dense.len += 1;
        }
        dense.held_from = dense.end() - dense.held.len() as u64;
        dense.compact();
        *self = Index::Dense(dense);
    }

    /// The same index with each leader id mapped by `f` (once per run of a
    /// dense index).
    pub(crate) fn map_leaders<M, E>(
        &self,
        mut f: impl FnMut(u64, &L) -> Result<M, E>,
    ) -> Result<Index<M>, E> {
        Ok(match self {
            Index::Dense(d) => Index::Dense(d.map_leaders(f)?),
            Index::Sparse(map) => Index::Sparse(
                map.iter()
                    .map(|(&index, slot)| {
                        Ok((
                            index,
                            Slot {
                                leader: f(index, &slot.leader)?,
                                at: slot.at.clone(),
                                pending: slot.pending.clone(),
                            },
                        ))
                    })
                    .collect::<Result<_, E>>()?,
            ),
        })
    }
}
