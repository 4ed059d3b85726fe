//! CATNIP-Good and CATNIP-Bad (CATNIP section III-C): DropTail, except that an arrival of the
//! favoured class finding the buffer full pushes out a randomly chosen queued packet of the
//! other class; the remaining packets keep their order. With no such packet queued, the
//! arrival is dropped.
//!
//! CATNIP-Good favours high priority (AF11): low-priority (anything not AF11) packets are
//! evicted for it. CATNIP-Bad is the mirror image, the worst case of section III-C: a
//! low-priority arrival evicts a high-priority packet.

use super::fifo::{Admission, Buffered, Fifo, FifoPolicy};
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::packet::Class;
use crate::params::Buffer;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// `{"kind": "catnip_good"}`: no parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatnipGoodConfig {}

/// `{"kind": "catnip_bad"}`: no parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatnipBadConfig {}

impl PolicyParams for CatnipGoodConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        Ok(Box::new(PushOut::<H>::new(env.buffer, true, env.seed)))
    }
}

impl PolicyParams for CatnipBadConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        Ok(Box::new(PushOut::<H>::new(env.buffer, false, env.seed)))
    }
}

pub fn is_high(class: Class) -> bool {
    class == Class::High
}

pub fn is_low(class: Class) -> bool {
    class != Class::High
}

/// The push-out rule.
pub struct PushOutRule {
    /// True: CATNIP-Good (protect high priority); false: CATNIP-Bad.
    protect_high: bool,
    rng: ChaCha8Rng,
}

pub type PushOut<H> = FifoPolicy<H, PushOutRule>;

impl<H> PushOut<H> {
    pub fn new(limit: Option<Buffer>, protect_high: bool, seed: u64) -> PushOut<H> {
        FifoPolicy::with_rule(limit, PushOutRule { protect_high, rng: ChaCha8Rng::seed_from_u64(seed) })
    }
}

/// Make room for `pkt` by evicting random packets of the `victim` class, if enough of them are
/// queued; otherwise refuse it. Shared with CATNIP-RED.
pub fn push_out<H>(
    fifo: &mut Fifo<H>,
    limit: Option<Buffer>,
    pkt: Queued<H>,
    victim: fn(Class) -> bool,
    rng: &mut ChaCha8Rng,
    dropped: &mut Vec<Dropped<H>>,
) {
    let len = pkt.info.len as usize;
    if fifo.fits(limit, len) {
        fifo.push(pkt);
        return;
    }
    let room = match limit {
        None => true,
        Some(Buffer::Packets(_)) => fifo.count_where(victim) > 0,
        Some(Buffer::Bytes(n)) => (fifo.bytes() - fifo.bytes_where(victim) + len) as u64 <= n,
    };
    if !room {
        dropped.push(Dropped::refused(pkt));
        return;
    }
    while !fifo.fits(limit, len) {
        let out = fifo.remove_random_where(victim, rng).expect("room was checked");
        dropped.push(Dropped::evicted(out));
    }
    fifo.push(pkt);
}

impl<H> Admission<H> for PushOutRule {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, _now: u64, dropped: &mut Vec<Dropped<H>>) {
        if q.fits(pkt.info.len) {
            q.fifo.push(pkt);
            return;
        }
        let favoured = if self.protect_high { is_high(pkt.info.class) } else { is_low(pkt.info.class) };
        if !favoured {
            dropped.push(Dropped::refused(pkt));
            return;
        }
        let victim = if self.protect_high { is_low } else { is_high };
        push_out(&mut q.fifo, q.limit, pkt, victim, &mut self.rng, dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12};

    fn pkt(seq: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(1000, dscp, 0), arrival: 0, seq }
    }

    fn offer(q: &mut PushOut<u64>, seq: u64, dscp: u8) -> Vec<(u64, bool)> {
        let mut dropped = Vec::new();
        q.enqueue(pkt(seq, dscp), 0, &mut dropped);
        dropped.iter().map(|d| (d.pkt.seq, d.is_eviction())).collect()
    }

    fn order(q: &mut PushOut<u64>) -> Vec<u64> {
        std::iter::from_fn(|| q.dequeue(0).map(|p| p.seq)).collect()
    }

    #[test]
    fn good_high_arrival_evicts_one_random_low_and_keeps_order() {
        let mut q = PushOut::new(Some(Buffer::Packets(4)), true, 7);
        for (i, d) in [DSCP_AF11, DSCP_AF12, DSCP_AF11, DSCP_AF12].iter().enumerate() {
            assert!(offer(&mut q, i as u64, *d).is_empty());
        }
        let out = offer(&mut q, 10, DSCP_AF11);
        assert_eq!(out.len(), 1);
        let (victim, evicted) = out[0];
        assert!(evicted && (victim == 1 || victim == 3));
        let kept: Vec<u64> = [0, 1, 2, 3, 10].into_iter().filter(|s| *s != victim).collect();
        assert_eq!(order(&mut q), kept);
    }

    #[test]
    fn good_low_arrival_or_no_low_queued_is_tail_drop() {
        let mut q = PushOut::new(Some(Buffer::Packets(2)), true, 1);
        offer(&mut q, 0, DSCP_AF11);
        offer(&mut q, 1, DSCP_AF12);
        assert_eq!(offer(&mut q, 2, DSCP_AF12), vec![(2, false)]);
        let mut all_high = PushOut::new(Some(Buffer::Packets(2)), true, 1);
        offer(&mut all_high, 0, DSCP_AF11);
        offer(&mut all_high, 1, DSCP_AF11);
        assert_eq!(offer(&mut all_high, 2, DSCP_AF11), vec![(2, false)]);
    }

    #[test]
    fn bad_is_the_mirror_image() {
        let mut q = PushOut::new(Some(Buffer::Packets(2)), false, 1);
        offer(&mut q, 0, DSCP_AF11);
        offer(&mut q, 1, DSCP_AF12);
        assert_eq!(offer(&mut q, 2, DSCP_AF11), vec![(2, false)]);
        assert_eq!(offer(&mut q, 3, DSCP_AF12), vec![(0, true)]);
        assert_eq!(order(&mut q), vec![1, 3]);
    }

    #[test]
    fn victims_are_uniform_and_seeded() {
        let mut counts = [0u32; 3];
        for seed in 0..3000 {
            let mut q = PushOut::new(Some(Buffer::Packets(3)), true, seed);
            for i in 0..3 {
                offer(&mut q, i, DSCP_AF12);
            }
            counts[offer(&mut q, 9, DSCP_AF11)[0].0 as usize] += 1;
        }
        assert!(counts.iter().all(|c| (900..1100).contains(c)), "{counts:?}");
        let run = |seed| {
            let mut q = PushOut::new(Some(Buffer::Packets(3)), true, seed);
            (0..3).for_each(|i| drop(offer(&mut q, i, DSCP_AF12)));
            offer(&mut q, 9, DSCP_AF11)
        };
        assert_eq!(run(42), run(42));
    }

    #[test]
    fn byte_limit_evicts_as_many_lows_as_needed() {
        let mut q = PushOut::new(Some(Buffer::Bytes(3000)), true, 3);
        for i in 0..3 {
            offer(&mut q, i, DSCP_AF12);
        }
        let mut dropped = Vec::new();
        let big = Queued { handle: 9, info: PacketInfo::new(1500, DSCP_AF11, 0), arrival: 0, seq: 9 };
        q.enqueue(big, 0, &mut dropped);
        assert_eq!(dropped.len(), 2);
        assert!(q.len_bytes() <= 3000 && q.len_packets() == 2);
    }
}
