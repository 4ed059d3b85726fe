//! Random loss as a wrapper around any policy (hysteresis paper, section 4, for validating
//! latency models): every arrival is lost independently with probability p, or, in the "CATNIP
//! error model", with p' for high-priority (AF11) and p for all other packets. Survivors go on
//! to the wrapped policy.
//!
//! A link's `"loss": {"p": p, "p_high": p'}` wraps its policy; the policy kinds `bernoulli`
//! (`loss_p`) and `catnip_loss` (`loss_p`, `loss_p_high`) are DropTail in the wrapper. Draws use
//! ChaCha8 seeded from the config's seed: the two kinds on stream 0, as they always did (a
//! DropTail makes no draws of its own), a link's `loss` on stream 1, apart from the draws of
//! the policy it wraps (stream 0).

use super::droptail::droptail;
use super::pushout::is_high;
use super::{Cause, Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// A link's `loss`: `{"p": p, "p_high": p'}`, both given (the schema writes p_high as p when a
/// scenario gives only p: spec/graph.py).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossConfig {
    pub p: f64,
    /// For AF11 packets.
    pub p_high: f64,
}

impl LossConfig {
    pub fn validate(&self) -> Result<(), String> {
        check("p", self.p)?;
        check("p_high", self.p_high)
    }

    /// Wrap `policy` (stream 1 of `seed`).
    pub fn wrap<H: 'static>(
        &self,
        policy: Box<dyn QueuePolicy<H>>,
        seed: u64,
    ) -> Result<Box<dyn QueuePolicy<H>>, String> {
        self.validate()?;
        Ok(Box::new(Lossy::new(policy, self.p, self.p_high, seed, 1)))
    }
}

fn check(name: &str, p: f64) -> Result<(), String> {
    if (0.0..1.0).contains(&p) {
        Ok(())
    } else {
        Err(format!("{name} must be in [0, 1) (got {p})"))
    }
}

/// `{"kind": "bernoulli", "loss_p": p}`: DropTail behind a loss of p for every packet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BernoulliConfig {
    pub loss_p: f64,
}

/// `{"kind": "catnip_loss", "loss_p": p, "loss_p_high": p'}`: the CATNIP error model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatnipLossConfig {
    pub loss_p: f64,
    pub loss_p_high: f64,
}

fn lossy_droptail<H: 'static>(p: f64, p_high: f64, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
    check("loss_p", p)?;
    check("loss_p_high", p_high)?;
    Ok(Box::new(Lossy::new(Box::new(droptail::<H>(env.buffer)), p, p_high, env.seed, 0)))
}

impl PolicyParams for BernoulliConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        lossy_droptail(self.loss_p, self.loss_p, env)
    }
}

impl PolicyParams for CatnipLossConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        lossy_droptail(self.loss_p, self.loss_p_high, env)
    }
}

/// Random loss in front of a policy.
pub struct Lossy<H> {
    inner: Box<dyn QueuePolicy<H>>,
    p_low: f64,
    p_high: f64,
    rng: ChaCha8Rng,
}

impl<H> Lossy<H> {
    /// `p_low` for packets other than AF11, `p_high` for AF11; draws from `stream` of `seed`.
    pub fn new(inner: Box<dyn QueuePolicy<H>>, p_low: f64, p_high: f64, seed: u64, stream: u64) -> Lossy<H> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Lossy { inner, p_low, p_high, rng }
    }
}

impl<H> QueuePolicy<H> for Lossy<H> {
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        let p = if is_high(pkt.info.class) { self.p_high } else { self.p_low };
        if p > 0.0 && self.rng.gen::<f64>() < p {
            dropped.push(Dropped { pkt, cause: Cause::Lost });
        } else {
            self.inner.enqueue(pkt, now, dropped);
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Queued<H>> {
        self.inner.dequeue(now)
    }

    fn len_packets(&self) -> usize {
        self.inner.len_packets()
    }

    fn len_bytes(&self) -> usize {
        self.inner.len_bytes()
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.inner.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12};
    use crate::params::{Buffer, Unit};
    use crate::policy::{Red, RedParams};

    fn pkt(i: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: i, info: PacketInfo::new(100, dscp, 0), arrival: 0, seq: i }
    }

    fn loss_rate(q: &mut Lossy<u64>, dscp: u8, n: u64) -> f64 {
        let mut lost = 0;
        for i in 0..n {
            let mut d = Vec::new();
            q.enqueue(pkt(i, dscp), 0, &mut d);
            assert!(d.iter().all(|x| x.cause == Cause::Lost));
            lost += d.len();
            q.dequeue(0);
        }
        lost as f64 / n as f64
    }

    fn lossy(p: f64, p_high: f64, seed: u64) -> Lossy<u64> {
        Lossy::new(Box::new(droptail(None)), p, p_high, seed, 0)
    }

    #[test]
    fn bernoulli_and_catnip_error_model_rates() {
        let mut b = lossy(0.05, 0.05, 1);
        assert!((loss_rate(&mut b, DSCP_AF12, 100_000) - 0.05).abs() < 0.003);
        let mut c = lossy(0.08, 0.0, 1);
        assert_eq!(loss_rate(&mut c, DSCP_AF11, 10_000), 0.0);
        assert!((loss_rate(&mut c, DSCP_AF12, 100_000) - 0.08).abs() < 0.004);
        let env = LinkEnv { buffer: None, rate_bps: 0, seed: 1 };
        assert!(BernoulliConfig { loss_p: 1.0 }.build::<u64>(&env).is_err());
        assert!(LossConfig { p: 0.1, p_high: -0.1 }.validate().unwrap_err().starts_with("p_high must be"));
    }

