//! Writes the engine's stats lines (STATS.jsonl) from a thread of its own, at normal priority.
//!
//! The real-time loop only copies its counters and hands them over: a write to the stats file
//! was measured blocking for 46-50 ms about once a second under a 100-client run (the page
//! cache waiting on writeback), and every verdict due meanwhile was that late
//! (docs/fidelity.md). Each line is formatted whole and written with one `write_all`; a reader
//! may still catch the last line half written and must skip it (testbed/engine.py).
//!
//! Stats are never worth the emulation: when the writer cannot keep up, periodic lines are
//! skipped (and counted), and when the file cannot be written the engine says so once and goes
//! on emulating; the runner then finds no final line and flags the point.

use crate::stats::{Lateness, LatenessCauses, LinkSnapshot};
use anyhow::{anyhow, Context, Result};
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// One stats line: the engine's counters and every link's, in the config's link order.
pub struct Record {
    pub t: f64,
    pub is_final: bool,
    pub lateness: Lateness,
    pub causes: LatenessCauses,
    pub nfq_errors: u64,
    /// Packets whose new DSCP could not be written (see nfq_loop.rs).
    pub rewrite_failed: u64,
    /// Segmentation-offload super-packets received whole (see nfq_loop.rs).
    pub gso_packets: u64,
    /// Packets of a queue no link has, accepted unemulated (see nfq_loop.rs).
    pub unbound_packets: u64,
    pub realtime: bool,
    pub links: Vec<LinkSnapshot>,
}

impl Record {
    pub fn to_json(&self, names: &[String]) -> Value {
        let mut links = Map::new();
        for (name, l) in names.iter().zip(&self.links) {
            links.insert(name.clone(), l.to_json());
        }
        let e = &self.lateness;
        let mut engine = json!({
            "events": e.events,
            "late_events": e.late_events,
            "max_late_us": e.max_late_ns as f64 / 1000.0,
            "late_p50_us": e.quantile_us(0.5),
            "late_p99_us": e.quantile_us(0.99),
            "late_p999_us": e.quantile_us(0.999),
            "nfq_errors": self.nfq_errors,
            "dscp_rewrite_failed": self.rewrite_failed,
            "gso_packets": self.gso_packets,
            "unbound_packets": self.unbound_packets,
            "realtime_scheduling": self.realtime,
        });
        engine.as_object_mut().expect("an object").extend(self.causes.fields());
        json!({"t": self.t, "final": self.is_final, "engine": engine, "links": links})
    }
}

/// Lines waiting for the writer; beyond this, periodic lines are skipped (0.5 s each by default).
const BACKLOG: usize = 16;

pub struct StatsWriter {
    tx: Option<SyncSender<Record>>,
    thread: Option<JoinHandle<Result<()>>>,
    /// Periodic lines not written because the writer was behind.
    pub skipped: u64,
}

impl StatsWriter {
    /// Open (append to) `path` and start the writing thread. The file is opened here so a bad
    /// path fails the engine's start, not the first stats line.
    pub fn open(path: &Path, names: Vec<String>) -> Result<StatsWriter> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let shown = path.display().to_string();
        let (tx, rx) = sync_channel::<Record>(BACKLOG);
        let thread = std::thread::Builder::new()
            .name("stats-writer".into())
            .spawn(move || -> Result<()> {
                normal_priority();
                block_stop_signals();
                for record in rx {
                    write_record(&mut file, &names, &record).with_context(|| format!("cannot write {shown}"))?;
                }
                Ok(())
            })
            .context("cannot start the stats writer thread")?;
        Ok(StatsWriter { tx: Some(tx), thread: Some(thread), skipped: 0 })
    }

    /// Hand a periodic line over without waiting: if the writer is behind, the line is skipped.
    /// Fails only when the writer has stopped, with the reason it stopped (once; later lines
    /// are dropped silently).
    pub fn send(&mut self, record: Record) -> Result<()> {
        let Some(tx) = &self.tx else { return Ok(()) };
        match tx.try_send(record) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.skipped += 1;
                Ok(())
            }
            Err(TrySendError::Disconnected(_)) => self.stopped(),
        }
    }

    /// Hand the final line over, waiting for room, then write everything queued and stop.
    pub fn finish(mut self, record: Record) -> Result<()> {
        let Some(tx) = self.tx.take() else { return Ok(()) };
        let sent = tx.send(record).is_ok();
        drop(tx);
        let joined = self.join();
        if sent {
            joined
        } else {
            joined.and(Err(anyhow!("the stats writer stopped before the final line")))
        }
    }

    fn stopped(&mut self) -> Result<()> {
        self.tx = None;
        Err(self.join().err().unwrap_or_else(|| anyhow!("the stats writer stopped")))
    }

    fn join(&mut self) -> Result<()> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow!("the stats writer panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for StatsWriter {
    /// An engine leaving on an error still writes the lines it had queued.
    fn drop(&mut self) {
        self.tx = None;
        let _ = self.join();
    }
}

