//! The FIFO the single-queue policies share.
//!
//! [`Fifo`] is the packet store: order kept, bytes counted, and removal of a randomly chosen
//! packet of a class from anywhere in the queue (push-out). [`FifoPolicy`] is the policy built on
//! it: the FIFO, the buffer limit and the time the queue went idle ([`Buffered`]), with dequeue,
//! length and drain done once for all; a policy supplies only its [`Admission`] rule, what to
//! do with an arrival (queue it, refuse it, evict others for it), plus what it wants to know of
//! departures.

use super::{Dropped, QueuePolicy, Queued};
use crate::packet::Class;
use crate::params::{Buffer, Unit};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

pub struct Fifo<H> {
    queue: VecDeque<Queued<H>>,
    bytes: usize,
}

impl<H> Fifo<H> {
    pub fn new() -> Fifo<H> {
        Fifo { queue: VecDeque::new(), bytes: 0 }
    }

    /// Would a packet of `len` bytes fit under `limit` now?
    pub fn fits(&self, limit: Option<Buffer>, len: usize) -> bool {
        match limit {
            None => true,
            Some(Buffer::Packets(n)) => (self.queue.len() as u64) < n,
            Some(Buffer::Bytes(n)) => (self.bytes + len) as u64 <= n,
        }
    }

    pub fn push(&mut self, pkt: Queued<H>) {
        self.bytes += pkt.info.len as usize;
        self.queue.push_back(pkt);
    }

    pub fn pop(&mut self) -> Option<Queued<H>> {
        let pkt = self.queue.pop_front()?;
        self.bytes -= pkt.info.len as usize;
        Some(pkt)
    }

    pub fn front(&self) -> Option<&Queued<H>> {
        self.queue.front()
    }

    pub fn count_where(&self, pred: impl Fn(Class) -> bool) -> usize {
        self.queue.iter().filter(|p| pred(p.info.class)).count()
    }

    pub fn bytes_where(&self, pred: impl Fn(Class) -> bool) -> usize {
        self.queue.iter().filter(|p| pred(p.info.class)).map(|p| p.info.len as usize).sum()
    }

    /// Remove one packet chosen uniformly among those whose class matches; the others keep
    /// their order (CATNIP section III-C).
    pub fn remove_random_where(&mut self, pred: impl Fn(Class) -> bool, rng: &mut ChaCha8Rng) -> Option<Queued<H>> {
        let n = self.count_where(&pred);
        if n == 0 {
            return None;
        }
        let k = rng.gen_range(0..n);
        let index = self.queue.iter().enumerate().filter(|(_, p)| pred(p.info.class)).nth(k)?.0;
        let pkt = self.queue.remove(index)?;
        self.bytes -= pkt.info.len as usize;
        Some(pkt)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn drain(&mut self) -> Vec<Queued<H>> {
        self.bytes = 0;
        self.queue.drain(..).collect()
    }

    /// The queue's size in `unit`.
    pub fn size(&self, unit: Unit) -> usize {
        match unit {
            Unit::Packets => self.len(),
            Unit::Bytes => self.bytes,
        }
    }

    /// The size in `unit` of the packets whose class matches.
    pub fn size_where(&self, unit: Unit, pred: impl Fn(Class) -> bool) -> usize {
        match unit {
            Unit::Packets => self.count_where(pred),
            Unit::Bytes => self.bytes_where(pred),
        }
    }
}

impl<H> Default for Fifo<H> {
    fn default() -> Self {
        Fifo::new()
    }
}

/// A FIFO policy's queue as its admission rule sees it.
pub struct Buffered<H> {
    pub fifo: Fifo<H>,
    pub limit: Option<Buffer>,
    /// When the queue last became empty (ns); None once an arrival is queued. Initially 0.
    idle_since: Option<u64>,
}

impl<H> Buffered<H> {
    pub fn new(limit: Option<Buffer>) -> Buffered<H> {
        Buffered { fifo: Fifo::new(), limit, idle_since: Some(0) }
    }

    /// Would a packet of `len` bytes fit under the limit now?
    pub fn fits(&self, len: u32) -> bool {
        self.fifo.fits(self.limit, len as usize)
    }

    /// Since when the queue has been empty, if it is (RED's idle-time correction).
    pub fn idle_since(&self) -> Option<u64> {
        self.idle_since.filter(|_| self.fifo.is_empty())
    }

    #[cfg(test)]
    pub fn set_busy(&mut self) {
        self.idle_since = None;
    }
}

/// A FIFO policy's own part: the decision on each arrival.
pub trait Admission<H> {
    /// Queue `pkt` (`q.fifo.push`), or refuse it, or evict queued packets for it; every packet
    /// removed goes onto `dropped`.
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, now: u64, dropped: &mut Vec<Dropped<H>>);
    /// `pkt` has just left the queue (for the transmitter).
    fn departed(&mut self, _pkt: &Queued<H>) {}
    /// The queue has been emptied at shutdown.
    fn cleared(&mut self) {}
}

/// A FIFO plus an admission rule.
pub struct FifoPolicy<H, A> {
    pub q: Buffered<H>,
    pub rule: A,
}

impl<H, A: Admission<H>> FifoPolicy<H, A> {
    pub fn with_rule(limit: Option<Buffer>, rule: A) -> FifoPolicy<H, A> {
        FifoPolicy { q: Buffered::new(limit), rule }
    }
}

impl<H, A: Admission<H>> QueuePolicy<H> for FifoPolicy<H, A> {
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        self.rule.admit(pkt, &mut self.q, now, dropped);
        if !self.q.fifo.is_empty() {
            self.q.idle_since = None;
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Queued<H>> {
        let pkt = self.q.fifo.pop()?;
        self.rule.departed(&pkt);
        if self.q.fifo.is_empty() {
            self.q.idle_since = Some(now);
        }
        Some(pkt)
    }

    fn len_packets(&self) -> usize {
        self.q.fifo.len()
    }

    fn len_bytes(&self) -> usize {
        self.q.fifo.bytes()
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.rule.cleared();
        self.q.fifo.drain()
    }
}
