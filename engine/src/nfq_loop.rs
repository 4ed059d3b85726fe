//! Live mode: the links of one router, fed by NFQUEUE, verdicts given on schedule.
//!
//! One netlink socket binds every link's queue number. The loop sleeps in ppoll until the
//! socket is readable or the next scheduled event (ns timeout, 1 ns timer slack), then
//! advances every link to the current time and gives the verdicts that fell due. Packets are
//! taken up to `recv_batch` per call (nfq_recv.rs), verdicts sent up to `verdict_batch` per call.

use crate::arrival_log::ArrivalLog;
use crate::config::Config;
use crate::link::{AckFeed, Fate, Link};
use crate::nfq_recv::{Packet, Receiver};
use crate::packet::{rewrite_dscp, PacketInfo};
use crate::stats::{Lateness, LatenessCauses};
use crate::stats_writer::{Record, StatsWriter};
use crate::verdicts::VerdictBatch;
use anyhow::{anyhow, Context, Result};
use nfq::Queue;
use std::collections::HashSet;
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Enough of the packet for the IPv4 header with the longest options (60 bytes) and the ports:
/// the payload itself is never needed, and copying less keeps the netlink socket from filling.
const COPY_RANGE: u16 = 80;
/// The whole packet, for links whose edge functions may rewrite the DSCP: a verdict with a
/// payload replaces the packet with it (nfqnl_mangle trims to its length).
const COPY_WHOLE: u16 = 65535;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // No SA_RESTART: ppoll returns EINTR and the loop sees STOP at once.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Open socket descriptors (listing /proc/self/fd opens a descriptor of its own: only
/// sockets count, so it is never mistaken for the queue's).
fn open_sockets() -> HashSet<i32> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                target.to_str()?.starts_with("socket:").then(|| e.file_name().to_str()?.parse().ok())?
            })
            .collect()
        })
        .unwrap_or_default()
}

/// Open the NFQUEUE socket and find its descriptor: the nfq crate does not expose it, and
/// ppoll needs it. The one descriptor that appears across `Queue::open` is the socket.
pub fn open_queue() -> Result<(Queue, i32)> {
    let before = open_sockets();
    let queue = Queue::open().context("cannot open the NFQUEUE netlink socket (root needed)")?;
    let new: Vec<i32> = open_sockets().difference(&before).copied().collect();
    match new.as_slice() {
        [fd] => Ok((queue, *fd)),
        _ => Err(anyhow!("cannot identify the NFQUEUE socket among new descriptors {new:?}")),
    }
}

struct Engine {
    links: Vec<Link<Packet>>,
    lateness: Lateness,
    causes: LatenessCauses,
    late_threshold_ns: u64,
    nfq_errors: u64,
    fates: Vec<Fate<Packet>>,
    /// Verdicts not sent yet, and the link and scheduled time of each delivery among them:
    /// lateness is taken when the verdict has left, after the send.
    batch: VerdictBatch,
    due: Vec<(usize, u64)>,
    /// Per link: whether its edge functions may change a packet's DSCP (whole packets copied).
    rewrites: Vec<bool>,
    /// Packets whose DSCP should have been rewritten but could not be (not all of the packet
    /// was copied, or not IPv4): released unchanged.
    rewrite_failed: u64,
    /// Segmentation-offload super-packets handed over whole (queues that take partial checksums
    /// take these too): none while offloads are off as a run sets them; each would be emulated
    /// as one packet of its full length, so they are counted and reported.
    gso_packets: u64,
    /// Packets from a queue number no link of this engine has: accepted as they came, not
    /// emulated (a rule steering to the wrong queue, or a message misread), so counted.
    unbound_packets: u64,
}

/// Each queue's copy range: whole packets for links that may rewrite the DSCP, 80 bytes for
/// the others, sorted so the largest comes last: the receive buffers (nfq_recv.rs) are sized
/// for it.
fn copy_ranges(config: &Config) -> Vec<(u16, u16)> {
    let mut ranges: Vec<(u16, u16)> =
        config.links.iter().map(|l| (l.queue_num, if l.may_rewrite() { COPY_WHOLE } else { COPY_RANGE })).collect();
    ranges.sort_by_key(|r| r.1);
    ranges
}

