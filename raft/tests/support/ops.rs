//! Random storage operations as a Raft node makes them, what a store must hold
//! after them, and what it may hold when one of them was cut short (the crash
//! and power-cut tests).

use std::collections::BTreeMap;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{LogId, RaftLogReader, Vote};
use walcodec_raft::LogStore;

use super::{entry, is_genuine, log_id, Entry, Rng, TypeConfig};

/// What a store holds, as far as the tests check it (the committed id may lag:
/// it is written with the next write).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    pub entries: BTreeMap<u64, LogId<u64>>,
    pub purged: Option<LogId<u64>>,
    pub vote: Option<Vote<u64>>,
}

impl Model {
    pub fn last(&self) -> Option<LogId<u64>> {
        self.entries.values().last().copied().or(self.purged)
    }

    pub fn apply(&mut self, op: &Op) {
        match *op {
            Op::Append { term, first, n } => {
                for i in first..first + n {
                    self.entries.insert(i, log_id(term, i));
                }
            }
            Op::Vote { term, node } => self.vote = Some(Vote::new(term, node)),
            Op::Truncate { index } => drop(self.entries.split_off(&index)),
            Op::Purge { term, index } => {
                self.entries = self.entries.split_off(&(index + 1));
                self.purged = Some(log_id(term, index));
            }
            Op::Committed { .. } => {}
        }
    }

    /// The states a store may be in after `in_flight` was cut short anywhere:
    /// not begun, or done (an append: any prefix of its entries).
    pub fn allowed(&self, in_flight: Option<Op>) -> Vec<Model> {
        let mut states = vec![self.clone()];
        match in_flight {
            Some(Op::Append { term, first, n }) => {
                for k in 1..=n {
                    let mut m = self.clone();
                    m.apply(&Op::Append { term, first, n: k });
                    states.push(m);
                }
            }
            Some(op) => {
                let mut m = self.clone();
                m.apply(&op);
                states.push(m);
            }
            None => {}
        }
        states
    }

    /// Reads what `store` holds; every entry must be the one appended for its id.
    pub async fn read(store: &mut LogStore<TypeConfig>) -> Model {
        let state = store.get_log_state().await.unwrap();
        let entries: Vec<Entry> = store.try_get_log_entries(..).await.unwrap();
        assert!(entries.iter().all(is_genuine), "an entry read back changed");
        let model = Model {
            entries: entries.iter().map(|e| (e.log_id.index, e.log_id)).collect(),
            purged: state.last_purged_log_id,
            vote: store.read_vote().await.unwrap(),
        };
        assert_eq!(state.last_log_id, model.last(), "log state vs entries");
        model
    }
}

/// One storage call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Append { term: u64, first: u64, n: u64 },
    Vote { term: u64, node: u64 },
    Truncate { index: u64 },
    Purge { term: u64, index: u64 },
    Committed { term: u64, index: u64 },
}

impl Op {
    /// As a line of words (the crash child prints it).
    pub fn line(&self) -> String {
        match *self {
            Op::Append { term, first, n } => format!("append {term} {first} {n}"),
            Op::Vote { term, node } => format!("vote {term} {node}"),
            Op::Truncate { index } => format!("truncate {index}"),
            Op::Purge { term, index } => format!("purge {term} {index}"),
            Op::Committed { term, index } => format!("committed {term} {index}"),
        }
    }

    /// Back from [`line`](Self::line)'s words.
    pub fn parse(words: &[&str]) -> Option<Op> {
        let n = |i: usize| words.get(i)?.parse::<u64>().ok();
        Some(match *words.first()? {
            "append" => Op::Append {
                term: n(1)?,
                first: n(2)?,
                n: n(3)?,
            },
            "vote" => Op::Vote {
                term: n(1)?,
                node: n(2)?,
            },
            "truncate" => Op::Truncate { index: n(1)? },
            "purge" => Op::Purge {
                term: n(1)?,
                index: n(2)?,
            },
            "committed" => Op::Committed {
                term: n(1)?,
                index: n(2)?,
            },
            _ => return None,
        })
    }

    /// Makes the call on `store`, whose contents `model` describes; returns once
    /// it returned (an append: once its flush callback fired).
    pub async fn execute(&self, store: &mut LogStore<TypeConfig>, model: &Model) {
        match *self {
            Op::Append { term, first, n } => store
                .blocking_append((first..first + n).map(|i| entry(term, i)))
                .await
                .unwrap(),
            Op::Vote { term, node } => store.save_vote(&Vote::new(term, node)).await.unwrap(),
            Op::Truncate { index } => store.truncate(model.entries[&index]).await.unwrap(),
            Op::Purge { term, index } => store.purge(log_id(term, index)).await.unwrap(),
            Op::Committed { term, index } => store
                .save_committed(Some(log_id(term, index)))
                .await
                .unwrap(),
        }
    }
}

/// Draws operations a node could make: appends after the last entry (sometimes
/// in a new term), votes that never go back, truncations of any entry, purges of
/// an entry or past the last one, committed ids that only grow.
#[derive(Debug)]
pub struct Workload {
    rng: Rng,
    term: u64,
    committed: Option<LogId<u64>>,
}

impl Workload {
    /// Continues from what `model` holds.
    pub fn new(seed: u64, model: &Model) -> Workload {
        let term = model.last().map_or(1, |l| l.leader_id.term);
        Workload {
            rng: Rng::new(seed),
            term: term.max(model.vote.map_or(1, |v| v.leader_id.term)),
            committed: None,
        }
    }

    pub fn next(&mut self, model: &Model) -> Op {
        let rng = &mut self.rng;
        loop {
            let next = model.last().map_or(0, |l| l.index + 1);
            let floor = model.purged.map_or(0, |p| p.index + 1);
            return match rng.below(100) {
                0..=54 => {
                    if rng.below(10) == 0 {
                        self.term += 1;
                    }
                    Op::Append {
                        term: self.term,
                        first: next,
                        n: 1 + rng.below(8),
                    }
                }
                55..=66 => {
                    let current = model.vote.map_or(0, |v| v.leader_id.term);
                    self.term = self.term.max(current + rng.below(2));
                    Op::Vote {
                        term: self.term,
                        node: 1,
                    }
                }
                67..=78 if next > floor => Op::Truncate {
                    index: floor + rng.below(next - floor),
                },
                79..=88 => {
                    if rng.below(5) == 0 || next == floor {
                        // Past the last entry, as after installing a snapshot.
                        self.term += 1;
                        Op::Purge {
                            term: self.term,
                            index: next + rng.below(3),
                        }
                    } else {
                        let index = floor + rng.below(next - floor);
                        Op::Purge {
                            term: model.entries[&index].leader_id.term,
                            index,
                        }
                    }
                }
                _ => match model.entries.values().last() {
                    Some(&last) if self.committed.is_none_or(|c| c < last) => {
                        self.committed = Some(last);
                        Op::Committed {
                            term: last.leader_id.term,
                            index: last.index,
                        }
                    }
                    _ => continue,
                },
            };
        }
    }
}

/// What a store's calls left at step `cut` of a run: the model of the calls
/// finished by then, and the call in flight (begun before it, finished after).
/// Each call is `(step it began at, step it finished at, the call)`.
pub fn expected_at(calls: &[(usize, usize, Op)], cut: usize) -> (Model, Option<Op>) {
    let mut model = Model::default();
    let mut in_flight = None;
    for &(begin, done, op) in calls {
        if done <= cut {
            model.apply(&op);
        } else if begin < cut {
            in_flight = Some(op);
        }
    }
    (model, in_flight)
}
