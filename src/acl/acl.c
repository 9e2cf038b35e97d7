/*-------------------------------------------------------------------------
 *
 * acl.c
 *		Who may do what with a topic: per-topic privileges (Kafka's ACL
 *		operations mapped to PostgreSQL roles), their checks and their
 *		grants (the SQL functions are in sql/grants.c), and who is an
 *		administrator.
 *
 * The rule every SPI query of mqlog follows (base/spi.c): it runs between
 * MqSpiBegin and MqSpiEnd, which set search_path to "pg_catalog, pg_temp" for its duration
 * (as a SECURITY DEFINER function's SET clause would), and it
 * schema-qualifies every relation, function, type and operator it names.
 * So no role can plant a function or an operator that mqlog's queries
 * would resolve to, whatever search_path the caller, its role or its
 * database sets.  Queries that read or write mqlog's catalog run as the
 * extension owner (MqSpiBegin(..., true)): the catalog tables are not
 * readable by PUBLIC, since they would show every topic and group.
 *
 * Topic privileges live in mqlog.topic_acl (topic, grantee, bit mask); a
 * topic's owner (its creator), members of mqlog_admin and superusers hold
 * all of them.  They are read with the topic into the backend's topic cache
 * (topic.c), so a check is a few has_privs_of_role() calls.  Who may use a
 * consumer group is the groups layer's (groups/ownership.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/spi.h"
#include "log/am.h"
#include "log/partition.h"
#include "log/topic.h"
#include "acl/acl.h"

bool		mqlog_allow_everyone_if_no_acl_found = false;

static Oid
admin_role(void)
{
	return get_role_oid("mqlog_admin", true);
}

bool
MqIsAdmin(Oid role)
{
	Oid			admin = admin_role();

	return superuser_arg(role) || (OidIsValid(admin) && has_privs_of_role(role, admin));
}

/*
 * May role grant and revoke on a topic or group of this owner?  Its owner
 * (and whoever has the owner's privileges) and mqlog_admin may; so they
 * also hold every privilege on it.
 */
bool
MqMayGrant(Oid role, Oid owner)
{
	return MqIsAdmin(role) || (OidIsValid(owner) && has_privs_of_role(role, owner));
}

/* ------------------------------------------------------------------------
 * Topic privileges
 * ------------------------------------------------------------------------ */

static const struct
{
	const char *name;
	int			bits;
}			priv_names[] = {
	{"produce", MQ_PRIV_PRODUCE},
	{"consume", MQ_PRIV_CONSUME},
	{"describe", MQ_PRIV_DESCRIBE},
	{"alter", MQ_PRIV_ALTER},
	{"all", MQ_PRIV_ALL},
};

int
MqPrivilegeFromName(const char *name)
{
	for (int i = 0; i < lengthof(priv_names); i++)
		if (pg_strcasecmp(name, priv_names[i].name) == 0)
			return priv_names[i].bits;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown topic privilege \"%s\"", name),
			 errhint("Valid privileges are: produce, consume, describe, alter, all.")));
	return 0;					/* keep the compiler quiet */
}

const char *
MqPrivilegeName(int priv)
{
	for (int i = 0; i < lengthof(priv_names); i++)
		if (priv_names[i].bits == priv)
			return priv_names[i].name;
	return "?";
}

/*
 * Does role hold priv on the topic?  As in Kafka, produce, consume and
 * alter each imply describe.
 */
bool
MqTopicHasPrivilege(MqTopic *topic, Oid role, int priv)
{
	int			held = 0;

	if (MqMayGrant(role, topic->owner))
		return true;
	for (int i = 0; i < topic->nacl; i++)
	{
		MqTopicAclItem *a = &topic->acl[i];

		if (!OidIsValid(a->grantee) || has_privs_of_role(role, a->grantee))
			held |= a->privs;
	}
	if (held != 0)
		held |= MQ_PRIV_DESCRIBE;
	else if (topic->nacl == 0 && mqlog_allow_everyone_if_no_acl_found)
		held = MQ_PRIV_PRODUCE | MQ_PRIV_CONSUME | MQ_PRIV_DESCRIBE;
	return (held & priv) == priv;
}

