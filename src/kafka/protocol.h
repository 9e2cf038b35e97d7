/*-------------------------------------------------------------------------
 *
 * protocol.h
 *		Kafka's wire protocol as the listener speaks it (protocol.c): the API
 *		keys and error codes mqlog uses, and bounds-checked readers and
 *		writers of the protocol's primitive types, classic and flexible
 *		(KIP-482: compact strings and arrays, tagged fields).
 *
 * A reader never reads past the frame it was given: every read checks the
 * bytes left, and the first read that would pass the end marks the reader
 * failed and returns zeros from then on, so a handler reads a whole
 * request and checks r->failed once at the end.  An array's element count
 * is capped by the bytes left divided by the smallest size one element
 * can have, so no count a client sends can make a handler allocate or
 * loop more than its frame allows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_PROTOCOL_H
#define MQLOG_KAFKA_PROTOCOL_H

#include "lib/stringinfo.h"

/* API keys */
#define MQK_PRODUCE				0
#define MQK_FETCH				1
#define MQK_LIST_OFFSETS		2
#define MQK_METADATA			3
#define MQK_OFFSET_COMMIT		8
#define MQK_OFFSET_FETCH		9
#define MQK_FIND_COORDINATOR	10
#define MQK_JOIN_GROUP			11
#define MQK_HEARTBEAT			12
#define MQK_LEAVE_GROUP			13
#define MQK_SYNC_GROUP			14
#define MQK_DESCRIBE_GROUPS		15
#define MQK_LIST_GROUPS			16
#define MQK_SASL_HANDSHAKE		17
#define MQK_API_VERSIONS		18
#define MQK_CREATE_TOPICS		19
#define MQK_DELETE_TOPICS		20
#define MQK_DELETE_RECORDS		21
#define MQK_INIT_PRODUCER_ID	22
#define MQK_OFFSET_FOR_LEADER_EPOCH 23
#define MQK_ADD_PARTITIONS_TO_TXN	24
#define MQK_ADD_OFFSETS_TO_TXN	25
#define MQK_END_TXN				26
#define MQK_TXN_OFFSET_COMMIT	28
#define MQK_DESCRIBE_ACLS		29
#define MQK_CREATE_ACLS			30
#define MQK_DELETE_ACLS			31
#define MQK_DESCRIBE_CONFIGS	32
#define MQK_ALTER_CONFIGS		33
#define MQK_DESCRIBE_LOG_DIRS	35
#define MQK_SASL_AUTHENTICATE	36
#define MQK_CREATE_PARTITIONS	37
#define MQK_DELETE_GROUPS		42
#define MQK_INCREMENTAL_ALTER_CONFIGS 44
#define MQK_OFFSET_DELETE		47
#define MQK_DESCRIBE_CLUSTER	60

