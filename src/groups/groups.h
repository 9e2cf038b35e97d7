/*-------------------------------------------------------------------------
 *
 * groups.h
 *		Consumer groups: settings, shared memory and the coordinator's
 *		entry point (groups.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_H
#define MQLOG_GROUPS_H

#include "postgres.h"

/* a member id, as Kafka's (a SQL session's is "sql-<pid>") */
#define MQ_MEMBER_ID_LEN	64

/* consumer group settings (groups.c) */
typedef enum MqAssignor
{
	MQ_ASSIGN_RANGE,
	MQ_ASSIGN_ROUNDROBIN,
	MQ_ASSIGN_STICKY
} MqAssignor;

typedef enum MqOffsetReset
{
	MQ_RESET_EARLIEST,
	MQ_RESET_LATEST,
	MQ_RESET_NONE				/* an error, as Kafka's auto.offset.reset=none */
} MqOffsetReset;

struct Latch;
extern int	mqlog_assignor;
extern int	mqlog_offset_reset;
extern int	mqlog_max_poll_interval_ms;
extern int	mqlog_poll_recheck_interval;
extern int	mqlog_max_groups_per_session;
extern Size MqGroupsShmemSize(void);
extern void MqGroupsShmemInit(void);
extern void MqGroupsInitCallbacks(void);
extern int	MqGroupsCoordinate(void);
extern void MqGroupsSetCoordinatorLatch(struct Latch *latch);

#endif							/* MQLOG_GROUPS_H */
