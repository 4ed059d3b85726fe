//! The live engine's arrivals, written in the order it took them and at the times it used
//! (`run.arrival_log`): the exact input of a replay of any of its links.
//!
//! A capture on the router's interfaces gives each packet its receive stamp, but not the order
//! the engine saw the links' packets in: a packet released by one link (an access link's delay)
//! reaches the next link's queue a verdict round trip after its scheduled release, and an ACK
//! crossing another link in that time is shown to the ACK observers first. The TCP-aware markers
//! (edge/tcpf.rs) read the ACKs, so that order changes marks. This log keeps it.
//!
//! ARRIVALS.csv: `link` (the link's name) then replay.rs's trace columns, one row per packet
//! handed to a link, the DSCP as it arrived (before the link's edge functions). A link's trace is
//! its rows as `fwd` and every other row as `rev` (nfq_loop.rs shows every packet of the engine to
//! the ACK observers); results/replay_trace.py `from_arrival_log` writes it.

use crate::packet::PacketInfo;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub const HEADER: &str = "link,time_us,size,dscp,flow,proto,src,dst,sport,dport,dir,flags,seq,ack,payload";

pub struct ArrivalLog {
    out: BufWriter<File>,
    path: PathBuf,
    names: Vec<String>,
}

impl ArrivalLog {
    pub fn create(path: &Path, names: Vec<String>) -> Result<ArrivalLog> {
        let file = File::create(path).with_context(|| format!("arrival log {}: cannot create", path.display()))?;
        let mut log = ArrivalLog { out: BufWriter::with_capacity(1 << 20, file), path: path.to_owned(), names };
        writeln!(log.out, "{HEADER}").with_context(|| format!("arrival log {}", log.path.display()))?;
        Ok(log)
    }

    /// One packet reaching link `link` at `at_ns` (the time nfq_loop::arrive was given).
    pub fn write(&mut self, link: usize, at_ns: u64, info: &PacketInfo) -> Result<()> {
        self.row(link, at_ns, info).with_context(|| format!("arrival log {}", self.path.display()))
    }

    fn row(&mut self, link: usize, at_ns: u64, p: &PacketInfo) -> std::io::Result<()> {
        let w = &mut self.out;
        write!(w, "{},{}.{:03},{},{},{},", self.names[link], at_ns / 1000, at_ns % 1000, p.len, p.dscp, p.flow)?;
        if p.proto == 0 && p.src == 0 && p.dst == 0 {
            write!(w, ",,,")?;
        } else {
            write!(w, "{},{},{},", p.proto, Ipv4Addr::from(p.src), Ipv4Addr::from(p.dst))?;
        }
        match p.ports {
            Some((s, d)) => write!(w, "{s},{d},")?,
            None => write!(w, ",,")?,
        }
        match p.tcp {
            Some(t) => writeln!(w, ",{},{},{},{}", t.flags, t.seq, t.ack, t.payload),
            None => writeln!(w, ",,,,"),
        }
    }

    pub fn finish(mut self) -> Result<()> {
        self.out.flush().with_context(|| format!("arrival log {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::TcpInfo;

    #[test]
    fn rows_carry_the_trace_columns_to_the_nanosecond() {
        let dir = std::env::temp_dir().join(format!("catnip-arrivals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.csv");
        let mut log = ArrivalLog::create(&path, vec!["r1>r2".into(), "r2>r1".into()]).unwrap();
        let tcp = TcpInfo { seq: 7, ack: 9, flags: 0x18, payload: 1448 };
        let data =
            PacketInfo::new(1500, 10, 42).with_addresses(6, 0x0a01_0002, 0x0a02_0002, Some((4000, 80))).with_tcp(tcp);
        log.write(0, 5_000_123_456_789, &data).unwrap();
        log.write(1, 5_000_123_456_790, &PacketInfo::new(60, 0, 3)).unwrap();
        log.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(lines[1], "r1>r2,5000123456.789,1500,10,42,6,10.1.0.2,10.2.0.2,4000,80,,24,7,9,1448");
        assert_eq!(lines[2], "r2>r1,5000123456.790,60,0,3,,,,,,,,,,");
        assert_eq!(lines[1].split(',').count(), HEADER.split(',').count());
        assert_eq!(lines[2].split(',').count(), HEADER.split(',').count());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
