//! Live mode: the links of one router, fed by NFQUEUE, verdicts given on schedule.
//!
//! One netlink socket binds every link's queue number. The loop sleeps in ppoll until the
//! socket is readable or the next scheduled event (ns timeout, 1 ns timer slack), then
//! advances every link to the current time and gives the verdicts that fell due.

use crate::config::Config;
use crate::link::{Fate, Link};
use crate::packet::PacketInfo;
use crate::stats::Lateness;
use anyhow::{anyhow, Context, Result};
use nfq::{Message, Queue, Verdict};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Enough of the packet for the IPv4 header, options and the ports.
const COPY_RANGE: u16 = 128;

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
fn open_queue() -> Result<(Queue, i32)> {
    let before = open_sockets();
    let queue = Queue::open().context("cannot open the NFQUEUE netlink socket (root needed)")?;
    let new: Vec<i32> = open_sockets().difference(&before).copied().collect();
    match new.as_slice() {
        [fd] => Ok((queue, *fd)),
        _ => Err(anyhow!("cannot identify the NFQUEUE socket among new descriptors {new:?}")),
    }
}

struct Engine {
    queue: Queue,
    links: Vec<Link<Message>>,
    lateness: Lateness,
    late_threshold_ns: u64,
    nfq_errors: u64,
    fates: Vec<Fate<Message>>,
}

impl Engine {
    /// Give the verdicts for everything the links decided; deliveries are checked against
    /// their scheduled time.
    fn settle(&mut self, link: usize) -> Result<()> {
        for fate in std::mem::take(&mut self.fates) {
            let (mut msg, verdict) = match fate {
                Fate::Deliver { handle, at, .. } => {
                    let late = now_ns().saturating_sub(at);
                    self.lateness.record(late, self.late_threshold_ns);
                    self.links[link].stats.lateness.record(late, self.late_threshold_ns);
                    (handle, Verdict::Accept)
                }
                Fate::Drop { handle, .. } => (handle, Verdict::Drop),
            };
            msg.set_verdict(verdict);
            self.queue.verdict(msg).context("verdict refused by the kernel")?;
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
        Ok(())
    }

    fn stats_line(&self, t: f64, is_final: bool, realtime: bool) -> Value {
        let mut links = Map::new();
        for l in &self.links {
            links.insert(l.name.clone(), l.stats.to_json(l.queue_packets(), l.queue_bytes()));
        }
        json!({
            "t": t,
            "final": is_final,
            "engine": {
                "events": self.lateness.events,
                "late_events": self.lateness.late_events,
                "max_late_us": self.lateness.max_late_ns as f64 / 1000.0,
                "nfq_errors": self.nfq_errors,
                "realtime_scheduling": realtime,
            },
            "links": links,
        })
    }
}

/// The engine is the emulation's clock: a busy machine (clients, servers, the kernel's own
/// forwarding) must not delay its verdicts. SCHED_FIFO at a modest priority lets it preempt them;
/// where that is refused it runs as a normal process and its lateness counters tell.
fn set_realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 20 };
    let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if !ok {
        eprintln!("catnip-engine: warning: SCHED_FIFO refused ({}); running unprioritized",
                  std::io::Error::last_os_error());
    }
    ok
}

fn write_line(file: &mut File, value: &Value) -> Result<()> {
    writeln!(file, "{value}")?;
    file.flush()?;
    Ok(())
}

pub fn run(config: &Config, stats_path: &Path) -> Result<()> {
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
    let realtime = set_realtime_priority();
    let mut by_queue = vec![usize::MAX; 65536];
    let mut links = Vec::new();
    for (i, l) in config.links.iter().enumerate() {
        queue
            .bind(l.queue_num)
            .with_context(|| format!("link {:?}: cannot bind NFQUEUE {} (already bound?)", l.name, l.queue_num))?;
        queue.set_copy_range(l.queue_num, COPY_RANGE)?;
        queue.set_queue_max_len(l.queue_num, config.queue_maxlen)?;
        by_queue[usize::from(l.queue_num)] = i;
        links.push(Link::new(l, config.seed).map_err(|e| anyhow!("link {:?}: {e}", l.name))?);
    }
    queue.set_nonblocking(true);
    let mut stats = OpenOptions::new()
        .create(true)
        .append(true)
        .open(stats_path)
        .with_context(|| format!("cannot open {}", stats_path.display()))?;
    install_signal_handlers();
    println!("READY");
    std::io::stdout().flush()?;

    let mut engine = Engine {
        queue,
        links,
        lateness: Lateness::default(),
        late_threshold_ns: config.late_threshold_us * 1000,
        nfq_errors: 0,
        fates: Vec::new(),
    };
    let start = now_ns();
    let interval = config.stats_interval_ms * 1_000_000;
    let mut next_stats = start + interval;
    while !STOP.load(Ordering::SeqCst) {
        engine.advance_all(now_ns())?;
        loop {
            match engine.queue.recv() {
                Ok(msg) => {
                    let now = now_ns();
                    let i = by_queue[usize::from(msg.get_queue_num())];
                    if i == usize::MAX {
                        let mut msg = msg;
                        msg.set_verdict(Verdict::Accept);
                        engine.queue.verdict(msg)?;
                        continue;
                    }
                    let info = PacketInfo::parse(msg.get_payload(), msg.get_original_len());
                    engine.links[i].advance(now, &mut engine.fates);
                    engine.links[i].arrive(msg, info, now, &mut engine.fates);
                    engine.settle(i)?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => engine.nfq_errors += 1,
                Err(e) if e.kind() == ErrorKind::Interrupted => break,
                Err(e) => return Err(e).context("NFQUEUE receive failed"),
            }
        }
        let now = now_ns();
        if now >= next_stats {
            write_line(&mut stats, &engine.stats_line((now - start) as f64 / 1e9, false, realtime))?;
            next_stats += interval * ((now - next_stats) / interval + 1);
        }
        let next = engine.links.iter().filter_map(|l| l.next_event()).min().unwrap_or(u64::MAX).min(next_stats);
        let wait = next.saturating_sub(now_ns());
        let timeout = libc::timespec { tv_sec: (wait / 1_000_000_000) as _, tv_nsec: (wait % 1_000_000_000) as _ };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        unsafe { libc::ppoll(&mut pfd, 1, &timeout, std::ptr::null()) };
    }
    // Shutdown: release everything held so no connection is left hanging, then the final record.
    for l in 0..engine.links.len() {
        for mut msg in engine.links[l].drain() {
            msg.set_verdict(Verdict::Accept);
            let _ = engine.queue.verdict(msg);
        }
    }
    write_line(&mut stats, &engine.stats_line((now_ns() - start) as f64 / 1e9, true, realtime))?;
    Ok(())
}
