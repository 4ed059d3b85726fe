//! The packet store the FIFO-based policies share: order kept, bytes counted, and removal of a
//! randomly chosen packet of a class from anywhere in the queue (push-out).

use super::Queued;
use crate::config::Buffer;
use crate::packet::Class;
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
}
