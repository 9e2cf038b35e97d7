/*-------------------------------------------------------------------------
 *
 * kafka_marker_horizon.h
 *		The delete horizons of a partition's Kafka transaction markers
 *		whose transactions compaction found empty
 *		(mqlog.kafka_marker_horizon, kafka_marker_horizon.c): Kafka's
 *		KIP-534 horizon, kept beside the log instead of in the marker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_MARKER_HORIZON_H
#define MQLOG_KAFKA_MARKER_HORIZON_H

#include "datatype/timestamp.h"

/*
 * The recorded horizons of the markers at these offsets of a partition:
 * horizons[i] for markers[i], DT_NOBEGIN where none is recorded (a
 * recorded one is a compaction's time plus delete.retention.ms, never
 * negative, so never '-infinity').
 */
extern void MqMarkerHorizonsLoad(int32 topic_id, int32 partition, const int64 *markers, int n,
								 TimestampTz *horizons);

/*
 * A compaction found the transactions of these markers empty first:
 * their horizon is this one (a horizon already recorded stays).
 */
extern void MqMarkerHorizonsRecord(int32 topic_id, int32 partition, const int64 *markers, int n,
								   TimestampTz horizon);

/* Compaction removed these markers: their horizons go too. */
extern void MqMarkerHorizonsForget(int32 topic_id, int32 partition, const int64 *markers, int n);

#endif							/* MQLOG_KAFKA_MARKER_HORIZON_H */
