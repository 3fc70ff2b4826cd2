//! One priority level's seats and queues. A request takes a free seat, or
//! (`limitResponse: Queue`) waits in one of the level's queues: its flow
//! (schema and distinguisher) is hashed to a hand of `handSize` queues
//! (shuffle sharding, as upstream's `shufflesharding.Dealer`) and it joins
//! the shortest of them, unless that one already holds `queueLengthLimit`
//! requests. A freed seat goes to the head of the next non-empty queue in
//! turn (round robin over queues: a simplification of upstream's fair
//! queuing, which orders by virtual finish time). With `Reject` a request
//! that finds no seat is refused at once.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

/// How a level answers a request it has no seat for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitResponse {
    Reject,
    Queue {
        queues: usize,
        hand_size: usize,
        queue_length_limit: usize,
    },
}

/// Why a request was refused (upstream's `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No seat and a Reject level, or every queue of the hand full.
    QueueFull,
    /// Waited in its queue for longer than the queue wait limit.
    TimeOut,
    /// The level went away while the request waited.
    Cancelled,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::QueueFull => "queue-full",
            Refused::TimeOut => "time-out",
            Refused::Cancelled => "cancelled",
        }
    }
}

struct Waiter {
    id: u64,
    tx: oneshot::Sender<()>,
}

struct State {
    seats: usize,
    executing: usize,
    response: LimitResponse,
    queues: Vec<VecDeque<Waiter>>,
    /// The queue the next freed seat looks at first.
    next: usize,
    next_id: u64,
}

/// A limited priority level's dispatch state.
pub struct Level {
    state: Mutex<State>,
}

/// A seat held: given back (and passed to the next waiting request) when
/// dropped.
pub struct Seat {
    level: Arc<Level>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut s = self.level.state.lock().expect("level lock");
        s.executing = s.executing.saturating_sub(1);
        s.dispatch();
    }
}

impl State {
    /// Hands free seats to waiting requests, round robin over queues.
    fn dispatch(&mut self) {
        while self.executing < self.seats {
            let n = self.queues.len();
            let Some(q) = (0..n)
                .map(|i| (self.next + i) % n)
                .find(|q| !self.queues[*q].is_empty())
            else {
                return;
            };
            self.next = (q + 1) % n;
            let w = self.queues[q].pop_front().expect("not empty");
            // A waiter whose request went away frees its place.
            if w.tx.send(()).is_ok() {
                self.executing += 1;
            }
        }
    }

    fn waiting(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }
}

/// The queues a flow may use: `hand` distinct ones of `deck`, dealt from
/// the flow's hash (upstream's `Dealer.Deal`).
pub fn deal(mut hash: u64, deck: usize, hand: usize) -> Vec<usize> {
    let mut cards: Vec<usize> = Vec::with_capacity(hand);
    for i in 0..hand.min(deck) {
        let left = (deck - i) as u64;
        let mut card = (hash % left) as usize;
        hash /= left;
        let mut taken = cards.clone();
        taken.sort_unstable();
        for t in taken {
            if card >= t {
                card += 1;
            }
        }
        cards.push(card);
    }
    cards
}

/// A flow's hash: its schema's name and distinguisher.
pub fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (schema, distinguisher).hash(&mut h);
    h.finish()
}

impl Level {
    pub fn new(seats: usize, response: LimitResponse) -> Arc<Level> {
        let level = Arc::new(Level {
            state: Mutex::new(State {
                seats,
                executing: 0,
                response,
                queues: Vec::new(),
                next: 0,
                next_id: 0,
            }),
        });
        level.configure(seats, response);
        level
    }

    /// A new seat count or limit response: waiting requests stay queued
    /// (spread over the new queues), and any seats now free are handed out.
    pub fn configure(&self, seats: usize, response: LimitResponse) {
        let mut s = self.state.lock().expect("level lock");
        s.seats = seats;
        s.response = response;
        let want = match response {
            LimitResponse::Queue { queues, .. } => queues.max(1),
            LimitResponse::Reject => 0,
        };
        if s.queues.len() != want {
            let waiting: Vec<Waiter> = s.queues.iter_mut().flat_map(|q| q.drain(..)).collect();
            s.queues = (0..want).map(|_| VecDeque::new()).collect();
            s.next = 0;
            for (i, w) in waiting.into_iter().enumerate() {
                match want {
                    // Now Reject: the waiters are refused (their senders drop).
                    0 => drop(w),
                    n => s.queues[i % n].push_back(w),
                }
            }
        }
        s.dispatch();
    }

    /// (seats, executing, waiting), for metrics and tests.
    pub fn counts(&self) -> (usize, usize, usize) {
        let s = self.state.lock().expect("level lock");
        (s.seats, s.executing, s.waiting())
    }

