//! Test-only pause points: the reader and the space reclaimer call [`at`] at
//! the steps a read and a rewrite are made of, and a test that installed a gate
//! for a log's directory and a point gets each arrival there, with the sender
//! that lets the paused task go on. Without a gate (every build but the crate's
//! unit tests, where the calls are compiled out) nothing waits.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};

/// Where a task pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// A read looked its entries up in the index (it holds their positions)
    /// and has read nothing of the files yet.
    ReadLookedUp,
    /// A read read one entry from the files.
    ReadEntry,
    /// A rewrite's copies are durable at the head of the log; the group's index
    /// still points at the old records.
    RewriteAppended,
    /// The group's index points at the copies; the old segments are still there.
    RewriteMoved,
    /// A deletion of the segments before a cut ran (its detail: the cut's
    /// segment). It keeps a segment a `DirReader` of the log still needs.
    Deleted,
}

/// A task paused at a point, with the point's detail: send (or drop) to let it
/// go on.
pub(crate) type Arrival = (Point, u64, oneshot::Sender<()>);

struct Gate {
    path: PathBuf,
    points: Vec<Point>,
    arrivals: mpsc::UnboundedSender<Arrival>,
}

static GATES: Mutex<Vec<Gate>> = Mutex::new(Vec::new());

/// From now on, tasks of the log at `path` arriving at one of `points` pause and
/// are handed to the receiver (until it is dropped or [`remove`] is called).
pub(crate) fn install(path: &Path, points: &[Point]) -> mpsc::UnboundedReceiver<Arrival> {
    let (arrivals, receiver) = mpsc::unbounded_channel();
    GATES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Gate {
            path: path.to_path_buf(),
            points: points.to_vec(),
            arrivals,
        });
    receiver
}

/// Tasks of the log at `path` no longer pause at `points`.
pub(crate) fn remove(path: &Path, points: &[Point]) {
    GATES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|gate| gate.path != path || !gate.points.iter().any(|p| points.contains(p)));
}

/// Pauses here while a test's gate for `path` and `point` holds the task.
pub(crate) async fn at(path: &Path, point: Point, detail: u64) {
    let gate = GATES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|gate| gate.path == path && gate.points.contains(&point))
        .map(|gate| gate.arrivals.clone());
    if let Some(arrivals) = gate {
        let (go, wait) = oneshot::channel();
        if arrivals.send((point, detail, go)).is_ok() {
            let _ = wait.await;
        }
    }
}
