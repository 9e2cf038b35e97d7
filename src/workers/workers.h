/*-------------------------------------------------------------------------
 *
 * workers.h
 *		The background workers: maintenance (maintenance.c) and the group
 *		coordinator (coordinator.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_WORKERS_H
#define MQLOG_WORKERS_H

#include "postgres.h"

extern void MqCoordinatorRegister(void);
extern int	mqlog_maintenance_naptime;
extern void MqMaintenanceRegister(void);

#endif							/* MQLOG_WORKERS_H */
