//! Multi-queue differentiation with a weighted round robin scheduler (service-differentiation
//! paper, section 5, Fig. 8): "multiple queues, served by a weighted round robin (WRR)
//! scheduler ... to avoid long delays in a shared buffer", with Telnet in a queue of its own
//! whose weight (e.g. 20% or more) sets its share of the link.
//!
//! Packets go to queues by DSCP class with the drop-precedence table of multired.rs: two queues
//! put AF11 in the first and everything else in the second (the paper's separate queue for the
//! HIGH-marked interactive traffic, section 5's mapping); three queues are HIGH (AF11), MED
//! (AF12), LOW (AF13 and unmarked) as in section 4.2. Each round, queue i may send up to
//! weights[i] packets; a queue that is empty gives up the rest of its turn (work-conserving),
//! so under backlog the queues' packet shares are weights[i] / sum(weights).
//!
//! Separate queues mean separate buffers. The paper does not size them; here the link's buffer
//! is split in proportion to the weights (rounded down, each at least one packet or byte),
//! which gives every queue the same worst-case queueing delay under backlog and keeps the
//! total within the link's buffer. Each queue is DropTail.

use super::fifo::Fifo;
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::packet::Class;
use crate::params::Buffer;
use serde::Deserialize;

/// `{"kind": "wrr", "weights": [w0, w1(, w2)]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrrConfig {
    pub weights: Vec<u32>,
}

impl PolicyParams for WrrConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        Ok(Box::new(Wrr::<H>::new(&self.weights, env.buffer)?))
    }
}

pub struct Wrr<H> {
    queues: Vec<Fifo<H>>,
    limits: Vec<Option<Buffer>>,
    weights: Vec<u32>,
    classify: fn(Class) -> usize,
    /// The queue whose turn it is and how many packets it may still send in it.
    current: usize,
    credit: u32,
}

impl<H> Wrr<H> {
    /// `weights`: 2 (AF11, the rest) or 3 (AF11, AF12, AF13 and unmarked), each at least 1.
    pub fn new(weights: &[u32], buffer: Option<Buffer>) -> Result<Wrr<H>, String> {
        let classify = match weights.len() {
            2 => super::multired::rio_level,
            3 => super::multired::three_level,
            n => return Err(format!("weights: need 2 (AF11, rest) or 3 (AF11, AF12, AF13 and unmarked), got {n}")),
        };
        if let Some(i) = weights.iter().position(|&w| w == 0) {
            return Err(format!("weights[{i}]: must be at least 1 (packets per round)"));
        }
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut limits = Vec::new();
        for (i, &w) in weights.iter().enumerate() {
            let share = |n: u64| (u128::from(n) * u128::from(w) / u128::from(total)) as u64;
            let limit = match buffer {
                None => None,
                Some(Buffer::Packets(n)) => Some(Buffer::Packets(share(n))),
                Some(Buffer::Bytes(n)) => Some(Buffer::Bytes(share(n))),
            };
            if matches!(limit, Some(Buffer::Packets(0) | Buffer::Bytes(0))) {
                return Err(format!(
                    "weights[{i}]: queue {i}'s share of the buffer ({w}/{total}) is empty; enlarge the buffer"
                ));
            }
            limits.push(limit);
        }
        Ok(Wrr {
            queues: weights.iter().map(|_| Fifo::new()).collect(),
            limits,
            weights: weights.to_vec(),
            classify,
            current: 0,
            credit: weights[0],
        })
    }
}

impl<H> QueuePolicy<H> for Wrr<H> {
    fn enqueue(&mut self, pkt: Queued<H>, _now: u64, dropped: &mut Vec<Dropped<H>>) {
        let i = (self.classify)(pkt.info.class);
        if self.queues[i].fits(self.limits[i], pkt.info.len as usize) {
            self.queues[i].push(pkt);
        } else {
            dropped.push(Dropped::refused(pkt));
        }
    }

    fn dequeue(&mut self, _now: u64) -> Option<Queued<H>> {
        // The current queue, then at most one full turn of every queue.
        for _ in 0..=self.queues.len() {
            if self.credit > 0 {
                if let Some(pkt) = self.queues[self.current].pop() {
                    self.credit -= 1;
                    return Some(pkt);
                }
            }
            self.current = (self.current + 1) % self.queues.len();
            self.credit = self.weights[self.current];
        }
        None
    }

    fn len_packets(&self) -> usize {
        self.queues.iter().map(|q| q.len()).sum()
    }

