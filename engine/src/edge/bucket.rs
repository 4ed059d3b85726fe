//! Token buckets: exact integers on the engine's virtual clock (a credit in units of 1e-9 bit,
//! to which a rate of r bit/s adds r per ns). Shared by the policer and the shaper (edge/) and
//! the source scheduler (policy/source_sched.rs).

/// The smallest bucket: one packet of 64 bytes.
pub const MIN_BUCKET_BYTES: u64 = 64;

/// A token bucket's parameters checked (shared with the source scheduler, policy/source_sched.rs).
pub(crate) fn check_bucket(rate_bps: u64, bucket_bytes: u64) -> Result<(), String> {
    if rate_bps == 0 {
        return Err("rate_bps: must be above 0".into());
    }
    if bucket_bytes < MIN_BUCKET_BYTES {
        return Err(format!(
            "bucket_bytes: must hold one packet of {MIN_BUCKET_BYTES} bytes at least (got {bucket_bytes})"
        ));
    }
    Ok(())
}

/// A token bucket's rate and depth, in credit units (1e-9 bit). Shared with the source
/// scheduler (policy/source_sched.rs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BucketSpec {
    pub(crate) rate: i128,
    pub(crate) depth: i128,
}

/// A bucket's credit as of time `at` (ns).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tokens {
    pub(crate) credit: i128,
    pub(crate) at: u64,
}

impl BucketSpec {
    pub(crate) fn new(rate_bps: u64, bucket_bytes: u64) -> BucketSpec {
        BucketSpec { rate: i128::from(rate_bps), depth: cost(bucket_bytes) }
    }

    pub(crate) fn full(&self, now: u64) -> Tokens {
        Tokens { credit: self.depth, at: now }
    }

    /// The credit as of `now` (capped at the depth); an earlier `now` changes nothing.
    pub(crate) fn refill(&self, t: &mut Tokens, now: u64) {
        if now <= t.at {
            return;
        }
        let dt = i128::from(now - t.at);
        let room = self.depth - t.credit;
        t.credit = if dt >= (room + self.rate - 1) / self.rate { self.depth } else { t.credit + self.rate * dt };
        t.at = now;
    }

    /// The credit a packet of `len` bytes waits for: its cost, or a full bucket if larger.
    pub(crate) fn need(&self, len: u32) -> i128 {
        cost(u64::from(len)).min(self.depth)
    }

    /// The first ns at which `t` holds what a packet of `len` bytes waits for (`t.at` if it
    /// already does).
    pub(crate) fn ready_at(&self, t: &Tokens, len: u32) -> u64 {
        let deficit = self.need(len) - t.credit;
        if deficit <= 0 {
            return t.at;
        }
        t.at + ((deficit + self.rate - 1) / self.rate) as u64
    }
}

/// A packet's cost in credit units.
pub(crate) fn cost(bytes: u64) -> i128 {
    i128::from(bytes) * 8 * 1_000_000_000
}