fn write_record(file: &mut File, names: &[String], record: &Record) -> Result<()> {
    let mut line = serde_json::to_string(&record.to_json(names))?;
    line.push('\n');
    file.write_all(line.as_bytes())?;
    Ok(())
}

/// The thread must not inherit the engine's SCHED_FIFO: its waits on the disk are harmless only
/// at normal priority.
fn normal_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
        eprintln!(
            "catnip-engine: warning: stats writer cannot take normal priority ({})",
            std::io::Error::last_os_error()
        );
    }
}

/// SIGTERM and SIGINT are for the real-time loop (its ppoll returns at once); taken by this
/// thread, the loop would notice only at its next wake-up.
fn block_stop_signals() {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketInfo;
    use crate::stats::LinkStats;

    #[test]
    fn lines_arrive_whole_in_order_with_the_link_names() {
        let dir = std::env::temp_dir().join(format!("catnip-stats-writer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.jsonl");
        let _ = std::fs::remove_file(&path);
        // Many links make a line far longer than one pipe or page: it must still be one line.
        let names: Vec<String> = (0..300).map(|i| format!("r>c{i}")).collect();
        let mut w = StatsWriter::open(&path, names.clone()).unwrap();
        let mut s = LinkStats::default();
        s.arrived.add(&PacketInfo::new(1500, 10, 0));
        let mut late = Lateness::default();
        late.record(2_000_000, 1_000_000);
        let record = |i: usize, fin| Record {
            t: i as f64,
            is_final: fin,
            lateness: late,
            causes: LatenessCauses::default(),
            nfq_errors: 0,
            rewrite_failed: 0,
            gso_packets: 0,
            unbound_packets: 0,
            realtime: false,
            links: vec![s.snapshot(i, 1500 * i); names.len()],
        };
        w.send(record(0, false)).unwrap();
        w.send(record(1, false)).unwrap();
        w.finish(record(2, true)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert!(text.lines().next().unwrap().len() > 65536);
        assert_eq!(lines.iter().map(|v| v["final"].as_bool().unwrap()).collect::<Vec<_>>(), [false, false, true]);
        assert_eq!(lines[2]["links"].as_object().unwrap().len(), 300);
        assert_eq!(lines[2]["links"]["r>c299"]["queue_pkts"], 2);
        assert_eq!(lines[2]["links"]["r>c0"]["arrived"]["high"], json!([1, 1500]));
        assert_eq!(lines[0]["engine"]["late_events"], 1);
        for k in [
            "late_at_issue_events",
            "slow_verdict_calls",
            "verdict_call_p99_us",
            "max_verdict_call_us",
            "gso_packets",
            "unbound_packets",
        ] {
            assert!(lines[0]["engine"].get(k).is_some(), "{k} missing from the engine's counters");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_path_fails_at_open() {
        let err = StatsWriter::open(Path::new("/nonexistent-dir/stats.jsonl"), vec![]).err().unwrap();
        assert!(format!("{err:#}").contains("cannot open /nonexistent-dir/stats.jsonl"), "{err:#}");
    }

    #[test]
    fn the_writer_thread_runs_at_normal_priority_with_stop_signals_blocked() {
        // As in the engine: the caller is real-time when it can be (root), the writer is not.
        let param = libc::sched_param { sched_priority: 10 };
        let was_rt = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            normal_priority();
            block_stop_signals();
            let policy = unsafe { libc::sched_getscheduler(0) };
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) };
            let blocked =
                unsafe { libc::sigismember(&set, libc::SIGTERM) == 1 && libc::sigismember(&set, libc::SIGINT) == 1 };
            tx.send((policy, blocked)).unwrap();
        })
        .join()
        .unwrap();
        if was_rt {
            let normal = libc::sched_param { sched_priority: 0 };
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) };
        }
        assert_eq!(rx.recv().unwrap(), (libc::SCHED_OTHER, true));
    }

    #[test]
    fn periodic_lines_are_skipped_not_waited_for_when_the_writer_is_behind() {
        let (tx, _rx) = sync_channel::<Record>(1); // a writer that never reads
        let mut w = StatsWriter { tx: Some(tx), thread: None, skipped: 0 };
        let rec = || Record {
            t: 0.0,
            is_final: false,
            lateness: Lateness::default(),
            causes: LatenessCauses::default(),
            nfq_errors: 0,
            rewrite_failed: 0,
            gso_packets: 0,
            unbound_packets: 0,
            realtime: false,
            links: vec![],
        };
        for _ in 0..3 {
            w.send(rec()).unwrap();
        }
        assert_eq!(w.skipped, 2);
        w.tx = None;
    }
}
