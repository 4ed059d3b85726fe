// SPDX-License-Identifier: GPL-2.0
/* The CATNIP sender heuristics (section III-B, Fig. 2) as Reno-based BPF congestion controls:
 *
 *   catnip_reno   plain Reno (the kernel's own Reno functions), the baseline of the variants;
 *   catnip_eca    Early Congestion Avoidance: leave slow start as soon as the rest of the
 *                 document would go out within the next doubled window, i.e. when the segments
 *                 not yet sent are at most 2 x cwnd. For Fig. 2's 14-segment document (cwnd
 *                 1, 2, 4) this keeps cwnd at 4 instead of 8 in the fourth round: bursts of 4
 *                 and 3 instead of 7, as in Fig. 2(c);
 *   catnip_rbplw  Rate-Based Pacing of the Last Window: once the rest of the document fits in
 *                 the window of the round that starts, TCP's internal pacing is switched on, so
 *                 the last window leaves spread over about one RTT (Fig. 2(b); the per-netns
 *                 tcp_pacing_ss_ratio / tcp_pacing_ca_ratio set to 100 make the paced rate
 *                 cwnd x MSS / RTT: testbed/sender.py sets them);
 *   catnip_ecarbplw  both (Fig. 2(d); TCP names have at most 15 characters);
 *   catnip_ns2reno  Reno as ns-2 and the hysteresis paper's model count it: one segment of
 *                 growth per ACK in slow start (1/cwnd in congestion avoidance), however many
 *                 segments the ACK covers. Linux's Reno grows by the segments acknowledged
 *                 (RFC 3465 byte counting), so with delayed ACKs it still doubles per round
 *                 where ns-2 grows by gamma = 1.5 (hysteresis paper, eq. 2).
 *
 * The document's extent comes from the SPM program's socket storage (bpf/spm.bpf.c), which
 * mod_catnip fills; without it the variants behave as plain Reno.
 *
 * catnip_reno also paces every connection of a host whose parameters (bpf/sender_params.h,
 * shared with catnip_newcwv) say pace=1: the unpaced/paced baseline of newCWV's section 4.5.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "catnip_sockopt.h"
#include "catnip_docs.h"
#include "sender_params.h"

#define SK_PACING_NEEDED_ 1

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

/* Segments of the current document not yet sent, or -1 when no document covers snd_nxt. */
static __always_inline long unsent_segments(struct sock *sk, struct tcp_sock *tp)
{
	struct conn_docs *st = bpf_sk_storage_get(&catnip_docs, sk, 0, 0);
	__u32 nxt = tp->snd_nxt, mss = tp->mss_cache ? tp->mss_cache : 1;
	int i;

	if (!st)
		return -1;
	for (i = 0; i < MAX_DOCS; i++) {
		struct doc *d = &st->doc[i];
		__s32 into = (__s32)(nxt - d->start);

		if (!d->len || into < 0 || (__u32)into >= d->len)
			continue;
		return (d->len - (__u32)into + mss - 1) / mss;
	}
	return -1;
}

static __always_inline void eca(struct tcp_sock *tp, long unsent)
{
	if (tp->snd_cwnd < tp->snd_ssthresh && unsent >= 0 && unsent <= 2 * (long)tp->snd_cwnd)
		tp->snd_ssthresh = tp->snd_cwnd; /* congestion avoidance from here on */
}

/* Called on an ACK before the window grows: the round this ACK starts is the last one when the
 * rest of the document fits in the window it will reach (2 x cwnd in slow start, cwnd + 1 in
 * congestion avoidance). From then on TCP paces the socket. */
static __always_inline void rbplw(struct sock *sk, struct tcp_sock *tp, long unsent)
{
	long next = tp->snd_cwnd < tp->snd_ssthresh ? 2 * (long)tp->snd_cwnd : (long)tp->snd_cwnd + 1;

	if (unsent >= 0 && unsent <= next)
		sk->sk_pacing_status = SK_PACING_NEEDED_;
}

/* TCP's internal pacing from the first segment, at the namespace's tcp_pacing_ss/ca_ratio. */
SEC("struct_ops")
void BPF_PROG(reno_init, struct sock *sk)
{
	if (host_params(sk).pace)
		sk->sk_pacing_status = SK_PACING_NEEDED_;
}

SEC("struct_ops")
__u32 BPF_PROG(catnip_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(catnip_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(eca_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	eca(tp, unsent_segments(sk, tp));
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(rbplw_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	rbplw(sk, tp, unsent_segments(sk, tp));
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(eca_rbplw_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	long unsent = unsent_segments(sk, tp);

	eca(tp, unsent);
	rbplw(sk, tp, unsent);
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(ns2reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked ? 1 : 0);
}

SEC(".struct_ops")
struct tcp_congestion_ops catnip_reno = {
	.init = (void *)reno_init,
	.ssthresh = (void *)catnip_ssthresh,
	.cong_avoid = (void *)reno_cong_avoid,
	.undo_cwnd = (void *)catnip_undo_cwnd,
	.name = "catnip_reno",
};

SEC(".struct_ops")
struct tcp_congestion_ops catnip_eca = {
	.ssthresh = (void *)catnip_ssthresh,
	.cong_avoid = (void *)eca_cong_avoid,
	.undo_cwnd = (void *)catnip_undo_cwnd,
	.name = "catnip_eca",
};

SEC(".struct_ops")
struct tcp_congestion_ops catnip_rbplw = {
	.ssthresh = (void *)catnip_ssthresh,
	.cong_avoid = (void *)rbplw_cong_avoid,
	.undo_cwnd = (void *)catnip_undo_cwnd,
	.name = "catnip_rbplw",
};

SEC(".struct_ops")
struct tcp_congestion_ops catnip_ecarbplw = {
	.ssthresh = (void *)catnip_ssthresh,
	.cong_avoid = (void *)eca_rbplw_cong_avoid,
	.undo_cwnd = (void *)catnip_undo_cwnd,
	.name = "catnip_ecarbplw",
};

SEC(".struct_ops")
struct tcp_congestion_ops catnip_ns2reno = {
	.ssthresh = (void *)catnip_ssthresh,
	.cong_avoid = (void *)ns2reno_cong_avoid,
	.undo_cwnd = (void *)catnip_undo_cwnd,
	.name = "catnip_ns2reno",
};

char LICENSE[] SEC("license") = "GPL";
