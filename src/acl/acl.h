/*-------------------------------------------------------------------------
 *
 * acl.h
 *		Privileges: per-topic privileges and per-group ownership (acl.c).
 *		SPI with a pinned search_path is base/spi.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_ACL_H
#define MQLOG_ACL_H

#include "fmgr.h"

#define MQ_GROUP_NAME_LEN	128		/* a group name is shorter */


/* what a group call needs (MqGroupCheckAccess) */
typedef enum MqGroupAccess
{
	MQ_GROUP_USE,				/* join, commit, reset: claims a new group */
	MQ_GROUP_USE_EXISTING,		/* seek, delete: never claims */
	MQ_GROUP_OWNER,				/* forced reset or delete: owner or mqlog_admin */
	MQ_GROUP_GRANT				/* grant or revoke on it: owner or mqlog_admin */
} MqGroupAccess;


extern bool mqlog_allow_everyone_if_no_acl_found;
extern void MqAclDefineSettings(void);	/* settings.c */

/* argument helpers of the SQL functions */
extern char *MqTextArg(FunctionCallInfo fcinfo, int argno, const char *what);
extern Oid	MqGranteeArg(FunctionCallInfo fcinfo, int argno);

extern bool MqIsAdmin(Oid role);

struct MqTopic;
extern bool MqTopicHasPrivilege(struct MqTopic *topic, Oid role, int priv);
extern void MqTopicCheckPrivilege(struct MqTopic *topic, int priv);
extern int	MqPrivilegeFromName(const char *name);

extern void MqCheckSegmentDescribe(Oid relid);
extern Oid	MqGroupCheckAccess(const char *group, MqGroupAccess mode, Oid live_owner);
extern void MqGroupPersistOwner(const char *group, Oid live_owner);
extern void MqGroupChangeGrant(const char *group, Oid grantee, bool grant);
extern bool MqGroupHasAccess(const char *group, Oid role, Oid live_owner);
extern void MqGroupForget(const char *group);
extern void MqCheckGroupName(const char *group);

/* DROP ROLE, REASSIGN OWNED and DROP OWNED on mqlog's owners and grants (roles.c) */
extern void MqAclInitHooks(void);

#endif							/* MQLOG_ACL_H */
