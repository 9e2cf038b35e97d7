/*-------------------------------------------------------------------------
 *
 * unsupported.c
 *		Requests mqlog does not serve: an API key it does not know, or a
 *		version outside the range it serves.  The client is told where
 *		the protocol lets the broker say so, and the operator is told
 *		once per connection, at LOG, what the client should change.
 *
 * A version below the floor (Produce v0-v2 and Fetch v0-v3, from before
 * record batch v2; OffsetFetch v0, whose offsets lived in ZooKeeper) has
 * a layout that is known: its request is read, and every topic and
 * partition it names is answered UNSUPPORTED_VERSION in its own place of
 * that version's response, as Kafka answers an error for a request it
 * can read (a Produce with acks 0 is not answered, as ever).  A version
 * above the ceiling has a layout mqlog does not know, and a key it does
 * not know has no layout at all: the connection is closed, as Kafka
 * closes it for a key it does not know (a client that asked ApiVersions
 * never sends either).  ApiVersions itself is answered in request.c.
 *
 * Each such request marks the connection's session (violated), and the
 * listener counts it against the client's address (backoff.c): the next
 * such request from the address (MqKafkaFrameUnsupported, read from the
 * frame before it is served) is held a little longer each time, so a
 * client that reconnects and tries again at once is slowed down, and
 * clients whose requests are served are not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

/* Kafka's API names by key (clients/src/main/resources/common/message) */
static const char *const kafka_api_names[] = {
	"Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica",
	"UpdateMetadata", "ControlledShutdown", "OffsetCommit", "OffsetFetch",
	"FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
	"DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics",
	"DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
	"AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
	"TxnOffsetCommit", "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs",
	"AlterConfigs", "AlterReplicaLogDirs", "DescribeLogDirs", "SaslAuthenticate",
	"CreatePartitions", "CreateDelegationToken", "RenewDelegationToken",
	"ExpireDelegationToken", "DescribeDelegationToken", "DeleteGroups", "ElectLeaders",
	"IncrementalAlterConfigs", "AlterPartitionReassignments",
	"ListPartitionReassignments", "OffsetDelete", "DescribeClientQuotas",
	"AlterClientQuotas", "DescribeUserScramCredentials", "AlterUserScramCredentials",
	"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum", "AlterPartition",
	"UpdateFeatures", "Envelope", "FetchSnapshot", "DescribeCluster",
	"DescribeProducers", "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker",
	"DescribeTransactions", "ListTransactions", "AllocateProducerIds",
	"ConsumerGroupHeartbeat",
};

static const char *
api_name(int16 key)
{
	if (key >= 0 && key < lengthof(kafka_api_names))
		return kafka_api_names[key];
	return "an API Kafka does not define";
}

/*
 * The log line, once per connection (later ones at DEBUG1: a client that
 * retries on the same connection is one problem, not many)
 */
static void
log_unsupported(MqKafkaRequest *req, const MqKafkaApi *api, bool answered)
{
	MqKafkaSession *s = req->session;
	const char *client = req->client_id ? req->client_id : "";
	const char *peer = s->peer ? s->peer : "";
	int			level = s->unsupported_logged ? DEBUG1 : LOG;

	s->unsupported_logged = true;
	s->violated = true;
	if (api == NULL)
		ereport(level,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Kafka client \"%s\" at %s sent a %s request (API key %d, v%d), which mqlog does not serve; closing its connection",
						client, peer, api_name(req->api_key), req->api_key, req->api_version),
				 errhint("ApiVersions lists the APIs mqlog serves; doc/kafka.md lists what is not supported yet.")));
	else if (req->api_version < api->min_version)
		ereport(level,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Kafka client \"%s\" at %s sent %s (API key %d) v%d, older than the oldest version mqlog serves (v%d); %s",
						client, peer, api->name, req->api_key, req->api_version,
						api->min_version,
						answered ? "answered UNSUPPORTED_VERSION" : "closing its connection"),
				 errdetail("mqlog speaks the protocol of Kafka 1.0 and later (record batch v2)."),
				 errhint("Set the client's protocol version to Kafka 1.0 or later: sarama's config.Version = sarama.V1_0_0_0 or later, kafka-python's api_version=(1, 0, 0) or later (or leave it unset), kafka-go 0.4 or later; librdkafka and kafkajs ask with ApiVersions by themselves.")));
	else
		ereport(level,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Kafka client \"%s\" at %s sent %s (API key %d) v%d, newer than the newest version mqlog serves (v%d); closing its connection",
						client, peer, api->name, req->api_key, req->api_version,
						api->max_version),
				 errhint("Let the client choose its versions with ApiVersions (librdkafka's api.version.request=true, kafka-python's api_version unset, sarama's config.ApiVersionsRequest = true), or set its protocol version no newer than what ApiVersions lists.")));
}

/*
 * One partition of an old request, read, and its answer written: its
 * index is read and echoed by the caller (answer_topics)
 */
typedef void (*PartitionAnswer) (MqKafkaReader *r, StringInfo out, int16 version);

