//! The floor of any NFQUEUE engine on this machine (a benchmark aid, not the engine): accept every
//! packet of the config's first link at once, with nothing emulated, so forward_bench can show
//! what NFQUEUE itself costs beside plain forwarding and beside the engine.
//!
//! Started like the engine (`nfq_floor run --config C --stats S`, READY on stdout, SIGTERM ends it
//! with one final stats line holding the verdict count). Config fields read: the first link's
//! `queue_num` and `name`, `verdict_batch` (default 32) and `recv_batch`: 1 (default) receives
//! one message per call through the nfq crate (as the engine did before its own receive path);
//! N > 1 takes up to N per recvmmsg call through the engine's receive path (nfq_recv.rs).

use catnip_engine::nfq_loop::{open_queue, set_realtime_priority};
use catnip_engine::nfq_recv::Receiver;
use catnip_engine::verdicts::VerdictBatch;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let (Some(config), Some(stats)) = (arg("--config"), arg("--stats")) else {
        anyhow::bail!("usage: nfq_floor run --config FILE --stats FILE");
    };
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(config)?)?;
    let link = &config["links"][0];
    let queue_num = link["queue_num"].as_u64().unwrap_or(0) as u16;
    let name = link["name"].as_str().unwrap_or("link").to_string();
    let verdict_batch = config["verdict_batch"].as_u64().unwrap_or(32) as usize;
    let recv_batch = config["recv_batch"].as_u64().unwrap_or(1).max(1) as usize;

    let (mut queue, fd) = open_queue()?;
    queue.bind(queue_num)?;
    queue.set_queue_max_len(queue_num, 16384)?;
    queue.set_copy_range(queue_num, 80)?;
    queue.set_recv_gso(queue_num, true)?;
    queue.set_nonblocking(true);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    // Scheduled as the engine is, so the comparison is of the work per packet alone.
    set_realtime_priority();
    println!("READY");
    let mut batch = VerdictBatch::new(fd, verdict_batch);
    let mut receiver = Receiver::new(fd, recv_batch, 80);
    let mut received = Vec::new();
    let (mut verdicts, mut calls, mut found) = (0u64, 0u64, Vec::new());
    let flush = |batch: &mut VerdictBatch, calls: &mut u64| -> std::io::Result<()> {
        if !batch.is_empty() {
            *calls += 1;
        }
        batch.flush()
    };
    while !STOP.load(Ordering::SeqCst) {
        loop {
            if recv_batch == 1 {
                match queue.recv() {
                    Ok(msg) => found.push((msg.get_queue_num(), msg.get_packet_id())),
                    Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                    Err(e) => return Err(e.into()),
                }
            } else {
                match receiver.recv(&mut received) {
                    Ok(0) => break,
                    Ok(_) => found.extend(received.drain(..).map(|p| (p.queue_num, p.id))),
                    Err(e) if e.kind() == ErrorKind::Interrupted => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            for (q, id) in found.drain(..) {
                batch.push(q, id, true, None);
                verdicts += 1;
                if batch.is_full() {
                    flush(&mut batch, &mut calls)?;
                }
            }
        }
        flush(&mut batch, &mut calls)?;
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        unsafe { libc::ppoll(&mut pfd, 1, std::ptr::null(), std::ptr::null()) };
    }
    let line = serde_json::json!({"t": 0.0, "final": true,
        "engine": {"events": verdicts, "verdict_calls": calls, "recv_batch": recv_batch},
        "links": {name: {"sent": {"other": [verdicts, 0]}}}});
    std::fs::write(stats, format!("{line}\n"))?;
    Ok(())
}
