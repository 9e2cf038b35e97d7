/*-------------------------------------------------------------------------
 *
 * groups.c
 *		The SQL entry points of consumer groups: mq_poll, mq_commit,
 *		mq_commit_offset, mq_seek, mq_leave, mq_reset_offsets,
 *		mq_delete_group, mqlog.group_members, mq_grant_group,
 *		mq_revoke_group and mq_has_group_privilege; for the DBA,
 *		mqlog.group_slots and mq_remove_group_members.
 *
 * A SQL session is one kind of group member: member "sql-<pid>" in every
 * group it polls, with the settings of the session (mqlog.assignor,
 * mqlog.max_poll_interval_ms, mqlog.auto_offset_reset).  Each function
 * checks its arguments and the privileges on the topics they name, then
 * calls the groups layer's service API (groups/groups.h) for that member.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "log/records.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "groups/groups.h"
#include "sql/grants.h"

PG_FUNCTION_INFO_V1(mq_poll);
PG_FUNCTION_INFO_V1(mq_poll_pattern);
PG_FUNCTION_INFO_V1(mq_commit);
PG_FUNCTION_INFO_V1(mq_commit_offset);
PG_FUNCTION_INFO_V1(mq_leave);
PG_FUNCTION_INFO_V1(mq_seek);
PG_FUNCTION_INFO_V1(mq_reset_offsets);
PG_FUNCTION_INFO_V1(mq_delete_group);
PG_FUNCTION_INFO_V1(mqlog_group_members);
PG_FUNCTION_INFO_V1(mq_grant_group);
PG_FUNCTION_INFO_V1(mq_revoke_group);
PG_FUNCTION_INFO_V1(mq_has_group_privilege);
PG_FUNCTION_INFO_V1(mqlog_group_slots);
PG_FUNCTION_INFO_V1(mq_remove_group_members);

#define MQ_MAX_POLL_TIMEOUT_MS	(600 * 1000)

static const char *const assignor_names[] = {"range", "roundrobin", "sticky"};

/* ------------------------------------------------------------------------
 * The session as a member
 * ------------------------------------------------------------------------ */

/* The member id of this SQL session in every group it polls. */
static const char *
session_member_id(void)
{
	static char id[MQ_MEMBER_ID_LEN];
	static int	for_pid = 0;

	if (for_pid != MyProcPid)
	{
		snprintf(id, sizeof(id), "sql-%d", MyProcPid);
		for_pid = MyProcPid;
	}
	return id;
}

/* the member's settings are the session's, as they are at each poll */
static void
session_config(MqMemberConfig *config)
{
	config->assignor = mqlog_assignor;
	config->max_poll_interval_ms = mqlog_max_poll_interval_ms;
	config->offset_reset = mqlog_offset_reset;
	config->auto_commit = mqlog_enable_auto_commit;
}

/* ------------------------------------------------------------------------
 * Argument checks
 * ------------------------------------------------------------------------ */

static char *
group_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *group;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("group must not be null")));
	group = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	MqCheckGroupName(group);
	return group;
}

/* mq_poll's topics: one name or an array of names, each consumable */
static MqTopic **
resolve_topics(FunctionCallInfo fcinfo, int *ntopics)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	MqTopic   **topics;
	int			n = 0;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topics must not be null")));
	if (argtype == TEXTOID)
	{
		topics = palloc(sizeof(MqTopic *));
		topics[n++] = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
		MqTopicCheckPrivilege(topics[0], MQ_PRIV_CONSUME);
	}
	else
	{
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &nelems);
		if (nelems == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("topics must not be empty")));
		if (nelems > MQ_MAX_SUB_TOPICS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a member may subscribe to at most %d topics", MQ_MAX_SUB_TOPICS)));
		topics = palloc(sizeof(MqTopic *) * nelems);
		for (int i = 0; i < nelems; i++)
		{
			MqTopic    *t;
			bool		dup = false;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("topic names must not be null")));
			t = MqTopicLookup(TextDatumGetCString(elems[i]), false);
			MqTopicCheckPrivilege(t, MQ_PRIV_CONSUME);
			for (int j = 0; j < n; j++)
				dup |= (topics[j] == t);
			if (!dup)
				topics[n++] = t;
		}
	}
	*ntopics = n;
	return topics;
}

