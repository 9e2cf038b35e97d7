/*-------------------------------------------------------------------------
 *
 * request.c
 *		Serving one Kafka request frame: the request header (v1, or v2 for
 *		flexible versions), the API and version check, the response header
 *		(v0, or v1 for flexible versions except ApiVersions, which Kafka
 *		always answers with v0), and the transaction the handler runs in.
 *
 * Every request that touches the database runs in a transaction of its
 * own, as the role the connection authenticated as with SASL (api_sasl.c) or,
 * without SASL, as mqlog.kafka_role (SetUserIdAndSecContext, so topic
 * privileges apply exactly as to a SQL session of that role), inside
 * PG_TRY: an
 * ERROR that escapes a handler aborts the transaction and closes the
 * connection, so nothing a client sends can leave a transaction open or
 * end the process.  A handler's per-partition work runs in
 * subtransactions (MqKafkaTry), where an ERROR becomes the partition's
 * Kafka error code and the rest of the request goes on.
 *
 * A request of an API key or a version that is not served is
 * unsupported.c's: answered UNSUPPORTED_VERSION where the protocol lets
 * the broker say so, else the connection is closed, logged either way.
 *
 * On a connection that must authenticate, only ApiVersions, SaslHandshake
 * and SaslAuthenticate are served until it has; any other request closes
 * it.  SaslAuthenticate runs as the worker's own user.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/subxact.h"
#include "log/producers.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/kafka_internal.h"

/* (sub)transactions aborted so far (MqKafkaAbortCount) */
static uint64 aborts = 0;

uint64
MqKafkaAbortCount(void)
{
	return aborts;
}

int16
MqKafkaErrorOf(int sqlerrcode, int16 invalid_code)
{
	switch (sqlerrcode)
	{
		case ERRCODE_UNDEFINED_OBJECT:
			return MQK_UNKNOWN_TOPIC_OR_PARTITION;
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return MQK_TOPIC_AUTHORIZATION_FAILED;
		case ERRCODE_MQ_NOT_LEADER:
		case ERRCODE_READ_ONLY_SQL_TRANSACTION:
			return MQK_NOT_LEADER_OR_FOLLOWER;
		case ERRCODE_MQ_NOT_ENOUGH_REPLICAS:
			return MQK_NOT_ENOUGH_REPLICAS;
		case ERRCODE_LOCK_NOT_AVAILABLE:
			return MQK_REQUEST_TIMED_OUT;	/* a wait given up: retriable */
		case ERRCODE_MQ_OUT_OF_ORDER_SEQUENCE:
			return MQK_OUT_OF_ORDER_SEQUENCE_NUMBER;
		case ERRCODE_MQ_INVALID_PRODUCER_EPOCH:
			return MQK_INVALID_PRODUCER_EPOCH;
		case ERRCODE_INVALID_BINARY_REPRESENTATION:
		case ERRCODE_DATA_CORRUPTED:
		case ERRCODE_CHARACTER_NOT_IN_REPERTOIRE:
			return MQK_CORRUPT_MESSAGE;
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
			return MQK_MESSAGE_TOO_LARGE;
		case ERRCODE_FEATURE_NOT_SUPPORTED:
			return MQK_UNSUPPORTED_FOR_MESSAGE_FORMAT;
		case ERRCODE_DATETIME_VALUE_OUT_OF_RANGE:
			return MQK_INVALID_TIMESTAMP;
		case ERRCODE_INVALID_PARAMETER_VALUE:
			return invalid_code;
		default:
			return MQK_UNKNOWN_SERVER_ERROR;
	}
}

