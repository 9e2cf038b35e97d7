/*-------------------------------------------------------------------------
 *
 * registry.h
 *		What the files of the consumer groups layer use of registry.c
 *		beyond groups/groups.h: the two halves of a join, which
 *		ownership.c puts around its check of the role (MqGroupJoin), a
 *		member's removal for its leave (consumer.c), and the member count
 *		and the evictions of a reset or a delete (reset.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_REGISTRY_H
#define MQLOG_GROUPS_REGISTRY_H

#include "groups/groups.h"

/*
 * Join or refresh a membership, for a role the caller checked first
 * (ownership.c, MqGroupCheckJoin): durable, against the group's durable
 * owner, and then the live owner does not matter; else against seen_owner
 * (the live owner the caller saw, InvalidOid: none), owner being the role
 * the group goes to if it has no live owner.  false, changing nothing, if the
 * live owner is a role the check did not cover (another role's session
 * created the group meanwhile): assignment->owner then names it, to check
 * against and join again.  On success, *assignment is the member's.
 */
extern bool MqGroupJoinAs(const char *group, const char *member_id,
						  MqTopic **topics, int ntopics,
						  const MqMemberConfig *config, bool durable,
						  Oid seen_owner, Oid owner, MqAssignment *assignment);
extern bool MqGroupRemoveMember(const char *group, const char *member_id);
extern int	MqGroupMemberCount(const char *group);
/* refuses while the group has members unless forced; returns how many */
extern int	MqGroupRefuseIfActive(const char *group, bool force, const char *what);
/* the group's members are evicted when this transaction commits */
extern void MqGroupEvictAtCommit(const char *group);

#endif							/* MQLOG_GROUPS_REGISTRY_H */
