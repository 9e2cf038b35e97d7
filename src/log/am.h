/*-------------------------------------------------------------------------
 *
 * am.h
 *		Segment relations: the "mqlog" table access method, what is a
 *		segment, and the DDL it refuses (am.c); DROP EXTENSION mqlog's
 *		bounded transactions (extdrop.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_AM_H
#define MQLOG_AM_H

#include "storage/lockdefs.h"
#include "utils/relcache.h"

struct TableAmRoutine;
extern const struct TableAmRoutine *MqTableAmRoutine(void);
extern bool MqIsSegment(Oid relid);
extern Relation MqSegmentOpen(Oid relid, LOCKMODE lockmode);
extern void MqCheckSegment(Oid relid);
extern bool mqlog_allow_segment_ddl;
extern void MqAmInitHooks(void);

/* extdrop.c: DROP EXTENSION mqlog's segments in bounded transactions first */
extern void MqDropExtensionPrepare(bool cascade, bool batched, bool *pushed);

#endif							/* MQLOG_AM_H */
