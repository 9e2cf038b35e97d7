/*-------------------------------------------------------------------------
 *
 * metadata.h
 *		The cluster's metadata as this node sees it: who this node is, the
 *		node list kept in shared memory (nodes.c), and topics and their
 *		partitions' replicas in etcd (topics.c).
 *
 * The key layout in etcd, under /mqlog/<mqlog.cluster_name>/ (see
 * doc/replication.md):
 *
 *	nodes/<node>			{"name","conninfo","started_at","sysid","broker_id",
 *							 "kafka","rack"}, under the node's lease: present
 *							while it is alive ("kafka": its Kafka listener's
 *							advertised host:port, absent without a listener;
 *							"rack": mqlog.node_rack, absent when empty)
 *	members/<node>			the same, without a lease: every node ever seen
 *	broker_ids/<id>			{"node"}: Kafka broker id <id> (1, 2, ...) is
 *							that node's, for good (never deleted by mqlog;
 *							see MqClusterAssignBrokerId in nodes.c)
 *	topics/<topic>			{"name","partitions","replication_factor","config",
 *							 "created_by","created_sysid","created_at",
 *							 "created_xid","uuid"} ("created_xid": the
 *							creating transaction's 64-bit id, as text;
 *							absent in keys an older build wrote)
 *	partitions/<topic>/<p>	{"replicas":[..],"leader","leader_epoch","isr":[..]}
 *
 * Every node copies topics/ and partitions/ whole into mqlog.cluster_partition
 * (directory.c), and the topics it is a replica of into its local catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_CLUSTER_METADATA_H
#define MQLOG_CLUSTER_METADATA_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"

#define MQ_CLUSTER_MAX_NODES	64
#define MQ_MAX_REPLICATION_FACTOR	8	/* a leader tracks 7 followers */
#define MQ_NODE_NAME_LEN		64	/* 63 bytes and the NUL */
#define MQ_NODE_CONNINFO_LEN	1024
#define MQ_NODE_KAFKA_LEN		256 /* host:port of a Kafka listener */
#define MQ_NODE_RACK_LEN		64	/* mqlog.node_rack: 63 bytes and the NUL */

/* one node, as etcd last listed it */
typedef struct MqClusterNode
{
	char		name[MQ_NODE_NAME_LEN];
	char		conninfo[MQ_NODE_CONNINFO_LEN];
	int32		broker_id;		/* its Kafka broker id; -1: none known */
	char		kafka[MQ_NODE_KAFKA_LEN];	/* its Kafka listener, host:port;
											 * "": none */
	char		rack[MQ_NODE_RACK_LEN]; /* its mqlog.node_rack; "": none */
	bool		alive;			/* holds a key under a live lease */
	bool		is_self;
	TimestampTz last_seen;		/* last time it was seen alive; 0: never */
} MqClusterNode;

/*
 * The settings of who this node is (cluster_settings.c; the etcd ones are in
 * etcd.h): MqClusterDefineSettings defines them all, MqClusterCheckSettings
 * refuses to start a node of a cluster that has no name or conninfo
 */
extern char *mqlog_cluster_name;
extern char *mqlog_node_name;
extern char *mqlog_node_conninfo;
extern char *mqlog_cluster_database;
extern char *mqlog_node_rack;
extern void MqClusterDefineSettings(void);
extern void MqClusterCheckSettings(void);

/* who this node is (nodes.c) */
extern bool MqClusterEnabled(void);
extern const char *MqClusterNodeName(void);
extern char *MqClusterNodeConninfo(const char *node);
extern char *MqClusterKey(const char *fmt,...) pg_attribute_printf(1, 2);
extern char *MqClusterNodeJson(int32 broker_id);
extern const char *MqClusterKafkaListener(void);
extern int32 MqClusterAssignBrokerId(void);

/*
 * What MqClusterKafkaListener asks: the kafka layer's answer, installed at
 * load time (mqlog.c passes MqKafkaListener), since that layer is above
 * this one
 */
typedef const char *(*MqKafkaListenerFn) (void);
extern void MqClusterSetKafkaListener(MqKafkaListenerFn listener);

/* the node list: from etcd, and the copy in shared memory (nodes.c) */
extern Size MqClusterShmemSize(void);
extern void MqClusterShmemInit(void);
extern List *MqClusterReadNodes(void);
extern void MqClusterPublishNodes(List *nodes);
extern List *MqClusterSharedNodes(void);
extern void MqClusterSetSelfBrokerId(int32 broker_id);
extern int32 MqClusterSelfBrokerId(void);

