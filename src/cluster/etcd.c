/*-------------------------------------------------------------------------
 *
 * etcd.c
 *		An etcd v3 client over etcd's JSON gateway (grpc-gateway, etcd 3.4),
 *		with libcurl for HTTP and PostgreSQL's jsonb for the answers.
 *
 * The gateway takes a POST of a JSON request to /v3/<service>/<method> and
 * answers with the JSON of the protobuf reply: keys and values are base64,
 * int64 fields are JSON strings, and fields at their default (false, 0, an
 * empty list) are left out, so a missing "succeeded" means false and a
 * missing "kvs" means no key.
 *
 * Every request is tried on the endpoints of mqlog.etcd_endpoints in turn,
 * from the one that answered last, all within one deadline of
 * mqlog.etcd_timeout, and gives up early when the backend is asked to
 * cancel or die.  A member that takes a request and never answers gets
 * half the time left, not all of it, unless the request is a transaction
 * (etcd_call says why).  A request that no endpoint
 * answered raises connection_failure naming each endpoint and curl's
 * reason.  The curl handle is freed on every path out (PG_FINALLY), and
 * libcurl's callbacks never raise an ERROR: they only fill a malloc'd
 * buffer or ask curl to stop.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <curl/curl.h>

#include "common/base64.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "cluster/etcd.h"
#include "cluster/json.h"

/* the largest answer we take (a range over every partition of a cluster) */
#define MAX_RESPONSE_BYTES	(64 * 1024 * 1024)

struct MqEtcdTxn
{
	StringInfoData compare;
	StringInfoData success;
	int			ncompare;
	int			nops;
};

/* the answer being received, in malloc'd memory (callbacks must not ERROR) */
typedef struct Response
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		too_big;
} Response;

static bool curl_ready = false;

/* ------------------------------------------------------------------------
 * Base64 and JSON helpers
 * ------------------------------------------------------------------------ */

static char *
b64_encode(const char *s, int len)
{
	int			cap = pg_b64_enc_len(len) + 1;
	char	   *out = palloc(cap);
	int			n = pg_b64_encode(s, len, out, cap);

	if (n < 0)
		elog(ERROR, "mqlog: base64 encoding failed");
	out[n] = '\0';
	return out;
}

static char *
b64_str(const char *s)
{
	return b64_encode(s, strlen(s));
}

static char *
b64_decode(const char *s)
{
	int			len = strlen(s);
	int			cap = pg_b64_dec_len(len) + 1;
	char	   *out = palloc(cap);
	int			n = pg_b64_decode(s, len, out, cap);

	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("etcd returned a key or value that is not valid base64")));
	out[n] = '\0';
	return out;
}

/* the JSON string of s, base64-encoded, appended with its key */
static void
append_b64_field(StringInfo buf, const char *field, const char *s)
{
	appendStringInfo(buf, "\"%s\":\"%s\"", field, b64_str(s));
}

/* ------------------------------------------------------------------------
 * HTTP
 * ------------------------------------------------------------------------ */

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Response   *r = (Response *) userdata;
	size_t		n = size * nmemb;

	if (r->len + n + 1 > MAX_RESPONSE_BYTES)
	{
		r->too_big = true;
		return 0;				/* curl stops with CURLE_WRITE_ERROR */
	}
	if (r->len + n + 1 > r->cap)
	{
		size_t		cap = Max(r->cap * 2, r->len + n + 1);
		char	   *p = realloc(r->data, Max(cap, 4096));

		if (p == NULL)
			return 0;
		r->data = p;
		r->cap = Max(cap, 4096);
	}
	memcpy(r->data + r->len, ptr, n);
	r->len += n;
	r->data[r->len] = '\0';
	return n;
}

/* stop the transfer when the backend is asked to cancel or exit */
static int
progress_cb(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
			curl_off_t ultotal, curl_off_t ulnow)
{
	if (ShutdownRequestPending)
		return 1;
	if (InterruptPending && (QueryCancelPending || ProcDiePending))
		return 1;
	return 0;
}

static void
ensure_curl(void)
{
	if (curl_ready)
		return;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not initialize libcurl")));
	curl_ready = true;
}

