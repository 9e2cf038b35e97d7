/*-------------------------------------------------------------------------
 *
 * acl.h
 *		Privileges: SPI with a pinned search_path (as the caller or as the
 *		extension owner), per-topic privileges, per-group ownership.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_ACL_H
#define MQLOG_ACL_H

#include "fmgr.h"

#define MQ_GROUP_NAME_LEN	128		/* a group name is shorter */

/* Kafka's ACL operations on a topic, as bits of MqTopicAclItem.privs */
#define MQ_PRIV_PRODUCE		0x01	/* Kafka Write */
#define MQ_PRIV_CONSUME		0x02	/* Kafka Read */
#define MQ_PRIV_DESCRIBE	0x04	/* Kafka Describe; implied by the others */
#define MQ_PRIV_ALTER		0x08	/* Kafka Alter and Delete */
#define MQ_PRIV_ALL			0x0f

typedef struct MqTopicAclItem
{
	Oid			grantee;		/* InvalidOid: PUBLIC */
	int			privs;
} MqTopicAclItem;

/* what a group call needs (MqGroupCheckAccess) */
typedef enum MqGroupAccess
{
	MQ_GROUP_USE,				/* join, commit, reset: claims a new group */
	MQ_GROUP_USE_EXISTING,		/* seek, delete: never claims */
	MQ_GROUP_OWNER,				/* forced reset or delete: owner or mqlog_admin */
	MQ_GROUP_GRANT				/* grant or revoke on it: owner or mqlog_admin */
} MqGroupAccess;

/*
 * A stretch of SPI work with search_path pinned to pg_catalog, pg_temp,
 * optionally as the extension owner.  Every SPI query of mqlog runs inside
 * one; an error in between is unwound by transaction abort.
 */
typedef struct MqSpi
{
	bool		as_owner;
	Oid			saved_user;
	int			saved_sec;
	int			guc_level;
} MqSpi;

extern bool mqlog_allow_everyone_if_no_acl_found;

/* argument helpers of the SQL functions */
extern char *MqTextArg(FunctionCallInfo fcinfo, int argno, const char *what);
extern Oid	MqGranteeArg(FunctionCallInfo fcinfo, int argno);

extern void MqSpiBegin(MqSpi *spi, bool as_owner);
extern void MqSpiEnd(MqSpi *spi);
extern Oid	MqExtensionOwner(void);
extern void MqWorkerPinSearchPath(void);
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

#endif							/* MQLOG_ACL_H */
