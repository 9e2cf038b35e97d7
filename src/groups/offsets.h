/*-------------------------------------------------------------------------
 *
 * offsets.h
 *		The committed-offset store (offsets.c), for the files of the
 *		consumer groups layer only: it checks no privileges, so positions.c
 *		and reset.c check the caller before they come here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_OFFSETS_H
#define MQLOG_GROUPS_OFFSETS_H

#include "groups/groups.h"

/*
 * mqlog.committed_offset, as the extension owner, in the caller's
 * transaction; every write of a replicated topic's offset is also logged
 * for the other nodes.  -1: no offset.
 */
extern int64 MqOffsetRead(const char *group, int32 topic_id, int32 partition);
extern void MqOffsetReadTopic(const char *group, int32 topic_id, int32 npartitions, int64 *offsets);
/* only if the row still holds expected (-1: there is no row); false if not */
extern bool MqOffsetWriteIf(const char *group, int32 topic_id, int32 partition,
							int64 expected, int64 offset);
extern void MqOffsetWrite(const char *group, int32 topic_id, int32 partition,
						  int64 offset);
/* every offset of the group; returns how many there were */
extern int64 MqOffsetsDelete(const char *group);

/*
 * Kafka's side of a row (the listener's OffsetCommit, OffsetFetch and
 * OffsetDelete): the commit's metadata string, set after the offset was
 * written (every other write of an offset clears it), and read; one
 * partition's row deleted (false: there was none); every row of a group.
 */
extern void MqOffsetSetMetadata(const char *group, int32 topic_id, int32 partition,
								const char *metadata);
extern char *MqOffsetReadMetadata(const char *group, int32 topic_id, int32 partition);
extern bool MqOffsetDelete(const char *group, int32 topic_id, int32 partition);
extern int	MqOffsetReadGroup(const char *group, MqOffsetRow **rows);

#endif							/* MQLOG_GROUPS_OFFSETS_H */
