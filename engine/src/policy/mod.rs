//! Drop and scheduling policies: what a link's buffer keeps, drops and sends next.
//!
//! Modelled on Mahimahi's AbstractPacketQueue: the link offers each arrival with
//! [`QueuePolicy::enqueue`] and asks for the next packet to transmit with
//! [`QueuePolicy::dequeue`]. A policy owns its packets, so push-out (CATNIP-Good),
//! per-flow state (FRED) or several queues (WRR) fit the same interface. Adding a policy is
//! one file here plus one line in [`build`].

mod droptail;
mod fifo;
mod fred;
mod loss;
mod multired;
mod pushout;
mod red;
mod wrr;

pub use droptail::DropTail;
pub use fred::Fred;
pub use loss::RandomLoss;
pub use multired::MultiRed;
pub use pushout::PushOut;
pub use red::{Red, RedParams};
pub use wrr::Wrr;

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

pub const KINDS: &[&str] = &[
    "droptail", "catnip_good", "catnip_bad", "red", "catnip_red", "rio", "red3", "fred", "frio", "wrr", "bernoulli",
    "catnip_loss",
];

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
            let params = red_params(config, rate_bps)?;
            Ok(Box::new(Red::new(params, buffer, config.kind == "catnip_red", seed)))
        }
        "rio" | "red3" => {
            let params = level_params(config, if config.kind == "rio" { 2 } else { 3 }, rate_bps)?;
            let classify = if config.kind == "rio" { multired::rio_level } else { multired::three_level };
            Ok(Box::new(MultiRed::new(params, classify, buffer, seed)))
        }
        "fred" => Ok(Box::new(Fred::classic(red_params(config, rate_bps)?, min_q(config)?, buffer, seed))),
        "frio" => {
            let params = level_params(config, 2, rate_bps)?;
            Ok(Box::new(Fred::frio([params[0], params[1]], min_q(config)?, buffer, seed)))
        }
        "wrr" => {
            let weights = config.weights.as_ref().ok_or(
                "wrr needs weights: packets per round for 2 queues (AF11, rest) or 3 (AF11, AF12, AF13 and unmarked)",
            )?;
            Ok(Box::new(Wrr::new(weights, buffer)?))
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

/// RED's parameters for `red`, `catnip_red` and `fred`.
fn red_params(config: &PolicyConfig, rate_bps: u64) -> Result<RedParams, String> {
    let need = |name: &str, v: Option<f64>| v.ok_or_else(|| format!("{} needs {name}", config.kind));
    let params = RedParams {
        min_th: need("min_th", config.min_th)?,
        max_th: need("max_th", config.max_th)?,
        w_q: need("w_q", config.w_q)?,
        max_p: need("max_p", config.max_p)?,
        typical_tx_ns: typical_tx_ns(config, rate_bps),
    };
    params.validate()?;
    Ok(params)
}

/// Per-level RED parameters (`levels`, highest precedence first, with a shared `w_q`) for
/// `rio`, `red3` and `frio`.
fn level_params(config: &PolicyConfig, want: usize, rate_bps: u64) -> Result<Vec<RedParams>, String> {
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
    Ok(params)
}

/// FRED's min_q: packets a flow may queue between the thresholds without a random drop
/// (Lin and Morris use 2, or 4 for large buffers).
fn min_q(config: &PolicyConfig) -> Result<f64, String> {
    match config.min_q.unwrap_or(2.0) {
        q if q >= 0.0 && q.is_finite() => Ok(q),
        q => Err(format!("min_q must be a packet count >= 0 (got {q})")),
    }
}

/// RED's idle correction needs a typical packet's transmission time; an unrated link drains at once.
fn typical_tx_ns(config: &PolicyConfig, rate_bps: u64) -> f64 {
    let mean_pkt = f64::from(config.mean_pkt_bytes.unwrap_or(1000));
    if rate_bps == 0 { 1.0 } else { mean_pkt * 8e9 / rate_bps as f64 }
}