    fn len_bytes(&self) -> usize {
        self.queues.iter().map(|q| q.bytes()).sum()
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.queues.iter_mut().flat_map(|q| q.drain()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12, DSCP_AF13};

    fn pkt(seq: u64, dscp: u8, len: u32) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(len, dscp, 0), arrival: 0, seq }
    }

    fn offer(q: &mut Wrr<u64>, seq: u64, dscp: u8) -> bool {
        let mut d = Vec::new();
        q.enqueue(pkt(seq, dscp, 1000), 0, &mut d);
        d.is_empty()
    }

    fn order(q: &mut Wrr<u64>, n: usize) -> Vec<u64> {
        (0..n).filter_map(|_| q.dequeue(0).map(|p| p.seq)).collect()
    }

    #[test]
    fn two_queues_are_served_weight_packets_per_turn() {
        let mut q: Wrr<u64> = Wrr::new(&[1, 3], None).unwrap();
        (0..4).for_each(|s| assert!(offer(&mut q, s, DSCP_AF11))); // queue 0: 0..3
        (10..18).for_each(|s| assert!(offer(&mut q, s, [DSCP_AF12, DSCP_AF13, 0][s as usize % 3])));
        assert_eq!(order(&mut q, 12), vec![0, 10, 11, 12, 1, 13, 14, 15, 2, 16, 17, 3]);
        assert_eq!((q.dequeue(0).is_none(), q.len_packets()), (true, 0));
    }

    #[test]
    fn service_shares_follow_the_weights_under_backlog() {
        let mut q: Wrr<u64> = Wrr::new(&[2, 5, 3], None).unwrap();
        let dscps = [DSCP_AF11, DSCP_AF12, DSCP_AF13];
        for s in 0..3000 {
            offer(&mut q, s, dscps[s as usize % 3]);
        }
        let mut served = [0u32; 3];
        for _ in 0..1000 {
            served[q.dequeue(0).unwrap().seq as usize % 3] += 1;
        }
        assert_eq!(served, [200, 500, 300]);
        // Unmarked packets share the LOW queue with AF13.
        let mut q: Wrr<u64> = Wrr::new(&[2, 5, 3], None).unwrap();
        for s in 0..4 {
            offer(&mut q, s, if s % 2 == 0 { 0 } else { DSCP_AF13 });
        }
        assert_eq!(order(&mut q, 4), vec![0, 1, 2, 3]);
    }

    #[test]
    fn an_idle_queue_gives_its_turn_away() {
        let mut q: Wrr<u64> = Wrr::new(&[1, 3], None).unwrap();
        for s in 0..3 {
            offer(&mut q, s, DSCP_AF11);
        }
        assert_eq!(order(&mut q, 3), vec![0, 1, 2]);
        // Queue 1 arrives mid-turn: the round goes on from where it was.
        offer(&mut q, 10, 0);
        offer(&mut q, 3, DSCP_AF11);
        assert_eq!(order(&mut q, 2), vec![10, 3]);
    }

    #[test]
    fn each_queue_has_its_share_of_the_buffer() {
        // 10 packets split 1:4: 2 for AF11, 8 for the rest.
        let mut q: Wrr<u64> = Wrr::new(&[1, 4], Some(Buffer::Packets(10))).unwrap();
        let high: Vec<bool> = (0..3).map(|s| offer(&mut q, s, DSCP_AF11)).collect();
        let low: Vec<bool> = (10..19).map(|s| offer(&mut q, s, DSCP_AF12)).collect();
        assert_eq!(high, vec![true, true, false]);
        assert_eq!(low.iter().filter(|&&ok| ok).count(), 8);
        assert_eq!((q.len_packets(), q.len_bytes()), (10, 10_000));
        let bytes: Wrr<u64> = Wrr::new(&[1, 3], Some(Buffer::Bytes(6000))).unwrap();
        assert_eq!(bytes.limits, vec![Some(Buffer::Bytes(1500)), Some(Buffer::Bytes(4500))]);
        assert_eq!(q.drain().len(), 10);
        assert_eq!(q.len_packets(), 0);
    }

    #[test]
    fn bad_weights_name_the_parameter() {
        let err = |w: &[u32], b| Wrr::<u64>::new(w, b).err().unwrap();
        assert!(err(&[1], None).starts_with("weights: need 2"));
        assert_eq!(err(&[1, 0, 2], None), "weights[1]: must be at least 1 (packets per round)");
        assert!(err(&[1, 9], Some(Buffer::Packets(5))).starts_with("weights[0]: queue 0's share of the buffer (1/10)"));
    }
}
