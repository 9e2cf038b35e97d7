/*-------------------------------------------------------------------------
 *
 * dump.h
 *		A segment's dump form, what pg_dump and pg_restore move (dump.c):
 *		COPY TO of a segment relation writes its stored batches, COPY FROM
 *		into an empty one restores them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_DUMP_H
#define MQLOG_DUMP_H

#include "executor/tuptable.h"
#include "nodes/parsenodes.h"
#include "utils/relcache.h"

#include "log/logiter.h"

/* the utility hook, around a COPY of a segment relation (segment's oid) */
extern void MqDumpCopyStart(CopyStmt *stmt, Oid relid);
extern void MqDumpCopyEnd(void);

/* COPY TO: the sequential scan of rel writes the dump form */
extern bool MqDumpScanning(Relation rel);
extern void MqDumpScanBegin(Relation rel);
extern bool MqDumpNextRow(MqLogIter *it, TupleTableSlot *slot);

/* COPY FROM: relid is being restored (the access method accepts its rows) */
extern bool MqRestoring(Oid relid);
extern void MqRestoreRows(Relation rel, TupleTableSlot **slots, int nslots);

#endif							/* MQLOG_DUMP_H */
