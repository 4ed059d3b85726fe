//! Packets received from NFQUEUE in batches: up to N netlink messages per recvmmsg call.
//!
//! The nfq crate receives one message per recv call; the kernel sends each queued packet as a
//! datagram of its own, so that is one system call per packet. recvmmsg takes every message
//! waiting (up to the batch) in one call. Each packet message is parsed here into a [`Packet`]
//! that owns its copied bytes, so the engine can hold it for as long as its link keeps it. The
//! crate still opens, binds and configures the queues; only the receive path is ours.

use std::io;

const NLMSG_HDRLEN: usize = 16;
const NFGEN_HDRLEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
/// (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET.
const NFQNL_PACKET: u16 = 0x0300;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_MARK: u16 = 3;
const NFQA_TIMESTAMP: u16 = 4;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CAP_LEN: u16 = 13;
const NFQA_SKB_INFO: u16 = 14;
const NFQA_SKB_GSO: u32 = 2;
/// The attribute type without the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// One queued packet as the kernel handed it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub queue_num: u16,
    pub id: u32,
    pub mark: u32,
    /// The kernel's receive timestamp, ns since the epoch (when the skb carries one).
    pub stamp_ns: Option<u64>,
    /// Length of the packet on the wire (the copy may be shorter).
    pub orig_len: usize,
    /// A segmentation-offload super-packet handed over whole.
    pub gso: bool,
    /// The copied bytes (the copy range's worth, from the IP header on).
    pub payload: Vec<u8>,
}

fn u16_ne(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_ne(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

fn u32_be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_be(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed NFQUEUE message: {what}"))
}

/// Parse one datagram (one or more netlink messages) into packets. An error message with an
/// error number (a verdict the kernel refused) is returned as that error, as the crate did;
/// other message types are skipped.
pub fn parse(buf: &[u8], out: &mut Vec<Packet>) -> io::Result<()> {
    let mut off = 0;
    while buf.len() - off >= NLMSG_HDRLEN {
        let len = u32_ne(buf, off) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() - off {
            return Err(malformed("message length"));
        }
        let msg = &buf[off..off + len];
        match u16_ne(msg, 4) {
            NLMSG_ERROR if len >= NLMSG_HDRLEN + 4 => {
                let errno = (u32_ne(msg, NLMSG_HDRLEN) as i32).unsigned_abs() as i32;
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(errno));
                }
            }
            NFQNL_PACKET if len >= NLMSG_HDRLEN + NFGEN_HDRLEN => out.push(packet(msg)?),
            _ => {}
        }
        off += (len + 3) & !3;
        off = off.min(buf.len());
    }
    Ok(())
}

fn packet(msg: &[u8]) -> io::Result<Packet> {
    let queue_num = u16::from_be_bytes([msg[NLMSG_HDRLEN + 2], msg[NLMSG_HDRLEN + 3]]);
    let mut p = Packet { queue_num, id: 0, mark: 0, stamp_ns: None, orig_len: 0, gso: false, payload: Vec::new() };
    let (mut has_hdr, mut cap_len) = (false, None);
    let mut a = NLMSG_HDRLEN + NFGEN_HDRLEN;
    while msg.len() - a >= 4 {
        let alen = usize::from(u16_ne(msg, a));
        if alen < 4 || alen > msg.len() - a {
            return Err(malformed("attribute length"));
        }
        let body = &msg[a + 4..a + alen];
        match u16_ne(msg, a + 2) & NLA_TYPE_MASK {
            NFQA_PACKET_HDR if body.len() >= 4 => {
                p.id = u32_be(body, 0);
                has_hdr = true;
            }
            NFQA_MARK if body.len() >= 4 => p.mark = u32_be(body, 0),
            NFQA_TIMESTAMP if body.len() >= 16 => {
                p.stamp_ns = Some(u64_be(body, 0) * 1_000_000_000 + u64_be(body, 8) * 1000);
            }
            NFQA_PAYLOAD => p.payload = body.to_vec(),
            NFQA_CAP_LEN if body.len() >= 4 => cap_len = Some(u32_be(body, 0) as usize),
            NFQA_SKB_INFO if body.len() >= 4 => p.gso = u32_be(body, 0) & NFQA_SKB_GSO != 0,
            _ => {}
        }
        a += (alen + 3) & !3;
        a = a.min(msg.len());
    }
    if !has_hdr {
        return Err(malformed("no packet header"));
    }
    // The kernel sends the original length only when it copied less (as the crate reads it).
    p.orig_len = cap_len.unwrap_or(p.payload.len());
    Ok(p)
}

