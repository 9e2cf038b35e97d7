/*-------------------------------------------------------------------------
 *
 * topic.h
 *		The topic metadata cache: a topic's config, privileges and segment
 *		chains, read from the catalog (topic.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_TOPIC_H
#define MQLOG_TOPIC_H

/*
 * Only the partition's lowest header: the append protocol (partition.c)
 * reads the topic cache, so the cache must not depend on it.
 */
#include "log/partition_shmem.h"

/* Kafka's ACL operations on a topic, as bits of MqTopicAclItem.privs */
#define MQ_PRIV_PRODUCE		0x01	/* Kafka Write */
#define MQ_PRIV_CONSUME		0x02	/* Kafka Read */
#define MQ_PRIV_DESCRIBE	0x04	/* Kafka Describe; implied by the others */
#define MQ_PRIV_ALTER		0x08	/* Kafka Alter and Delete */
#define MQ_PRIV_ALL			0x0f

/*
 * mqlog's own SQLSTATEs, class MQ: Kafka's errors that PostgreSQL has no
 * code for.
 */
#define ERRCODE_MQ_NOT_LEADER			MAKE_SQLSTATE('M','Q','0','0','1')	/* NOT_LEADER_OR_FOLLOWER */
#define ERRCODE_MQ_NOT_ENOUGH_REPLICAS	MAKE_SQLSTATE('M','Q','0','0','2')	/* NOT_ENOUGH_REPLICAS */

typedef struct MqTopicAclItem
{
	Oid			grantee;		/* InvalidOid: PUBLIC */
	int			privs;
} MqTopicAclItem;

/* ------------------------------------------------------------------------
 * Topic metadata cache (topic.c)
 * ------------------------------------------------------------------------ */

typedef struct MqSegmentRef
{
	int64		base_offset;
	Oid			relid;
	bool		sealed;
} MqSegmentRef;

/* a replicated partition as this node knows it (mqlog.replica_state) */
typedef struct MqReplicaInfo
{
	char	   *leader;			/* NULL: unknown yet */
	int			leader_epoch;
	int			nreplicas;
	char	  **replicas;		/* every replica, the leader first at placement */
	int			nisr;
	char	  **isr;			/* in-sync replicas, the leader among them */
	int64		hw_checkpoint;	/* the high watermark last checkpointed */
} MqReplicaInfo;

typedef struct MqTopic
{
	Oid			catalog_relid;	/* mqlog.topic, see MqPartitionKey */
	int32		topic_id;
	char	   *name;
	int			partitions;
	int			replication_factor;
	int			min_insync_replicas;
	bool		unclean_election;	/* unclean.leader.election.enable */
	int64		sync_catchups;	/* MqClusterSyncCatchups when read
								 * (MqTopicCheckLeader) */
	char	   *uuid;			/* replicated topics: mqlog.replicated_topic */
	struct MqReplicaInfo *replicas; /* replicated topics: per partition, from
									 * mqlog.replica_state; NULL for
									 * single-node topics */
	int64		max_message_bytes;
	bool		log_append_time;
	int			compression;	/* compression.type: MqCodec or
								 * MQ_CODEC_PRODUCER */
	bool		compact;
	int64		delete_retention_ms;
	int64		segment_bytes;	/* roll when a segment would pass it */
	int64		segment_ms;		/* ... or is older than this */
	Oid			owner;			/* the role that created it */
	bool		written_here;	/* this transaction created, grew, altered
								 * or locked the topic's row */
	int			nacl;			/* mqlog.topic_acl rows, see acl.c */
	struct MqTopicAclItem *acl;
	/* per partition, the segment chain in ascending base offset */
	int		   *nsegments;
	MqSegmentRef **segments;
	int64	   *log_starts;		/* per partition, mq_delete_records' log start
								 * offset (-1: none; mqlog.log_start) */
	Oid		   *spares;			/* per partition, a prepared segment not yet
								 * in use, or InvalidOid */
	struct MqPartition **parts;	/* shared state, looked up lazily */
} MqTopic;

extern MqTopic *MqTopicLookup(const char *name, bool missing_ok);
extern List *MqTopicNames(const char *pattern);
extern bool MqTopicLeadsHere(MqTopic *topic, int32 partition);
extern const char *MqTopicLeaderFence(MqTopic *topic, int32 partition);
extern bool MqTopicLeadsHereNow(MqTopic *topic, int32 partition);
extern MqTopic *MqTopicLedHereNow(MqTopic *topic, int32 partition);
extern MqTopic *MqTopicCheckLeader(MqTopic *topic, int32 partition);
extern MqTopic *MqTopicLookupById(int32 topic_id);
extern MqTopic *MqTopicFindById(int32 topic_id);
extern const char *MqTopicNameOrId(int32 topic_id);
extern MqTopic *MqTopicRefresh(const char *name);
extern void MqCheckPartition(MqTopic *topic, int32 partition);
extern int32 MqTopicIdOfSegment(Oid relid);

extern MqPartition *MqTopicPartition(MqTopic *topic, int32 partition);
extern const MqSegmentRef *MqTopicActiveSegment(MqTopic *topic, int32 partition);
extern bool MqTopicPartitionPending(MqTopic *topic, int32 partition);
extern MqTopic *MqTopicAwaitPartition(MqTopic *topic, int32 partition);

extern int64 MqLogStartOffset(MqTopic *topic, int32 partition);
extern Oid	MqTopicCatalogRelid(void);

#endif							/* MQLOG_TOPIC_H */