/* ------------------------------------------------------------------------
 * What a request's units may allocate
 *
 * A unit's answer (a partition's metadata, a group's members, an error
 * message) lives in the request's memory until the response is written,
 * and a request may name one partition or group as often as its frame
 * holds (MQK_MAX_REQUEST_ELEMENTS): small input, each element answered
 * at full size.  So once the request's memory and its response have
 * grown by mqlog.kafka_max_request_memory since its first unit, no
 * further unit runs: each is answered REQUEST_TIMED_OUT untouched, as the
 * units past the time budget are (the client retries them), and one line
 * says so.  (A DescribeGroups naming a group with a 3.9 MB member 2,000
 * times made the listener 400 MB larger before.)
 * The bytes of an answer buffer whose API bounds them itself (Fetch's
 * records, MqKafkaTry's out) do not count.  Produce's batches have their
 * own budget (api_produce.c) and are freed after each entry.
 *
 * The bound is smaller when the answers other connections have not read
 * yet, and the frames being read, leave less of
 * mqlog.kafka_max_buffered_size (MqKafkaAnswerRoom, as a Fetch's records
 * are bounded): clients that read their answers slowly, or not at all,
 * each asking for a large one, make every later request answer fewer
 * units (its first always runs), not make the listener hold more.  (40
 * connections that read nothing of their Metadata answers held 1.4 GB
 * before.)
 * ------------------------------------------------------------------------ */

static MemoryContext units_cxt = NULL;	/* the request's, while it is served */
static StringInfo units_out;	/* its response, and where that began */
static int	units_out_at;
static Size units_base = 0;		/* the two at its first unit; 0: none yet */
static Size units_cap = 0;		/* what they may grow by */
static int	units_refused = 0;

static void
units_begin(MemoryContext cxt, StringInfo out)
{
	units_cxt = cxt;
	units_out = out;
	units_out_at = out->len;
	units_base = 0;
	units_cap = (Size) Min((int64) mqlog_kafka_max_request_memory, MqKafkaAnswerRoom());
	units_refused = 0;
}

static void
units_end(const MqKafkaRequest *req, const MqKafkaApi *api)
{
	if (units_refused > 0)
		ereport(LOG,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Kafka %s request from client \"%s\" held over %s (%zu bytes) of answers: %d of its units answered REQUEST_TIMED_OUT without being run",
						api->name, req->client_id ? req->client_id : "",
						units_cap < (Size) mqlog_kafka_max_request_memory ?
						"what unread answers left of mqlog.kafka_max_buffered_size" :
						"mqlog.kafka_max_request_memory",
						units_cap, units_refused)));
	units_cxt = NULL;
}

/* may the next unit run?  answer_bytes: its API's own answer buffer */
static bool
units_memory_left(Size answer_bytes)
{
	Size		held;

	if (units_cxt == NULL)
		return true;
	held = MemoryContextMemAllocated(units_cxt, true) + (units_out->len - units_out_at);
	if (units_base == 0)
		units_base = held;
	held -= Min(held, answer_bytes);
	if (held <= units_base + units_cap)
		return true;
	units_refused++;
	return false;
}

/*
 * A unit in a subtransaction, rolled back even when it succeeds unless
 * keep; its ERROR in *edata
 */
static bool
try_unit(void (*fn) (void *arg), void *arg, bool keep, ErrorData **edata)
{
	bool		ok;

	ok = keep ? MqRunInSubtransaction(fn, arg, edata) : MqTryInSubtransaction(fn, arg, edata);
	if (!keep || !ok)
		aborts++;
	return ok;
}