/* error codes (Kafka's org.apache.kafka.common.protocol.Errors) */
#define MQK_UNKNOWN_SERVER_ERROR	(-1)
#define MQK_NONE					0
#define MQK_OFFSET_OUT_OF_RANGE		1
#define MQK_CORRUPT_MESSAGE			2
#define MQK_UNKNOWN_TOPIC_OR_PARTITION 3
#define MQK_LEADER_NOT_AVAILABLE	5
#define MQK_NOT_LEADER_OR_FOLLOWER	6
#define MQK_REQUEST_TIMED_OUT		7
#define MQK_MESSAGE_TOO_LARGE		10
#define MQK_OFFSET_METADATA_TOO_LARGE 12
#define MQK_COORDINATOR_NOT_AVAILABLE 15
#define MQK_NOT_COORDINATOR			16
#define MQK_INVALID_TOPIC_EXCEPTION	17
#define MQK_NOT_ENOUGH_REPLICAS		19
#define MQK_NOT_ENOUGH_REPLICAS_AFTER_APPEND 20
#define MQK_INVALID_REQUIRED_ACKS	21
#define MQK_ILLEGAL_GENERATION		22
#define MQK_INCONSISTENT_GROUP_PROTOCOL 23
#define MQK_INVALID_GROUP_ID		24
#define MQK_UNKNOWN_MEMBER_ID		25
#define MQK_INVALID_SESSION_TIMEOUT	26
#define MQK_REBALANCE_IN_PROGRESS	27
#define MQK_TOPIC_AUTHORIZATION_FAILED 29
#define MQK_GROUP_AUTHORIZATION_FAILED 30
#define MQK_CLUSTER_AUTHORIZATION_FAILED 31
#define MQK_INVALID_TIMESTAMP		32
#define MQK_UNSUPPORTED_SASL_MECHANISM 33
#define MQK_ILLEGAL_SASL_STATE		34
#define MQK_UNSUPPORTED_VERSION		35
#define MQK_TOPIC_ALREADY_EXISTS	36
#define MQK_INVALID_PARTITIONS		37
#define MQK_INVALID_REPLICATION_FACTOR 38
#define MQK_INVALID_REPLICA_ASSIGNMENT 39
#define MQK_INVALID_CONFIG			40
#define MQK_INVALID_REQUEST			42
#define MQK_UNSUPPORTED_FOR_MESSAGE_FORMAT 43
#define MQK_OUT_OF_ORDER_SEQUENCE_NUMBER 45
#define MQK_INVALID_PRODUCER_EPOCH	47
#define MQK_INVALID_TXN_STATE		48
#define MQK_INVALID_PRODUCER_ID_MAPPING 49
#define MQK_INVALID_TRANSACTION_TIMEOUT 50
#define MQK_CONCURRENT_TRANSACTIONS	51
#define MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53
#define MQK_SECURITY_DISABLED		54
#define MQK_SASL_AUTHENTICATION_FAILED 58
#define MQK_OPERATION_NOT_ATTEMPTED	55
#define MQK_NON_EMPTY_GROUP			68
#define MQK_GROUP_ID_NOT_FOUND		69
#define MQK_FETCH_SESSION_ID_NOT_FOUND 70
#define MQK_FENCED_LEADER_EPOCH		74
#define MQK_UNKNOWN_LEADER_EPOCH	76
#define MQK_MEMBER_ID_REQUIRED		79
#define MQK_GROUP_SUBSCRIBED_TO_TOPIC 86
#define MQK_INVALID_RECORD			87
#define MQK_PRODUCER_FENCED			90
#define MQK_UNSUPPORTED_ENDPOINT_TYPE 115

/*
 * Reading a request: bounded by its frame.  Its arrays hold at most
 * MQK_MAX_REQUEST_ELEMENTS elements in all: a handler allocates a struct
 * for each (a Produce's partition entry takes 8 bytes on the wire and 56
 * in memory), so without a cap a 100 MB frame could cost 700 MB of them.
 * Two hundred thousand is twenty times the partitions a large consumer
 * fetches, and more than a 2 MB frame of DescribeConfigs resources holds;
 * a request with more is malformed (its connection closes).  (Half a
 * million let one request hold the listener 5.5 s, answering a Metadata
 * of one topic named as often, and add 230 MB to it.)
 */
#define MQK_MAX_REQUEST_ELEMENTS 200000

typedef struct MqKafkaReader
{
	const char *data;
	int			len;
	int			pos;
	bool		failed;			/* a read passed the end or was malformed */
	int64		elements;		/* array elements announced so far */
} MqKafkaReader;

extern void MqKafkaReaderInit(MqKafkaReader *r, const char *data, int len);
extern int8 MqKafkaReadInt8(MqKafkaReader *r);
extern int16 MqKafkaReadInt16(MqKafkaReader *r);
extern int32 MqKafkaReadInt32(MqKafkaReader *r);
extern int64 MqKafkaReadInt64(MqKafkaReader *r);
extern uint32 MqKafkaReadUVarint(MqKafkaReader *r);
extern char *MqKafkaReadString(MqKafkaReader *r, bool flexible, bool *isnull);
extern const char *MqKafkaReadBytes(MqKafkaReader *r, bool flexible, int *len);
extern int32 MqKafkaReadArrayLen(MqKafkaReader *r, bool flexible, int min_elem_size);
extern void MqKafkaSkipTags(MqKafkaReader *r, bool flexible);

/* Writing a response into a StringInfo, big-endian as Kafka's. */
extern void MqKafkaWriteInt8(StringInfo buf, int8 v);
extern void MqKafkaWriteInt16(StringInfo buf, int16 v);
extern void MqKafkaWriteInt32(StringInfo buf, int32 v);
extern void MqKafkaWriteInt64(StringInfo buf, int64 v);
extern void MqKafkaWriteUVarint(StringInfo buf, uint32 v);
extern void MqKafkaWriteString(StringInfo buf, bool flexible, const char *s);
extern void MqKafkaWriteBytes(StringInfo buf, bool flexible, const char *data, int len);
extern void MqKafkaWriteArrayLen(StringInfo buf, bool flexible, int32 n);
extern void MqKafkaWriteTags(StringInfo buf, bool flexible);
extern void MqKafkaPatchInt32(StringInfo buf, int at, int32 v);

#endif							/* MQLOG_KAFKA_PROTOCOL_H */