/// Write the packet's new DSCP into `pkt` if it differs from the one it came with; true if the
/// payload must go back with the verdict. `rewrite_failed` counts the packets that cannot be
/// given back whole.
fn rewrite(pkt: &mut Packet, dscp: u8, rewrite_failed: &mut u64) -> bool {
    let payload = &pkt.payload;
    if payload.len() < 2 || payload[1] >> 2 == dscp {
        return false;
    }
    if payload.len() != pkt.orig_len || payload.len() > usize::from(COPY_WHOLE) - 4 {
        *rewrite_failed += 1;
        return false;
    }
    let ok = rewrite_dscp(&mut pkt.payload, dscp);
    if !ok {
        *rewrite_failed += 1;
    }
    ok
}

impl Engine {
    /// Queue the verdicts for everything the links decided (sent when the batch is full, or by
    /// `flush` once the socket is drained or the links have been advanced).
    fn settle(&mut self, link: usize) -> Result<()> {
        // Borrow the list out and put it back, so its allocation is reused packet after packet.
        let mut fates = std::mem::take(&mut self.fates);
        for fate in fates.drain(..) {
            match fate {
                Fate::Deliver { mut handle, at, info } => {
                    let (queue, id, mark) = (handle.queue_num, handle.id, Some(release_mark(at)));
                    if self.rewrites[link] && rewrite(&mut handle, info.dscp, &mut self.rewrite_failed) {
                        self.batch.push_rewritten(queue, id, mark, &handle.payload);
                    } else {
                        self.batch.push(queue, id, true, mark);
                    }
                    self.due.push((link, at));
                }
                Fate::Drop { handle, .. } => {
                    self.batch.push(handle.queue_num, handle.id, false, None);
                }
            }
            if self.batch.is_full() {
                self.flush()?;
            }
        }
        self.fates = fates;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let issued = now_ns();
        self.batch.flush().context("verdicts refused by the kernel")?;
        let now = now_ns();
        self.causes.calls.record(now.saturating_sub(issued), self.late_threshold_ns);
        for (link, at) in self.due.drain(..) {
            let late = now.saturating_sub(at);
            self.causes.at_issue.record(issued.saturating_sub(at), self.late_threshold_ns);
            self.lateness.record(late, self.late_threshold_ns);
            self.links[link].stats.lateness.record(late, self.late_threshold_ns);
        }
        Ok(())
    }

    fn advance_all(&mut self, now: u64) -> Result<()> {
        for i in 0..self.links.len() {
            self.links[i].advance(now, &mut self.fates);
            if !self.fates.is_empty() {
                self.settle(i)?;
            }
        }
        self.flush()
    }

    /// The counters for one stats line, copied so the writer thread can format them.
    fn record(&self, t: f64, is_final: bool, realtime: bool) -> Record {
        Record {
            t,
            is_final,
            lateness: self.lateness,
            causes: self.causes,
            nfq_errors: self.nfq_errors,
            rewrite_failed: self.rewrite_failed,
            gso_packets: self.gso_packets,
            unbound_packets: self.unbound_packets,
            realtime,
            links: self.links.iter().map(Link::snapshot).collect(),
        }
    }
}

/// The engine is the emulation's clock: a busy machine (clients, servers, the kernel's own
/// forwarding) must not delay its verdicts. SCHED_FIFO at a modest priority lets it preempt them;
/// where that is refused it runs as a normal process and its lateness counters tell.
pub fn set_realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 20 };
    let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if !ok {
        eprintln!(
            "catnip-engine: warning: SCHED_FIFO refused ({}); running unprioritized",
            std::io::Error::last_os_error()
        );
    }
    ok
}

/// Ask the kernel to timestamp received packets (a global switch any socket with
/// SO_TIMESTAMPNS turns on), so NFQUEUE hands each packet over with the time it reached the
/// router: the schedule then starts from the true arrival, not from when the engine woke up.
fn enable_rx_timestamps() -> Option<i32> {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return None;
        }
        let on: libc::c_int = 1;
        let ok = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0;
        ok.then_some(fd)
    }
}

fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Mark bit saying the low 31 bits carry the packet's scheduled release (us) from an earlier
/// link of this router (e.g. a host link's delay, then the bottleneck queue).
const MARK_RELEASED: u32 = 0x8000_0000;

fn release_mark(at_ns: u64) -> u32 {
    MARK_RELEASED | ((at_ns / 1000) as u32 & 0x7fff_ffff)
}

/// The most recent time (ns, not after `now`) whose microseconds end in the mark's 31 bits.
fn time_from_mark(mark: u32, now: u64) -> u64 {
    let now_us = now / 1000;
    let back = (now_us.wrapping_sub(u64::from(mark & 0x7fff_ffff))) & 0x7fff_ffff;
    (now_us - back.min(now_us)) * 1000
}

/// The packet's arrival on the engine's clock. A packet this engine released from another link
/// arrives at its scheduled release (the virtual schedule carries on exactly); a packet fresh
/// from the wire arrives at the kernel's receive timestamp (the skb keeps that stamp through
/// later hooks, so it is only right on the first one); otherwise now.
fn arrival_time(pkt: &Packet, now: u64) -> u64 {
    if pkt.mark & MARK_RELEASED != 0 {
        let at = time_from_mark(pkt.mark, now);
        return if now - at <= MAX_STAMP_AGE_NS { at } else { now };
    }
    let Some(stamp) = pkt.stamp_ns else { return now };
    let age = realtime_ns().saturating_sub(stamp);
    if age > MAX_STAMP_AGE_NS {
        return now;
    }
    now.saturating_sub(age)
}

/// One packet reaching `link` at `at`: shown to the ACK observers of all the router's links,
/// then the link is brought up to `at` and takes it (edge functions, then the policy). Live
/// mode and offline replay both call this, so a replay runs the live order, not a copy of it.
pub fn arrive<H: 'static>(
    acks: &AckFeed,
    link: &mut Link<H>,
    handle: H,
    info: PacketInfo,
    at: u64,
    out: &mut Vec<Fate<H>>,
) {
    acks.observe(&info, at);
    link.advance(at, out);
    link.arrive(handle, info, at, out);
}

/// A receive timestamp older than this is not trusted (clock step, stale skb).
const MAX_STAMP_AGE_NS: u64 = 50_000_000;

/// The NFQUEUE socket with every link's queue bound and set up (copy range, GSO, non-blocking),
/// and the links built: a failed start says which link and why.
fn bind_links(config: &Config) -> Result<(Queue, i32, Vec<usize>, Vec<Link<Packet>>)> {
    let (mut queue, fd) = open_queue()?;
    queue.set_recv_enobufs(true)?;
    let rcvbuf: libc::c_int = 16 << 20;
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &rcvbuf as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut by_queue = vec![usize::MAX; 65536];
    let mut links = Vec::new();
    for (i, l) in config.links.iter().enumerate() {
        queue.bind(l.queue_num).with_context(|| {
            format!(
                "link {:?}: cannot bind NFQUEUE {} (root needed; is another process bound to it?)",
                l.name, l.queue_num
            )
        })?;
        queue.set_queue_max_len(l.queue_num, config.queue_maxlen)?;
        by_queue[usize::from(l.queue_num)] = i;
        links.push(Link::new(l, config.seed).map_err(|e| anyhow!("link {:?}: {e}", l.name))?);
    }
    for (queue_num, range) in copy_ranges(config) {
        queue.set_copy_range(queue_num, range)?;
    }
    for l in config.links.iter().filter(|l| !l.may_rewrite()) {
        // Without this flag the kernel completes every partial checksum before queueing (one
        // pass over the payload) and the receiver, handed a packet without the offload's
        // promise, checks it again (another): measured 5% of the engine's CPU (docs/benchmarks.md).
        // Links that may rewrite keep the default: a verdict with a payload marks the packet's
        // checksum as not to be completed, so it must be complete already.
        queue.set_recv_gso(l.queue_num, true)?;
    }
    queue.set_nonblocking(true);
    Ok((queue, fd, by_queue, links))
}

