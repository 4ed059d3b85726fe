/* The CATNIP document-size socket option (see docs/spm.md).
 *
 * A web server tells the kernel, before it writes a response, where the response starts in the
 * connection's byte stream and how long it is (status line + headers + body):
 *
 *     struct catnip_doc d = { .offset = bytes_already_written_on_this_connection, .length = n };
 *     setsockopt(fd, SOL_CATNIP, CATNIP_DOC, &d, sizeof d);
 *
 * A cgroup/setsockopt BPF program (bpf/spm.bpf.c) consumes the option and keeps the document's
 * first and last sequence numbers in socket-local storage, so the tc marker can find the first
 * three and last three segments of each document (CATNIP section III-B, "Selective Packet
 * Marking"; the paper's kernel needed "an initial sequence number and a document size", V-G).
 * Without the BPF program attached the call fails with ENOPROTOOPT and nothing else changes.
 */
#ifndef CATNIP_SOCKOPT_H
#define CATNIP_SOCKOPT_H

#define SOL_CATNIP 0x43544e50 /* "CTNP": a level no protocol uses */
#define CATNIP_DOC 1
#define CATNIP_DOC_LAST 1 /* flags: the server closes the connection after this document */

struct catnip_doc {
	unsigned long long offset; /* first byte of the document, counted from the connection's first data byte */
	unsigned int length;       /* bytes of the document on the wire (headers included) */
	unsigned int flags;        /* CATNIP_DOC_LAST or 0 */
};

#endif