static List *
endpoint_list(void)
{
	List	   *result = NIL;
	char	   *copy = pstrdup(mqlog_etcd_endpoints ? mqlog_etcd_endpoints : "");
	char	   *tok;
	char	   *save = NULL;

	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
	{
		int			len;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		len = strlen(tok);
		while (len > 0 && (tok[len - 1] == ' ' || tok[len - 1] == '\t' || tok[len - 1] == '/'))
			tok[--len] = '\0';
		if (len > 0)
			result = lappend(result, tok);
	}
	if (result == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no etcd endpoint is configured"),
				 errhint("Set mqlog.etcd_endpoints, for example to 'http://127.0.0.1:2379'.")));
	return result;
}

/*
 * One POST to one endpoint.  Returns the curl result; *status is the HTTP
 * status and r holds the answer.  Nothing in between raises an ERROR (the
 * callbacks only fill a buffer or ask curl to stop), but should anything,
 * the handle, the header list and the buffer are freed before it goes on.
 */
static CURLcode
post_once(const char *url, const char *body, long connect_ms, long total_ms,
		  Response *r, long *status, bool *sent, char *errbuf)
{
	CURL	   *h;
	struct curl_slist *headers;
	volatile CURLcode rc = CURLE_FAILED_INIT;
	long		request_size = 0;

	h = curl_easy_init();
	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl handle")));
	headers = curl_slist_append(NULL, "Content-Type: application/json");
	PG_TRY();
	{
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
		errbuf[0] = '\0';
		rc = curl_easy_perform(h);
		*status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
		curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
		*sent = request_size > 0;
	}
	PG_CATCH();
	{
		curl_easy_cleanup(h);
		curl_slist_free_all(headers);
		free(r->data);
		r->data = NULL;
		PG_RE_THROW();
	}
	PG_END_TRY();
	curl_easy_cleanup(h);
	curl_slist_free_all(headers);
	return rc;
}

/*
 * The endpoint this process asks first: the one that answered last.  A
 * member that hangs costs a process its share of one request's time, once,
 * rather than every request's (etcd's own clientv3 keeps to one endpoint
 * the same way).  Per process: each learns it by itself.
 */
static int	preferred_endpoint = 0;

/*
 * POST body to path on the endpoints in turn, from the preferred one, and
 * parse the first answer.  An answer of etcd's with an error (a JSON object
 * with "error" or "message" and a gRPC "code") is raised, unless grpc_code
 * is given: it then receives the code and the result is NULL.
 *
 * repeatable: the request may be sent again to another endpoint after one
 * that took it did not answer (a read, a put, a lease call).  Such a
 * request gives each endpoint but the last half of the time left, so that
 * a member that accepts connections and never answers (a hung host) leaves
 * the others time.  A transaction is not repeatable: once an endpoint took
 * it, it may have been applied though no answer came, and a second try
 * would fail its compare and read as a lost race.  It goes to another
 * endpoint only when no connection was made, as clientv3 retries only what
 * was never sent; otherwise the failure is raised, and the caller's next
 * round (which reads what is there) starts at the next endpoint.
 */