/* may this node lead: its lease, and what followers say of etcd (lease.c) */
extern Size MqClusterLeaseShmemSize(void);
extern void MqClusterLeaseShmemInit(void);
extern int64 MqClusterClock(void);
extern void MqClusterSetLease(int64 lease_id, int64 valid_until, bool registered);
extern int64 MqClusterCurrentLease(void);
extern void MqClusterNoteEtcd(bool reached);
extern bool MqClusterEtcdReached(void);
extern int64 MqClusterEtcdReachedAgo(void);
extern void MqClusterNoteSynced(int64 read_from);
extern void MqClusterNoteRevision(int64 revision);
extern int64 MqClusterRevisionSeen(void);
extern int64 MqClusterSyncCatchups(void);
extern void MqClusterNotePeer(const char *node, bool peer_reaches_etcd, int64 reached_ms_ago);
extern const char *MqClusterLeaderFence(const char *const *isr, int nisr, bool unclean);

/* the elector: one node elects leaders for partitions whose leader is gone (failover.c) */
extern void MqClusterElectorRound(int64 lease, List *nodes);

/* which node coordinates a consumer group (group_claims.c) */
extern char *MqClusterClaimGroup(const char *group, int64 lease);
extern void MqClusterReleaseGroups(int64 lease, List *(*groups_with_members) (void));

/* a topic's metadata in etcd (topics.c) */
typedef struct MqTopicMeta
{
	char	   *name;
	int			partitions;
	int			replication_factor;
	char	   *config;			/* JSON text: the topic's overrides */
	char	   *created_by;		/* node name */
	char	   *created_sysid;	/* that node's system identifier, as text */
	char	   *created_at;		/* timestamptz as text */
	char	   *created_xid;	/* the creating transaction's FullTransactionId,
								 * as text; NULL: written by an older build */
	char	   *uuid;
	int64		mod_revision;	/* of the topic key; 0 before it is written */
} MqTopicMeta;

/* one partition's replicas, leader, epoch and in-sync replicas */
typedef struct MqPartitionMeta
{
	int			partition;
	List	   *replicas;		/* node names (char *), leader first */
	char	   *leader;
	int			leader_epoch;
	List	   *isr;
	int64		mod_revision;
} MqPartitionMeta;

extern List *MqClusterPlace(List *nodes, int first, int count, int replication_factor);
extern char *MqTopicMetaJson(const MqTopicMeta *t);
extern char *MqPartitionMetaJson(const MqPartitionMeta *p);
extern MqTopicMeta *MqTopicMetaParse(const char *json, int64 mod_revision);
extern MqPartitionMeta *MqPartitionMetaParse(const char *json, int partition,
											 int64 mod_revision);
extern bool MqPartitionHasReplica(const MqPartitionMeta *p, const char *node);
extern bool MqClusterNameListed(List *names, const char *name);
extern char *MqClusterNamesText(List *names);
extern char *MqClusterNodeClaim(void);
extern void MqClusterAppendNames(StringInfo buf, List *names);

/* a replicated topic of the cluster, with its partitions (MqPartitionMeta *) */
typedef struct MqClusterTopic
{
	MqTopicMeta *meta;
	List	   *parts;
} MqClusterTopic;

/* every replicated topic of the cluster, held here or not (directory.c) */
extern void MqClusterDirectoryStore(List *topics, List *partial);
extern List *MqClusterDirectoryRead(const char *name);

/* replicated topics: creation and drop from SQL (topics.c) */
extern void MqClusterCheckReplicationFactor(int replication_factor);
extern void MqClusterCreateTopic(const char *name);
extern bool MqClusterTopicIsReplicated(int topic_id);
extern void MqClusterDropTopic(const char *name, int topic_id);
extern void MqClusterDropTopicByUuid(const char *name, const char *uuid);
extern char *MqClusterTopicConfig(const char *name);
extern void MqClusterAddPartitions(const char *name, int old_count);
extern void MqClusterAlterTopic(const char *name, const char *change);
extern void MqClusterAlterTopicByUuid(const char *name, const char *uuid, const char *change);
extern void MqClusterStoreLocal(int topic_id, const MqTopicMeta *t, List *parts);
extern void MqClusterInitCallbacks(void);
extern void MqClusterTopicMetaNew(MqTopicMeta *t);

#endif							/* MQLOG_CLUSTER_METADATA_H */
