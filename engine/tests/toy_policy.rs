//! The plug-in point of queue policies: a toy policy written in a few lines (an admission rule
//! on the shared FIFO base) behaves as a policy through the same interface the link uses.

use catnip_engine::config::Buffer;
use catnip_engine::packet::PacketInfo;
use catnip_engine::policy::fifo::{Admission, Buffered, FifoPolicy};
use catnip_engine::policy::{Dropped, QueuePolicy, Queued};

/// Refuses every `n`-th arrival, queues the rest while they fit.
struct EveryNth {
    n: u64,
    seen: u64,
}

impl<H> Admission<H> for EveryNth {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, _now: u64, dropped: &mut Vec<Dropped<H>>) {
        self.seen += 1;
        if self.seen % self.n == 0 || !q.fits(pkt.info.len) {
            dropped.push(Dropped::refused(pkt));
        } else {
            q.fifo.push(pkt);
        }
    }
}

#[test]
fn a_toy_admission_rule_is_a_whole_policy() {
    let mut policy: Box<dyn QueuePolicy<u64>> =
        Box::new(FifoPolicy::with_rule(Some(Buffer::Packets(100)), EveryNth { n: 3, seen: 0 }));
    let mut dropped = Vec::new();
    for seq in 0..9u64 {
        let pkt = Queued { handle: seq, info: PacketInfo::new(1000, 0, seq), arrival: seq * 1000, seq };
        policy.enqueue(pkt, seq * 1000, &mut dropped);
    }
    let refused: Vec<u64> = dropped.iter().map(|d| d.pkt.seq).collect();
    assert_eq!(refused, vec![2, 5, 8]);
    assert_eq!(policy.len_packets(), 6);
    assert_eq!(policy.len_bytes(), 6000);
    let order: Vec<u64> = std::iter::from_fn(|| policy.dequeue(10_000).map(|p| p.seq)).collect();
    assert_eq!(order, vec![0, 1, 3, 4, 6, 7]);
}
