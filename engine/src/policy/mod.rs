//! Drop and scheduling policies: what a link's buffer keeps, drops and sends next.
//!
//! Modelled on Mahimahi's AbstractPacketQueue: the link offers each arrival with
//! [`QueuePolicy::enqueue`] and asks for the next packet to transmit with
//! [`QueuePolicy::dequeue`]. A policy owns its packets, so push-out (CATNIP-Good),
//! per-flow state (FRED) or several queues (WRR) fit the same interface. Adding a policy is
//! one file here plus one line in [`build`].

mod droptail;

pub use droptail::DropTail;

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

pub const KINDS: &[&str] = &["droptail"];

/// The policy a config names. Errors list the allowed kinds.
pub fn build<H: 'static>(
    config: &PolicyConfig,
    buffer: Option<Buffer>,
    _seed: u64,
) -> Result<Box<dyn QueuePolicy<H>>, String> {
    match config.kind.as_str() {
        "droptail" => Ok(Box::new(DropTail::new(buffer))),
        other => Err(format!("unknown kind {other:?}; allowed: {}", KINDS.join(", "))),
    }
}
