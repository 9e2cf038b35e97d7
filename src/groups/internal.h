/*-------------------------------------------------------------------------
 *
 * internal.h
 *		What the files of the consumer groups layer share among themselves
 *		and nobody above them calls: the committed-offset store (offsets.c),
 *		which checks no privileges, and the parts of membership that only
 *		leave and the administration use (registry.c), and of positions
 *		that only leave uses (positions.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_INTERNAL_H
#define MQLOG_GROUPS_INTERNAL_H

#include "groups/groups.h"

/* registry.c */
extern int64 MqGroupJoinBegin(const char *group, const char *member_id,
							  MqTopic **topics, int ntopics);
extern bool MqGroupJoinAs(const char *group, const char *member_id,
						  MqTopic **topics, int ntopics,
						  const MqMemberConfig *config, Oid seen_owner, Oid owner,
						  int64 lease, MqAssignment *assignment);
extern bool MqGroupRemoveMember(const char *group, const char *member_id);
extern int	MqGroupMemberCount(const char *group);
extern int	MqGroupRefuseIfActive(const char *group, bool force, const char *what);
extern void MqGroupEvictAtCommit(const char *group);

/*
 * ownership.c: the checks against the owner the registry holds now, and
 * the group's ownership made durable (the row in mqlog.consumer_group) or
 * dropped with the group
 */
extern Oid	MqGroupAuthorize(const char *group, MqGroupAccess mode);
extern void MqGroupPersistOwner(const char *group, Oid live_owner);
extern void MqGroupRecordOwner(const char *group);
extern bool MqGroupDropOwnership(const char *group);

/* positions.c */
extern void MqPositionsForget(const char *group, const char *member_id);

/*
 * offsets.c: mqlog.committed_offset, as the extension owner, in the
 * caller's transaction; every write of a replicated topic's offset is also
 * logged for the other nodes.  -1: no offset.
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

#endif							/* MQLOG_GROUPS_INTERNAL_H */
