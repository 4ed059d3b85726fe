// SPDX-License-Identifier: GPL-2.0
/* catnip_newcwv: RFC 7661 newCWV on Linux Reno, as a BPF struct_ops congestion control (the
 * paper, Hossain & Fairhurst section 3, used a loadable module; this kernel loads none).
 * docs/newcwv-sender.md maps each rule to the RFC and the paper, and lists the deviations.
 *
 *   pipeACK   bytes acknowledged over one round, sampled in cong_avoid (never in recovery) when
 *             snd_una passes the snd_nxt recorded at the previous sample; the value is the maximum
 *             of the samples in a filter of `bins` bins spanning PSP = max(3 SRTT, 1 s) (RFC 7661
 *             section 4.2; the authors' module: one bin per PSP/bins, at most `bins`). With the
 *             host's `nofilter` the latest sample alone, still undefined once older than PSP
 *             (the paper's Fig. 5a, the comparison for its filter).
 *   validated pipeACK undefined, or pipeACK >= cwnd * MSS / 2 (RFC 7661 section 3).
 *   growth    Reno's (slow start, then +1 MSS per cwnd acknowledged), and none while not
 *             cwnd-limited, as Linux's tcp_is_cwnd_limited says: in the non-validated phase this is
 *             RFC 7661 section 4.3's / the module's rule, in the validated phase Linux Reno's own.
 *   idle      cwnd is kept: the sender's namespace must have tcp_slow_start_after_idle = 0, or the
 *             kernel restarts cwnd before any congestion control is asked (spec/senders.py).
 *   NVP       after `nvp_ms` (300 s) without validation: ssthresh = max(ssthresh, 3/4 cwnd),
 *             cwnd = max(cwnd/2, IW), once per elapsed period, checked on ACKs and on
 *             CA_EVENT_TX_START (RFC 7661 section 4.4.3, section 5).
 *   loss      entering fast recovery non-validated: the recovery's target (PRR drives cwnd to
 *             ssthresh) is max(max(pipeACK/MSS, LossFlightSize)/2, 1); at its end
 *             (CA_EVENT_COMPLETE_CWR, after PRR set cwnd = ssthresh) cwnd = ssthresh =
 *             max((max(pipeACK/MSS, LossFlightSize) - R)/2, 1), pipeACK undefined (RFC 7661
 *             section 4.4.1). A retransmission timeout: Reno's response and pipeACK undefined.
 *
 * Parameters per sending host (pace, nvp_ms, bins, trace, nofilter) come from catnip_sndparams
 * (bpf/sender_params.h), read once per connection in .init. All state is per connection, in
 * socket-local storage (the bins are indexed by a variable, which icsk_ca_priv, a field of the
 * socket, does not allow; a map value does). A connection without it behaves as Reno.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sender_params.h"

#define PSP_MIN_MS 1000      /* RFC 7661 section 4.2: PSP = max(3 SRTT, 1 s) */
#define MAX_CLOSEDOWNS 32    /* halvings applied at once; cwnd is at IW long before */

#define F_TRACE 1
#define F_LOSS_NVP 2         /* a recovery that began non-validated is under way */
#define F_NOFILTER 4         /* pipeACK is the latest sample: every sample opens the one bin */

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, struct cwv_trace);
} catnip_cwvtrace SEC(".maps");

/* Per connection. Times are CLOCK_MONOTONIC milliseconds (u32: the differences taken are short). */
struct newcwv {
	__u32 pipeack;       /* bytes, CWV_UNDEF when undefined */
	__u32 prev_una;      /* snd_una at the previous sample */
	__u32 prev_nxt;      /* snd_nxt at the previous sample: the next sample when snd_una passes it */
	__u32 valid_ms;      /* when cwnd was last validated (the NVP runs from here) */
	__u32 nvp_ms;
	__u32 iw;
	__u32 lfs;           /* LossFlightSize (segments) of the recovery under way */
	__u32 prior_retrans; /* tp->total_retrans when it began */
	__u8 nbins;
	__u8 head;           /* the newest bin */
	__u8 count;          /* bins in use, newest first back from head */
	__u8 flags;
	__u32 bin_val[NEWCWV_MAX_BINS];
	__u32 bin_ms[NEWCWV_MAX_BINS];  /* when the bin's first sample came */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct newcwv);
} newcwv_state SEC(".maps");

static __always_inline struct newcwv *ca_of(struct sock *sk)
{
	return bpf_sk_storage_get(&newcwv_state, sk, 0, 0);
}