/*
 * The topics whose names match pattern (a POSIX regular expression, as
 * PostgreSQL's ~), in name order, that the role may consume: Kafka's
 * subscribe(Pattern), which leaves out the topics a client may not read.
 * Evaluated at each poll, so a topic created or dropped since counts from
 * the next one.
 */
static MqTopic **
topics_matching(const char *pattern, int *ntopics)
{
	List	   *names = MqTopicNames(pattern);
	MqTopic   **topics;
	ListCell   *lc;
	int			n = 0;

	topics = palloc(sizeof(MqTopic *) * Max(list_length(names), 1));
	foreach(lc, names)
	{
		MqTopic    *t = MqTopicLookup(lfirst(lc), true);

		if (t == NULL || !MqTopicHasPrivilege(t, GetUserId(), MQ_PRIV_CONSUME))
			continue;
		if (n == MQ_MAX_SUB_TOPICS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("pattern \"%s\" matches more than %d topics", pattern, MQ_MAX_SUB_TOPICS),
					 errdetail("A member may subscribe to at most %d topics.", MQ_MAX_SUB_TOPICS),
					 errhint("Use a narrower pattern, or several groups.")));
		topics[n++] = t;
	}
	*ntopics = n;
	return topics;
}

/*
 * Arguments (group, topic, partition, offset) of mq_commit and mq_seek,
 * checked; the caller holds consume on the topic.
 */
static void
explicit_args(FunctionCallInfo fcinfo, char **group, MqTopic **topic, int32 *partition,
			  int64 *offset)
{
	MqGroupsCheckReady();
	*group = group_arg(fcinfo, 0);
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic, partition and offset must not be null")));
	*partition = PG_GETARG_INT32(2);
	*offset = PG_GETARG_INT64(3);
	if (*offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset must not be negative"),
				 errhint("An offset is the next offset to read, from 0 to the high watermark.")));
	*topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
	MqTopicCheckPrivilege(*topic, MQ_PRIV_CONSUME);
}

/* ------------------------------------------------------------------------
 * Polling, committing, positioning
 * ------------------------------------------------------------------------ */

/*
 * An interval in microseconds (a month as 30 days, as PostgreSQL's
 * interval comparison counts it), false when no int64 holds them: summed
 * with wrapping multiplications, 2^64 microseconds and a second (213503982
 * days and 28910.551616 s) came out as a second, a timeout the check below
 * accepted.
 */
static bool
interval_usecs(const Interval *iv, int64 *us)
{
	int64		days_us;
	int64		months_us;

	return !pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &days_us) &&
		!pg_mul_s64_overflow((int64) iv->month, DAYS_PER_MONTH * USECS_PER_DAY, &months_us) &&
		!pg_add_s64_overflow(iv->time, days_us, us) &&
		!pg_add_s64_overflow(*us, months_us, us);
}

/* mq_poll and mq_poll_pattern: the same poll of the topics resolved */
static Datum
poll_topics(FunctionCallInfo fcinfo, char *group, MqTopic **topics, int ntopics)
{
	int32		max_records;
	int64		timeout_ms = 0;
	MqRecordOutput out;
	MqMemberConfig config;

	max_records = PG_ARGISNULL(2) ? 500 : PG_GETARG_INT32(2);
	if (max_records < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_records must be at least 1")));
	if (!PG_ARGISNULL(3))
	{
		Interval   *iv = PG_GETARG_INTERVAL_P(3);
		int64		us;

		if (!interval_usecs(iv, &us) || us < 0 || us > (int64) MQ_MAX_POLL_TIMEOUT_MS * 1000)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("poll timeout must be between 0 and %d seconds", MQ_MAX_POLL_TIMEOUT_MS / 1000),
					 errhint("Poll again in a loop for longer waits.")));
		timeout_ms = us / 1000;
	}

	MqInitRecordOutput(fcinfo, &out);
	session_config(&config);
	MqGroupPoll(group, session_member_id(), topics, ntopics, &config, max_records,
				timeout_ms, &out);
	return (Datum) 0;
}

Datum
mq_poll(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic   **topics;
	int			ntopics;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	topics = resolve_topics(fcinfo, &ntopics);
	return poll_topics(fcinfo, group, topics, ntopics);
}

