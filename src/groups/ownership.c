/*-------------------------------------------------------------------------
 *
 * ownership.c
 *		Who may use a consumer group: its owner, live with its members or
 *		recorded, and its grantees; the check of every group call against
 *		them, the join that claims a new group, mq_grant_group and
 *		mq_revoke_group.
 *
 * A group belongs to the role that first joined it, committed to it, reset
 * it or granted on it; others need mq_grant_group(), and members of
 * mqlog_admin and superusers may use every group.  While a group has
 * members, its owner is kept with them in the registry's shared memory
 * (registry.c: the role of the session whose join created the group's
 * slot), so that a first poll writes nothing (and works on a standby).  A
 * join checks the role against the owner it sees, and the registry sets
 * it, under the groups lock, if the slot has none; if another role's
 * session created the group in between, the join checks again
 * (MqGroupCheckJoin, MqGroupJoinAs).  The first commit that writes an offset, mq_reset_offsets
 * and mq_grant_group record the owner in mqlog.consumer_group
 * (MqGroupPersistOwner), and the grantees live in mqlog.group_acl; both
 * are read and written as the extension owner, with search_path pinned
 * (base/spi.c).  Once all members have left, only the recorded row
 * remains.
 *
 * The live owner comes from the registry: MqGroupAuthorize reads it
 * itself; the hot paths (a poll's join, a commit) read it with the member's
 * assignment in their one visit of the registry (MqAssignment.owner) and
 * hand it here, so that a poll or a commit enters each file once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/spi.h"
#include "log/partition.h"
#include "acl/acl.h"
#include "groups/ownership.h"
#include "groups/registry.h"

/*
 * Positive answers are cached per backend: (group, role) was allowed at
 * this catalog generation.  mq_grant_group, mq_revoke_group and
 * mq_delete_group bump the generation; a change of role membership and an
 * aborted (sub)transaction (whose rows an answer may rest on) drop the
 * whole cache.
 */
typedef struct GroupAccessEntry
{
	char		group[NAMEDATALEN * 2 + 2];	/* hash key; longer names are not cached */
	Oid			role;
	uint64		generation;
	Oid			owner;
} GroupAccessEntry;

static HTAB *group_access = NULL;
static bool group_access_valid = true;

/* role membership changed: has_privs_of_role answers may differ now */
static void
roles_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	group_access_valid = false;
}

/*
 * An answer may rest on a row this transaction wrote (read_group sees its
 * own changes): a rollback takes the row back, so it takes the cache too.
 */
static void
group_cache_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		group_access_valid = false;
}

static void
group_cache_subxact(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		group_access_valid = false;
}

static GroupAccessEntry *
group_cache(const char *group, bool create)
{
	if (strlen(group) >= sizeof(((GroupAccessEntry *) 0)->group))
		return NULL;
	if (group_access != NULL && !group_access_valid)
	{
		hash_destroy(group_access);
		group_access = NULL;
	}
	group_access_valid = true;
	if (group_access == NULL)
	{
		HASHCTL		ctl;
		static bool callbacks = false;

		if (!create)
			return NULL;
		if (!callbacks)
		{
			CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, roles_changed, (Datum) 0);
			CacheRegisterSyscacheCallback(AUTHOID, roles_changed, (Datum) 0);
			RegisterXactCallback(group_cache_xact, NULL);
			RegisterSubXactCallback(group_cache_subxact, NULL);
			callbacks = true;
		}
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(((GroupAccessEntry *) 0)->group);
		ctl.entrysize = sizeof(GroupAccessEntry);
		ctl.hcxt = TopMemoryContext;
		group_access = hash_create("mqlog group access", 32, &ctl,
								   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	return hash_search(group_access, group, create ? HASH_ENTER : HASH_FIND, NULL);
}

/* a deleted group's cached answers go at once (its generation moves too) */
static void
forget(const char *group)
{
	if (group_access && strlen(group) < sizeof(((GroupAccessEntry *) 0)->group))
		hash_search(group_access, group, HASH_REMOVE, NULL);
}

/*
 * Read a group's owner and grantees with a fresh snapshot (a claim another
 * session committed a moment ago counts, also in REPEATABLE READ).  Runs
 * inside MqSpiBegin(..., true).  Returns false if the group has no owner.
 */
static bool
read_group(const char *group, Oid *owner, ArrayType **grantees)
{
	Oid			argtype = TEXTOID;
	Datum		arg = CStringGetTextDatum(group);
	bool		found = false;
	int			ret;

	PushActiveSnapshot(GetLatestSnapshot());
	ret = SPI_execute_with_args("SELECT g.owner, ARRAY(SELECT a.grantee::pg_catalog.oid FROM mqlog.group_acl a"
								" WHERE a.group_id OPERATOR(pg_catalog.=) g.group_id)"
								" FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) $1",
								1, &argtype, &arg, NULL, true, 1);
	PopActiveSnapshot();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: group owner lookup failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		bool		isnull;

		*owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		*grantees = DatumGetArrayTypePCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		found = true;
	}
	return found;
}