static __always_inline __u32 ms_of(__u64 ns)
{
	return (__u32)(ns / 1000000);
}

static __always_inline __u32 psp_ms(struct tcp_sock *tp)
{
	__u32 p = (__u32)(((__u64)(tp->srtt_us >> 3) * 3) / 1000); /* srtt_us holds SRTT << 3 */

	return p > PSP_MIN_MS ? p : PSP_MIN_MS;
}

static __always_inline __u32 mss_of(struct tcp_sock *tp)
{
	return tp->mss_cache ? tp->mss_cache : 1;
}

static __always_inline __u32 in_flight(struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline bool validated(struct newcwv *ca, struct tcp_sock *tp)
{
	return ca->pipeack == CWV_UNDEF || (__u64)ca->pipeack * 2 >= (__u64)tp->snd_cwnd * mss_of(tp);
}

/* Linux's tcp_is_cwnd_limited: the last window used all of cwnd, or, in slow start, cwnd is below
 * twice the most that was in flight. */
static __always_inline bool cwnd_limited(struct tcp_sock *tp)
{
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

static __always_inline __u8 ca_state(struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	return BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);
}

static __always_inline void trace(struct sock *sk, struct newcwv *ca, __u64 now_ns, __u8 event, __u32 sample,
				  __u32 prior_cwnd, __u32 lfs, __u32 r, __u32 pipeack)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct cwv_trace_entry *e;
	struct cwv_trace *ring;
	__u32 zero = 0;
	__u64 idx;

	if (!(ca->flags & F_TRACE))
		return;
	ring = bpf_map_lookup_elem(&catnip_cwvtrace, &zero);
	if (!ring)
		return;
	idx = __sync_fetch_and_add(&ring->head, 1);
	e = &ring->e[idx & (CWV_TRACE_SLOTS - 1)];
	e->t_ns = now_ns;
	e->netns = sock_netns(sk);
	e->saddr = sk->__sk_common.skc_rcv_saddr;
	e->daddr = sk->__sk_common.skc_daddr;
	e->sport = sk->__sk_common.skc_num;
	e->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	e->event = event;
	e->validated = validated(ca, tp);
	e->loss_nvp = !!(ca->flags & F_LOSS_NVP);
	e->pad = 0;
	e->cwnd = tp->snd_cwnd;
	e->ssthresh = tp->snd_ssthresh;
	e->pipeack = pipeack;
	e->sample = sample;
	e->inflight = in_flight(tp);
	e->lfs = lfs;
	e->retrans = r;
	e->mss = tp->mss_cache;
	e->psp_ms = psp_ms(tp);
	e->srtt_us = tp->srtt_us >> 3;
	e->prior_cwnd = prior_cwnd;
	e->iw = ca->iw;
	e->seq = idx + 1; /* last: the entry is complete */
}

static __always_inline void forget_pipeack(struct sock *sk, struct newcwv *ca)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	ca->pipeack = CWV_UNDEF;
	ca->count = 0;
	ca->head = 0;
	/* the next sample measures a whole round from here */
	ca->prev_una = tp->snd_una;
	ca->prev_nxt = tp->snd_nxt;
}

/* The max filter (RFC 7661 section 4.2): a sample opens a new bin when the newest bin is older than
 * PSP/bins (the oldest bin gives way when all are in use), else raises the newest bin; bins older
 * than PSP are dropped; pipeACK is the largest bin left, undefined when none is. */
static __always_inline void filter_sample(struct newcwv *ca, __u32 sample, __u32 now, __u32 psp)
{
	__u32 n = ca->nbins, h = ca->head & (NEWCWV_MAX_BINS - 1);

	if (!ca->count || (ca->flags & F_NOFILTER) || now - ca->bin_ms[h] > psp / n) {
		if (ca->count) {
			h = h + 1 >= n ? 0 : h + 1;
			h &= NEWCWV_MAX_BINS - 1;
		}
		ca->head = h;
		ca->bin_val[h] = sample;
		ca->bin_ms[h] = now;
		if (ca->count < n)
			ca->count++;
	} else if (sample > ca->bin_val[h]) {
		ca->bin_val[h] = sample;
	}
}

