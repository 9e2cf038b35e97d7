/*-------------------------------------------------------------------------
 *
 * partition_extend.h
 *		Extending active segments ahead of their appenders
 *		(partition_extend.c), for the roll-ahead pass.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_EXTEND_H
#define MQLOG_PARTITION_EXTEND_H

extern int64 MqPartitionsExtendAhead(Oid catalog_relid);

#endif							/* MQLOG_PARTITION_EXTEND_H */
