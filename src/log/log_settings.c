/*-------------------------------------------------------------------------
 *
 * log_settings.c
 *		The log layer's settings: the partitions' shared memory
 *		(mqlog.max_partitions, mqlog.max_inflight_partitions), the segments
 *		prepared and extended ahead (mqlog.roll_ahead,
 *		mqlog.segment_extend_ahead), the idempotent producers' state
 *		(mqlog.max_producer_states, mqlog.kafka_producer_state_window), the switch that lets mqlog's own
 *		functions change segment relations (mqlog.allow_segment_ddl), and
 *		those of replica.c (mqlog.acks, mqlog.acks_timeout).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "log/am.h"
#include "log/partition.h"
#include "log/producers.h"
#include "log/replica.h"

int			mqlog_max_partitions = 4096;
int			mqlog_max_inflight = 64;
bool		mqlog_roll_ahead = true;
int			mqlog_segment_extend_ahead = 32768;	/* kB */
int			mqlog_max_producer_states = 10000;
int			mqlog_kafka_producer_state_window = 65536;	/* kB */

/* set (SET clause of mqlog's own functions) while mqlog makes or changes segments */
bool		mqlog_allow_segment_ddl = false;

void
MqLogDefineSettings(void)
{
	DefineCustomIntVariable("mqlog.max_partitions",
							"Maximum number of partitions whose state is kept in shared memory.",
							"Every partition that is produced to or read from needs one slot.",
							&mqlog_max_partitions,
							4096, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_inflight_partitions",
							"Maximum number of partitions one transaction may produce to.",
							NULL,
							&mqlog_max_inflight,
							64, 1, 10000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.allow_segment_ddl",
							 "Lets mqlog's own functions drop, alter and rename segment relations.",
							 "Set only by mqlog's functions; DROP TABLE or ALTER TABLE of a segment is refused otherwise.",
							 &mqlog_allow_segment_ddl, false,
							 PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.roll_ahead",
							 "Prepares each partition's next segment ahead, so that appenders roll exactly at segment.bytes and segment.ms.",
							 "Off: no segment is prepared ahead, and the maintenance worker rolls segments on its passes instead (they can outgrow segment.bytes meanwhile).",
							 &mqlog_roll_ahead, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.segment_extend_ahead",
							"How far the maintenance worker extends an active segment ahead of its appender.",
							"The appender then takes pages that exist instead of extending the relation itself; at most this much, at most what the log of the segment already holds, never past segment.bytes, and only once that log is 4 MB. 0 turns it off.",
							&mqlog_segment_extend_ahead, 32768, 0, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_producer_states",
							"Maximum number of idempotent producers' states kept in shared memory, one per producer and partition.",
							"Each partition written by idempotent producers takes one more. When all are used, the least recently used is evicted: its producer's next batch is taken as an unknown producer's, at any sequence.",
							&mqlog_max_producer_states,
							10000, 100, 10000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_producer_state_window",
							"How much of a partition's log end is read to rebuild its idempotent producers' state after a restart or a leader change.",
							"A retry of a batch older than this is not recognized after a restart, and is appended again.",
							&mqlog_kafka_producer_state_window, 65536, 64, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	MqReplicaDefineSettings();
}