static __always_inline void filter_expire(struct newcwv *ca, __u32 now, __u32 psp)
{
	__u32 n = ca->nbins, best = 0, kept = 0, i, j;

	/* from the newest back: the first bin too old ends the filter (older ones are older still) */
	for (i = 0; i < NEWCWV_MAX_BINS; i++) {
		if (i >= ca->count)
			break;
		j = (ca->head + n - i) % n;
		j &= NEWCWV_MAX_BINS - 1;
		if (now - ca->bin_ms[j] > psp)
			break;
		if (ca->bin_val[j] > best)
			best = ca->bin_val[j];
		kept++;
	}
	ca->count = kept;
	ca->pipeack = kept ? best : CWV_UNDEF;
}

/* RFC 7661 section 4.4.3: each non-validated period that elapsed since cwnd was last validated
 * halves cwnd, to no less than IW (and never raises it), and keeps ssthresh at 3/4 of it. */
static __always_inline void closedown(struct sock *sk, struct newcwv *ca, __u64 now_ns)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 now = ms_of(now_ns), since = now - ca->valid_ms, n, i, cwnd, floor, three4;

	if (since <= ca->nvp_ms)
		return;
	n = (since - 1) / ca->nvp_ms; /* periods wholly elapsed: "while now - valid > NVP" */
	ca->valid_ms += n * ca->nvp_ms;
	for (i = 0; i < MAX_CLOSEDOWNS; i++) {
		if (i >= n)
			break;
		cwnd = tp->snd_cwnd;
		three4 = cwnd * 3 / 4;
		if (tp->snd_ssthresh < three4)
			tp->snd_ssthresh = three4;
		floor = ca->iw < cwnd ? ca->iw : cwnd;
		tp->snd_cwnd = cwnd / 2 > floor ? cwnd / 2 : floor;
		trace(sk, ca, now_ns, CWV_EV_CLOSEDOWN, CWV_UNDEF, cwnd, 0, 0, ca->pipeack);
	}
}