/* mq_poll_pattern(group, pattern, ...): Kafka's subscribe(Pattern) */
Datum
mq_poll_pattern(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic   **topics;
	int			ntopics;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pattern must not be null")));
	topics = topics_matching(text_to_cstring(PG_GETARG_TEXT_PP(1)), &ntopics);
	return poll_topics(fcinfo, group, topics, ntopics);
}

/* commit what this session polled; a session's commits are cooperative */
Datum
mq_commit(PG_FUNCTION_ARGS)
{
	char	   *group;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	PreventCommandIfReadOnly("mq_commit");
	PG_RETURN_INT64(MqGroupCommit(group, session_member_id(), MQ_ANY_GENERATION));
}

Datum
mq_commit_offset(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	int32		partition;
	int64		offset;

	PreventCommandIfReadOnly("mq_commit");
	explicit_args(fcinfo, &group, &topic, &partition, &offset);
	MqGroupCommitOffset(group, session_member_id(), MQ_ANY_GENERATION, topic,
						partition, offset);
	PG_RETURN_INT64(1);
}

Datum
mq_seek(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	int32		partition;
	int64		offset;

	explicit_args(fcinfo, &group, &topic, &partition, &offset);
	MqGroupSeek(group, session_member_id(), topic, partition, offset);
	PG_RETURN_VOID();
}

Datum
mq_leave(PG_FUNCTION_ARGS)
{
	char	   *group;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	PG_RETURN_BOOL(MqGroupLeave(group, session_member_id()));
}

/* ------------------------------------------------------------------------
 * mq_reset_offsets, mq_delete_group
 * ------------------------------------------------------------------------ */

/* an optional sign and digits only: what mq_reset_offsets takes for an offset */
static bool
looks_like_integer(const char *s)
{
	while (isspace((unsigned char) *s))
		s++;
	if (*s == '+' || *s == '-')
		s++;
	if (!isdigit((unsigned char) *s))
		return false;
	while (isdigit((unsigned char) *s))
		s++;
	while (isspace((unsigned char) *s))
		s++;
	return *s == '\0';
}

/*
 * A reset target that is neither a keyword nor an offset must be a
 * timestamp; the parser's own error would not say what else was allowed,
 * so it runs in a subtransaction and its error is replaced.
 */
static TimestampTz
parse_reset_time(const char *to)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	TimestampTz ts = 0;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(to),
													 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid offset reset target \"%s\"", to),
				 errhint("Reset to 'earliest', 'latest', an offset from 0 to the high watermark, or a timestamp such as '2026-01-31 12:00:00+00'.")));
	return ts;
}

/* 'earliest', 'latest', an offset or a timestamp */
static void
parse_reset_target(const char *to, MqResetTarget *target)
{
	char	   *end;
	bool		out_of_range;

	memset(target, 0, sizeof(*target));
	if (pg_strcasecmp(to, "earliest") == 0)
	{
		target->kind = MQ_RESET_TO_EARLIEST;
		return;
	}
	if (pg_strcasecmp(to, "latest") == 0)
	{
		target->kind = MQ_RESET_TO_LATEST;
		return;
	}
	if (!looks_like_integer(to))
	{
		target->kind = MQ_RESET_TO_TIME;
		target->ts = parse_reset_time(to);
		return;
	}
	errno = 0;
	target->kind = MQ_RESET_TO_OFFSET;
	target->offset = strtoll(to, &end, 10);
	out_of_range = (errno == ERANGE);
	if (out_of_range || target->offset < 0)
		ereport(ERROR,
				(errcode(out_of_range ? ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE :
						 ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset \"%s\" is out of range", to),
				 errhint("Reset to 'earliest', 'latest', an offset from 0 to the high watermark, or a timestamp such as '2026-01-31 12:00:00+00'.")));
}