void
MqTopicCheckPrivilege(MqTopic *topic, int priv)
{
	Oid			role = GetUserId();

	if (!MqTopicHasPrivilege(topic, role, priv))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for topic \"%s\"", topic->name),
				 errdetail("Role \"%s\" does not hold the privilege \"%s\" on topic \"%s\".",
						   GetUserNameFromId(role, false), MqPrivilegeName(priv), topic->name),
				 errhint("The topic's owner or a member of mqlog_admin can grant it with mq_grant('%s', '%s', '%s').",
						 topic->name, GetUserNameFromId(role, false), MqPrivilegeName(priv))));
}

/*
 * A segment's statistics show what its topic holds: describe on the topic,
 * or mqlog_admin for a segment no topic lists any more.
 */
void
MqCheckSegmentDescribe(Oid relid)
{
	int32		topic_id;

	if (!MqIsSegment(relid))
		return;					/* MqSegmentOpen gives the error */
	topic_id = MqTopicIdOfSegment(relid);
	if (topic_id > 0)
		MqTopicCheckPrivilege(MqTopicLookupById(topic_id), MQ_PRIV_DESCRIBE);
	else if (!MqIsAdmin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for segment \"%s\"", get_rel_name(relid)),
				 errdetail("The segment belongs to no topic; only members of mqlog_admin may read it.")));
}

/* ------------------------------------------------------------------------
 * Granting and revoking topic privileges
 * ------------------------------------------------------------------------ */

static void
check_topic_grantor(MqTopic *topic, bool grant)
{
	Oid			role = GetUserId();

	if (!MqMayGrant(role, topic->owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s privileges on topic \"%s\"",
						grant ? "grant" : "revoke", topic->name),
				 errdetail("Only the topic's owner and members of mqlog_admin can grant and revoke.")));
}

/*
 * mq_grant and mq_revoke: privs (a mask of MQ_PRIV_*) on the topic to or
 * from grantee (InvalidOid: PUBLIC), if the caller is the topic's owner or
 * a member of mqlog_admin.
 */
void
MqTopicChangeAcl(MqTopic *topic, Oid grantee, int privs, bool grant)
{
	Oid			types[3] = {INT4OID, OIDOID, INT4OID};
	Datum		vals[3];
	MqSpi		spi;
	int			ret;

	check_topic_grantor(topic, grant);
	vals[0] = Int32GetDatum(topic->topic_id);
	vals[1] = ObjectIdGetDatum(grantee);
	vals[2] = Int32GetDatum(privs);
	MqSpiBegin(&spi, true);
	if (grant)
		ret = SPI_execute_with_args("INSERT INTO mqlog.topic_acl AS a (topic_id, grantee, privs) VALUES ($1, $2, $3)"
									" ON CONFLICT (topic_id, grantee) DO UPDATE"
									" SET privs = a.privs OPERATOR(pg_catalog.|) $3",
									3, types, vals, NULL, false, 0);
	else
	{
		/* a row left with no privilege goes; the others lose the bits */
		ret = SPI_execute_with_args("DELETE FROM mqlog.topic_acl a"
									" WHERE a.topic_id OPERATOR(pg_catalog.=) $1 AND a.grantee OPERATOR(pg_catalog.=) $2"
									" AND (a.privs OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.~) $3)) OPERATOR(pg_catalog.=) 0",
									3, types, vals, NULL, false, 0);
		if (ret == SPI_OK_DELETE)
			ret = SPI_execute_with_args("UPDATE mqlog.topic_acl a SET privs = a.privs OPERATOR(pg_catalog.&)"
										" (OPERATOR(pg_catalog.~) $3)"
										" WHERE a.topic_id OPERATOR(pg_catalog.=) $1 AND a.grantee OPERATOR(pg_catalog.=) $2",
										3, types, vals, NULL, false, 0);
	}
	if (ret < 0)
		elog(ERROR, "mqlog: changing topic privileges failed: %s", SPI_result_code_string(ret));
	MqSpiEnd(&spi);
	MqlogCatalogChanged();
}

/* ------------------------------------------------------------------------
 * Listing grants
 * ------------------------------------------------------------------------ */