/* LOG for an error that has no Kafka code, else DEBUG1 */
static void
log_unit_error(int16 code, ErrorData *edata)
{
	ereport(code == MQK_UNKNOWN_SERVER_ERROR ? LOG : DEBUG1,
			(errmsg("kafka request answered with error %d: %s", code, edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
}

int16
MqKafkaTry(void (*fn) (void *arg), void *arg, int16 invalid_code, StringInfo out)
{
	int			out_len = out ? out->len : 0;
	ErrorData  *edata;
	int16		code;

	if (!units_memory_left(out ? (Size) out->maxlen : 0))
		return MQK_REQUEST_TIMED_OUT;
	if (try_unit(fn, arg, true, &edata))
		return MQK_NONE;
	code = MqKafkaErrorOf(edata->sqlerrcode, invalid_code);
	log_unit_error(code, edata);
	FreeErrorData(edata);
	if (out)
		out->len = out_len;
	return code;
}

int16
MqKafkaTryAdmin(void (*fn) (void *arg), void *arg, int16 (*map) (int sqlerrcode, void *arg),
				bool keep, char **message)
{
	ErrorData  *edata;
	int16		code;

	*message = NULL;
	if (!units_memory_left(0))
	{
		*message = pstrdup("the request's answers passed the listener's bound (mqlog.kafka_max_request_memory, or what other connections' unread answers left of mqlog.kafka_max_buffered_size): ask again for what was not answered");
		return MQK_REQUEST_TIMED_OUT;
	}
	if (try_unit(fn, arg, keep, &edata))
		return MQK_NONE;
	code = map ? map(edata->sqlerrcode, arg) : MqKafkaErrorOf(edata->sqlerrcode, MQK_INVALID_REQUEST);
	log_unit_error(code, edata);
	*message = pstrdup(edata->message);
	FreeErrorData(edata);
	return code;
}

bool
MqKafkaOutOfTime(MqKafkaRequest *req, int *attempted)
{
	return (*attempted)++ > 0 &&
		TimestampDifferenceExceeds(req->began, GetCurrentTimestamp(), MQK_REQUEST_TIME_MS);
}

MqTopic *
MqKafkaTopic(const char *name, int priv, int16 *error)
{
	MqTopic    *topic;

	*error = MQK_NONE;
	if (!OidIsValid(get_extension_oid("mqlog", true)))
	{
		*error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return NULL;
	}
	if ((topic = MqTopicLookup(name, true)) == NULL)
	{
		/* a replicated topic held elsewhere: to its leader (brokers.c) */
		*error = MqKafkaClusterTopicError(name);
		if (*error == MQK_NONE)
			*error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return NULL;
	}
	if (!MqTopicHasPrivilege(topic, GetUserId(), priv))
	{
		*error = MQK_TOPIC_AUTHORIZATION_FAILED;
		return NULL;
	}
	return topic;
}

/*
 * A partition to read where it is led (ListOffsets, OffsetForLeaderEpoch):
 * its topic, or NULL with *error set, checked in Kafka's order: the topic
 * (MqKafkaTopic, with priv), the partition (UNKNOWN_TOPIC_OR_PARTITION),
 * the client's epoch (MqKafkaCheckLeaderEpoch, first, as Kafka's leader
 * checks it), then that this node leads it (MqKafkaCheckLeader, brokers.c,
 * which may read the topic again: the epoch is checked again on the copy
 * it returns).
 */
struct MqTopic *
MqKafkaLedPartition(const char *name, int priv, int32 partition, int32 client_epoch,
					int16 *error)
{
	MqTopic    *topic = MqKafkaTopic(name, priv, error);

	if (topic == NULL)
		return NULL;
	if (partition < 0 || partition >= topic->partitions)
		*error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
	else if ((*error = MqKafkaCheckLeaderEpoch(topic, partition, client_epoch)) == MQK_NONE &&
			 (*error = MqKafkaCheckLeader(&topic, partition)) == MQK_NONE)
		*error = MqKafkaCheckLeaderEpoch(topic, partition, client_epoch);
	return *error == MQK_NONE ? topic : NULL;
}

/*
 * The connection's authenticated role (SASL, or its client certificate)
 * or mqlog.kafka_role, or InvalidOid (and a log line) when it cannot serve
 */
static Oid
request_role(MqKafkaSession *session)
{
	Oid			role;

	/* a client certificate's role, at the first request that needs one */
	if (session->state == MQK_SASL_OFF && !MqKafkaTlsLogin(session))
		return InvalidOid;
	if (session->state == MQK_SASL_DONE)
	{
		if (SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(session->role)))
			return session->role;
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the role a Kafka connection authenticated as (OID %u) was dropped; closing the connection",
						session->role)));
		return InvalidOid;
	}
	if (mqlog_kafka_role == NULL || mqlog_kafka_role[0] == '\0')
	{
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("the Kafka listener serves no request while mqlog.kafka_role is empty"),
				 errhint("Set mqlog.kafka_role to the role Kafka clients act as, and reload.")));
		return InvalidOid;
	}
	role = get_role_oid(mqlog_kafka_role, true);
	if (!OidIsValid(role))
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" named by mqlog.kafka_role does not exist", mqlog_kafka_role)));
	return role;
}