/*
 * The "topics [name, partitions [index, ...]]" of an old request, each
 * partition answered by each (min_size: a partition's least bytes);
 * false if the request is malformed
 */
static bool
answer_topics(MqKafkaReader *r, StringInfo out, int16 version, int min_size,
			  PartitionAnswer each)
{
	int32		ntopics = MqKafkaReadArrayLen(r, false, 6);

	MqKafkaWriteArrayLen(out, false, Max(ntopics, 0));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		int32		nparts;

		MqKafkaWriteString(out, false, MqKafkaReadString(r, false, NULL));
		nparts = MqKafkaReadArrayLen(r, false, min_size);
		MqKafkaWriteArrayLen(out, false, Max(nparts, 0));
		for (int p = 0; p < nparts && !r->failed; p++)
		{
			MqKafkaWriteInt32(out, MqKafkaReadInt32(r));	/* index */
			each(r, out, version);
		}
	}
	return !r->failed && ntopics >= 0;
}

/* Produce v0-v2: UNSUPPORTED_VERSION, at offset -1 */
static void
produce_partition(MqKafkaReader *r, StringInfo out, int16 version)
{
	int			len;

	(void) MqKafkaReadBytes(r, false, &len);	/* the message set */
	MqKafkaWriteInt16(out, MQK_UNSUPPORTED_VERSION);
	MqKafkaWriteInt64(out, -1); /* base_offset */
	if (version >= 2)
		MqKafkaWriteInt64(out, -1); /* log_append_time_ms */
}

/* Fetch v0-v3: UNSUPPORTED_VERSION, with no records */
static void
fetch_partition(MqKafkaReader *r, StringInfo out, int16 version)
{
	(void) MqKafkaReadInt64(r); /* fetch_offset */
	(void) MqKafkaReadInt32(r); /* partition_max_bytes */
	MqKafkaWriteInt16(out, MQK_UNSUPPORTED_VERSION);
	MqKafkaWriteInt64(out, -1); /* high_watermark */
	MqKafkaWriteBytes(out, false, "", 0);	/* records */
}

/* OffsetFetch v0: UNSUPPORTED_VERSION, no offset */
static void
offset_fetch_partition(MqKafkaReader *r, StringInfo out, int16 version)
{
	MqKafkaWriteInt64(out, -1); /* committed_offset */
	MqKafkaWriteString(out, false, NULL);	/* metadata */
	MqKafkaWriteInt16(out, MQK_UNSUPPORTED_VERSION);
}

/* the answer to an old request whose layout is known, or MQK_CLOSE */
static MqKafkaOutcome
old_version_error(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int16		acks;

	switch (req->api_key)
	{
		case MQK_PRODUCE:
			if (v > 2)
				break;
			acks = MqKafkaReadInt16(r);
			(void) MqKafkaReadInt32(r); /* timeout_ms */
			if (!answer_topics(r, out, v, 8, produce_partition))
				break;
			if (v >= 1)
				MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
			return acks == 0 ? MQK_NO_RESPONSE : MQK_RESPOND;
		case MQK_FETCH:
			if (v > 3)
				break;
			(void) MqKafkaReadInt32(r); /* replica_id */
			(void) MqKafkaReadInt32(r); /* max_wait_ms */
			(void) MqKafkaReadInt32(r); /* min_bytes */
			if (v >= 3)
				(void) MqKafkaReadInt32(r); /* max_bytes */
			if (v >= 1)
				MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
			if (answer_topics(r, out, v, 16, fetch_partition))
				return MQK_RESPOND;
			break;
		case MQK_OFFSET_FETCH:
			if (v > 0)
				break;
			(void) MqKafkaReadString(r, false, NULL);	/* group_id */
			if (answer_topics(r, out, v, 4, offset_fetch_partition))
				return MQK_RESPOND;
			break;
		default:
			break;
	}
	return MQK_CLOSE;
}

MqKafkaOutcome
MqKafkaUnsupported(MqKafkaRequest *req, const MqKafkaApi *api, StringInfo out)
{
	MqKafkaOutcome outcome = MQK_CLOSE;

	/* the layouts read here are those below today's floors */
	if (api != NULL && req->api_version >= 0 && req->api_version < api->min_version)
		outcome = old_version_error(req, out);
	log_unsupported(req, api, outcome != MQK_CLOSE);
	return outcome;
}

bool
MqKafkaFrameUnsupported(const char *frame, int len, bool before_auth)
{
	MqKafkaReader r;
	int16		key;
	int16		version;
	const MqKafkaApi *api;

	MqKafkaReaderInit(&r, frame, len);
	key = MqKafkaReadInt16(&r);
	version = MqKafkaReadInt16(&r);
	if (r.failed)
		return false;
	api = MqKafkaFindApi(key);
	if (api == NULL || (before_auth && !MqKafkaPreAuthApi(key)))
		return true;
	/* ApiVersions of a version too new is a probe, answered as Kafka does */
	return key != MQK_API_VERSIONS &&
		(version < api->min_version || version > api->max_version);
}
