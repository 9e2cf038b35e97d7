/*-------------------------------------------------------------------------
 *
 * ownership.h
 *		What the files of the consumer groups layer use of ownership.c
 *		beyond groups/groups.h: the checks of their calls against the owner
 *		the registry holds now, and the group's ownership recorded (the row
 *		in mqlog.consumer_group) or dropped with the group.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_OWNERSHIP_H
#define MQLOG_GROUPS_OWNERSHIP_H

#include "groups/groups.h"

/*
 * MqGroupCheckAccess against the live owner (MqGroupLiveOwner) read now;
 * returns that owner, for MqGroupPersistOwner later in the same call
 */
extern Oid	MqGroupAuthorize(const char *group, MqGroupAccess mode);
/* the row, if there is none yet: the live owner's, else the current role's */
extern void MqGroupPersistOwner(const char *group, Oid live_owner);
/*
 * A join's check before the registry's (see MqGroupJoinAs): decided by the
 * durable owner (*durable), else against live_owner if live_known, else
 * not yet (the current role is returned)
 */
extern Oid	MqGroupCheckJoin(const char *group, Oid live_owner, bool live_known,
							 bool *durable);
/*
 * MqGroupCheckAccess against live_owner, then, if record,
 * MqGroupPersistOwner: a commit's one visit of this file
 */
extern void MqGroupAuthorizeCommit(const char *group, MqGroupAccess mode,
								   Oid live_owner, bool record);
/* the row and the grants go (mq_delete_group); false if there was none */
extern bool MqGroupDropOwnership(const char *group);
/* MqGroupHasAccess of many groups (sorted by strcmp) in one query */
extern void MqGroupsHaveAccess(char **groups, const Oid *live_owners, int n, Oid role,
							   bool *allowed);

#endif							/* MQLOG_GROUPS_OWNERSHIP_H */
