//! Random loss models for validating latency models (hysteresis paper, section 4): every
//! arrival is lost independently with probability p (Bernoulli), or, in the "CATNIP error
//! model", with p' for high-priority (AF11) and p for all other packets. Survivors go through
//! an ordinary DropTail buffer.

use super::droptail::DropTail;
use super::pushout::is_high;
use super::{Dropped, QueuePolicy, Queued};
use crate::config::Buffer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct RandomLoss<H> {
    p_low: f64,
    p_high: f64,
    buffer: DropTail<H>,
    rng: ChaCha8Rng,
}

impl<H> RandomLoss<H> {
    pub fn new(p_low: f64, p_high: f64, limit: Option<Buffer>, seed: u64) -> Result<RandomLoss<H>, String> {
        for (name, p) in [("loss_p", p_low), ("loss_p_high", p_high)] {
            if !(0.0..1.0).contains(&p) {
                return Err(format!("{name} must be in [0, 1) (got {p})"));
            }
        }
        Ok(RandomLoss { p_low, p_high, buffer: DropTail::new(limit), rng: ChaCha8Rng::seed_from_u64(seed) })
    }
}

impl<H> QueuePolicy<H> for RandomLoss<H> {
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        let p = if is_high(pkt.info.class) { self.p_high } else { self.p_low };
        if p > 0.0 && self.rng.gen::<f64>() < p {
            dropped.push(Dropped { pkt, evicted: false });
        } else {
            self.buffer.enqueue(pkt, now, dropped);
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Queued<H>> {
        self.buffer.dequeue(now)
    }

    fn len_packets(&self) -> usize {
        self.buffer.len_packets()
    }

    fn len_bytes(&self) -> usize {
        self.buffer.len_bytes()
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.buffer.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12};

    fn loss_rate(q: &mut RandomLoss<u64>, dscp: u8, n: u64) -> f64 {
        let mut lost = 0;
        for i in 0..n {
            let mut d = Vec::new();
            q.enqueue(Queued { handle: i, info: PacketInfo::new(100, dscp, 0), arrival: 0, seq: i }, 0, &mut d);
            lost += d.len();
            q.dequeue(0);
        }
        lost as f64 / n as f64
    }

    #[test]
    fn bernoulli_and_catnip_error_model_rates() {
        let mut b = RandomLoss::new(0.05, 0.05, None, 1).unwrap();
        assert!((loss_rate(&mut b, DSCP_AF12, 100_000) - 0.05).abs() < 0.003);
        let mut c = RandomLoss::new(0.08, 0.0, None, 1).unwrap();
        assert_eq!(loss_rate(&mut c, DSCP_AF11, 10_000), 0.0);
        assert!((loss_rate(&mut c, DSCP_AF12, 100_000) - 0.08).abs() < 0.004);
        assert!(RandomLoss::<u64>::new(1.0, 0.0, None, 1).is_err());
    }
}