static bool
group_allows(Oid role, Oid owner, ArrayType *grantees, bool owner_only)
{
	Datum	   *elems;
	int			n;

	if (MqMayGrant(role, owner))
		return true;
	if (owner_only)
		return false;
	deconstruct_array(grantees, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &elems, NULL, &n);
	for (int i = 0; i < n; i++)
	{
		Oid			g = DatumGetObjectId(elems[i]);

		if (!OidIsValid(g) || has_privs_of_role(role, g))
			return true;
	}
	return false;
}

/*
 * Make a group's ownership durable: the row in mqlog.consumer_group, if
 * there is none yet.  Called by the calls that write committed offsets
 * (their transaction is what makes the group exist after its members have
 * gone) and by mq_grant_group.  It must never wait for another session's
 * open transaction that is claiming the same group -- a consumer would
 * then stall behind another member's long transaction -- so the insert
 * runs in a subtransaction with a short lock_timeout, and when another
 * claim is in flight this call fails with 40001: only the very first
 * commits of a new group can meet that, and a retry finds the claim
 * decided.
 */
void
MqGroupPersistOwner(const char *group, Oid live_owner)
{
	MqSpi		spi;
	Oid			owner;
	ArrayType  *grantees;
	Oid			claimer = OidIsValid(live_owner) ? live_owner : GetUserId();
	GroupAccessEntry *e = group_cache(group, false);

	/*
	 * A cached answer rests on the durable row (only those are cached):
	 * nothing to record, and no query on the hot path of every commit.
	 */
	if (e && e->generation == MqlogCatalogGeneration())
		return;

	MqSpiBegin(&spi, true);		/* GetUserId() is the extension owner from here */
	if (!read_group(group, &owner, &grantees))
	{
		MemoryContext cxt = CurrentMemoryContext;
		ResourceOwner resowner = CurrentResourceOwner;
		Oid			types[2] = {TEXTOID, OIDOID};
		Datum		vals[2];

		vals[0] = CStringGetTextDatum(group);
		vals[1] = ObjectIdGetDatum(claimer);
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			int			level = NewGUCNestLevel();

			(void) set_config_option("lock_timeout", "10", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			if (SPI_execute_with_args("INSERT INTO mqlog.consumer_group (group_id, owner) VALUES ($1, $2)"
									  " ON CONFLICT DO NOTHING", 2, types, vals, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "mqlog: claiming group failed");
			AtEOXact_GUC(true, level);
			ReleaseCurrentSubTransaction();
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = resowner;
			if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
				ReThrowError(edata);
			/*
			 * Another open transaction is claiming the group.  Going on
			 * would let that claim, if it commits, take over the offsets
			 * this one commits; the first claim wins, this one retries.
			 */
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("consumer group \"%s\" is being claimed by another transaction", group),
					 errdetail("A group belongs to the role whose commit, offset reset or grant first created it."),
					 errhint("Roll back and try again.")));
		}
		PG_END_TRY();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = resowner;
	}
	MqSpiEnd(&spi);
}

