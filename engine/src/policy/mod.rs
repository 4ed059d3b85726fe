//! Drop and scheduling policies: what a link's buffer keeps, drops and sends next.
//!
//! Modelled on Mahimahi's AbstractPacketQueue: the link offers each arrival with
//! [`QueuePolicy::enqueue`] and asks for the next packet to transmit with
//! [`QueuePolicy::dequeue`]. A policy owns its packets, so push-out (CATNIP-Good),
//! per-flow state (FRED) or several queues (WRR) fit the same interface. Adding a policy is
//! one file here plus one line in [`build`].

mod droptail;
mod fifo;
mod loss;
mod multired;
mod pushout;
mod red;

pub use droptail::DropTail;
pub use loss::RandomLoss;
pub use multired::MultiRed;
pub use pushout::PushOut;
pub use red::{Red, RedParams};

use crate::config::{Buffer, PolicyConfig};
use crate::packet::PacketInfo;

/// A packet held by the engine; `H` is whatever the driver needs to give its verdict
/// (an NFQUEUE message, or a trace index in replay).
#[derive(Debug)]
pub struct Queued<H> {
    pub handle: H,
    pub info: PacketInfo,
    /// Arrival time, ns on the engine's clock.
    pub arrival: u64,
    /// Sequence number of the arrival on its link (replay reports evictions by it).
    pub seq: u64,
}

/// A packet a policy removed: refused on arrival, or evicted from the queue by a later arrival.
#[derive(Debug)]
pub struct Dropped<H> {
    pub pkt: Queued<H>,
    pub evicted: bool,
}

pub trait QueuePolicy<H> {
    /// Offer an arrival; push every packet removed (the arrival itself and/or evicted ones)
    /// onto `dropped`.
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>);
    /// The next packet to put on the wire, if any.
    fn dequeue(&mut self, now: u64) -> Option<Queued<H>>;
    fn len_packets(&self) -> usize;
    fn len_bytes(&self) -> usize;
    /// Remove everything (engine shutdown releases held packets).
    fn drain(&mut self) -> Vec<Queued<H>>;
}

pub const KINDS: &[&str] =
    &["droptail", "catnip_good", "catnip_bad", "red", "catnip_red", "rio", "red3", "bernoulli", "catnip_loss"];

/// The policy a config names. Errors list the allowed kinds or name the bad parameter.
pub fn build<H: 'static>(
    config: &PolicyConfig,
    buffer: Option<Buffer>,
    rate_bps: u64,
    seed: u64,
) -> Result<Box<dyn QueuePolicy<H>>, String> {
    match config.kind.as_str() {
        "droptail" => Ok(Box::new(DropTail::new(buffer))),
        "catnip_good" => Ok(Box::new(PushOut::new(buffer, true, seed))),
        "catnip_bad" => Ok(Box::new(PushOut::new(buffer, false, seed))),
        "red" | "catnip_red" => {
            let need = |name: &str, v: Option<f64>| v.ok_or_else(|| format!("{} needs {name}", config.kind));
            let params = RedParams {
                min_th: need("min_th", config.min_th)?,
                max_th: need("max_th", config.max_th)?,
                w_q: need("w_q", config.w_q)?,
                max_p: need("max_p", config.max_p)?,
                typical_tx_ns: typical_tx_ns(config, rate_bps),
            };
            params.validate()?;
            Ok(Box::new(Red::new(params, buffer, config.kind == "catnip_red", seed)))
        }
        "rio" | "red3" => {
            let want = if config.kind == "rio" { 2 } else { 3 };
            let levels = config.levels.as_ref().filter(|l| l.len() == want).ok_or_else(|| {
                format!("{} needs levels: {want} of {{min_th, max_th, max_p}}, highest precedence first", config.kind)
            })?;
            let w_q = config.w_q.ok_or_else(|| format!("{} needs w_q", config.kind))?;
            let tx = typical_tx_ns(config, rate_bps);
            let params: Vec<RedParams> = levels
                .iter()
                .map(|l| RedParams { min_th: l.min_th, max_th: l.max_th, w_q, max_p: l.max_p, typical_tx_ns: tx })
                .collect();
            for (i, p) in params.iter().enumerate() {
                p.validate().map_err(|e| format!("levels[{i}]: {e}"))?;
            }
            let classify = if config.kind == "rio" { multired::rio_level } else { multired::three_level };
            Ok(Box::new(MultiRed::new(params, classify, buffer, seed)))
        }
        "bernoulli" | "catnip_loss" => {
            let p = config.loss_p.ok_or_else(|| format!("{} needs loss_p", config.kind))?;
            let p_high = if config.kind == "bernoulli" {
                p
            } else {
                config.loss_p_high.ok_or("catnip_loss needs loss_p_high (p' for AF11 packets)")?
            };
            Ok(Box::new(RandomLoss::new(p, p_high, buffer, seed)?))
        }
        other => Err(format!("unknown kind {other:?}; allowed: {}", KINDS.join(", "))),
    }
}

/// RED's idle correction needs a typical packet's transmission time; an unrated link drains at once.
fn typical_tx_ns(config: &PolicyConfig, rate_bps: u64) -> f64 {
    let mean_pkt = f64::from(config.mean_pkt_bytes.unwrap_or(1000));
    if rate_bps == 0 { 1.0 } else { mean_pkt * 8e9 / rate_bps as f64 }
}
