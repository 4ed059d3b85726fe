//! The CATNIP testbed's queue engine.
//!
//! A router port's egress is a [`link::Link`]: a buffer managed by a drop policy
//! ([`policy`]), a transmitter serializing at the link rate, and a constant propagation
//! delay. The same link code runs on live packets from NFQUEUE (`nfq_loop`) and on a
//! packet trace (`replay`), so policies can be tested without a network.

pub mod arrival_log;
pub mod config;
pub mod edge;
pub mod link;
pub mod nfq_loop;
pub mod nfq_recv;
pub mod packet;
pub mod params;
pub mod policy;
pub mod replay;
pub mod stats;
pub mod stats_writer;
#[doc(hidden)]
pub mod testkit;
pub mod verdicts;