    #[test]
    fn the_loss_kinds_draw_as_they_always_did() {
        // Before the wrapper, `bernoulli` and `catnip_loss` drew one f64 from ChaCha8 seeded with
        // the seed (stream 0) per arrival whose p is above 0, and lost it when below p: replays
        // with a seed must not change.
        let env = LinkEnv { buffer: None, rate_bps: 0, seed: 42 };
        let mut q = CatnipLossConfig { loss_p: 0.3, loss_p_high: 0.0 }.build::<u64>(&env).unwrap();
        let mut reference = ChaCha8Rng::seed_from_u64(42);
        for i in 0..5000 {
            let dscp = if i % 3 == 0 { DSCP_AF11 } else { DSCP_AF12 };
            let p = if dscp == DSCP_AF11 { 0.0 } else { 0.3 };
            let want = p > 0.0 && reference.gen::<f64>() < p;
            let mut d = Vec::new();
            q.enqueue(pkt(i, dscp), 0, &mut d);
            assert_eq!(!d.is_empty(), want, "arrival {i}");
            q.dequeue(0);
        }
        // A link's `loss` draws from stream 1 instead.
        let mut wrapped = LossConfig { p: 0.3, p_high: 0.3 }.wrap(Box::new(droptail::<u64>(None)), 42).unwrap();
        let mut stream1 = ChaCha8Rng::seed_from_u64(42);
        stream1.set_stream(1);
        for i in 0..1000 {
            let mut d = Vec::new();
            wrapped.enqueue(pkt(i, DSCP_AF11), 0, &mut d);
            assert_eq!(!d.is_empty(), stream1.gen::<f64>() < 0.3, "arrival {i}");
        }
    }

    #[test]
    fn the_wrapper_loses_before_the_policy_sees_the_packet() {
        // Around a droptail of 2 packets that never drains: the losses come first, and only the
        // survivors fill the buffer (and overflow it: those are refusals, not losses).
        let mut q = Lossy::new(Box::new(droptail::<u64>(Some(Buffer::Packets(2)))), 0.5, 0.5, 3, 1);
        let mut d = Vec::new();
        for i in 0..40 {
            q.enqueue(pkt(i, 0), 0, &mut d);
        }
        let lost = d.iter().filter(|x| x.cause == Cause::Lost).count();
        let refused = d.iter().filter(|x| x.cause == Cause::Refused).count();
        assert_eq!((lost + refused, q.len_packets()), (38, 2));
        assert!((10..30).contains(&lost), "{lost}");
        // Around RED: RED judges exactly the survivors, as a RED alone fed only them would.
        let params = RedParams { min_th: 1.0, max_th: 3.0, w_q: 0.5, max_p: 0.5, typical_tx_ns: 1e6 };
        let mut wrapped = Lossy::new(Box::new(Red::<u64>::new(params, Unit::Packets, None, false, 9)), 0.3, 0.3, 9, 1);
        let mut alone = Red::<u64>::new(params, Unit::Packets, None, false, 9);
        let (mut d, mut d_alone) = (Vec::new(), Vec::new());
        for i in 0..2000 {
            let before = d.len();
            wrapped.enqueue(pkt(i, 0), i * 1000, &mut d);
            if !d[before..].iter().any(|x| x.cause == Cause::Lost) {
                alone.enqueue(pkt(i, 0), i * 1000, &mut d_alone);
            }
            if i % 2 == 1 {
                assert_eq!(wrapped.dequeue(i * 1000).map(|p| p.seq), alone.dequeue(i * 1000).map(|p| p.seq));
            }
        }
        let lost = d.iter().filter(|x| x.cause == Cause::Lost).count();
        assert!((500..700).contains(&lost), "{lost}");
        let refused: Vec<u64> = d.iter().filter(|x| x.cause == Cause::Refused).map(|x| x.pkt.seq).collect();
        assert!(refused.len() > 100, "{}", refused.len());
        assert_eq!(refused, d_alone.iter().map(|x| x.pkt.seq).collect::<Vec<_>>());
        // And with p = 0 the wrapper is invisible: the same drops as RED alone on every arrival.
        let mut wrapped = Lossy::new(Box::new(Red::<u64>::new(params, Unit::Packets, None, false, 9)), 0.0, 0.0, 9, 1);
        let mut alone = Red::<u64>::new(params, Unit::Packets, None, false, 9);
        let (mut d, mut d_alone) = (Vec::new(), Vec::new());
        for i in 0..2000 {
            wrapped.enqueue(pkt(i, 0), i * 1000, &mut d);
            alone.enqueue(pkt(i, 0), i * 1000, &mut d_alone);
            if i % 2 == 1 {
                wrapped.dequeue(i * 1000);
                alone.dequeue(i * 1000);
            }
        }
        assert!(!d.is_empty() && d.iter().map(|x| x.pkt.seq).eq(d_alone.iter().map(|x| x.pkt.seq)));
    }
}
