/*-------------------------------------------------------------------------
 *
 * producers_load.h
 *		Loading a partition's idempotent producers from the tail of its log
 *		(producers_load.c), for the appender (append.c) that found them not
 *		loaded.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PRODUCERS_LOAD_H
#define MQLOG_PRODUCERS_LOAD_H

#include "log/producers.h"
#include "log/topic.h"

extern void MqProducerKeyOf(MqProducerKey *key, MqTopic *topic, int32 partition,
							int64 producer_id);
extern void MqProducersLoad(MqTopic **topicp, int32 partition, int32 leader_epoch);

#endif							/* MQLOG_PRODUCERS_LOAD_H */