/// Receive buffers for `batch` messages of up to `room` bytes each, reused call after call.
pub struct Receiver {
    fd: i32,
    room: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl Receiver {
    /// `max_copy`: the largest copy range of the queues on `fd` (the kernel's metadata comes
    /// on top: under a page).
    pub fn new(fd: i32, batch: usize, max_copy: usize) -> Receiver {
        let batch = batch.max(1);
        let room = 8192 + max_copy;
        let mut r = Receiver { fd, room, bufs: vec![0; room * batch], iovs: Vec::new(), hdrs: Vec::new() };
        for chunk in r.bufs.chunks_mut(room) {
            r.iovs.push(libc::iovec { iov_base: chunk.as_mut_ptr() as *mut libc::c_void, iov_len: room });
        }
        for iov in r.iovs.iter_mut() {
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = iov as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 1;
            r.hdrs.push(h);
        }
        r
    }

    /// Take the messages waiting, up to the batch, without blocking; append their packets to
    /// `out`. Ok(0) when none was waiting; errors as recv gives them (ENOBUFS: the socket
    /// overflowed and messages were lost).
    pub fn recv(&mut self, out: &mut Vec<Packet>) -> io::Result<usize> {
        let n = unsafe {
            libc::recvmmsg(
                self.fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(e) };
        }
        for i in 0..n as usize {
            let h = &self.hdrs[i];
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let start = i * self.room;
            parse(&self.bufs[start..start + h.msg_len as usize], out)?;
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet message as nfqnl_build_packet_message writes it (the attributes we read, plus
    /// one we skip), in the order the kernel puts them.
    fn message(queue: u16, id: u32, mark: Option<u32>, cap_len: Option<u32>, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        let attr = |m: &mut Vec<u8>, kind: u16, body: &[u8]| {
            m.extend_from_slice(&((4 + body.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(body);
            m.resize((m.len() + 3) & !3, 0);
        };
        m.extend_from_slice(&[0; 16]);
        m.extend_from_slice(&[2, 0]);
        m.extend_from_slice(&queue.to_be_bytes());
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&[0x08, 0x00, 4]);
        attr(&mut m, NFQA_PACKET_HDR, &hdr);
        if let Some(mark) = mark {
            attr(&mut m, NFQA_MARK, &mark.to_be_bytes());
        }
        let mut stamp = 1_700_000_000u64.to_be_bytes().to_vec();
        stamp.extend_from_slice(&123_456u64.to_be_bytes());
        attr(&mut m, NFQA_TIMESTAMP, &stamp);
        attr(&mut m, 5, &7u32.to_be_bytes()); // NFQA_IFINDEX_INDEV: not read
        attr(&mut m, NFQA_SKB_INFO, &NFQA_SKB_GSO.to_be_bytes());
        if let Some(c) = cap_len {
            attr(&mut m, NFQA_CAP_LEN, &c.to_be_bytes());
        }
        attr(&mut m, NFQA_PAYLOAD, payload);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&NFQNL_PACKET.to_ne_bytes());
        m
    }

    #[test]
    fn a_packet_message_gives_every_field_the_engine_reads() {
        let mut out = Vec::new();
        parse(&message(7, 0xdead_beef, Some(0x8000_0042), Some(1500), &[0x45, 0x28, 0, 80, 1]), &mut out).unwrap();
        assert_eq!(
            out,
            [Packet {
                queue_num: 7,
                id: 0xdead_beef,
                mark: 0x8000_0042,
                stamp_ns: Some(1_700_000_000 * 1_000_000_000 + 123_456_000),
                orig_len: 1500,
                gso: true,
                payload: vec![0x45, 0x28, 0, 80, 1],
            }]
        );
    }

    #[test]
    fn a_whole_copy_has_no_cap_len_and_messages_follow_each_other() {
        let mut buf = message(1, 1, None, None, &[0x45; 40]);
        buf.extend(message(2, 2, None, Some(60), &[0x45; 40]));
        let mut out = Vec::new();
        parse(&buf, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|p| (p.queue_num, p.id, p.mark, p.orig_len)).collect::<Vec<_>>(),
            [(1, 1, 0, 40), (2, 2, 0, 60)]
        );
    }

    #[test]
    fn a_refused_verdict_comes_back_as_its_error_and_bad_lengths_are_refused() {
        let mut err = vec![0u8; 36];
        err[0..4].copy_from_slice(&36u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse(&err, &mut Vec::new()).unwrap_err().raw_os_error(), Some(libc::ENOENT));
        let mut ack = err.clone();
        ack[16..20].copy_from_slice(&0i32.to_ne_bytes());
        assert!(parse(&ack, &mut Vec::new()).is_ok());
        let mut short = message(1, 1, None, None, &[1, 2, 3, 4]);
        short[0..4].copy_from_slice(&400u32.to_ne_bytes());
        assert!(parse(&short, &mut Vec::new()).is_err());
    }
}