/// What the loop carries from one packet to the next besides the engine: the link of each
/// queue number, each link's last arrival time, and the arrival log if one was asked for.
struct Arrivals {
    by_queue: Vec<usize>,
    last: Vec<u64>,
    log: Option<ArrivalLog>,
}

impl Engine {
    /// One received packet: an unbound queue's packet is accepted as it came; any other arrives
    /// at its link (the same `arrive` an offline replay calls), then the link runs up to now.
    fn take(&mut self, acks: &AckFeed, arrivals: &mut Arrivals, pkt: Packet) -> Result<()> {
        let now = now_ns();
        let i = arrivals.by_queue[usize::from(pkt.queue_num)];
        if i == usize::MAX {
            self.unbound_packets += 1;
            self.batch.push(pkt.queue_num, pkt.id, true, None);
            return Ok(());
        }
        self.gso_packets += u64::from(pkt.gso);
        let info = PacketInfo::parse(&pkt.payload, pkt.orig_len);
        // Never earlier than the link's previous arrival: its schedule only moves forward.
        let at = arrival_time(&pkt, now).max(arrivals.last[i]);
        arrivals.last[i] = at;
        if let Some(log) = arrivals.log.as_mut() {
            log.write(i, at, &info)?;
        }
        arrive(acks, &mut self.links[i], pkt, info, at, &mut self.fates);
        self.links[i].advance(now, &mut self.fates);
        self.settle(i)
    }

    /// Everything the socket holds now, packet by packet, verdicts sent as batches fill.
    fn drain_socket(
        &mut self,
        receiver: &mut Receiver,
        received: &mut Vec<Packet>,
        acks: &AckFeed,
        arrivals: &mut Arrivals,
    ) -> Result<()> {
        loop {
            match receiver.recv(received) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.nfq_errors += 1,
                Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(()),
                Err(e) => return Err(e).context("NFQUEUE receive failed"),
            }
            for pkt in received.drain(..) {
                self.take(acks, arrivals, pkt)?;
            }
            if self.batch.is_full() {
                self.flush()?;
            }
        }
    }

    /// Shutdown: release everything held so no connection is left hanging.
    fn release_all(&mut self) {
        let _ = self.flush();
        for l in 0..self.links.len() {
            for (mut pkt, info) in self.links[l].drain() {
                if self.rewrites[l] && rewrite(&mut pkt, info.dscp, &mut self.rewrite_failed) {
                    self.batch.push_rewritten(pkt.queue_num, pkt.id, None, &pkt.payload);
                } else {
                    self.batch.push(pkt.queue_num, pkt.id, true, None);
                }
                if self.batch.is_full() {
                    let _ = self.batch.flush();
                }
            }
        }
        let _ = self.batch.flush();
    }
}

/// Sleep in ppoll until the socket is readable or `next` (ns, CLOCK_MONOTONIC) is `spin_ns` away.
fn wait_until(fd: i32, next: u64, spin_ns: u64) {
    let wait = next.saturating_sub(now_ns());
    // Close to an event, poll without sleeping: waking a sleeping process costs tens of
    // microseconds on a VM, and every hop of every packet would pay it.
    let wait = wait.saturating_sub(spin_ns);
    let timeout = libc::timespec { tv_sec: (wait / 1_000_000_000) as _, tv_nsec: (wait % 1_000_000_000) as _ };
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    unsafe { libc::ppoll(&mut pfd, 1, &timeout, std::ptr::null()) };
}

