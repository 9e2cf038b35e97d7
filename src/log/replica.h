/*-------------------------------------------------------------------------
 *
 * replica.h
 *		A partition's log as a follower writes it and a leader exports it
 *		(replica.c): batches appended at the leader's offsets with their
 *		fate, the leader's LSO logged for the stream, and the resolved
 *		batches read back for a copy.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_REPLICA_H
#define MQLOG_REPLICA_H

#include "log/topic.h"

typedef enum MqReplicaAppend
{
	MQ_REPLICA_APPENDED,		/* written at the log end offset */
	MQ_REPLICA_PRESENT			/* the log already holds these bytes there */
} MqReplicaAppend;

/*
 * A leader's batch (Kafka bytes, its base offset and epoch inside) at its
 * offset, committed or aborted as the leader decided.  Below the log end
 * offset it must be byte-identical to what is there.
 */
extern MqReplicaAppend MqLogAppendReplica(MqTopic **topicp, int32 partition,
										  const char *kafka, Size len, bool committed,
										  int64 *next_offset);

/* acks (mqlog.acks): checked at produce, awaited at commit */
typedef enum MqAcks
{
	MQ_ACKS_LEADER = 1,			/* "1": the leader's commit is enough */
	MQ_ACKS_ALL = -1			/* "all": every in-sync replica holds it */
} MqAcks;

extern int	mqlog_acks;
extern int	mqlog_acks_timeout;
extern void MqReplicaDefineSettings(void);
extern void MqReplicaCheckAcks(MqTopic *topic, int32 partition);
extern void MqReplicaAwaitAt(MqTopic *topic, int32 partition, int64 end_offset);
/*
 * How many acks=all waits of this process ended without the in-sync
 * replicas (timed out, cancelled, the lease lapsed): each one's commit was
 * answered with a WARNING.  A caller that answers its own client (the
 * Kafka listener) compares it before and after a commit.
 */
extern uint64 MqReplicaAcksNotReached(void);
/* ... of which ended because the leader's ISR fell below min.insync.replicas */
extern uint64 MqReplicaAcksIsrBelow(void);

/* log the partition's LSO into the WAL for the followers' streams */
extern int64 MqLogMarkLso(MqTopic *topic, int32 partition);

#endif							/* MQLOG_REPLICA_H */
