//! Waiting for a [`LogDir`](crate::LogDir)'s durable end to move, woken at most
//! once per interval while it keeps moving.
//!
//! Every commit moves the durable end, and a task parked on it is woken through
//! another thread: on a small machine that wake costs a lone appending task about
//! 10% of its appends/s (measured: a task that only awaited the watch channel took
//! a single appender to 0.87x-0.92x; one that looked once per millisecond while the
//! log was busy, to 1.00x). So a waiter that was woken less than an interval ago
//! sleeps out the rest of it and then looks, without asking to be woken; only when
//! the end has not moved since does it park on the channel again, so the first
//! commit after a quiet spell still wakes it at once. While the log is busy, what
//! it waits for arrives at most an interval (plus the timer's 1 ms tick) late.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::position::LogPosition;

/// A receiver of the durable end that coalesces wakes while the end keeps moving.
#[derive(Debug)]
pub(crate) struct DurableWatch {
    rx: watch::Receiver<LogPosition>,
    /// Zero: woken by every move.
    interval: Duration,
    /// When the end was last seen to move.
    last_moved: Option<Instant>,
}

/// The channel's sender is gone: the log is dropped.
#[derive(Debug)]
pub(crate) struct Closed;

impl DurableWatch {
    pub(crate) fn new(rx: watch::Receiver<LogPosition>, interval: Duration) -> DurableWatch {
        DurableWatch {
            rx,
            interval,
            last_moved: None,
        }
    }

    pub(crate) fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// The durable end now, marked seen.
    pub(crate) fn current(&mut self) -> LogPosition {
        *self.rx.borrow_and_update()
    }

    /// The durable end now, without marking it seen.
    pub(crate) fn peek(&self) -> LogPosition {
        *self.rx.borrow()
    }

    /// Returns once the end moved past what was last seen (by
    /// [`current`](Self::current) or an earlier return of this), marking it seen:
    /// read the end after this returns.
    /// Cancel-safe: dropped and called again, it waits for the same deadline.
    pub(crate) async fn moved(&mut self) -> Result<(), Closed> {
        if let Some(last) = self.last_moved {
            let deadline = last + self.interval;
            if !self.interval.is_zero() && Instant::now() < deadline {
                tokio::time::sleep_until(deadline).await;
                if self.rx.has_changed().map_err(|_| Closed)? {
                    // Seen now: the caller reads the end after this returns.
                    self.rx.borrow_and_update();
                    self.last_moved = Some(Instant::now());
                    return Ok(());
                }
            }
        }
        self.rx.changed().await.map_err(|_| Closed)?;
        self.last_moved = Some(Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::watch;
    use tokio::time::Instant;

    use super::{DurableWatch, LogPosition};

    const INTERVAL: Duration = Duration::from_millis(100);

    fn at(offset: u64) -> LogPosition {
        LogPosition::new(1, offset)
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_end_is_looked_at_once_per_interval_without_a_wake() {
        let (tx, rx) = watch::channel(at(0));
        let mut end = DurableWatch::new(rx, INTERVAL);
        tx.send_replace(at(1));
        let first = Instant::now();
        end.moved().await.unwrap();
        assert_eq!(end.peek(), at(1));
        // Moves right after the first wake wait out the interval...
        tx.send_replace(at(2));
        tx.send_replace(at(3));
        end.moved().await.unwrap();
        assert!(
            first.elapsed() >= INTERVAL,
            "woke after {:?}",
            first.elapsed()
        );
        assert_eq!(end.peek(), at(3));
        // ...and so does the next, counted from the look that found them.
        let second = Instant::now();
        tx.send_replace(at(4));
        end.moved().await.unwrap();
        assert!(second.elapsed() >= INTERVAL);
        assert_eq!(end.peek(), at(4));
        // Once it stops moving, the wait parks until the next move.
        let quiet = tokio::time::timeout(INTERVAL * 5, end.moved()).await;
        assert!(quiet.is_err(), "a quiet end was reported as moved");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_move_after_a_quiet_interval_wakes_at_once() {
        let (tx, rx) = watch::channel(at(0));
        let mut end = DurableWatch::new(rx, INTERVAL);
        tx.send_replace(at(1));
        end.moved().await.unwrap();
        // Nothing moves within the interval: it parks on the channel after it.
        let sender = tokio::spawn(async move {
            tokio::time::sleep(INTERVAL * 3).await;
            let sent = Instant::now();
            tx.send_replace(at(2));
            (tx, sent)
        });
        end.moved().await.unwrap();
        let woke = Instant::now();
        let (_tx, sent) = sender.await.unwrap();
        assert_eq!(woke, sent, "a quiet log's next commit was held back");
        assert_eq!(end.peek(), at(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_interval_wakes_on_every_move() {
        let (tx, rx) = watch::channel(at(0));
        let mut end = DurableWatch::new(rx, Duration::ZERO);
        let started = Instant::now();
        for offset in 1..5 {
            tx.send_replace(at(offset));
            end.moved().await.unwrap();
            assert_eq!(end.peek(), at(offset));
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_sender_ends_the_wait() {
        let (tx, rx) = watch::channel(at(0));
        let mut end = DurableWatch::new(rx, INTERVAL);
        tx.send_replace(at(1));
        end.moved().await.unwrap();
        drop(tx);
        assert!(end.moved().await.is_err());
    }
}