static JsonbContainer *
etcd_call(const char *path, const char *body, bool repeatable, int *grpc_code)
{
	List	   *endpoints = endpoint_list();
	int			nendpoints = list_length(endpoints);
	int			first = preferred_endpoint < nendpoints ? preferred_endpoint : 0;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   mqlog_etcd_timeout);
	StringInfoData failures;

	ensure_curl();
	initStringInfo(&failures);
	if (grpc_code)
		*grpc_code = 0;

	for (int k = 0; k < nendpoints; k++)
	{
		int			i = (first + k) % nendpoints;
		const char *ep = list_nth(endpoints, i);
		char	   *url = psprintf("%s%s", ep, path);
		long		left = (long) ((deadline - GetCurrentTimestamp()) / 1000);
		long		share;
		long		connect_ms;
		Response	r = {0};
		long		status = 0;
		bool		sent = false;
		char		errbuf[CURL_ERROR_SIZE];
		CURLcode	rc;

		if (left <= 0)
		{
			appendStringInfo(&failures, "%s%s: not tried, mqlog.etcd_timeout (%d ms) spent",
							 failures.len ? "; " : "", ep, mqlog_etcd_timeout);
			continue;
		}
		/* leave the later endpoints some of the time if this one hangs */
		share = (repeatable && k < nendpoints - 1) ? Max(left / 2, Min(left, 250)) : left;
		connect_ms = Min(share, Max((long) mqlog_etcd_timeout / nendpoints, 100));
		rc = post_once(url, body, connect_ms, share, &r, &status, &sent, errbuf);

		if (rc == CURLE_ABORTED_BY_CALLBACK)
		{
			free(r.data);
			CHECK_FOR_INTERRUPTS();
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("etcd request canceled")));
		}
		if (rc != CURLE_OK || r.too_big || status >= 500 || status == 0)
		{
			const char *why;

			if (r.too_big)
				why = psprintf("the answer is larger than %d bytes", MAX_RESPONSE_BYTES);
			else if (rc != CURLE_OK)
				why = errbuf[0] ? pstrdup(errbuf) : curl_easy_strerror(rc);
			else
				why = psprintf("HTTP status %ld%s%s", status,
							   r.data ? ": " : "", r.data ? pnstrdup(r.data, 200) : "");
			appendStringInfo(&failures, "%s%s: %s", failures.len ? "; " : "", ep, why);
			free(r.data);
			/* the next request starts at the next endpoint */
			preferred_endpoint = (i + 1) % nendpoints;
			if (sent && !repeatable)
			{
				appendStringInfoString(&failures, " (a transaction this endpoint took is not sent again: it may have been applied)");
				break;
			}
			continue;
		}

		/* an answer: parse it */
		preferred_endpoint = i;
		{
			char	   *text = pnstrdup(r.data ? r.data : "", r.len);
			JsonbContainer *root;
			char	   *err;
			char	   *msg;

			free(r.data);
			/* a keepalive's stream answer may end in a newline; jsonb_in takes it */
			root = MqJsonParse(text);
			err = MqJsonString(root, "error");
			msg = MqJsonString(root, "message");
			if (status != 200 || ((err || msg) && MqJsonField(root, "code")))
			{
				int			code = (int) MqJsonInt64(root, "code");

				if (grpc_code)
				{
					*grpc_code = code ? code : -1;
					return NULL;
				}
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_EXCEPTION),
						 errmsg("etcd refused request %s", path),
						 errdetail("Endpoint %s answered HTTP status %ld, gRPC code %d: %s.",
								   ep, status, code, msg ? msg : (err ? err : "(no message)"))));
			}
			return root;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not reach etcd"),
			 errdetail("Request %s failed: %s.", path, failures.data),
			 errhint("Check that etcd runs and that mqlog.etcd_endpoints (\"%s\") names it; each request waits at most mqlog.etcd_timeout (%d ms).",
					 mqlog_etcd_endpoints, mqlog_etcd_timeout)));
	return NULL;				/* keep compiler quiet */
}

/* ------------------------------------------------------------------------
 * Leases
 * ------------------------------------------------------------------------ */

int64
MqEtcdLeaseGrant(int ttl_seconds)
{
	JsonbContainer *res = etcd_call("/v3/lease/grant",
									psprintf("{\"TTL\":%d,\"ID\":0}", ttl_seconds), true, NULL);
	int64		id = MqJsonInt64(res, "ID");

	if (id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("etcd granted a lease without an id")));
	return id;
}

/* false: the lease has expired or was revoked (its keys are gone) */
bool
MqEtcdLeaseKeepAlive(int64 lease_id)
{
	int			code;
	JsonbContainer *res = etcd_call("/v3/lease/keepalive",
									psprintf("{\"ID\":\"" INT64_FORMAT "\"}", lease_id), true, &code);

	if (res == NULL)
	{
		if (code == 5)			/* NotFound */
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("etcd refused to keep lease " INT64_FORMAT " alive", lease_id),
				 errdetail("gRPC code %d.", code)));
	}
	/* a streaming call: the gateway wraps each message in "result" */
	if (MqJsonObject(res, "result"))
		res = MqJsonObject(res, "result");
	return MqJsonInt64(res, "TTL") > 0;
}

void
MqEtcdLeaseRevoke(int64 lease_id)
{
	int			code;

	if (etcd_call("/v3/lease/revoke",
				  psprintf("{\"ID\":\"" INT64_FORMAT "\"}", lease_id), true, &code) == NULL &&
		code != 5)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("etcd refused to revoke lease " INT64_FORMAT, lease_id),
				 errdetail("gRPC code %d.", code)));
}

/* ------------------------------------------------------------------------
 * Reads
 * ------------------------------------------------------------------------ */

