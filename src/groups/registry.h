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

/* the checks before the groups lock and the cluster claim: returns its lease */
extern int64 MqGroupJoinBegin(const char *group, const char *member_id,
							  MqTopic **topics, int ntopics);
/*
 * join under the owner checked against seen_owner; false: another role's
 * session created the group since, check again
 */
extern bool MqGroupJoinAs(const char *group, const char *member_id,
						  MqTopic **topics, int ntopics,
						  const MqMemberConfig *config, Oid seen_owner, Oid owner,
						  int64 lease, MqAssignment *assignment);
extern bool MqGroupRemoveMember(const char *group, const char *member_id);
extern int	MqGroupMemberCount(const char *group);
/* refuses while the group has members unless forced; returns how many */
extern int	MqGroupRefuseIfActive(const char *group, bool force, const char *what);
/* the group's members are evicted when this transaction commits */
extern void MqGroupEvictAtCommit(const char *group);

#endif							/* MQLOG_GROUPS_REGISTRY_H */
