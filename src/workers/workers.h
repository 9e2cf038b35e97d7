/*-------------------------------------------------------------------------
 *
 * workers.h
 *		The background workers: maintenance (maintenance.c), the group
 *		coordinator (coordinator.c), the cluster workers (cluster.c) and
 *		the follower apply workers (apply.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_WORKERS_H
#define MQLOG_WORKERS_H

#include "postgres.h"

#include "nodes/pg_list.h"

extern void MqCoordinatorRegister(void);
extern int	mqlog_maintenance_naptime;
extern int	mqlog_debug_pause_step;
extern void MqWorkersDefineSettings(void);	/* settings.c */
extern void MqMaintenanceRegister(void);
extern void MqMaintenanceDebugPause(const char *step);
extern void MqClusterWorkersRegister(void);

/* follower apply workers (apply.c) */
extern Size MqApplyShmemSize(void);
extern void MqApplyShmemInit(void);
extern void MqApplyRequestLWLocks(void);
extern void MqApplyEnsureWorkers(List *leaders);
extern pid_t MqApplyWorkerPid(const char *leader);

/* a unit of work in a transaction of its own (txn.c) */
struct ErrorData;
extern bool MqWorkerRunInTransaction(void (*fn) (void *arg), void *arg,
									 struct ErrorData **error);

/* the leader's in-sync replica sets (isr.c) */
extern void MqIsrRound(void);
extern void MqCheckpointHighWatermarks(void);

#endif							/* MQLOG_WORKERS_H */