SEC("struct_ops")
void BPF_PROG(newcwv_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct sender_params p = host_params(sk);
	struct newcwv *ca = bpf_sk_storage_get(&newcwv_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	__u64 now_ns = bpf_ktime_get_ns();
	int i;

	if (p.pace)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	if (!ca)
		return;

	ca->valid_ms = ms_of(now_ns);
	ca->nvp_ms = p.nvp_ms;
	ca->iw = tp->snd_cwnd; /* tcp_init_transfer set it from the route's initcwnd just before */
	ca->lfs = 0;
	ca->prior_retrans = 0;
	ca->nbins = p.nofilter ? 1 : p.bins;
	ca->flags = (p.trace ? F_TRACE : 0) | (p.nofilter ? F_NOFILTER : 0);
	for (i = 0; i < NEWCWV_MAX_BINS; i++) {
		ca->bin_val[i] = 0;
		ca->bin_ms[i] = 0;
	}
	forget_pipeack(sk, ca);
	trace(sk, ca, now_ns, CWV_EV_INIT, CWV_UNDEF, tp->snd_cwnd, 0, 0, ca->pipeack);
}

SEC("struct_ops")
__u32 BPF_PROG(newcwv_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(newcwv_undo_cwnd, struct sock *sk)
{
	/* the loss was spurious: Reno's undo, and no newCWV rule at the recovery's end */
	struct newcwv *ca = ca_of(sk);

	if (ca)
		ca->flags &= ~F_LOSS_NVP;
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(newcwv_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct newcwv *ca = ca_of(sk);

	/* Called outside fast recovery and CWR only; after a timeout (Loss) no samples either. */
	if (ca && ca_state(sk) != TCP_CA_Loss) {
		__u64 now_ns = bpf_ktime_get_ns();
		__u32 now = ms_of(now_ns), psp = psp_ms(tp), sample = CWV_UNDEF;

		if ((__s32)(tp->snd_una - ca->prev_nxt) >= 0 && tp->snd_una != ca->prev_una) {
			sample = tp->snd_una - ca->prev_una;
			ca->prev_una = tp->snd_una;
			ca->prev_nxt = tp->snd_nxt;
			filter_sample(ca, sample, now, psp);
		}
		filter_expire(ca, now, psp);
		if (sample != CWV_UNDEF)
			trace(sk, ca, now_ns, CWV_EV_SAMPLE, sample, tp->snd_cwnd, 0, 0, ca->pipeack);
		if (validated(ca, tp))
			ca->valid_ms = now;
		else
			closedown(sk, ca, now_ns);
	}
	/* No growth unless cwnd-limited (RFC 7661 section 4.3 in the non-validated phase; Linux
	 * Reno's own rule otherwise), then Reno. */
	if (!cwnd_limited(tp))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
}

/* set_state runs before icsk_ca_state changes: ca_state() is still the old state. */
SEC("struct_ops")
void BPF_PROG(newcwv_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct newcwv *ca = ca_of(sk);
	__u8 old = ca_state(sk);

	if (!ca)
		return;

	if (new_state == TCP_CA_Recovery && old != TCP_CA_Recovery) {
		/* tcp_init_cwnd_reduction has just asked ssthresh() (Reno's cwnd/2); nothing is
		 * retransmitted yet. Linux reduces cwnd during recovery by PRR toward ssthresh, so the
		 * RFC's recovery cwnd becomes that target. */
		__u32 lfs = 0, r = 0;

		if (!validated(ca, tp)) {
			__u32 m = ca->pipeack / mss_of(tp), target;

			ca->lfs = lfs = tp->packets_out; /* FlightSize (RFC 5681) when the loss was detected */
			ca->prior_retrans = tp->total_retrans;
			ca->flags |= F_LOSS_NVP;
			if (m < lfs)
				m = lfs;
			target = m / 2 > 1 ? m / 2 : 1;
			tp->snd_ssthresh = target;
		}
		trace(sk, ca, bpf_ktime_get_ns(), CWV_EV_RECOVERY, CWV_UNDEF, tp->snd_cwnd, lfs, r, ca->pipeack);
	} else if (new_state == TCP_CA_Open && (old == TCP_CA_Recovery || old == TCP_CA_Loss)) {
		/* samples resume with a whole round measured from here */
		ca->prev_una = tp->snd_una;
		ca->prev_nxt = tp->snd_nxt;
	}
}

SEC("struct_ops")
void BPF_PROG(newcwv_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct newcwv *ca = ca_of(sk);
	__u64 now_ns = bpf_ktime_get_ns();
	__u32 prior = tp->snd_cwnd;

	if (!ca)
		return;
	switch (ev) {
	case CA_EVENT_TX_START:
		/* nothing in flight and data to send: after idle, the non-validated period may be over */
		closedown(sk, ca, now_ns);
		trace(sk, ca, now_ns, CWV_EV_TX_START, CWV_UNDEF, prior, 0, 0, ca->pipeack);
		break;
	case CA_EVENT_COMPLETE_CWR: {
		/* tcp_end_cwnd_reduction has set cwnd = ssthresh (PRR's end); RFC 7661 section 4.4.1
		 * sets it from what the path carried before the loss, less what was lost. */
		__u32 lfs = ca->lfs, r = 0, pipeack = ca->pipeack;

		if (ca->flags & F_LOSS_NVP) {
			__u32 m = pipeack / mss_of(tp), cwnd;

			r = tp->total_retrans - ca->prior_retrans;
			if (m < lfs)
				m = lfs;
			cwnd = m > r ? (m - r) / 2 : 0;
			if (cwnd < 1)
				cwnd = 1;
			tp->snd_cwnd = cwnd;
			tp->snd_ssthresh = cwnd;
			ca->flags &= ~F_LOSS_NVP;
			forget_pipeack(sk, ca); /* back to the validated phase */
			ca->valid_ms = ms_of(now_ns);
			/* the entry shows the pipeACK the rule used (now undefined) */
			trace(sk, ca, now_ns, CWV_EV_RECOVERY_END, CWV_UNDEF, prior, lfs, r, pipeack);
		} else {
			trace(sk, ca, now_ns, CWV_EV_RECOVERY_END, CWV_UNDEF, prior, 0, 0, ca->pipeack);
		}
		break;
	}
	case CA_EVENT_LOSS:
		/* retransmission timeout: Reno's response (ssthresh() already ran); the pipeACK
		 * measured before it says nothing of the path now */
		ca->flags &= ~F_LOSS_NVP;
		forget_pipeack(sk, ca);
		trace(sk, ca, now_ns, CWV_EV_RTO, CWV_UNDEF, prior, 0, 0, ca->pipeack);
		break;
	default:
		break;
	}
}

SEC(".struct_ops")
struct tcp_congestion_ops catnip_newcwv = {
	.init = (void *)newcwv_init,
	.ssthresh = (void *)newcwv_ssthresh,
	.cong_avoid = (void *)newcwv_cong_avoid,
	.set_state = (void *)newcwv_set_state,
	.cwnd_event = (void *)newcwv_cwnd_event,
	.undo_cwnd = (void *)newcwv_undo_cwnd,
	.name = "catnip_newcwv",
};

char LICENSE[] SEC("license") = "GPL";
