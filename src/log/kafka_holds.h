/*-------------------------------------------------------------------------
 *
 * kafka_holds.h
 *		The holds of the Kafka transactions open when the server started,
 *		put back on a partition before its first reader or appender;
 *		a hot standby's readers' bound at the first open one
 *		(kafka_holds.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_HOLDS_H
#define MQLOG_KAFKA_HOLDS_H

#include "utils/snapshot.h"

struct MqTopic;

extern void MqKafkaHoldsInit(void);
extern int64 MqKafkaOpenFirstOffset(int32 topic_id, int32 partition, Snapshot snapshot);

#endif							/* MQLOG_KAFKA_HOLDS_H */
