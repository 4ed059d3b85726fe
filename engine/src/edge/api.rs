//! What an edge function is, as the engine's links see it: its parameters build it
//! ([`EdgeParams`]), it takes arrivals and keeps its own counters ([`EdgeFunction`]), and what
//! it did with a packet ([`Step`]); plus the checks its parameters share. Each edge function's
//! file (mark.rs, police.rs, shape.rs, tcpf.rs) implements these; edge/mod.rs registers them.

use crate::packet::PacketInfo;
use crate::policy::Queued;
use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;

/// An edge function's parameters, as the config gives them: checks them and builds the
/// function. An error names the bad parameter (`rules[1].src: ...`).
pub trait EdgeParams {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String>;

    /// Whether it may change a packet's DSCP (the live engine then copies whole packets from the
    /// kernel, to give them back rewritten).
    fn may_rewrite(&self) -> bool;
}

/// A built edge function.
pub trait EdgeFunction<H> {
    /// Take an arrival at `now`.
    fn apply(&mut self, pkt: Queued<H>, now: u64) -> Step<H>;

    /// Its counters, by name, in the order the stats line gives them.
    fn counters(&self) -> Vec<(&'static str, u64)>;

    /// When it next releases a packet it holds (a shaper); None: it holds none.
    fn next_release(&self) -> Option<u64> {
        None
    }

    /// Release its head packet at `t` (its `next_release`).
    fn release(&mut self, _t: u64) -> Queued<H> {
        unreachable!("only a function with a next_release holds packets")
    }

    /// Packets held (shutdown).
    fn drain(&mut self) -> Vec<Queued<H>> {
        Vec::new()
    }

    /// A function that must see every packet crossing the router (the ACKs of the flows it
    /// marks) gives the engine a handle on itself.
    fn ack_observer(&self) -> Option<Rc<RefCell<dyn AckObserver>>> {
        None
    }
}

/// Shown every packet arriving on any link of the engine (link.rs `AckFeed`).
pub trait AckObserver {
    fn observe(&mut self, p: &PacketInfo, now: u64);
}

/// What an edge function did with a packet.
pub enum Step<H> {
    /// On to the next function (or the queue).
    Next(Queued<H>),
    /// A shaper holds it.
    Held,
    /// Dropped by a policer (true) or a full shaper buffer (false).
    Drop(Queued<H>, bool),
}

pub(crate) fn check_dscp(field: &str, dscp: u8) -> Result<u8, String> {
    if dscp <= 63 {
        Ok(dscp)
    } else {
        Err(format!("{field}: must be a DSCP, 0-63 (got {dscp})"))
    }
}

/// `a.b.c.d/len` (or a bare address, /32) as (network, mask); host bits must be zero.
pub fn parse_cidr(text: &str) -> Result<(u32, u32), String> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => {
            (a, l.parse::<u32>().ok().filter(|l| *l <= 32).ok_or(format!("{text:?}: prefix length must be 0-32"))?)
        }
        None => (text, 32),
    };
    let addr: Ipv4Addr = addr.parse().map_err(|_| format!("{text:?}: not an IPv4 address a.b.c.d/len"))?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    let net = u32::from(addr);
    if net & !mask != 0 {
        return Err(format!("{text:?}: host bits set (the network is {}/{len})", Ipv4Addr::from(net & mask)));
    }
    Ok((net, mask))
}
