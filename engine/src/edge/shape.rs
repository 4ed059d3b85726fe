//! `shape`: holds packets in a buffer of its own until a token bucket lets them on, releasing
//! them on the link's virtual clock.

use super::api::{EdgeFunction, EdgeParams, Step};
use super::bucket::{check_bucket, cost, BucketSpec, Tokens};
use crate::params::Buffer;
use crate::policy::fifo::Fifo;
use crate::policy::Queued;
use serde::Deserialize;

/// `{"kind": "shape", "rate_bps": r, "bucket_bytes": b, "buffer": {...} or null}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeConfig {
    pub rate_bps: u64,
    pub bucket_bytes: u64,
    /// The shaper's own buffer (tail drop); null: unlimited.
    #[serde(deserialize_with = "crate::params::nullable")]
    pub buffer: Option<Buffer>,
}

impl EdgeParams for ShapeConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        check_bucket(self.rate_bps, self.bucket_bytes)?;
        if matches!(self.buffer, Some(Buffer::Packets(0) | Buffer::Bytes(0))) {
            return Err("buffer: must hold at least one packet or byte (null for unlimited)".into());
        }
        let spec = BucketSpec::new(self.rate_bps, self.bucket_bytes);
        Ok(Box::new(Shaper { spec, tokens: spec.full(0), limit: self.buffer, queue: Fifo::new(), held: 0, dropped: 0 }))
    }

    fn may_rewrite(&self) -> bool {
        false
    }
}

pub struct Shaper<H> {
    spec: BucketSpec,
    tokens: Tokens,
    limit: Option<Buffer>,
    queue: Fifo<H>,
    /// Packets that had to wait, and those dropped for a full buffer.
    held: u64,
    dropped: u64,
}

impl<H> Shaper<H> {
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

impl<H> EdgeFunction<H> for Shaper<H> {
    fn apply(&mut self, pkt: Queued<H>, now: u64) -> Step<H> {
        let len = pkt.info.len;
        if self.queue.is_empty() {
            self.spec.refill(&mut self.tokens, now);
            if self.tokens.credit >= self.spec.need(len) {
                self.tokens.credit -= cost(u64::from(len));
                return Step::Next(pkt);
            }
        }
        if !self.queue.fits(self.limit, len as usize) {
            self.dropped += 1;
            return Step::Drop(pkt, false);
        }
        self.queue.push(pkt);
        self.held += 1;
        Step::Held
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("held", self.held), ("dropped", self.dropped), ("queue_pkts", self.queue.len() as u64)]
    }

    /// When the head of the queue may leave, if any is held.
    fn next_release(&self) -> Option<u64> {
        let head = self.queue.front()?;
        Some(self.spec.ready_at(&self.tokens, head.info.len))
    }

    fn release(&mut self, t: u64) -> Queued<H> {
        // Not capped at the depth: t is the first ns with enough credit, so the excess is less
        // than one ns of tokens, and keeping it keeps the schedule from drifting.
        self.tokens.credit += self.spec.rate * i128::from(t - self.tokens.at);
        self.tokens.at = t;
        let pkt = self.queue.pop().expect("a release time means a packet held");
        self.tokens.credit -= cost(u64::from(pkt.info.len));
        pkt
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        self.queue.drain()
    }
}