    /// A seat for a request of the flow hashed to `flow`: at once if one is
    /// free, else after waiting in its queue for at most `max_wait`.
    pub async fn acquire(self: &Arc<Self>, flow: u64, max_wait: Duration) -> Result<Seat, Refused> {
        let (id, rx) = {
            let mut s = self.state.lock().expect("level lock");
            if s.executing < s.seats && s.waiting() == 0 {
                s.executing += 1;
                return Ok(Seat {
                    level: self.clone(),
                });
            }
            let LimitResponse::Queue {
                queues,
                hand_size,
                queue_length_limit,
            } = s.response
            else {
                return Err(Refused::QueueFull);
            };
            let hand = deal(flow, queues.max(1), hand_size.max(1));
            let q = hand
                .into_iter()
                .min_by_key(|q| s.queues[*q].len())
                .expect("a hand of at least one queue");
            if s.queues[q].len() >= queue_length_limit {
                return Err(Refused::QueueFull);
            }
            let (tx, rx) = oneshot::channel();
            s.next_id += 1;
            let id = s.next_id;
            s.queues[q].push_back(Waiter { id, tx });
            // Seats may be free while others wait (after a reconfigure).
            s.dispatch();
            (id, rx)
        };
        match tokio::time::timeout(max_wait, rx).await {
            Ok(Ok(())) => Ok(Seat {
                level: self.clone(),
            }),
            Ok(Err(_)) => Err(Refused::Cancelled),
            Err(_) => {
                let mut s = self.state.lock().expect("level lock");
                for q in s.queues.iter_mut() {
                    if let Some(i) = q.iter().position(|w| w.id == id) {
                        q.remove(i);
                        return Err(Refused::TimeOut);
                    }
                }
                // Dispatched just as the wait ended: the seat is ours.
                Ok(Seat {
                    level: self.clone(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deals_distinct_queues_of_the_deck() {
        for hash in [0u64, 1, 12345, u64::MAX, flow_hash("fs", "alice")] {
            let mut hand = deal(hash, 8, 3);
            assert_eq!(hand.len(), 3);
            assert!(hand.iter().all(|q| *q < 8));
            hand.sort_unstable();
            hand.dedup();
            assert_eq!(hand.len(), 3, "{hash}");
        }
        assert_eq!(deal(7, 1, 1), [0]);
        assert_eq!(
            deal(flow_hash("a", "b"), 64, 8),
            deal(flow_hash("a", "b"), 64, 8)
        );
    }

    #[tokio::test]
    async fn reject_level_refuses_past_its_seats() {
        let level = Level::new(1, LimitResponse::Reject);
        let seat = level.acquire(1, Duration::from_secs(1)).await.unwrap();
        assert_eq!(
            level.acquire(2, Duration::from_secs(1)).await.err(),
            Some(Refused::QueueFull)
        );
        drop(seat);
        assert!(level.acquire(2, Duration::from_secs(1)).await.is_ok());
        assert_eq!(level.counts(), (1, 0, 0));
    }

    #[tokio::test]
    async fn queued_requests_get_freed_seats_in_turn() {
        let level = Level::new(
            1,
            LimitResponse::Queue {
                queues: 2,
                hand_size: 1,
                queue_length_limit: 1,
            },
        );
        let seat = level.acquire(0, Duration::from_secs(5)).await.unwrap();
        // Hashes 0 and 1 deal queues 0 and 1 of two.
        let l = level.clone();
        let first = tokio::spawn(async move { l.acquire(0, Duration::from_secs(30)).await });
        let l = level.clone();
        let second = tokio::spawn(async move { l.acquire(1, Duration::from_secs(30)).await });
        while level.counts().2 < 2 {
            tokio::task::yield_now().await;
        }
        // Queue 0 holds one already: a third of its flow is refused.
        assert_eq!(
            level.acquire(0, Duration::from_secs(5)).await.err(),
            Some(Refused::QueueFull)
        );
        drop(seat);
        let s1 = first.await.unwrap().unwrap();
        assert_eq!(level.counts(), (1, 1, 1));
        drop(s1);
        let s2 = second.await.unwrap().unwrap();
        drop(s2);
        assert_eq!(level.counts(), (1, 0, 0));
    }

    #[tokio::test]
    async fn a_wait_times_out_and_leaves_its_queue() {
        let level = Level::new(
            1,
            LimitResponse::Queue {
                queues: 1,
                hand_size: 1,
                queue_length_limit: 5,
            },
        );
        let _seat = level.acquire(0, Duration::from_secs(5)).await.unwrap();
        let r = level.acquire(0, Duration::from_millis(20)).await;
        assert_eq!(r.err(), Some(Refused::TimeOut));
        assert_eq!(level.counts(), (1, 1, 0));
    }

    #[tokio::test]
    async fn more_seats_release_waiters() {
        let level = Level::new(
            0,
            LimitResponse::Queue {
                queues: 4,
                hand_size: 2,
                queue_length_limit: 5,
            },
        );
        let l = level.clone();
        let waiting = tokio::spawn(async move { l.acquire(9, Duration::from_secs(30)).await });
        while level.counts().2 < 1 {
            tokio::task::yield_now().await;
        }
        level.configure(1, LimitResponse::Reject);
        // Reconfigured to Reject: the waiter was refused, not served.
        assert!(waiting.await.unwrap().is_err());
        let l = level.clone();
        level.configure(
            0,
            LimitResponse::Queue {
                queues: 4,
                hand_size: 2,
                queue_length_limit: 5,
            },
        );
        let waiting = tokio::spawn(async move { l.acquire(9, Duration::from_secs(30)).await });
        while level.counts().2 < 1 {
            tokio::task::yield_now().await;
        }
        level.configure(
            1,
            LimitResponse::Queue {
                queues: 4,
                hand_size: 2,
                queue_length_limit: 5,
            },
        );
        assert!(waiting.await.unwrap().is_ok());
    }
}
