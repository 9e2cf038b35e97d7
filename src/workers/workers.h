/*-------------------------------------------------------------------------
 *
 * workers.h
 *		The background workers: maintenance (maintenance.c), the group
 *		evictor (group_evictor.c), the cluster workers (cluster_node.c,
 *		cluster_sync.c) and the follower apply workers (apply.c, started
 *		by apply_launcher.c), and what they share (bgworker.c, txn.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_WORKERS_H
#define MQLOG_WORKERS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/* registering a worker (bgworker.c) */
struct BackgroundWorker;
extern void MqWorkerInit(struct BackgroundWorker *worker, const char *function,
						 const char *type, bool database);
extern void MqRegisterWorker(const char *function, const char *type, bool database,
							 int restart_s);

/* a worker's loop (bgworker.c): SIGTERM and SIGHUP; sleep, then reload */
extern void MqWorkerSetupSignals(void);
extern void MqWorkerNap(long ms);

/*
 * A failure of a round that repeats (etcd away) is logged again at most
 * every MQ_RETRY_LOG_MS (bgworker.c): what it was and when it was last
 * logged, per loop or kind of unit.
 */
#define MQ_RETRY_LOG_MS		60000

typedef struct MqRetryLog
{
	bool		failing;
	TimestampTz last_logged;
	char		last_message[256];
} MqRetryLog;

struct ErrorData;
extern void MqRetryLogFailure(MqRetryLog *rl, const char *who, struct ErrorData *e);
extern void MqRetryLogSuccess(MqRetryLog *rl, const char *who);

extern void MqGroupEvictorRegister(void);
extern int	mqlog_maintenance_naptime;
extern int	mqlog_debug_pause_step;
extern void MqWorkersDefineSettings(void);	/* worker_settings.c */
extern void MqMaintenanceRegister(void);
extern void MqMaintenanceDebugPause(const char *step);

/*
 * A step of each regular maintenance pass that a layer beside this one
 * owns (maintenance.c): mqlog.c hands it kafka's MqKafkaTxnMaintain, so
 * that a Kafka transaction's timeout is enforced with or without the
 * listener, while this layer knows nothing of Kafka.  It runs in a
 * transaction of its own (with SPI and a snapshot), again while it
 * answers true (there may be more), at most 100 times a pass; round
 * counts from 0.
 */
typedef bool (*MqMaintenanceStepFn) (int round);
extern void MqMaintenanceSetStep(MqMaintenanceStepFn step, const char *what);
extern void MqClusterNodeWorkerRegister(void);
extern void MqClusterSyncWorkerRegister(void);

/* the follower apply workers' launcher (apply_launcher.c) */
extern Size MqApplyShmemSize(void);
extern void MqApplyShmemInit(void);
extern void MqApplyRequestLWLocks(void);
extern void MqApplyEnsureWorkers(List *leaders);
extern void MqApplyAttach(int slot, char *leader);

/* the leader's in-sync replica sets (isr.c) */
extern void MqIsrRound(void);
extern void MqCheckpointHighWatermarks(void);

#endif							/* MQLOG_WORKERS_H */