/*
 * The handler in a transaction of its own, as the request's role (or, for
 * SaslAuthenticate, as the worker's user); an ERROR that escapes it (or
 * the commit) in *error, and MQK_CLOSE
 */
static MqKafkaOutcome
run_once(const MqKafkaApi *api, MqKafkaRequest *req, StringInfo out, ErrorData **error)
{
	MemoryContext outer = CurrentMemoryContext;
	int			out_len = out->len;
	volatile MqKafkaOutcome outcome = MQK_CLOSE;

	*error = NULL;
	PG_TRY();
	{
		Oid			role;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		MemoryContextSwitchTo(outer);
		units_begin(outer, out);
		/* no request waits long for a lock: every other client waits with it */
		(void) set_config_option("lock_timeout", CppAsString2(MQK_LOCK_WAIT_MS), PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
		if (api->key == MQK_SASL_AUTHENTICATE)
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			outcome = api->handler(req, out);
			PopActiveSnapshot();
		}
		else if (OidIsValid(role = request_role(req->session)))
		{
			Oid			saved_user;
			int			saved_sec;

			GetUserIdAndSecContext(&saved_user, &saved_sec);
			SetUserIdAndSecContext(role, saved_sec | SECURITY_LOCAL_USERID_CHANGE);
			PushActiveSnapshot(GetTransactionSnapshot());
			outcome = api->handler(req, out);
			PopActiveSnapshot();
			SetUserIdAndSecContext(saved_user, saved_sec);
		}
		CommitTransactionCommand();
		if (req->after_commit != NULL && outcome == MQK_RESPOND)
			req->after_commit(req, out);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(outer);
		*error = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		aborts++;
		outcome = MQK_CLOSE;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(outer);
	units_end(req, api);
	if (outcome != MQK_RESPOND && outcome != MQK_RESPOND_CLOSE)
		out->len = out_len;
	return outcome;
}

/*
 * run_once, and for a Metadata request whose topic auto-creation lost to
 * another node's at commit (etcd took the other's write first:
 * cluster/topics.c), once more: the topic is in etcd now, so the second
 * run finds it instead of creating it, and the client gets an answer, not
 * a closed connection.  Any other ERROR closes the connection.
 */
static MqKafkaOutcome
run_in_transaction(const MqKafkaApi *api, MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader body = req->body;
	ErrorData  *edata;
	MqKafkaOutcome outcome = run_once(api, req, out, &edata);

	if (edata != NULL && api->key == MQK_METADATA &&
		edata->sqlerrcode == ERRCODE_DUPLICATE_OBJECT)
	{
		ereport(DEBUG1,
				(errmsg("kafka Metadata request from client \"%s\" served again: %s",
						req->client_id ? req->client_id : "", edata->message)));
		FreeErrorData(edata);
		req->body = body;
		req->after_commit = NULL;
		outcome = run_once(api, req, out, &edata);
	}
	if (edata != NULL)
	{
		ereport(LOG,
				(errmsg("kafka %s request from client \"%s\" failed, closing its connection: %s",
						api->name, req->client_id ? req->client_id : "", edata->message)));
		FreeErrorData(edata);
	}
	return outcome;
}

static bool
responds(MqKafkaOutcome outcome)
{
	return outcome == MQK_RESPOND || outcome == MQK_RESPOND_CLOSE;
}

/* the response's size filled in at start, or the response taken back */
static MqKafkaOutcome
finish_response(StringInfo out, int start, MqKafkaOutcome outcome)
{
	if (responds(outcome))
		MqKafkaPatchInt32(out, start, out->len - start - 4);
	else
		out->len = start;
	return outcome;
}

/*
 * Serve one frame (its 4-byte size already taken off) of a connection in
 * session's state.  On MQK_RESPOND (and MQK_RESPOND_CLOSE), out ends with
 * the whole response, size prefix included.  req is filled here; a parked
 * request is served again with the same req.
 */
MqKafkaOutcome
MqKafkaServe(const char *frame, int len, MqKafkaSession *session, MqKafkaRequest *req,
			 StringInfo out)
{
	MqKafkaReader *r = &req->body;
	const MqKafkaApi *api;
	int			start = out->len;
	MqKafkaOutcome outcome;

	MqKafkaReaderInit(r, frame, len);
	req->session = session;
	req->began = GetCurrentTimestamp();
	if (session->state == MQK_SASL_WAIT_RAW)
	{
		/* after SaslHandshake v0: a bare token, answered by a bare one */
		req->api_key = MQK_SASL_AUTHENTICATE;
		MqKafkaWriteInt32(out, 0);	/* size, filled in below */
		outcome = run_in_transaction(MqKafkaFindApi(MQK_SASL_AUTHENTICATE), req, out);
		return finish_response(out, start, outcome);
	}
	req->api_key = MqKafkaReadInt16(r);
	req->api_version = MqKafkaReadInt16(r);
	req->correlation_id = MqKafkaReadInt32(r);
	req->client_id = MqKafkaReadString(r, false, NULL);
	if (r->failed)
		return MQK_CLOSE;
	api = MqKafkaFindApi(req->api_key);
	if (api == NULL)
		return MqKafkaUnsupported(req, NULL, out);	/* logs, and closes */
	if (session->state != MQK_SASL_OFF && session->state != MQK_SASL_DONE &&
		!MqKafkaPreAuthApi(req->api_key))
	{
		/*
		 * A violation, as an unsupported request is: a client that
		 * reconnects and sends it again at once is held (backoff.c), or
		 * it would write this line thousands of times a second
		 */
		session->violated = true;
		ereport(LOG,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("Kafka client \"%s\" sent a %s request before authenticating; closing its connection",
						req->client_id ? req->client_id : "", api->name)));
		return MQK_CLOSE;
	}

	MqKafkaWriteInt32(out, 0);	/* size, filled in below */
	MqKafkaWriteInt32(out, req->correlation_id);
	if (req->api_version < api->min_version || req->api_version > api->max_version)
	{
		/* ApiVersions says which versions there are, in its v0 form */
		if (req->api_key == MQK_API_VERSIONS)
		{
			MqKafkaApiVersionsError(out);
			return finish_response(out, start, MQK_RESPOND);
		}
		/* others: UNSUPPORTED_VERSION where the layout is known (unsupported.c) */
		return finish_response(out, start, MqKafkaUnsupported(req, api, out));
	}
	req->flexible = req->api_version >= api->first_flexible;
	MqKafkaSkipTags(r, req->flexible);	/* request header v2 */
	if (r->failed)
	{
		out->len = start;
		return MQK_CLOSE;
	}
	if (req->flexible && req->api_key != MQK_API_VERSIONS)
		MqKafkaWriteTags(out, true);	/* response header v1 */

	if (req->api_key == MQK_API_VERSIONS || req->api_key == MQK_SASL_HANDSHAKE)
		outcome = api->handler(req, out);	/* needs no database */
	else
		outcome = run_in_transaction(api, req, out);
	return finish_response(out, start, outcome);
}
