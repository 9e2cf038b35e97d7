/*-------------------------------------------------------------------------
 *
 * scan.h
 *		The executor node for the rows of mq_poll and mq_fetch (scan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_SQL_SCAN_H
#define MQLOG_SQL_SCAN_H

extern void MqRecordScanInit(void);

#endif							/* MQLOG_SQL_SCAN_H */
