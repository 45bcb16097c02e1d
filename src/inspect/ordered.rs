//! Work on numbered ranges run by a few threads, its output taken in range order.
//!
//! The split reads (`parallel.rs`) cut a log into ranges that threads
//! read at once, while the calling thread prints or merges what each range found,
//! range after range. A thread starts a range only while it is at most `window`
//! ranges ahead of the one being taken, so what waits to be taken stays bounded
//! whatever the log's length.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

/// Sends one message of a range; false once the run stops.
pub(crate) type Sender<'a, M> = dyn FnMut(M) -> bool + 'a;

/// The work on one range: its index, and where to send its messages.
pub(crate) type Work<'a, M> = dyn Fn(usize, &mut Sender<'_, M>) + Sync + 'a;

/// Ranges handed out and ranges taken.
struct Progress {
    next: usize,
    taken: usize,
}

/// Runs `work(index, send)` for every range `0..count` on `threads` threads, and
/// `take(index, receiver)` on the calling thread for each range in order, with what
/// that range's `work` sent. `send` returns false once the run stops (a `take` said
/// so), and `work` should then return. `take` returns whether to go on; after a
/// false, no range is started and the rest are not taken.
pub(crate) fn in_order<M: Send>(
    count: usize,
    threads: usize,
    window: usize,
    work: &Work<'_, M>,
    take: &mut dyn FnMut(usize, &mpsc::Receiver<M>) -> bool,
) {
    let window = window.max(1);
    let progress = Mutex::new(Progress { next: 0, taken: 0 });
    let moved = Condvar::new();
    let stop = AtomicBool::new(false);
    let channels: Vec<_> = (0..count).map(|_| mpsc::channel()).collect();
    let senders: Vec<_> = channels.iter().map(|(s, _)| s.clone()).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, count.max(1)) {
            let (progress, moved, stop, senders) = (&progress, &moved, &stop, &senders);
            scope.spawn(move || loop {
                let index = {
                    let mut state = progress.lock().unwrap_or_else(|p| p.into_inner());
                    while state.next >= state.taken + window && !stop.load(Ordering::Relaxed) {
                        state = moved.wait(state).unwrap_or_else(|p| p.into_inner());
                    }
                    if stop.load(Ordering::Relaxed) || state.next >= count {
                        return;
                    }
                    state.next += 1;
                    state.next - 1
                };
                let sender = &senders[index];
                work(index, &mut |message| {
                    !stop.load(Ordering::Relaxed) && sender.send(message).is_ok()
                });
            });
        }
        for (index, (_, receiver)) in channels.iter().enumerate() {
            let go_on = take(index, receiver);
            let mut state = progress.lock().unwrap_or_else(|p| p.into_inner());
            if !go_on {
                stop.store(true, Ordering::Relaxed);
                moved.notify_all();
                break;
            }
            state.taken = index + 1;
            moved.notify_all();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn takes_every_range_in_order_whatever_the_threads() {
        for threads in [1, 2, 5] {
            let mut seen = Vec::new();
            in_order(
                20,
                threads,
                3,
                &|index, send| {
                    for part in 0..3 {
                        send((index, part));
                    }
                },
                &mut |index, receiver| {
                    for _ in 0..3 {
                        seen.push(receiver.recv().unwrap());
                    }
                    assert!(seen.last().unwrap().0 == index);
                    true
                },
            );
            let expected: Vec<_> = (0..20).flat_map(|i| (0..3).map(move |p| (i, p))).collect();
            assert_eq!(seen, expected, "{threads} threads");
        }
    }

    #[test]
    fn never_runs_more_than_the_window_ahead() {
        let started = AtomicUsize::new(0);
        let mut most_ahead = 0;
        in_order(
            50,
            4,
            2,
            &|_, send| {
                started.fetch_add(1, Ordering::SeqCst);
                send(());
            },
            &mut |index, receiver| {
                receiver.recv().unwrap();
                // Ranges started beyond the one taken: at most the window.
                most_ahead = most_ahead.max(started.load(Ordering::SeqCst) - index);
                true
            },
        );
        assert!(most_ahead <= 2, "{most_ahead} ranges started ahead");
        assert_eq!(started.load(Ordering::SeqCst), 50);
    }

    #[test]
    fn a_stop_starts_no_more_ranges() {
        let started = AtomicUsize::new(0);
        let mut taken = 0;
        in_order(
            100,
            2,
            2,
            &|_, send| {
                started.fetch_add(1, Ordering::SeqCst);
                send(());
            },
            &mut |index, receiver| {
                receiver.recv().unwrap();
                taken += 1;
                index < 4
            },
        );
        assert_eq!(taken, 5);
        assert!(started.load(Ordering::SeqCst) <= 5 + 2);
    }
}
