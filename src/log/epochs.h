/*-------------------------------------------------------------------------
 *
 * epochs.h
 *		A partition's leader epochs, read from its log (epochs.c): Kafka's
 *		leader-epoch cache, for truncation after a failover (KIP-101/279).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_EPOCHS_H
#define MQLOG_EPOCHS_H

#include "log/topic.h"

/* the epoch of the log's last batch; -1 for an empty log */
extern int32 MqLogLastEpoch(MqTopic *topic, int32 partition);

/* the epoch of the batch that holds offset; -1: no batch holds it */
extern int32 MqLogEpochAt(MqTopic *topic, int32 partition, int64 offset);

/*
 * Kafka's OffsetForLeaderEpoch: the largest epoch at most epoch that the
 * log holds batches of (-1: none), and where it ends: the first offset of a
 * later epoch, or the log end offset.
 */
extern int64 MqLogEpochEnd(MqTopic *topic, int32 partition, int32 epoch, int32 *found_epoch);

#endif							/* MQLOG_EPOCHS_H */
