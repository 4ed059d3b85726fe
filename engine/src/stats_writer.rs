//! Writes the engine's stats lines (STATS.jsonl) from a thread of its own, at normal priority.
//!
//! The real-time loop only copies its counters and hands them over: a write to the stats file
//! was measured blocking for 46-50 ms about once a second under a 100-client run (the page
//! cache waiting on writeback), and every verdict due meanwhile was that late
//! (docs/fidelity.md). Each line is formatted whole and written with one call, so a reader
//! never sees half a record from a writer that formatted it piece by piece.

use crate::stats::{LinkSnapshot, Lateness};
use anyhow::{anyhow, Context, Result};
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;

/// One stats line: the engine's counters and every link's, in the config's link order.
pub struct Record {
    pub t: f64,
    pub is_final: bool,
    pub lateness: Lateness,
    pub nfq_errors: u64,
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
        json!({
            "t": self.t,
            "final": self.is_final,
            "engine": {
                "events": e.events,
                "late_events": e.late_events,
                "max_late_us": e.max_late_ns as f64 / 1000.0,
                "late_p50_us": e.quantile_us(0.5),
                "late_p99_us": e.quantile_us(0.99),
                "late_p999_us": e.quantile_us(0.999),
                "nfq_errors": self.nfq_errors,
                "realtime_scheduling": self.realtime,
            },
            "links": links,
        })
    }
}

pub struct StatsWriter {
    tx: Option<Sender<Record>>,
    thread: Option<JoinHandle<Result<()>>>,
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
        let (tx, rx) = channel::<Record>();
        let thread = std::thread::Builder::new()
            .name("stats-writer".into())
            .spawn(move || -> Result<()> {
                normal_priority();
                for record in rx {
                    write_record(&mut file, &names, &record).with_context(|| format!("cannot write {shown}"))?;
                }
                Ok(())
            })
            .context("cannot start the stats writer thread")?;
        Ok(StatsWriter { tx: Some(tx), thread: Some(thread) })
    }

    /// Queue a line. Fails only when the writer has stopped, with the reason it stopped.
    pub fn send(&mut self, record: Record) -> Result<()> {
        let sent = self.tx.as_ref().map(|tx| tx.send(record).is_ok()).unwrap_or(false);
        if sent {
            return Ok(());
        }
        self.tx = None;
        Err(self.join().err().unwrap_or_else(|| anyhow!("the stats writer stopped")))
    }

    /// Write everything queued and stop the thread.
    pub fn finish(mut self) -> Result<()> {
        self.tx = None;
        self.join()
    }

    fn join(&mut self) -> Result<()> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow!("the stats writer panicked"))?,
            None => Ok(()),
        }
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
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
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
        for (i, fin) in [(0, false), (1, false), (2, true)] {
            let links = vec![s.snapshot(i, 1500 * i); names.len()];
            w.send(Record { t: i as f64, is_final: fin, lateness: late, nfq_errors: 0, realtime: false, links })
                .unwrap();
        }
        w.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert!(text.lines().next().unwrap().len() > 65536);
        assert_eq!(lines.iter().map(|v| v["final"].as_bool().unwrap()).collect::<Vec<_>>(), [false, false, true]);
        assert_eq!(lines[2]["links"].as_object().unwrap().len(), 300);
        assert_eq!(lines[2]["links"]["r>c299"]["queue_pkts"], 2);
        assert_eq!(lines[2]["links"]["r>c0"]["arrived"]["high"], json!([1, 1500]));
        assert_eq!(lines[0]["engine"]["late_events"], 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_path_fails_at_open() {
        let err = StatsWriter::open(Path::new("/nonexistent-dir/stats.jsonl"), vec![]).err().unwrap();
        assert!(format!("{err:#}").contains("cannot open /nonexistent-dir/stats.jsonl"), "{err:#}");
    }
}
