/*-------------------------------------------------------------------------
 *
 * api_versions.c
 *		The APIs and versions the listener serves, and ApiVersions (key
 *		18, v0-v3), which tells a client so.  A client asking ApiVersions
 *		at a version past ours gets UNSUPPORTED_VERSION with the list in
 *		the v0 form, as Kafka answers, and tries again lower.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

/*
 * Versions: what Debian's librdkafka 2.0, kafka-python 2.0 and kafkajs 2
 * ask for, with record batch v2 throughout (Produce >= 3, Fetch >= 4).
 */
static const MqKafkaApi apis[] = {
	{MQK_PRODUCE, 3, 8, 9, "Produce", MqKafkaProduce},
	{MQK_FETCH, 4, 12, 12, "Fetch", MqKafkaFetch},
	{MQK_LIST_OFFSETS, 0, 5, 6, "ListOffsets", MqKafkaListOffsets},
	{MQK_METADATA, 0, 9, 9, "Metadata", MqKafkaMetadata},
	{MQK_OFFSET_COMMIT, 0, 7, 8, "OffsetCommit", MqKafkaOffsetCommit},
	{MQK_OFFSET_FETCH, 1, 7, 6, "OffsetFetch", MqKafkaOffsetFetch},
	{MQK_FIND_COORDINATOR, 0, 2, 3, "FindCoordinator", MqKafkaFindCoordinator},
	{MQK_JOIN_GROUP, 0, 5, 6, "JoinGroup", MqKafkaJoinGroup},
	{MQK_HEARTBEAT, 0, 3, 4, "Heartbeat", MqKafkaHeartbeat},
	{MQK_LEAVE_GROUP, 0, 2, 4, "LeaveGroup", MqKafkaLeaveGroup},
	{MQK_SYNC_GROUP, 0, 3, 4, "SyncGroup", MqKafkaSyncGroup},
	{MQK_DESCRIBE_GROUPS, 0, 4, 5, "DescribeGroups", MqKafkaDescribeGroups},
	{MQK_LIST_GROUPS, 0, 4, 3, "ListGroups", MqKafkaListGroups},
	{MQK_SASL_HANDSHAKE, 0, 1, 2, "SaslHandshake", MqKafkaSaslHandshake},
	{MQK_API_VERSIONS, 0, 3, 3, "ApiVersions", MqKafkaApiVersions},
	{MQK_CREATE_TOPICS, 0, 4, 5, "CreateTopics", MqKafkaCreateTopics},
	{MQK_DELETE_TOPICS, 0, 3, 4, "DeleteTopics", MqKafkaDeleteTopics},
	{MQK_DELETE_RECORDS, 0, 2, 2, "DeleteRecords", MqKafkaDeleteRecords},
	{MQK_INIT_PRODUCER_ID, 0, 4, 2, "InitProducerId", MqKafkaInitProducerId},
	{MQK_OFFSET_FOR_LEADER_EPOCH, 0, 4, 4, "OffsetForLeaderEpoch", MqKafkaOffsetForLeaderEpoch},
	{MQK_ADD_PARTITIONS_TO_TXN, 0, 3, 3, "AddPartitionsToTxn", MqKafkaAddPartitionsToTxn},
	{MQK_ADD_OFFSETS_TO_TXN, 0, 3, 3, "AddOffsetsToTxn", MqKafkaAddOffsetsToTxn},
	{MQK_END_TXN, 0, 3, 3, "EndTxn", MqKafkaEndTxn},
	{MQK_TXN_OFFSET_COMMIT, 0, 3, 3, "TxnOffsetCommit", MqKafkaTxnOffsetCommit},
	{MQK_DESCRIBE_ACLS, 0, 3, 2, "DescribeAcls", MqKafkaDescribeAcls},
	{MQK_CREATE_ACLS, 0, 3, 2, "CreateAcls", MqKafkaCreateAcls},
	{MQK_DELETE_ACLS, 0, 3, 2, "DeleteAcls", MqKafkaDeleteAcls},
	{MQK_DESCRIBE_CONFIGS, 0, 2, 4, "DescribeConfigs", MqKafkaDescribeConfigs},
	{MQK_ALTER_CONFIGS, 0, 2, 2, "AlterConfigs", MqKafkaAlterConfigs},
	{MQK_DESCRIBE_LOG_DIRS, 0, 4, 2, "DescribeLogDirs", MqKafkaDescribeLogDirs},
	{MQK_SASL_AUTHENTICATE, 0, 2, 2, "SaslAuthenticate", MqKafkaSaslAuthenticate},
	{MQK_CREATE_PARTITIONS, 0, 3, 2, "CreatePartitions", MqKafkaCreatePartitions},
	{MQK_DELETE_GROUPS, 0, 1, 2, "DeleteGroups", MqKafkaDeleteGroups},
	{MQK_INCREMENTAL_ALTER_CONFIGS, 0, 1, 1, "IncrementalAlterConfigs", MqKafkaIncrementalAlterConfigs},
	{MQK_OFFSET_DELETE, 0, 0, 1, "OffsetDelete", MqKafkaOffsetDelete},
	{MQK_DESCRIBE_CLUSTER, 0, 1, 0, "DescribeCluster", MqKafkaDescribeCluster},
};

/* the APIs a connection may use before it has authenticated */
bool
MqKafkaPreAuthApi(int16 api_key)
{
	return api_key == MQK_API_VERSIONS || api_key == MQK_SASL_HANDSHAKE ||
		api_key == MQK_SASL_AUTHENTICATE;
}

const MqKafkaApi *
MqKafkaFindApi(int16 key)
{
	for (int i = 0; i < lengthof(apis); i++)
		if (apis[i].key == key)
			return &apis[i];
	return NULL;
}

static void
write_api_list(StringInfo out, bool flexible)
{
	MqKafkaWriteArrayLen(out, flexible, lengthof(apis));
	for (int i = 0; i < lengthof(apis); i++)
	{
		MqKafkaWriteInt16(out, apis[i].key);
		MqKafkaWriteInt16(out, apis[i].min_version);
		MqKafkaWriteInt16(out, apis[i].max_version);
		MqKafkaWriteTags(out, flexible);
	}
}

/* the answer to an ApiVersions request of a version we do not know */
void
MqKafkaApiVersionsError(StringInfo out)
{
	MqKafkaWriteInt16(out, MQK_UNSUPPORTED_VERSION);
	write_api_list(out, false);
}

MqKafkaOutcome
MqKafkaApiVersions(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;

	if (req->api_version >= 3)
	{
		/* client_software_name and _version: only for the broker's metrics */
		(void) MqKafkaReadString(r, true, NULL);
		(void) MqKafkaReadString(r, true, NULL);
		MqKafkaSkipTags(r, true);
	}
	if (r->failed)
		return MQK_CLOSE;
	MqKafkaWriteInt16(out, MQK_NONE);
	write_api_list(out, req->flexible);
	if (req->api_version >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteTags(out, req->flexible);
	return MQK_RESPOND;
}
