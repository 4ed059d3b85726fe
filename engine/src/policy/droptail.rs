//! DropTail: a FIFO that refuses arrivals when full, with a limit in packets or bytes.
//! The packet being serialized has left the buffer (ns-2's DropTail counts the same way).

use super::fifo::{Admission, Buffered, FifoPolicy};
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::params::Buffer;
use serde::Deserialize;

/// `{"kind": "droptail"}`: no parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropTailConfig {}

impl PolicyParams for DropTailConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        Ok(Box::new(droptail::<H>(env.buffer)))
    }
}

/// Admit what fits.
pub struct TailDrop;

pub type DropTail<H> = FifoPolicy<H, TailDrop>;

/// A DropTail queue with the given limit.
pub fn droptail<H>(limit: Option<Buffer>) -> DropTail<H> {
    FifoPolicy::with_rule(limit, TailDrop)
}

impl<H> Admission<H> for TailDrop {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, _now: u64, dropped: &mut Vec<Dropped<H>>) {
        if q.fits(pkt.info.len) {
            q.fifo.push(pkt);
        } else {
            dropped.push(Dropped::refused(pkt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketInfo;

    fn pkt(seq: u64, len: u32) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(len, 0, 0), arrival: 0, seq }
    }

    fn offer(q: &mut DropTail<u64>, seq: u64, len: u32) -> bool {
        let mut dropped = Vec::new();
        q.enqueue(pkt(seq, len), 0, &mut dropped);
        assert!(dropped.iter().all(|d| !d.is_eviction() && d.pkt.seq == seq));
        dropped.is_empty()
    }

    #[test]
    fn packet_limit_refuses_the_arrival_that_does_not_fit() {
        let mut q = droptail(Some(Buffer::Packets(3)));
        assert!((0..3).all(|i| offer(&mut q, i, 1500)));
        assert!(!offer(&mut q, 3, 40));
        assert_eq!((q.len_packets(), q.len_bytes()), (3, 4500));
        assert_eq!(q.dequeue(0).unwrap().seq, 0);
        assert!(offer(&mut q, 4, 40));
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(0).map(|p| p.seq)).collect();
        assert_eq!(order, vec![1, 2, 4]);
    }

    #[test]
    fn byte_limit_counts_exact_bytes() {
        let mut q = droptail(Some(Buffer::Bytes(3000)));
        assert!(offer(&mut q, 0, 1500));
        assert!(offer(&mut q, 1, 1500));
        assert!(!offer(&mut q, 2, 1));
        q.dequeue(0);
        assert!(!offer(&mut q, 3, 1501));
        assert!(offer(&mut q, 4, 1500));
        assert_eq!(q.len_bytes(), 3000);
    }

    #[test]
    fn unlimited_never_drops() {
        let mut q = droptail(None);
        assert!((0..10_000).all(|i| offer(&mut q, i, 1500)));
        assert_eq!(q.drain().len(), 10_000);
        assert_eq!((q.len_packets(), q.len_bytes()), (0, 0));
    }
}
