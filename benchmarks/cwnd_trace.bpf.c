// SPDX-License-Identifier: GPL-2.0
/* The kernel's cwnd of one TCP port's connections at every segment they receive and send
 * (benchmarks/cwnd_trace.py loads it; docs/reproduction-newcwv.md, "The baseline at 0.25 s idle").
 *
 *   RCV   tp_btf/tcp_probe: each segment the sender receives (the request, each ACK), with the
 *         socket's state before the kernel processes it (the tracepoint opens tcp_rcv_established).
 *   XMIT  tp_btf/net_dev_start_xmit: each segment the sender hands to its interface, with cwnd then.
 *
 * Both are tracepoints: this kernel (lockdown integrity) refuses fentry programs, so the two places
 * Linux shrinks an unused window are read from the state around them, which every event carries:
 * the restart after idle (tcp_slow_start_after_idle_check -> tcp_cwnd_restart, at the first send
 * after an idle longer than the RTO: now - lsndtime > icsk_rto) and the decay of an
 * application-limited window (tcp_cwnd_validate -> tcp_cwnd_application_limited, after a send when
 * cwnd was not fully used for an RTO: now - snd_cwnd_stamp >= icsk_rto); lsnd_age_j and
 * stamp_age_j are those two ages, cwnd_used is snd_cwnd_used.
 *
 * Filter: the connection's local port (cfg[0]); 0 records nothing. Events go to an array in the
 * order written (cnt[0] counts them; past EVENTS they are counted, not kept). Times are
 * bpf_ktime_get_ns(), CLOCK_MONOTONIC: time.monotonic() in the burst application's records.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define EVENTS 65536

enum { EV_RCV = 1, EV_XMIT = 2 };

struct ev {
	__u64 t_ns;
	__u64 netns;
	__u32 kind;
	__u16 sport, dport;
	__u32 len;             /* XMIT: the packet's bytes, headers included; RCV: the segment's payload bytes */
	__u32 cwnd;
	__u32 ssthresh;
	__u32 packets_out;
	__u32 max_packets_out;
	__u32 snd_una, snd_nxt, rcv_nxt;
	__u32 srtt_us;         /* smoothed RTT, microseconds */
	__u32 rto_j;           /* icsk_rto, jiffies */
	__u32 lsnd_age_j;      /* jiffies since the last data segment was sent (tcp_sock.lsndtime) */
	__u32 stamp_age_j;     /* jiffies since snd_cwnd_stamp (cwnd last fully used, or last changed by a decay) */
	__u32 cwnd_used;       /* snd_cwnd_used: the most in flight while cwnd was not fully used */
	__u32 ca_state;
	__u32 cwnd_limited;    /* tcp_sock.is_cwnd_limited */
	char cc[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cnt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EVENTS);
	__type(key, __u32);
	__type(value, struct ev);
} events SEC(".maps");

static __always_inline bool wanted(struct sock *sk)
{
	__u32 k = 0, *port = bpf_map_lookup_elem(&cfg, &k);

	return port && *port && sk->__sk_common.skc_num == *port;
}

static __always_inline struct ev *slot(void)
{
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&cnt, &k);
	__u32 i;

	if (!n)
		return NULL;
	i = __sync_fetch_and_add(n, 1);
	if (i >= EVENTS)
		return NULL;
	return bpf_map_lookup_elem(&events, &i);
}

static __always_inline void record(struct tcp_sock *tp, __u32 kind, __u32 len)
{
	struct inet_connection_sock *icsk = &tp->inet_conn;
	struct sock *sk = &icsk->icsk_inet.sk;
	__u32 now = (__u32)bpf_jiffies64();
	struct ev *e;

	if (!wanted(sk) || !(e = slot()))
		return;
	e->t_ns = bpf_ktime_get_ns();
	e->netns = sk->__sk_common.skc_net.net->net_cookie;
	e->kind = kind;
	e->sport = sk->__sk_common.skc_num;
	e->dport = __builtin_bswap16(sk->__sk_common.skc_dport);
	e->len = len;
	e->cwnd = tp->snd_cwnd;
	e->ssthresh = tp->snd_ssthresh;
	e->packets_out = tp->packets_out;
	e->max_packets_out = tp->max_packets_out;
	e->snd_una = tp->snd_una;
	e->snd_nxt = tp->snd_nxt;
	e->rcv_nxt = tp->rcv_nxt;
	e->srtt_us = tp->srtt_us >> 3;
	e->rto_j = icsk->icsk_rto;
	e->lsnd_age_j = now - tp->lsndtime;
	e->stamp_age_j = now - tp->snd_cwnd_stamp;
	e->cwnd_used = tp->snd_cwnd_used;
	e->ca_state = icsk->icsk_ca_state;
	e->cwnd_limited = tp->is_cwnd_limited;
	bpf_probe_read_kernel_str(e->cc, sizeof(e->cc), icsk->icsk_ca_ops->name);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_rcv, struct sock *sk, struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	__u8 doff = 0;

	if (!tp)
		return 0;
	/* skb->data is the TCP header here: its data offset (byte 12, high nibble) gives the payload */
	bpf_probe_read_kernel(&doff, 1, skb->data + 12);
	record(tp, EV_RCV, skb->len - (doff >> 4) * 4);
	return 0;
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_xmit, struct sk_buff *skb, struct net_device *dev)
{
	struct sock *sk;
	__u64 raw = 0;

	/* skb->sk is an RCU pointer the socket helpers refuse here: read it as a number, then as a
	 * read-only tcp_sock once it is a full TCP socket. A socket's own packets carry it; a packet
	 * forwarded from another namespace does not. */
	bpf_probe_read_kernel(&raw, sizeof(raw), &skb->sk);
	if (!raw)
		return 0;
	sk = bpf_rdonly_cast((void *)raw, bpf_core_type_id_kernel(struct sock));
	if (sk->__sk_common.skc_family != 2 && sk->__sk_common.skc_family != 10)
		return 0;
	if (sk->__sk_common.skc_state == 6 || sk->__sk_common.skc_state == 12 || sk->__sk_common.skc_state == 10)
		return 0;  /* TCP_TIME_WAIT, TCP_NEW_SYN_RECV, TCP_LISTEN: not a full connection */
	if (sk->sk_protocol != 6 || sk->sk_type != 1)
		return 0;  /* IPPROTO_TCP, SOCK_STREAM */
	record(bpf_rdonly_cast((void *)raw, bpf_core_type_id_kernel(struct tcp_sock)), EV_XMIT, skb->len);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