/*
 * Check that the current role may use the group, as its owner, a grantee
 * or a member of mqlog_admin.  The owner is the durable row's, else, for a
 * group whose first members have not committed yet, live_owner (kept with
 * the group's members in shared memory by groups/registry.c); a group with
 * neither is nobody's, and the current role may take it.  Returns the owner
 * the answer was based on (the current role for a new group).
 */
static Oid
check_access(const char *group, MqGroupAccess mode, Oid live_owner, bool live_known,
			 bool *durable_out)
{
	Oid			role = GetUserId();
	uint64		gen = MqlogCatalogGeneration();
	GroupAccessEntry *e;
	MqSpi		spi;
	Oid			owner = InvalidOid;
	ArrayType  *grantees = NULL;
	bool		durable;
	bool		owner_only = (mode == MQ_GROUP_OWNER || mode == MQ_GROUP_GRANT);

	if (!owner_only)
	{
		e = group_cache(group, false);
		if (e && e->role == role && e->generation == gen)
		{
			*durable_out = true;
			return e->owner;
		}
	}

	MqSpiBegin(&spi, true);
	durable = read_group(group, &owner, &grantees);
	MqSpiEnd(&spi);
	*durable_out = durable;

	if (!durable)
	{
		if (!live_known)
			return role;		/* the registry compares (MqGroupJoinAs) */
		if (!OidIsValid(live_owner))
		{
			if (mode == MQ_GROUP_GRANT)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("consumer group \"%s\" does not exist", group)));
			if (mode == MQ_GROUP_OWNER && !MqIsAdmin(role))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied for consumer group \"%s\"", group),
						 errdetail("The group has no owner yet; forcing it needs a member of mqlog_admin.")));
			return role;		/* nothing to protect: a new group */
		}
		owner = live_owner;
		grantees = construct_empty_array(OIDOID);
	}
	if (!group_allows(role, owner, grantees, owner_only))
	{
		const char *owner_name = GetUserNameFromId(owner, true);

		if (mode == MQ_GROUP_GRANT)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to grant or revoke on consumer group \"%s\"", group),
					 errdetail("Only the group's owner (role \"%s\") and members of mqlog_admin can grant and revoke.",
							   owner_name ? owner_name : "?")));
		if (mode == MQ_GROUP_OWNER)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for consumer group \"%s\"", group),
					 errdetail("Forcing a group with live members needs its owner (role \"%s\") or a member of mqlog_admin.",
							   owner_name ? owner_name : "?")));
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for consumer group \"%s\"", group),
				 errdetail("The group belongs to role \"%s\"; role \"%s\" holds no grant on it.",
						   owner_name ? owner_name : "?", GetUserNameFromId(role, false)),
				 errhint("Its owner or a member of mqlog_admin can grant it with mq_grant_group('%s', '%s').",
						 group, GetUserNameFromId(role, false))));
	}
	/* only answers from the durable row are cached: live owners go away */
	if (durable && !owner_only && (e = group_cache(group, true)) != NULL)
	{
		e->role = role;
		e->generation = gen;
		e->owner = owner;
	}
	return owner;
}

Oid
MqGroupCheckAccess(const char *group, MqGroupAccess mode, Oid live_owner)
{
	bool		durable;

	return check_access(group, mode, live_owner, true, &durable);
}

/*
 * A join's check, made before the registry is asked so that a poll visits
 * each of the two once: a group with a durable owner is decided by it
 * (and, once allowed, by the cache, with no query); for one without,
 * live_known false, the current role is returned unchecked, and the
 * registry joins only if the live owner is none or that role, else it
 * names the live owner to check against (live_known true) and join again.
 */
Oid
MqGroupCheckJoin(const char *group, Oid live_owner, bool live_known, bool *durable)
{
	return check_access(group, MQ_GROUP_USE, live_owner, live_known, durable);
}

/*
 * A commit's check and record in one visit: the role may use the group
 * (checked against live_owner, the owner the caller's read of the registry
 * saw), and, if record, the group's ownership is made durable before the
 * first offset is written.
 */