/*
 * The grants a query of mqlog's catalog finds that the current role may
 * revoke: those of the objects it owns (or has the owner's privileges of),
 * all of them for mqlog_admin.  The query takes the object's name ($1 text,
 * null: every object), the grantee ($2 oid, null: every grantee), and a
 * page's start and size (rows after ($3 text, $4 oid) in its order of
 * object and grantee, $3 null: from the first; LIMIT $5, null: all), and
 * returns the object's name, the grantee, the privileges (MQ_PRIV_*) and
 * the owner; it runs as the extension owner, the catalog's only reader.
 * A page must cost what it reads, not the whole listing: the queries walk
 * the objects by their name's index and each object's grants by the
 * grant table's primary key (a lateral join, the grantee's lower bound an
 * index condition), never sorting all rows (a page of 1,000 of 400,000
 * grants of one topic: 180 ms as a join and a sort, 1.5 ms so).
 * Who may see a grant is who may change it, as Kafka's DescribeAcls needs
 * the cluster's Describe.  A list of MqGrant in the caller's context.
 */
List *
MqGrantsOf(const char *query, const char *object, bool any_grantee, Oid grantee,
		   MqGrantPage *page)
{
	Oid			role = GetUserId();
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[5] = {TEXTOID, OIDOID, TEXTOID, OIDOID, INT8OID};
	Datum		vals[5];
	char		nulls[5] = {' ', ' ', 'n', ' ', 'n'};
	List	   *grants = NIL;
	MqSpi		spi;

	vals[0] = object ? CStringGetTextDatum(object) : (Datum) 0;
	vals[1] = ObjectIdGetDatum(grantee);
	if (object == NULL)
		nulls[0] = 'n';
	if (any_grantee)
		nulls[1] = 'n';
	vals[3] = ObjectIdGetDatum(InvalidOid);
	if (page != NULL)
	{
		if (page->object != NULL)
		{
			vals[2] = CStringGetTextDatum(page->object);
			vals[3] = ObjectIdGetDatum(page->grantee);
			nulls[2] = ' ';
		}
		vals[4] = Int64GetDatum(page->limit);
		nulls[4] = ' ';
	}
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args(query, 5, types, vals, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: listing grants failed");
	if (page != NULL)
	{
		page->done = SPI_processed < (uint64) page->limit;
		if (SPI_processed > 0)
		{
			HeapTuple	last = SPI_tuptable->vals[SPI_processed - 1];
			bool		isnull;
			MemoryContext old = MemoryContextSwitchTo(cxt);

			page->object = SPI_getvalue(last, SPI_tuptable->tupdesc, 1);
			page->grantee = DatumGetObjectId(SPI_getbinval(last, SPI_tuptable->tupdesc, 2, &isnull));
			MemoryContextSwitchTo(old);
		}
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			owner = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		MemoryContext old;
		MqGrant    *g;

		if (!MqMayGrant(role, owner))
			continue;
		old = MemoryContextSwitchTo(cxt);
		g = palloc(sizeof(MqGrant));
		g->object = SPI_getvalue(tup, desc, 1);
		g->grantee = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		g->privs = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
		grants = lappend(grants, g);
		MemoryContextSwitchTo(old);
	}
	MqSpiEnd(&spi);
	return grants;
}

/* the topic grants the current role may revoke (MqGrantsOf) */
List *
MqTopicGrants(const char *topic, bool any_grantee, Oid grantee, MqGrantPage *page)
{
	return MqGrantsOf("SELECT t.name, a.grantee::pg_catalog.oid, a.privs, t.owner::pg_catalog.oid"
					  " FROM mqlog.topic t CROSS JOIN LATERAL ("
					  "  SELECT a.grantee, a.privs FROM mqlog.topic_acl a"
					  "   WHERE a.topic_id OPERATOR(pg_catalog.=) t.topic_id"
					  "     AND ($2 IS NULL OR a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) $2)"
					  "     AND a.grantee::pg_catalog.oid OPERATOR(pg_catalog.>=)"
					  "         CASE WHEN t.name OPERATOR(pg_catalog.=) $3 THEN $4 ELSE 0::pg_catalog.oid END"
					  "     AND (t.name OPERATOR(pg_catalog.=) $3 AND a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) $4) IS NOT TRUE"
					  "   ORDER BY a.grantee::pg_catalog.oid LIMIT $5) a"
					  " WHERE ($1 IS NULL OR t.name OPERATOR(pg_catalog.=) $1)"
					  " AND ($3 IS NULL OR t.name OPERATOR(pg_catalog.>=) $3)"
					  " ORDER BY t.name, a.grantee::pg_catalog.oid LIMIT $5",
					  topic, any_grantee, grantee, page);
}
