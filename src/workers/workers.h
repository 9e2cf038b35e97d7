/*-------------------------------------------------------------------------
 *
 * workers.h
 *		The background workers: maintenance (maintenance.c), the group
 *		coordinator (coordinator.c) and the cluster workers (cluster.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_WORKERS_H
#define MQLOG_WORKERS_H

#include "postgres.h"

extern void MqCoordinatorRegister(void);
extern int	mqlog_maintenance_naptime;
extern void MqMaintenanceRegister(void);
extern void MqClusterWorkersRegister(void);

#endif							/* MQLOG_WORKERS_H */