Datum
mq_reset_offsets(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	bool		force;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MqResetTarget target;
	int64	   *targets;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic and target must not be null")));
	topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
	force = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);
	PreventCommandIfReadOnly("mq_reset_offsets");
	parse_reset_target(text_to_cstring(PG_GETARG_TEXT_PP(2)), &target);
	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	targets = MqGroupResetOffsets(group, topic, &target, force);

	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < topic->partitions; p++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int32GetDatum(p);
		values[1] = Int64GetDatum(targets[p]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
mq_delete_group(PG_FUNCTION_ARGS)
{
	char	   *group;
	bool		force;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	force = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	PreventCommandIfReadOnly("mq_delete_group");
	PG_RETURN_INT64(MqGroupDelete(group, force));
}

/* ------------------------------------------------------------------------
 * mqlog.group_members
 * ------------------------------------------------------------------------ */

/*
 * The members of the groups the Kafka listener coordinates, as it
 * publishes them (MqExternalMembersList): kind "kafka", the listener's
 * pid, the group's protocol as assignor, the client's id and address, its
 * subscription and assignment; for the groups the caller may use.
 */
static void
kafka_group_members(ReturnSetInfo *rsinfo)
{
	int			n;
	MqExternalMember *members = MqExternalMembersList(false, &n);
	bool	   *visible = palloc(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		MqExternalMember *m = &members[i];
		Datum		values[12];
		bool		nulls[12] = {0};
		Datum	   *topics = palloc(sizeof(Datum) * Max(m->ntopics, 1));
		Datum	   *assigned = palloc(sizeof(Datum) * Max(m->nassigned, 1));
		const char *names[MQ_EXT_TOPICS_LEN / 2];
		int			pos = 0;
		int			j;

		for (j = 0; j < i; j++)
			if (strcmp(members[j].group, m->group) == 0)
				break;
		visible[i] = (j < i) ? visible[j] : MqGroupHasPrivilege(m->group, GetUserId());
		if (!visible[i])
			continue;
		for (int t = 0; t < m->ntopics; t++)
		{
			names[t] = m->topics + pos;
			pos += strlen(names[t]) + 1;
		}
		for (int t = 0; t < m->nsubscribed; t++)
			topics[t] = CStringGetTextDatum(names[t]);
		for (int a = 0; a < m->nassigned; a++)
			assigned[a] = CStringGetTextDatum(psprintf("%s-%d", names[m->assigned[a].topic],
													   m->assigned[a].partition));
		values[0] = CStringGetTextDatum(m->group);
		values[1] = CStringGetTextDatum(m->member_id);
		values[2] = Int32GetDatum(m->pid);
		values[3] = CStringGetTextDatum(m->protocol);
		values[4] = Int32GetDatum(m->generation);
		values[5] = PointerGetDatum(construct_array(topics, m->nsubscribed, TEXTOID, -1, false, TYPALIGN_INT));
		values[6] = PointerGetDatum(construct_array(assigned, m->nassigned, TEXTOID, -1, false, TYPALIGN_INT));
		values[7] = TimestampTzGetDatum(m->joined_at);
		values[8] = TimestampTzGetDatum(m->last_seen);
		values[9] = CStringGetTextDatum("kafka");
		values[10] = CStringGetTextDatum(m->client_id);
		values[11] = CStringGetTextDatum(m->client_host);
		nulls[11] = m->client_host[0] == '\0';
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

Datum
mqlog_group_members(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MqMemberInfo *members;
	bool	   *visible;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	members = MqGroupMembers(false, &n);
	visible = palloc(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		MqMemberInfo *m = &members[i];
		Datum		values[12];
		bool		nulls[12] = {0};
		int			j;
		Datum	   *topics;
		Datum	   *assigned;

		/* only the groups the caller may use, asked once per group */
		for (j = 0; j < i; j++)
			if (strcmp(members[j].group, m->group) == 0)
				break;
		visible[i] = (j < i) ? visible[j] : MqGroupHasAccess(m->group, GetUserId(), m->owner);
		if (!visible[i])
			continue;
		topics = palloc(sizeof(Datum) * Max(m->ntopics, 1));
		assigned = palloc(sizeof(Datum) * Max(m->nassigned, 1));

		for (int t = 0; t < m->ntopics; t++)
			topics[t] = CStringGetTextDatum(MqTopicNameOrId(m->topic_ids[t]));
		for (int a = 0; a < m->nassigned; a++)
			assigned[a] = CStringGetTextDatum(psprintf("%s-%d", MqTopicNameOrId(m->assigned[a].topic_id),
													   m->assigned[a].partition));
		values[0] = CStringGetTextDatum(m->group);
		values[1] = CStringGetTextDatum(m->member_id);
		values[2] = Int32GetDatum(m->pid);
		values[3] = CStringGetTextDatum(assignor_names[m->assignor]);
		values[4] = Int32GetDatum(m->generation);
		values[5] = PointerGetDatum(construct_array(topics, m->ntopics, TEXTOID, -1, false, TYPALIGN_INT));
		values[6] = PointerGetDatum(construct_array(assigned, m->nassigned, TEXTOID, -1, false, TYPALIGN_INT));
		values[7] = TimestampTzGetDatum(m->joined_at);
		values[8] = TimestampTzGetDatum(m->last_poll);
		values[9] = CStringGetTextDatum("sql");
		nulls[10] = nulls[11] = true;	/* the session's, from pg_stat_activity */
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	kafka_group_members(rsinfo);
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * mq_grant_group, mq_revoke_group, mq_has_group_privilege
 * ------------------------------------------------------------------------ */

static void
change_group_grant(FunctionCallInfo fcinfo, bool grant)
{
	char	   *group = MqTextArg(fcinfo, 0, "group name");
	Oid			grantee = MqGranteeArg(fcinfo, 1);

	MqGroupsCheckReady();
	MqCheckGroupName(group);
	PreventCommandIfReadOnly(grant ? "mq_grant_group" : "mq_revoke_group");
	MqGroupGrant(group, grantee, grant);
}

Datum
mq_grant_group(PG_FUNCTION_ARGS)
{
	change_group_grant(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
mq_revoke_group(PG_FUNCTION_ARGS)
{
	change_group_grant(fcinfo, false);
	PG_RETURN_VOID();
}

Datum
mq_has_group_privilege(PG_FUNCTION_ARGS)
{
	char	   *group = text_to_cstring(PG_GETARG_TEXT_PP(0));

	MqGroupsCheckReady();
	PG_RETURN_BOOL(MqGroupHasPrivilege(group, GetUserId()));
}

/* ------------------------------------------------------------------------
 * The DBA's view of the group table: mqlog.group_slots,
 * mq_remove_group_members
 * ------------------------------------------------------------------------ */

/*
 * Every member slot in use, server-wide (the table is shared by all
 * databases).  Granted to mqlog_admin; the groups of other databases are
 * shown only to roles with the privileges of pg_read_all_stats, as
 * pg_stat_activity shows other sessions' queries.
 */
/* a group_slots row's database_oid and database (null if it is gone) */
static void
slot_database(Oid dboid, Datum *values, bool *nulls)
{
	char	   *db = get_database_name(dboid);

	values[0] = ObjectIdGetDatum(dboid);
	if (db)
		values[1] = CStringGetTextDatum(db);
	else
		nulls[1] = true;
}

Datum
mqlog_group_slots(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	MqMemberInfo *members;
	MqExternalGroupInfo *external;
	int			n;

	MqGroupsCheckReady();
	InitMaterializedSRF(fcinfo, 0);
	members = MqGroupMembers(all, &n);
	for (int i = 0; i < n; i++)
	{
		MqMemberInfo *m = &members[i];
		Datum		values[9];
		bool		nulls[9] = {0};

		slot_database(m->dboid, values, nulls);
		values[2] = CStringGetTextDatum(m->group);
		values[3] = CStringGetTextDatum(m->member_id);
		values[4] = Int32GetDatum(m->pid);
		values[5] = TimestampTzGetDatum(m->last_poll);
		values[6] = Int32GetDatum(m->max_poll_interval_ms);
		values[7] = Int32GetDatum(m->nassigned);
		nulls[8] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	/* the Kafka listener's groups: a group slot each, no member slot */
	external = MqGroupsHostedExternally(all, &n);
	for (int i = 0; i < n; i++)
	{
		MqExternalGroupInfo *g = &external[i];
		Datum		values[9];
		bool		nulls[9] = {false, false, false, true, false, true, true, true, false};

		slot_database(g->dboid, values, nulls);
		values[2] = CStringGetTextDatum(g->group);
		values[4] = Int32GetDatum(g->pid);
		values[8] = Int32GetDatum(g->members);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * Free a group's member slots in this database: its members are removed
 * when the transaction commits, whatever their max_poll_interval_ms, and
 * the group is rebalanced; a live session rejoins at its next poll (and a
 * transaction of its that polled before cannot commit).  EXECUTE is
 * mqlog_admin's: it acts on any group, without the group's access check.
 */
Datum
mq_remove_group_members(PG_FUNCTION_ARGS)
{
	char	   *group;

	MqGroupsCheckReady();
	group = group_arg(fcinfo, 0);
	PreventCommandIfReadOnly("mq_remove_group_members");
	PG_RETURN_INT32(MqGroupRemoveMembers(group));
}