void
MqGroupAuthorizeCommit(const char *group, MqGroupAccess mode, Oid live_owner, bool record)
{
	MqGroupCheckAccess(group, mode, live_owner);
	if (record)
		MqGroupPersistOwner(group, live_owner);
}

/* mq_grant_group and mq_revoke_group, once the caller may grant */
static void
change_grant(const char *group, Oid grantee, bool grant)
{
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		vals[2];
	MqSpi		spi;
	int			ret;

	vals[0] = CStringGetTextDatum(group);
	vals[1] = ObjectIdGetDatum(grantee);
	MqSpiBegin(&spi, true);
	if (grant)
		ret = SPI_execute_with_args("INSERT INTO mqlog.group_acl (group_id, grantee) VALUES ($1, $2)"
									" ON CONFLICT DO NOTHING", 2, types, vals, NULL, false, 0);
	else
		ret = SPI_execute_with_args("DELETE FROM mqlog.group_acl a"
									" WHERE a.group_id OPERATOR(pg_catalog.=) $1 AND a.grantee OPERATOR(pg_catalog.=) $2",
									2, types, vals, NULL, false, 0);
	if (ret < 0)
		elog(ERROR, "mqlog: changing group privileges failed: %s", SPI_result_code_string(ret));
	MqSpiEnd(&spi);
	MqlogCatalogChanged();
}

/* For the views: may role see the group?  A group nobody owns is nobody's. */
bool
MqGroupHasAccess(const char *group, Oid role, Oid live_owner)
{
	MqSpi		spi;
	Oid			owner;
	ArrayType  *grantees;
	bool		exists;

	if (MqIsAdmin(role))
		return true;
	MqSpiBegin(&spi, true);
	exists = read_group(group, &owner, &grantees);
	MqSpiEnd(&spi);
	if (!exists && OidIsValid(live_owner))
		return has_privs_of_role(role, live_owner);
	return exists && group_allows(role, owner, grantees, false);
}

/* ------------------------------------------------------------------------
 * The calls of the groups layer, against the owner the registry holds now
 * ------------------------------------------------------------------------ */

/*
 * MqGroupCheckAccess against the owner the registry holds for the group
 * now; returns that owner (InvalidOid: none), for a MqGroupPersistOwner
 * later in the same call.
 */
Oid
MqGroupAuthorize(const char *group, MqGroupAccess mode)
{
	Oid			live = MqGroupLiveOwner(group);

	MqGroupCheckAccess(group, mode, live);
	return live;
}

void
MqGroupGrant(const char *group, Oid grantee, bool grant)
{
	Oid			live = MqGroupLiveOwner(group);

	/* a group nobody owns yet becomes the granter's */
	if (grant)
	{
		MqGroupCheckAccess(group, MQ_GROUP_USE, live);
		MqGroupPersistOwner(group, live);
	}
	MqGroupCheckAccess(group, MQ_GROUP_GRANT, live);
	change_grant(group, grantee, grant);
}

/*
 * The group grants the current role may revoke (acl.c's MqGrantsOf): of
 * the groups whose recorded owner it has the privileges of, every group's
 * for mqlog_admin.  A grant always has a recorded owner (MqGroupGrant
 * records it first).  A group grant is the whole use of the group, so its
 * privileges are MQ_PRIV_ALL.
 */