char *
MqEtcdPrefixEnd(const char *prefix)
{
	int			len = strlen(prefix);
	char	   *end = pstrdup(prefix);

	/* the first key after every key that begins with prefix */
	while (len > 0)
	{
		if ((unsigned char) end[len - 1] < 0xff)
		{
			end[len - 1]++;
			end[len] = '\0';
			return end;
		}
		len--;
	}
	return pstrdup("\0");		/* no end: every key (not used by mqlog) */
}

static MqEtcdKv *
kv_from_json(JsonbContainer *c)
{
	MqEtcdKv   *kv = palloc0(sizeof(MqEtcdKv));
	char	   *k = MqJsonString(c, "key");
	char	   *v = MqJsonString(c, "value");

	kv->key = k ? b64_decode(k) : pstrdup("");
	kv->value = v ? b64_decode(v) : pstrdup("");
	kv->create_revision = MqJsonInt64(c, "create_revision");
	kv->mod_revision = MqJsonInt64(c, "mod_revision");
	kv->lease = MqJsonInt64(c, "lease");
	return kv;
}

static List *
range(const char *key, const char *range_end, int64 *revision)
{
	StringInfoData body;
	JsonbContainer *res;
	JsonbValue *kvs;
	List	   *result = NIL;

	initStringInfo(&body);
	appendStringInfoChar(&body, '{');
	append_b64_field(&body, "key", key);
	if (range_end)
	{
		appendStringInfoChar(&body, ',');
		append_b64_field(&body, "range_end", range_end);
	}
	appendStringInfoChar(&body, '}');
	res = etcd_call("/v3/kv/range", body.data, true, NULL);
	if (revision)
		*revision = MqJsonInt64(MqJsonObject(res, "header"), "revision");
	kvs = MqJsonField(res, "kvs");
	if (kvs != NULL && kvs->type == jbvBinary && JsonContainerIsArray(kvs->val.binary.data))
	{
		JsonbContainer *arr = kvs->val.binary.data;
		uint32		n = JsonContainerSize(arr);

		for (uint32 i = 0; i < n; i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

			if (e != NULL && e->type == jbvBinary)
				result = lappend(result, kv_from_json(e->val.binary.data));
		}
	}
	return result;
}

/* false when there is no such key */
bool
MqEtcdGet(const char *key, MqEtcdKv *kv, int64 *revision)
{
	List	   *l = range(key, NULL, revision);

	if (l == NIL)
		return false;
	if (kv)
		*kv = *(MqEtcdKv *) linitial(l);
	return true;
}

/* every key that begins with prefix, in key order: a list of MqEtcdKv * */
List *
MqEtcdRange(const char *prefix, int64 *revision)
{
	return range(prefix, MqEtcdPrefixEnd(prefix), revision);
}

/* ------------------------------------------------------------------------
 * Transactions, and the writes built on them
 * ------------------------------------------------------------------------ */

MqEtcdTxn *
MqEtcdTxnBegin(void)
{
	MqEtcdTxn  *txn = palloc0(sizeof(MqEtcdTxn));

	initStringInfo(&txn->compare);
	initStringInfo(&txn->success);
	return txn;
}

/* a key's create_revision against 0: EQUAL, absent; GREATER, present */
static void
compare_create_revision(MqEtcdTxn *txn, const char *key, const char *result)
{
	appendStringInfo(&txn->compare, "%s{", txn->ncompare++ ? "," : "");
	append_b64_field(&txn->compare, "key", key);
	appendStringInfo(&txn->compare,
					 ",\"result\":\"%s\",\"target\":\"CREATE\",\"create_revision\":\"0\"}",
					 result);
}

void
MqEtcdTxnIfAbsent(MqEtcdTxn *txn, const char *key)
{
	compare_create_revision(txn, key, "EQUAL");
}

void
MqEtcdTxnIfPresent(MqEtcdTxn *txn, const char *key)
{
	compare_create_revision(txn, key, "GREATER");
}

void
MqEtcdTxnIfModRevision(MqEtcdTxn *txn, const char *key, int64 mod_revision)
{
	appendStringInfo(&txn->compare, "%s{", txn->ncompare++ ? "," : "");
	append_b64_field(&txn->compare, "key", key);
	appendStringInfo(&txn->compare,
					 ",\"result\":\"EQUAL\",\"target\":\"MOD\",\"mod_revision\":\"" INT64_FORMAT "\"}",
					 mod_revision);
}

