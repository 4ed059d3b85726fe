/* mod_catnip: tells the kernel where each response starts and how long it is, so the
 * Selective Packet Marking program (bpf/spm.bpf.c) can mark its first and last segments
 * (CATNIP section III-B; the paper's kernel kept "an initial sequence number and a document
 * size", section V-G).
 *
 * Two output filters:
 *  - CATNIP_COUNT (connection level, just above the core network filter) counts every byte the
 *    connection writes, so a response's offset in the byte stream is known even when earlier
 *    responses are still buffered (HTTP/1.1 pipelining);
 *  - CATNIP_DOC (per request, after the HTTP header and chunk filters) sees the status line and
 *    headers as their own brigade first (modules/http/http_filters.c), adds the body length from
 *    Content-Length, and sets the SOL_CATNIP/CATNIP_DOC option (bpf/catnip_sockopt.h) before any
 *    byte of the response leaves the module.
 * A response without Content-Length is not announced (the marker then uses TCP state only).
 */
#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"
#include "apr_buckets.h"
#include "apr_portable.h"
#include "apr_strings.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "catnip_sockopt.h"

module AP_MODULE_DECLARE_DATA catnip_module;

typedef struct {
	apr_uint64_t written; /* bytes passed to the network filter on this connection */
} catnip_conn_t;

static int unsupported_logged;

static catnip_conn_t *conn_state(conn_rec *c)
{
	return ap_get_module_config(c->conn_config, &catnip_module);
}

static apr_status_t count_filter(ap_filter_t *f, apr_bucket_brigade *bb)
{
	catnip_conn_t *st = f->ctx;
	apr_off_t len = 0;

	if (st && apr_brigade_length(bb, 1, &len) == APR_SUCCESS && len > 0)
		st->written += (apr_uint64_t)len;
	return ap_pass_brigade(f->next, bb);
}

static void announce(request_rec *r, apr_off_t header_len)
{
	conn_rec *c = r->connection;
	catnip_conn_t *st = conn_state(c);
	const char *cl = apr_table_get(r->headers_out, "Content-Length");
	apr_off_t body = 0;
	struct catnip_doc doc;
	apr_os_sock_t fd;
	apr_socket_t *sock = ap_get_conn_socket(c);

	if (!st || !sock || apr_os_sock_get(&fd, sock) != APR_SUCCESS)
		return;
	if (!r->header_only) {
		char *end;
		if (!cl || apr_strtoff(&body, cl, &end, 10) != APR_SUCCESS || *end || body < 0)
			return; /* length unknown: TCP-state marking only */
	}
	memset(&doc, 0, sizeof(doc));
	doc.offset = st->written;
	doc.length = (unsigned int)(header_len + body);
	doc.flags = c->keepalive == AP_CONN_CLOSE ? CATNIP_DOC_LAST : 0;
	if (setsockopt(fd, SOL_CATNIP, CATNIP_DOC, &doc, sizeof(doc)) != 0 && !unsupported_logged) {
		unsupported_logged = 1;
		ap_log_rerror(APLOG_MARK, APLOG_NOTICE, errno, r,
			      "mod_catnip: the kernel did not take the document size (is the SPM program attached "
			      "to this server's cgroup?); marking falls back to TCP state");
	}
}

static apr_status_t doc_filter(ap_filter_t *f, apr_bucket_brigade *bb)
{
	apr_off_t header_len = 0;

	/* The first brigade is the status line and headers, passed on their own by the header filter. */
	if (apr_brigade_length(bb, 1, &header_len) == APR_SUCCESS)
		announce(f->r, header_len);
	ap_remove_output_filter(f);
	return ap_pass_brigade(f->next, bb);
}

static int pre_connection(conn_rec *c, void *csd)
{
	catnip_conn_t *st = apr_pcalloc(c->pool, sizeof(*st));

	ap_set_module_config(c->conn_config, &catnip_module, st);
	ap_add_output_filter("CATNIP_COUNT", st, NULL, c);
	return OK;
}

static void insert_filter(request_rec *r)
{
	ap_add_output_filter("CATNIP_DOC", NULL, r, r->connection);
}

static void register_hooks(apr_pool_t *p)
{
	ap_register_output_filter("CATNIP_COUNT", count_filter, NULL, AP_FTYPE_CONNECTION + 5);
	ap_register_output_filter("CATNIP_DOC", doc_filter, NULL, AP_FTYPE_TRANSCODE + 5);
	ap_hook_pre_connection(pre_connection, NULL, NULL, APR_HOOK_MIDDLE);
	ap_hook_insert_filter(insert_filter, NULL, NULL, APR_HOOK_LAST);
	ap_hook_insert_error_filter(insert_filter, NULL, NULL, APR_HOOK_LAST);
}

AP_DECLARE_MODULE(catnip) = {
	STANDARD20_MODULE_STUFF, NULL, NULL, NULL, NULL, NULL, register_hooks
};
