//! Verdicts written in batches: several NFQUEUE verdict messages in one netlink send.
//!
//! The nfq crate sends one message per verdict, one system call each; at 100,000+ packets per
//! second that call is a large share of the engine's time. The kernel's nfnetlink handles every
//! message of one send in turn (netlink_rcv_skb), so the verdicts of packets that fall due
//! together can share a call. Each message is the one the crate would send: nlmsghdr, nfgenmsg
//! (queue number), NFQA_VERDICT_HDR {verdict, packet id} and, for accepted packets, NFQA_MARK
//! and, for a packet given back rewritten, NFQA_PAYLOAD (what the crate sends after
//! `Message::set_payload`; the kernel replaces the packet with it, so it must be all of it).
//! Errors come back asynchronously on the socket, as they did for single sends.

use std::io;

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_VERDICT: u16 = 1;
const NLM_F_REQUEST: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_MARK: u16 = 3;
const NFQA_PAYLOAD: u16 = 10;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// nlmsghdr 16 + nfgenmsg 4 + verdict attribute 12 + mark attribute 8.
const MAX_MSG: usize = 40;

pub struct VerdictBatch {
    fd: i32,
    buf: Vec<u8>,
    count: usize,
    limit: usize,
}

impl VerdictBatch {
    /// `limit`: verdicts held before they are sent on their own.
    pub fn new(fd: i32, limit: usize) -> VerdictBatch {
        VerdictBatch { fd, buf: Vec::with_capacity(limit.max(1) * MAX_MSG), count: 0, limit: limit.max(1) }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn is_full(&self) -> bool {
        self.count >= self.limit
    }

    /// Queue a verdict (the caller flushes, when full or when nothing else is waiting).
    pub fn push(&mut self, queue_num: u16, packet_id: u32, accept: bool, mark: Option<u32>) {
        encode(&mut self.buf, queue_num, packet_id, accept, mark, None);
        self.count += 1;
    }

    /// Queue an accept that gives the packet back as `payload` (the whole packet, rewritten).
    pub fn push_rewritten(&mut self, queue_num: u16, packet_id: u32, mark: Option<u32>, payload: &[u8]) {
        encode(&mut self.buf, queue_num, packet_id, true, mark, Some(payload));
        self.count += 1;
    }

    /// Send every queued verdict in one call.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = unsafe {
            libc::sendto(
                self.fd,
                self.buf.as_ptr() as *const libc::c_void,
                self.buf.len(),
                0,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        self.buf.clear();
        self.count = 0;
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Append one verdict message (netlink headers in host order, netfilter payloads big-endian).
/// Netlink attributes are padded to 4 bytes; a payload only goes with an accept.
pub fn encode(
    buf: &mut Vec<u8>,
    queue_num: u16,
    packet_id: u32,
    accept: bool,
    mark: Option<u32>,
    payload: Option<&[u8]>,
) {
    let payload = payload.filter(|_| accept);
    let padded = |n: usize| (n + 3) & !3;
    let payload_len = payload.map_or(0, |p| padded(4 + p.len()));
    let len = (if accept && mark.is_some() { 40 } else { 32 } + payload_len) as u32;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT).to_ne_bytes());
    buf.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // sequence number
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    buf.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]); // family, NFNETLINK_V0
    buf.extend_from_slice(&queue_num.to_be_bytes());
    buf.extend_from_slice(&12u16.to_ne_bytes());
    buf.extend_from_slice(&NFQA_VERDICT_HDR.to_ne_bytes());
    buf.extend_from_slice(&(if accept { NF_ACCEPT } else { NF_DROP }).to_be_bytes());
    buf.extend_from_slice(&packet_id.to_be_bytes());
    if let (true, Some(mark)) = (accept, mark) {
        buf.extend_from_slice(&8u16.to_ne_bytes());
        buf.extend_from_slice(&NFQA_MARK.to_ne_bytes());
        buf.extend_from_slice(&mark.to_be_bytes());
    }
    if let Some(p) = payload {
        buf.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        buf.extend_from_slice(&NFQA_PAYLOAD.to_ne_bytes());
        buf.extend_from_slice(p);
        buf.resize(buf.len() + padded(p.len()) - p.len(), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accept_with_a_mark_is_the_crates_message_byte_for_byte() {
        let mut buf = Vec::new();
        encode(&mut buf, 5, 0x01020304, true, Some(0xaabbccdd), None);
        assert_eq!(buf.len(), 40);
        assert_eq!(u32::from_ne_bytes(buf[0..4].try_into().unwrap()), 40);
        assert_eq!(u16::from_ne_bytes(buf[4..6].try_into().unwrap()), 0x0301);
        assert_eq!(u16::from_ne_bytes(buf[6..8].try_into().unwrap()), 1);
        assert_eq!(&buf[16..20], &[0, 0, 0, 5]);
        assert_eq!(&buf[20..24], &[12u8, 0, 2, 0]);
        assert_eq!(&buf[24..32], &[0, 0, 0, 1, 1, 2, 3, 4]);
        assert_eq!(&buf[32..40], &[8, 0, 3, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn a_drop_carries_no_mark_and_messages_follow_each_other() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, 7, false, Some(9), Some(&[1, 2]));
        encode(&mut buf, 1, 8, true, None, None);
        assert_eq!(buf.len(), 64);
        assert_eq!(&buf[24..32], &[0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(u32::from_ne_bytes(buf[32..36].try_into().unwrap()), 32);
        assert_eq!(&buf[56..64], &[0, 0, 0, 1, 0, 0, 0, 8]);
    }

    #[test]
    fn a_rewritten_packet_follows_the_mark_padded_to_four_bytes() {
        let mut buf = Vec::new();
        encode(&mut buf, 5, 9, true, Some(0xaabbccdd), Some(&[0x45, 0x28, 0, 21, 7]));
        // 40 as before, then the attribute: length 4 + 5 = 9, type 10, 5 bytes, 3 of padding.
        assert_eq!(buf.len(), 52);
        assert_eq!(u32::from_ne_bytes(buf[0..4].try_into().unwrap()), 52);
        assert_eq!(&buf[32..40], &[8, 0, 3, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(u16::from_ne_bytes(buf[40..42].try_into().unwrap()), 9);
        assert_eq!(u16::from_ne_bytes(buf[42..44].try_into().unwrap()), 10);
        assert_eq!(&buf[44..52], &[0x45, 0x28, 0, 21, 7, 0, 0, 0]);
        // Verdicts after it start on the next message boundary.
        encode(&mut buf, 5, 10, true, None, Some(&[1, 2, 3, 4]));
        assert_eq!(u32::from_ne_bytes(buf[52..56].try_into().unwrap()), 32 + 8);
        assert_eq!(buf.len(), 52 + 40);
    }
}