pub fn run(config: &Config, stats_path: &Path) -> Result<()> {
    let (queue, fd, by_queue, links) = bind_links(config)?;
    // Started before the engine turns real-time, and set back to normal priority in any case.
    let mut stats = StatsWriter::open(stats_path, config.links.iter().map(|l| l.name.clone()).collect())?;
    // Only once every queue is ours: a failed start then says one thing, the reason.
    let realtime = set_realtime_priority();
    let _stamp_socket = enable_rx_timestamps();
    install_signal_handlers();
    println!("READY");
    std::io::stdout().flush()?;

    let max_copy = copy_ranges(config).last().map_or(COPY_RANGE, |r| r.1);
    let mut receiver = Receiver::new(fd, config.recv_batch, usize::from(max_copy));
    let mut received: Vec<Packet> = Vec::with_capacity(config.recv_batch);
    let mut engine = Engine {
        links,
        lateness: Lateness::default(),
        causes: LatenessCauses::default(),
        late_threshold_ns: config.late_threshold_us * 1000,
        nfq_errors: 0,
        fates: Vec::new(),
        batch: VerdictBatch::new(fd, config.verdict_batch),
        due: Vec::new(),
        rewrites: config.links.iter().map(|l| l.may_rewrite()).collect(),
        rewrite_failed: 0,
        gso_packets: 0,
        unbound_packets: 0,
    };
    let acks = AckFeed::of(&engine.links);
    let log = match &config.arrival_log {
        Some(path) => Some(ArrivalLog::create(path, config.links.iter().map(|l| l.name.clone()).collect())?),
        None => None,
    };
    let mut arrivals = Arrivals { by_queue, last: vec![0u64; engine.links.len()], log };
    let spin_ns = config.spin_us * 1000;
    let start = now_ns();
    let interval = config.stats_interval_ms * 1_000_000;
    let mut next_stats = start + interval;
    while !STOP.load(Ordering::SeqCst) {
        engine.advance_all(now_ns())?;
        engine.drain_socket(&mut receiver, &mut received, &acks, &mut arrivals)?;
        engine.flush()?; // the socket is drained: nothing waits behind these verdicts any more
        let now = now_ns();
        if now >= next_stats {
            if let Err(e) = stats.send(engine.record((now - start) as f64 / 1e9, false, realtime)) {
                eprintln!("catnip-engine: warning: no more stats lines: {e:#}; emulation goes on");
            }
            next_stats += interval * ((now - next_stats) / interval + 1);
        }
        let next = engine.links.iter().filter_map(|l| l.next_event()).min().unwrap_or(u64::MAX).min(next_stats);
        wait_until(fd, next, spin_ns);
    }
    // Shutdown: release everything held, then the final record.
    engine.release_all();
    drop(queue); // the socket closes once every verdict has gone
    if let Some(log) = arrivals.log {
        log.finish()?;
    }
    if stats.skipped > 0 {
        eprintln!("catnip-engine: note: {} stats lines skipped (the writer was behind)", stats.skipped);
    }
    stats.finish(engine.record((now_ns() - start) as f64 / 1e9, true, realtime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rewriting_links_copy_whole_packets_and_they_are_set_last() {
        let link = |n: u16, edge: &str| {
            format!(
                r#"{{"name": "l{n}", "queue_num": {n}, "rate_bps": 0, "delay_us": 0, "buffer": null,
                    "policy": {{"kind": "droptail"}}, "edge": [{edge}]}}"#
            )
        };
        let police = |action: &str| {
            format!(r#"{{"kind": "police", "rate_bps": 1000, "bucket_bytes": 1500, "exceed": {action}}}"#)
        };
        let links = [
            link(1, r#"{"kind": "mark", "default": 10}"#),
            link(2, ""),
            link(3, &police(r#"{"action": "remark", "dscp": 12}"#)),
            link(4, &police(r#"{"action": "drop"}"#)),
        ];
        let config =
            Config::parse(&crate::testkit::filled(&format!(r#"{{"links": [{}]}}"#, links.join(", ")))).unwrap();
        assert_eq!(copy_ranges(&config), vec![(2, 80), (4, 80), (1, 65535), (3, 65535)]);
    }

    #[test]
    fn release_marks_round_trip_to_the_microsecond() {
        let at = 5_000_123_456_789u64; // ns
        for later in [0u64, 1_000, 3_000_000, 40_000_000] {
            assert_eq!(time_from_mark(release_mark(at), at + later), at / 1000 * 1000);
        }
        // Across the 31-bit wrap of the microsecond counter.
        let wrap = (1u64 << 31) * 1000 - 500_000;
        assert_eq!(time_from_mark(release_mark(wrap), wrap + 2_000_000), wrap / 1000 * 1000);
    }
}
