//! RED with drop precedences: RIO (Clark and Fang; TCP-friendly marking paper, section 5) and
//! the 3-level RED of the service-differentiation paper (section 4.2, Fig. 5).
//!
//! Level 0 has the highest precedence (AF11: RIO's IN, HIGH); the last level the lowest (RIO's
//! OUT, LOW). Each level has its own thresholds, max_p and drop-spacing count, and an average
//! queue that counts the queued packets at its level or higher: RIO's IN average counts IN
//! packets, its OUT average counts all. An arrival updates the averages whose counted set
//! contains it (an IN arrival both, an OUT arrival only the OUT average, as in RIO), then is
//! judged by its own level's average with RED's rule (see red.rs). The buffer limit still applies.

use super::fifo::Fifo;
use super::red::{early_drop, next_average, RedParams};
use super::{Dropped, QueuePolicy, Queued};
use crate::config::Buffer;
use crate::packet::Class;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

struct Level {
    params: RedParams,
    avg: f64,
    count: i64,
}

pub struct MultiRed<H> {
    levels: Vec<Level>,
    classify: fn(Class) -> usize,
    limit: Option<Buffer>,
    fifo: Fifo<H>,
    idle_since: Option<u64>,
    rng: ChaCha8Rng,
}

/// RIO: AF11 is IN (level 0), everything else OUT (level 1).
pub fn rio_level(class: Class) -> usize {
    if class == Class::High { 0 } else { 1 }
}

/// 3-level RED: AF11 HIGH, AF12 MED, AF13 and unmarked LOW.
pub fn three_level(class: Class) -> usize {
    match class {
        Class::High => 0,
        Class::Low => 1,
        Class::Lowest | Class::Other => 2,
    }
}

impl<H> MultiRed<H> {
    pub fn new(params: Vec<RedParams>, classify: fn(Class) -> usize, limit: Option<Buffer>, seed: u64) -> MultiRed<H> {
        MultiRed {
            levels: params.into_iter().map(|params| Level { params, avg: 0.0, count: -1 }).collect(),
            classify,
            limit,
            fifo: Fifo::new(),
            idle_since: Some(0),
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    pub fn averages(&self) -> Vec<f64> {
        self.levels.iter().map(|l| l.avg).collect()
    }

    fn update_averages(&mut self, level: usize, now: u64) {
        let classify = self.classify;
        let idle = self.idle_since.filter(|_| self.fifo.is_empty());
        for l in level..self.levels.len() {
            let q = self.fifo.count_where(|c| classify(c) <= l) as f64;
            let lv = &mut self.levels[l];
            lv.avg = next_average(&lv.params, lv.avg, q, idle, now);
        }
    }

    fn early_drop(&mut self, level: usize) -> bool {
        let lv = &mut self.levels[level];
        early_drop(&lv.params, lv.avg, &mut lv.count, &mut self.rng)
    }
}

impl<H> QueuePolicy<H> for MultiRed<H> {
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        let level = (self.classify)(pkt.info.class).min(self.levels.len() - 1);
        self.update_averages(level, now);
        if !self.early_drop(level) && self.fifo.fits(self.limit, pkt.info.len as usize) {
            self.fifo.push(pkt);
            self.idle_since = None;
        } else {
            dropped.push(Dropped { pkt, evicted: false });
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Queued<H>> {
        let pkt = self.fifo.pop()?;
        if self.fifo.is_empty() {
            self.idle_since = Some(now);
        }
        Some(pkt)
    }

    fn len_packets(&self) -> usize {
        self.fifo.len()
    }

    fn len_bytes(&self) -> usize {
        self.fifo.bytes()
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.fifo.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12, DSCP_AF13};

    fn p(min_th: f64, max_th: f64) -> RedParams {
        RedParams { min_th, max_th, w_q: 1.0, max_p: 0.1, typical_tx_ns: 1e6 }
    }

    fn pkt(seq: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(500, dscp, 0), arrival: 0, seq }
    }

    #[test]
    fn rio_in_average_counts_in_packets_out_average_counts_all() {
        let mut q: MultiRed<u64> = MultiRed::new(vec![p(40.0, 70.0), p(10.0, 20.0)], rio_level, None, 1);
        for i in 0..4 {
            q.fifo.push(pkt(i, DSCP_AF11));
        }
        for i in 4..9 {
            q.fifo.push(pkt(i, DSCP_AF12));
        }
        q.idle_since = None;
        let mut d = Vec::new();
        q.enqueue(pkt(20, DSCP_AF11), 0, &mut d); // w_q = 1: averages become the counts
        assert_eq!(q.averages(), vec![4.0, 9.0]);
        q.enqueue(pkt(21, DSCP_AF12), 0, &mut d); // an OUT arrival leaves the IN average alone
        assert_eq!(q.averages(), vec![4.0, 10.0]);
        assert!(d.is_empty());
    }

    #[test]
    fn out_packets_are_dropped_where_in_packets_still_pass() {
        let mut q: MultiRed<u64> = MultiRed::new(vec![p(40.0, 70.0), p(5.0, 10.0)], rio_level, None, 1);
        for i in 0..12 {
            q.fifo.push(pkt(i, DSCP_AF11));
        }
        q.idle_since = None;
        let mut d = Vec::new();
        q.enqueue(pkt(30, DSCP_AF12), 0, &mut d); // OUT average 12 >= 10: dropped
        q.enqueue(pkt(31, DSCP_AF11), 0, &mut d); // IN average 12 < 40: kept
        assert_eq!(d.iter().map(|x| x.pkt.seq).collect::<Vec<_>>(), vec![30]);
        assert_eq!(q.len_packets(), 13);
    }

    #[test]
    fn three_levels_count_their_level_or_higher() {
        let mut q: MultiRed<u64> = MultiRed::new(vec![p(50.0, 60.0), p(50.0, 60.0), p(50.0, 60.0)], three_level, None, 1);
        for (i, d) in [DSCP_AF11, DSCP_AF12, DSCP_AF12, DSCP_AF13, 0].iter().enumerate() {
            q.fifo.push(pkt(i as u64, *d));
        }
        q.idle_since = None;
        let mut d = Vec::new();
        q.enqueue(pkt(9, DSCP_AF11), 0, &mut d);
        assert_eq!(q.averages(), vec![1.0, 3.0, 5.0]);
    }
}
