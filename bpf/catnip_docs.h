/* The documents a server announced on each TCP connection (bpf/catnip_sockopt.h), in socket-local
 * storage shared by the SPM marker (spm.bpf.c) and the sender heuristics (catnip_cc.bpf.c): the
 * map is pinned by name (/sys/fs/bpf/catnip_docs), so both objects load the same one. */
#ifndef CATNIP_DOCS_H
#define CATNIP_DOCS_H

#define MAX_DOCS 16

struct doc {
	__u32 start; /* sequence number of the document's first byte */
	__u32 len;
	__u32 flags; /* CATNIP_DOC_LAST: the connection closes after it */
	__u32 pad;
};

struct conn_docs {
	__u32 count; /* documents announced on this connection; doc[count % MAX_DOCS] is next */
	__u32 pad;
	struct doc doc[MAX_DOCS];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, int);
	__type(value, struct conn_docs);
} catnip_docs SEC(".maps");

#endif
