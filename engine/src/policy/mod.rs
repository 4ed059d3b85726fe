//! Drop and scheduling policies: what a link's buffer keeps, drops and sends next.
//!
//! Modelled on Mahimahi's AbstractPacketQueue: the link offers each arrival with
//! [`QueuePolicy::enqueue`] and asks for the next packet to transmit with
//! [`QueuePolicy::dequeue`]. A policy owns its packets, so push-out (CATNIP-Good),
//! per-flow state (FRED) or several queues (WRR) fit the same interface. Policies that are one
//! FIFO plus an admission rule write only the rule ([`fifo::Admission`]); the FIFO, its limit
//! and its idle time are [`fifo::FifoPolicy`]'s.
//!
//! Each policy's config is a struct of its own (in its file) that checks its parameters, builds
//! the policy and says what the link must know of it ([`PolicyParams`]: whether it rewrites DSCPs,
//! whether it idles while holding packets). Adding a policy is one file here plus one line in the
//! `policies!` list below, which makes the `kind` enum of the config, the list of kinds and the
//! dispatch. A policy's parameters have no defaults here: every one must be given (a missing
//! one is a config error naming it); the controller's schema (spec/policy.py) is where a
//! scenario's defaults live, and it writes them all (docs/engine.md, "Parameters").

mod droptail;
pub mod fifo;
mod fred;
mod loss;
mod multired;
mod pushout;
mod red;
mod source_sched;
mod wrr;

pub use droptail::{DropTail, DropTailConfig};
pub use fred::{Fred, FredConfig, FrioConfig};
pub use loss::{BernoulliConfig, CatnipLossConfig, LossConfig, Lossy};
pub use multired::{LevelConfig, MultiRed, Red3Config, RioConfig};
pub use pushout::{CatnipBadConfig, CatnipGoodConfig, PushOut};
pub use red::{CatnipRedConfig, Red, RedConfig, RedParams};
pub use source_sched::{BucketConfig, SourceCounters, SourceScheduler, SourceSchedulerConfig};
pub use wrr::{Wrr, WrrConfig};

use crate::packet::PacketInfo;
use crate::params::Buffer;
use serde::Deserialize;

/// What a policy needs to know about its link.
#[derive(Debug, Clone, Copy)]
pub struct LinkEnv {
    pub buffer: Option<Buffer>,
    pub rate_bps: u64,
    /// Seed of the policy's random choices (ChaCha8).
    pub seed: u64,
}

/// A policy's parameters, as the config gives them: checks them and builds the policy. An
/// error names the bad parameter (`weights[1]: must be at least 1`).
pub trait PolicyParams {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String>;

    /// Whether the policy may change a packet's DSCP (the live engine then copies whole packets
    /// from the kernel, to give them back rewritten).
    fn may_rewrite(&self) -> bool {
        false
    }

    /// Whether the policy may hold packets with none to send (waiting for tokens), telling the
    /// link when to ask again through [`QueuePolicy::wake_at`]. The loss wrapper does not pass
    /// `wake_at` on, so such a policy cannot be wrapped.
    fn idles_while_holding(&self) -> bool {
        false
    }
}

/// The policies: `"kind" => Variant(its parameters)`, one line each.
macro_rules! policies {
    ($($kind:literal => $variant:ident($params:ty),)*) => {
        /// A link's `policy`: `{"kind": K, ...K's parameters}`.
        #[derive(Debug, Clone, Deserialize)]
        #[serde(tag = "kind")]
        pub enum PolicyConfig {
            $(#[serde(rename = $kind)] $variant($params),)*
        }

        /// Every policy kind, in the order error messages list them.
        pub const KINDS: &[&str] = &[$($kind),*];

        /// Every kind with the parameters it takes (`catnip-engine kinds`): each one must be
        /// given, the engine has no defaults (the controller's schema writes them all).
        pub fn parameters() -> Vec<(&'static str, &'static [&'static str])> {
            vec![$(($kind, crate::params::fields_of::<$params>()),)*]
        }

        impl PolicyConfig {
            pub fn kind(&self) -> &'static str {
                match self {
                    $(PolicyConfig::$variant(_) => $kind,)*
                }
            }

            pub fn may_rewrite(&self) -> bool {
                match self {
                    $(PolicyConfig::$variant(p) => p.may_rewrite(),)*
                }
            }

            pub fn idles_while_holding(&self) -> bool {
                match self {
                    $(PolicyConfig::$variant(p) => p.idles_while_holding(),)*
                }
            }

            /// Check the parameters and build the policy.
            pub fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
                match self {
                    $(PolicyConfig::$variant(p) => p.build(env),)*
                }
            }

            /// Why the parameters of `kind` in `rest` (the policy object without its kind) do
            /// not deserialize: `.field: message` (see config.rs, params.rs `deep_error`).
            pub fn explain(kind: &str, rest: &serde_json::Value) -> Option<String> {
                match kind {
                    $($kind => crate::params::deep_error::<$params>(rest),)*
                    _ => None,
                }
            }
        }
    };
}

policies! {
    "droptail" => Droptail(DropTailConfig),
    "catnip_good" => CatnipGood(CatnipGoodConfig),
    "catnip_bad" => CatnipBad(CatnipBadConfig),
    "red" => Red(RedConfig),
    "catnip_red" => CatnipRed(CatnipRedConfig),
    "rio" => Rio(RioConfig),
    "red3" => Red3(Red3Config),
    "fred" => Fred(FredConfig),
    "frio" => Frio(FrioConfig),
    "wrr" => Wrr(WrrConfig),
    "bernoulli" => Bernoulli(BernoulliConfig),
    "catnip_loss" => CatnipLoss(CatnipLossConfig),
    "source_scheduler" => SourceScheduler(SourceSchedulerConfig),
}

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

/// Why a policy removed a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Refused on arrival.
    Refused,
    /// Evicted from the queue by a later arrival (the one being enqueued).
    Evicted,
    /// Lost at random on arrival (the loss wrapper, [`Lossy`]).
    Lost,
}

/// A packet a policy removed.
#[derive(Debug)]
pub struct Dropped<H> {
    pub pkt: Queued<H>,
    pub cause: Cause,
}

impl<H> Dropped<H> {
    pub fn refused(pkt: Queued<H>) -> Dropped<H> {
        Dropped { pkt, cause: Cause::Refused }
    }

    pub fn evicted(pkt: Queued<H>) -> Dropped<H> {
        Dropped { pkt, cause: Cause::Evicted }
    }

    pub fn is_eviction(&self) -> bool {
        self.cause == Cause::Evicted
    }
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
    /// The earliest virtual time (ns) the policy may have a packet to send without a new arrival,
    /// when it holds packets it will not send yet (a non-work-conserving policy waiting for
    /// tokens); None: it sends whenever it holds something. The link starts its next
    /// transmission at that time if its wire is idle. After `dequeue(t)` returns None, this must
    /// be later than t (or None).
    fn wake_at(&self) -> Option<u64> {
        None
    }
    /// The policy's own counters, for the stats line (`policy_counters`); none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// RED's idle correction needs a typical packet's transmission time; an unrated link drains at once.
pub fn typical_tx_ns(mean_pkt_bytes: u32, rate_bps: u64) -> f64 {
    let mean_pkt = f64::from(mean_pkt_bytes);
    if rate_bps == 0 {
        1.0
    } else {
        mean_pkt * 8e9 / rate_bps as f64
    }
}
