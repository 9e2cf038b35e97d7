/*-------------------------------------------------------------------------
 *
 * acl.h
 *		Privileges: who is an administrator, and per-topic privileges, their
 *		checks and their grants (acl.c); DROP ROLE and friends as they
 *		touch mqlog's owners and grantees (roles.c).  A consumer group's
 *		ownership is groups/ownership.c.  SPI with a pinned search_path is
 *		base/spi.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_ACL_H
#define MQLOG_ACL_H

extern bool mqlog_allow_everyone_if_no_acl_found;
extern void MqAclDefineSettings(void);	/* acl_settings.c */

extern bool MqIsAdmin(Oid role);

struct MqTopic;
extern bool MqTopicHasPrivilege(struct MqTopic *topic, Oid role, int priv);
extern void MqTopicCheckPrivilege(struct MqTopic *topic, int priv);
extern int	MqPrivilegeFromName(const char *name);
extern void MqTopicChangeAcl(struct MqTopic *topic, Oid grantee, int privs, bool grant);

extern void MqCheckSegmentDescribe(Oid relid);

/* DROP ROLE, REASSIGN OWNED and DROP OWNED on mqlog's owners and grants (roles.c) */
extern void MqAclInitHooks(void);

#endif							/* MQLOG_ACL_H */