List *
MqGroupGrants(const char *group, bool any_grantee, Oid grantee, MqGrantPage *page)
{
	return MqGrantsOf(psprintf("SELECT g.group_id, a.grantee::pg_catalog.oid, %d, g.owner::pg_catalog.oid"
					  " FROM mqlog.consumer_group g CROSS JOIN LATERAL ("
					  "  SELECT a.grantee FROM mqlog.group_acl a"
					  "   WHERE a.group_id OPERATOR(pg_catalog.=) g.group_id"
					  "     AND ($2 IS NULL OR a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) $2)"
					  "     AND a.grantee::pg_catalog.oid OPERATOR(pg_catalog.>=)"
					  "         CASE WHEN g.group_id OPERATOR(pg_catalog.=) $3 THEN $4 ELSE 0::pg_catalog.oid END"
					  "     AND (g.group_id OPERATOR(pg_catalog.=) $3 AND a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) $4) IS NOT TRUE"
					  "   ORDER BY a.grantee::pg_catalog.oid LIMIT $5) a"
					  " WHERE ($1 IS NULL OR g.group_id OPERATOR(pg_catalog.=) $1)"
					  " AND ($3 IS NULL OR g.group_id OPERATOR(pg_catalog.>=) $3)"
					  " ORDER BY g.group_id, a.grantee::pg_catalog.oid LIMIT $5", MQ_PRIV_ALL),
					  group, any_grantee, grantee, page);
}

bool
MqGroupHasPrivilege(const char *group, Oid role)
{
	return MqGroupHasAccess(group, role, MqGroupLiveOwner(group));
}

/*
 * mq_delete_group: the group's recorded owner goes, and its grants with it
 * (the group_deleted trigger deletes them); returns whether there was one.
 */
bool
MqGroupDropOwnership(const char *group)
{
	MqSpi		spi;
	Oid			type = TEXTOID;
	Datum		val = CStringGetTextDatum(group);
	uint64		owned;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) $1",
							  1, &type, &val, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog: deleting the group failed");
	owned = SPI_processed;
	MqSpiEnd(&spi);
	forget(group);
	MqlogCatalogChanged();
	return owned > 0;
}

/*
 * MqGroupHasAccess of many groups at once, for the same role (Kafka's
 * ListGroups, groups/listing.c): the recorded owners and grantees of all of
 * them are read in one query, where one query per group held the Kafka
 * listener 2.75 s for 40,000 groups.  groups are sorted by strcmp;
 * live_owners[i] is the registry's owner of groups[i] (InvalidOid: none),
 * used as MqGroupHasAccess uses it, for a group without a recorded row.
 */
void
MqGroupsHaveAccess(char **groups, const Oid *live_owners, int n, Oid role, bool *allowed)
{
	MqSpi		spi;
	Datum	   *names;
	Oid			argtype = TEXTARRAYOID;
	Datum		arg;
	int			ret;
	int			i = 0;

	if (MqIsAdmin(role))
	{
		for (int k = 0; k < n; k++)
			allowed[k] = true;
		return;
	}
	for (int k = 0; k < n; k++)
		allowed[k] = OidIsValid(live_owners[k]) && has_privs_of_role(role, live_owners[k]);
	if (n == 0)
		return;
	names = palloc(sizeof(Datum) * n);
	for (int k = 0; k < n; k++)
		names[k] = CStringGetTextDatum(groups[k]);
	arg = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));

	MqSpiBegin(&spi, true);
	PushActiveSnapshot(GetLatestSnapshot());
	ret = SPI_execute_with_args("SELECT g.group_id, g.owner, ARRAY(SELECT a.grantee::pg_catalog.oid FROM mqlog.group_acl a"
								" WHERE a.group_id OPERATOR(pg_catalog.=) g.group_id)"
								" FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) ANY ($1)"
								" ORDER BY g.group_id COLLATE \"C\"",
								1, &argtype, &arg, NULL, true, 0);
	PopActiveSnapshot();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: group owner lookup failed: %s", SPI_result_code_string(ret));
	/* both sorted byte-wise: one merge */
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	t = SPI_tuptable->vals[r];
		char	   *name = SPI_getvalue(t, SPI_tuptable->tupdesc, 1);
		bool		isnull;

		while (i < n && strcmp(groups[i], name) < 0)
			i++;
		if (i < n && strcmp(groups[i], name) == 0)
			allowed[i] = group_allows(role,
									  DatumGetObjectId(SPI_getbinval(t, SPI_tuptable->tupdesc, 2, &isnull)),
									  DatumGetArrayTypeP(SPI_getbinval(t, SPI_tuptable->tupdesc, 3, &isnull)),
									  false);
	}
	MqSpiEnd(&spi);
}
