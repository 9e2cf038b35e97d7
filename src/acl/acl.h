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

#include "nodes/pg_list.h"

extern bool mqlog_allow_everyone_if_no_acl_found;
extern void MqAclDefineSettings(void);	/* acl_settings.c */

extern bool MqIsAdmin(Oid role);
/* may role grant and revoke on an object (topic, group) of this owner */
extern bool MqMayGrant(Oid role, Oid owner);

struct MqTopic;
extern bool MqTopicHasPrivilege(struct MqTopic *topic, Oid role, int priv);
extern void MqTopicCheckPrivilege(struct MqTopic *topic, int priv);
extern int	MqPrivilegeFromName(const char *name);
/* the name of one MQ_PRIV_* bit, or of MQ_PRIV_ALL ("all") */
extern const char *MqPrivilegeName(int priv);
extern void MqTopicChangeAcl(struct MqTopic *topic, Oid grantee, int privs, bool grant);

extern void MqCheckSegmentDescribe(Oid relid);

/*
 * A grant as the catalog holds it: the topic's or group's name, the
 * grantee (InvalidOid: PUBLIC) and the privileges (a group's: MQ_PRIV_ALL)
 */
typedef struct MqGrant
{
	char	   *object;
	Oid			grantee;
	int			privs;
} MqGrant;

/*
 * A page of grants: at most limit rows of the catalog after (object,
 * grantee) in the listing's order (object NULL: from the first), which
 * MqGrantsOf moves to the last row it read, and sets done once there is
 * no more.  A caller with a time bound (Kafka's DescribeAcls) reads a
 * listing page by page; a NULL page reads it all.
 */
typedef struct MqGrantPage
{
	char	   *object;
	Oid			grantee;
	int			limit;
	bool		done;
} MqGrantPage;

/*
 * The grants the current role may revoke, of one object (NULL: all) and
 * one grantee (any_grantee: all), all of them or one page: MqGrantsOf
 * runs the query a module gives for its own catalog table; MqTopicGrants
 * is the topics'
 */
extern List *MqGrantsOf(const char *query, const char *object, bool any_grantee, Oid grantee,
						MqGrantPage *page);
extern List *MqTopicGrants(const char *topic, bool any_grantee, Oid grantee, MqGrantPage *page);

/* DROP ROLE, REASSIGN OWNED and DROP OWNED on mqlog's owners and grants (roles.c) */
extern void MqAclInitHooks(void);

#endif							/* MQLOG_ACL_H */