void
MqEtcdTxnPut(MqEtcdTxn *txn, const char *key, const char *value, int64 lease)
{
	appendStringInfo(&txn->success, "%s{\"request_put\":{", txn->nops++ ? "," : "");
	append_b64_field(&txn->success, "key", key);
	appendStringInfoChar(&txn->success, ',');
	append_b64_field(&txn->success, "value", value);
	if (lease != 0)
		appendStringInfo(&txn->success, ",\"lease\":\"" INT64_FORMAT "\"", lease);
	appendStringInfoString(&txn->success, "}}");
}

void
MqEtcdTxnDelete(MqEtcdTxn *txn, const char *key, bool prefix)
{
	appendStringInfo(&txn->success, "%s{\"request_delete_range\":{", txn->nops++ ? "," : "");
	append_b64_field(&txn->success, "key", key);
	if (prefix)
	{
		appendStringInfoChar(&txn->success, ',');
		append_b64_field(&txn->success, "range_end", MqEtcdPrefixEnd(key));
	}
	appendStringInfoString(&txn->success, "}}");
}

int
MqEtcdTxnOps(MqEtcdTxn *txn)
{
	return txn->nops;
}

/*
 * True when every compare held and the operations were applied; revision
 * is then the revision they made (every key put has it as mod_revision).
 */
bool
MqEtcdTxnCommit(MqEtcdTxn *txn, int64 *revision)
{
	JsonbContainer *res;

	if (txn->nops > MQ_ETCD_MAX_TXN_OPS)
		elog(ERROR, "mqlog: etcd transaction of %d operations, more than %d",
			 txn->nops, MQ_ETCD_MAX_TXN_OPS);
	res = etcd_call("/v3/kv/txn",
					psprintf("{\"compare\":[%s],\"success\":[%s],\"failure\":[]}",
							 txn->compare.data, txn->success.data), false, NULL);
	if (revision)
		*revision = MqJsonInt64(MqJsonObject(res, "header"), "revision");
	return MqJsonBool(res, "succeeded");
}

int64
MqEtcdPut(const char *key, const char *value, int64 lease)
{
	StringInfoData body;
	JsonbContainer *res;

	initStringInfo(&body);
	appendStringInfoChar(&body, '{');
	append_b64_field(&body, "key", key);
	appendStringInfoChar(&body, ',');
	append_b64_field(&body, "value", value);
	if (lease != 0)
		appendStringInfo(&body, ",\"lease\":\"" INT64_FORMAT "\"", lease);
	appendStringInfoChar(&body, '}');
	res = etcd_call("/v3/kv/put", body.data, true, NULL);
	return MqJsonInt64(MqJsonObject(res, "header"), "revision");
}

/* create-if-absent: true when the key did not exist and is now written */
bool
MqEtcdPutIfAbsent(const char *key, const char *value, int64 lease, int64 *revision)
{
	MqEtcdTxn  *txn = MqEtcdTxnBegin();

	MqEtcdTxnIfAbsent(txn, key);
	MqEtcdTxnPut(txn, key, value, lease);
	return MqEtcdTxnCommit(txn, revision);
}

/* compare-and-swap: true when the key was still at mod_revision */
bool
MqEtcdPutIfModRevision(const char *key, const char *value, int64 mod_revision,
					   int64 lease, int64 *revision)
{
	MqEtcdTxn  *txn = MqEtcdTxnBegin();

	MqEtcdTxnIfModRevision(txn, key, mod_revision);
	MqEtcdTxnPut(txn, key, value, lease);
	return MqEtcdTxnCommit(txn, revision);
}

/* the number of keys deleted (prefix: every key that begins with key) */
int64
MqEtcdDelete(const char *key, bool prefix)
{
	StringInfoData body;
	JsonbContainer *res;

	initStringInfo(&body);
	appendStringInfoChar(&body, '{');
	append_b64_field(&body, "key", key);
	if (prefix)
	{
		appendStringInfoChar(&body, ',');
		append_b64_field(&body, "range_end", MqEtcdPrefixEnd(key));
	}
	appendStringInfoChar(&body, '}');
	res = etcd_call("/v3/kv/deleterange", body.data, true, NULL);
	return MqJsonInt64(res, "deleted");
}
