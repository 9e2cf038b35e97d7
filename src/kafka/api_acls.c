/*-------------------------------------------------------------------------
 *
 * api_acls.c
 *		DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
 *		v0-v3 (v2+ flexible): Kafka's ACL bindings as a view of mqlog's
 *		grants, mq_grant and mq_revoke on topics, mq_grant_group and
 *		mq_revoke_group on consumer groups, run as the request's role.
 *
 * There is one privilege system, PostgreSQL roles and mqlog's grants; the
 * ACL APIs read and change it and keep nothing of their own.  A binding
 * maps onto a grant only where the two mean the same thing, so that what
 * a Kafka client creates is what SQL then shows and enforces, and what it
 * describes is what is stored:
 *
 *	TOPIC, LITERAL name	 ALL = all, READ = consume, WRITE = produce,
 *						 DESCRIBE = describe, ALTER = alter
 *	GROUP, LITERAL name	 ALL = mq_grant_group (the whole use of the group)
 *	principal			 User:<role> a role as pg_roles spells it; User:* PUBLIC
 *	host, permission	 * and ALLOW only
 *
 * Anything else (PREFIXED patterns, the wildcard name "*", DENY, a host,
 * CLUSTER and the other resource types, operations such as READ on a
 * group, whose mqlog grant also lets a role delete the group) is refused
 * with INVALID_REQUEST and a message saying what mqlog can express, and
 * changes nothing.  A grant of all four topic privileges is listed as one
 * ALL binding, any other as one binding per privilege.
 *
 * Who may do what is the SQL functions' rule, checked by the same code: a
 * role creates and deletes bindings on the topics and groups it may grant
 * on (their owner, mqlog_admin), else CLUSTER_AUTHORIZATION_FAILED, as
 * Kafka answers a principal without Alter on the cluster; it describes the
 * grants it could revoke and no others (MqGrantsOf), the rows SQL's view
 * mqlog.grants shows it.  Each creation and
 * each deletion is a subtransaction of the request's transaction, and a
 * filter's listing reads the catalog a page of grants at a time, for at
 * most MQK_REQUEST_TIME_MS in all (the rest are answered REQUEST_TIMED_OUT
 * untouched: a DescribeAcls whose filter matches more than that time can
 * read is REQUEST_TIMED_OUT, with a message to narrow it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "log/topic.h"
#include "acl/acl.h"
#include "groups/groups.h"
#include "kafka/kafka_internal.h"

/* Kafka's ResourceType (v3 adds USER, the last) */
#define RES_UNKNOWN		0
#define RES_ANY			1
#define RES_TOPIC		2
#define RES_GROUP		3
#define RES_LAST		7

/* Kafka's PatternType */
#define PAT_UNKNOWN		0
#define PAT_ANY			1
#define PAT_MATCH		2
#define PAT_LITERAL		3
#define PAT_PREFIXED	4

/* Kafka's AclOperation */
#define OP_UNKNOWN		0
#define OP_ANY			1
#define OP_ALL			2
#define OP_READ			3
#define OP_WRITE		4
#define OP_ALTER		7
#define OP_DESCRIBE		8
#define OP_LAST			14

/* Kafka's AclPermissionType */
#define PERM_UNKNOWN	0
#define PERM_ANY		1
#define PERM_DENY		2
#define PERM_ALLOW		3

static const char *const resource_names[] = {
	"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"
};
static const char *const pattern_names[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};
static const char *const operation_names[] = {
	"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
	"DESCRIBE_TOKENS"
};

/*
 * The operations that are a grant, per resource type, in the order a
 * grant's bindings are listed.  Kafka's Delete and AlterConfigs on a topic
 * are part of mqlog's alter, its DescribeConfigs of describe: they are not
 * bindings of their own, since creating one would grant more than it says.
 */
typedef struct OpMap
{
	int8		resource;
	int8		operation;
	int			privs;
} OpMap;

static const OpMap op_map[] = {
	{RES_TOPIC, OP_ALL, MQ_PRIV_ALL},
	{RES_TOPIC, OP_READ, MQ_PRIV_CONSUME},
	{RES_TOPIC, OP_WRITE, MQ_PRIV_PRODUCE},
	{RES_TOPIC, OP_DESCRIBE, MQ_PRIV_DESCRIBE},
	{RES_TOPIC, OP_ALTER, MQ_PRIV_ALTER},
	{RES_GROUP, OP_ALL, MQ_PRIV_ALL},
};

/* a binding (CreateAcls) or a filter (DescribeAcls, DeleteAcls) as sent */
typedef struct Binding
{
	int8		resource;
	char	   *name;			/* a filter's NULL: any */
	int8		pattern;
	char	   *principal;		/* a filter's NULL: any */
	char	   *host;			/* a filter's NULL: any */
	int8		operation;
	int8		permission;
} Binding;

/*
 * A grant's change (a creation, or the deletion of a binding a filter
 * matched), and its answer
 */
typedef struct Change
{
	int8		resource;
	char	   *name;
	Oid			grantee;
	int8		operation;
	int			privs;
	bool		grant;
	int16		error;
	char	   *message;
} Change;

static const char *
name_of(const char *const *names, int n, int8 code)
{
	return code >= 0 && code < n ? names[code] : "UNKNOWN";
}

static void
read_binding(MqKafkaRequest *req, Binding *b)
{
	MqKafkaReader *r = &req->body;
	bool		f = req->flexible;

	b->resource = MqKafkaReadInt8(r);
	b->name = MqKafkaReadString(r, f, NULL);
	b->pattern = req->api_version >= 1 ? MqKafkaReadInt8(r) : PAT_LITERAL;
	b->principal = MqKafkaReadString(r, f, NULL);
	b->host = MqKafkaReadString(r, f, NULL);
	b->operation = MqKafkaReadInt8(r);
	b->permission = MqKafkaReadInt8(r);
	MqKafkaSkipTags(r, f);
}

/* the bindings (or filters) of a CreateAcls (DeleteAcls); NULL: malformed */
static Binding *
read_bindings(MqKafkaRequest *req, int32 *n)
{
	MqKafkaReader *r = &req->body;
	Binding    *b;

	*n = MqKafkaReadArrayLen(r, req->flexible, 7);
	if (*n < 0)
		return NULL;
	b = palloc0(sizeof(Binding) * (*n + 1));
	for (int i = 0; i < *n && !r->failed; i++)
		read_binding(req, &b[i]);
	MqKafkaSkipTags(r, req->flexible);
	return r->failed ? NULL : b;
}

/*
 * A principal's grantee: User:* is PUBLIC (InvalidOid), User:<role> the
 * role as pg_roles spells it.  False, with why, for any other principal.
 */
static bool
principal_grantee(const char *principal, Oid *grantee, char **why)
{
	*grantee = InvalidOid;
	if (principal == NULL || strncmp(principal, "User:", 5) != 0)
	{
		*why = psprintf("principal \"%s\" is not supported: mqlog grants to roles, named User:<role> (User:* is PUBLIC)",
						principal ? principal : "");
		return false;
	}
	if (strcmp(principal + 5, "*") == 0)
		return true;
	*grantee = get_role_oid(principal + 5, true);
	if (!OidIsValid(*grantee))
	{
		*why = psprintf("role \"%s\" does not exist", principal + 5);
		return false;
	}
	return true;
}

static char *
principal_of(Oid grantee)
{
	const char *name;

	if (!OidIsValid(grantee))
		return "User:*";
	name = GetUserNameFromId(grantee, true);
	return name ? psprintf("User:%s", name) : psprintf("User:%u", grantee);
}

static const OpMap *
op_of(int8 resource, int8 operation)
{
	for (int i = 0; i < lengthof(op_map); i++)
		if (op_map[i].resource == resource && op_map[i].operation == operation)
			return &op_map[i];
	return NULL;
}

/*
 * Why a filter is not one (Kafka's AclBindingFilter.isUnknown: a field
 * UNKNOWN or out of range), or NULL
 */
static char *
filter_invalid(const Binding *f)
{
	if (f->resource <= RES_UNKNOWN || f->resource > RES_LAST)
		return psprintf("unknown resource type %d", f->resource);
	if (f->pattern <= PAT_UNKNOWN || f->pattern > PAT_PREFIXED)
		return psprintf("unknown pattern type %d", f->pattern);
	if (f->operation <= OP_UNKNOWN || f->operation > OP_LAST)
		return psprintf("unknown operation %d", f->operation);
	if (f->permission <= PERM_UNKNOWN || f->permission > PERM_ALLOW)
		return psprintf("unknown permission type %d", f->permission);
	return NULL;
}

/*
 * Can a filter match any binding of this resource type, whatever its
 * name, principal and operation?  Every binding mqlog has is LITERAL,
 * for host * and ALLOW.
 */
static bool
filter_reaches(const Binding *f, int8 resource)
{
	return (f->resource == RES_ANY || f->resource == resource) &&
		f->pattern != PAT_PREFIXED &&
		(f->host == NULL || strcmp(f->host, "*") == 0) &&
		(f->permission == PERM_ANY || f->permission == PERM_ALLOW);
}

/*
 * One page of the grants of a resource type (MqGrantsOf) that the filter
 * matches, appended to *out as Changes revoking each: a grant of every
 * privilege is one ALL binding, another one binding per privilege
 */
static void
page_matching(const Binding *f, int8 kind, bool any_grantee, Oid grantee, MqGrantPage *page,
			  List **out)
{
	List	   *grants = kind == RES_TOPIC ? MqTopicGrants(f->name, any_grantee, grantee, page)
		: MqGroupGrants(f->name, any_grantee, grantee, page);
	ListCell   *lc;

	foreach(lc, grants)
	{
		MqGrant    *g = lfirst(lc);

		for (int i = 0; i < lengthof(op_map); i++)
		{
			const OpMap *m = &op_map[i];
			bool		listed;
			Change	   *c;

			if (m->resource != kind)
				continue;
			listed = (g->privs == MQ_PRIV_ALL) ? (m->privs == MQ_PRIV_ALL)
				: (m->privs != MQ_PRIV_ALL && (g->privs & m->privs) != 0);
			if (!listed || (f->operation != OP_ANY && f->operation != m->operation))
				continue;
			c = palloc0(sizeof(Change));
			c->resource = kind;
			c->name = g->object;
			c->grantee = g->grantee;
			c->operation = m->operation;
			c->privs = m->privs;
			*out = lappend(*out, c);
		}
	}
	list_free(grants);
}

/*
 * The bindings of the stored grants that the filter matches, among those
 * the role may see, in *out.  The grants are read GRANT_PAGE catalog rows
 * at a time, each page a unit of the request's time (MqKafkaOutOfTime):
 * a filter that matches more than that time can read (a million grants)
 * holds the listener no longer, nor more memory than a page and the
 * bindings read by then.  False when the time was up before the listing
 * was whole.
 */
#define GRANT_PAGE 1000

static bool
matching(MqKafkaRequest *req, const Binding *f, int *attempted, List **out)
{
	static const int8 kinds[] = {RES_TOPIC, RES_GROUP};
	bool		any_grantee = (f->principal == NULL);
	Oid			grantee = InvalidOid;
	char	   *why;

	*out = NIL;
	if (!any_grantee && !principal_grantee(f->principal, &grantee, &why))
		return true;			/* no grant is to such a principal */
	for (int k = 0; k < lengthof(kinds); k++)
	{
		MqGrantPage page = {.limit = GRANT_PAGE};

		if (!filter_reaches(f, kinds[k]))
			continue;
		while (!page.done)
		{
			if (MqKafkaOutOfTime(req, attempted))
				return false;
			page_matching(f, kinds[k], any_grantee, grantee, &page, out);
		}
	}
	return true;
}

/*
 * The grant a binding to create is, in *c; else INVALID_REQUEST and why:
 * the binding is not one mqlog can express
 */
static int16
creation_of(const Binding *b, Change *c, char **why)
{
	const OpMap *m;

	c->resource = b->resource;
	c->name = b->name;
	c->operation = b->operation;
	c->grant = true;
	*why = NULL;
	if (b->resource == RES_ANY || b->resource <= RES_UNKNOWN || b->resource > RES_LAST)
		*why = psprintf("resource type %s is not a resource: a binding names TOPIC or GROUP",
						name_of(resource_names, lengthof(resource_names), b->resource));
	else if (b->resource != RES_TOPIC && b->resource != RES_GROUP)
		*why = psprintf("resource type %s is not supported: mqlog grants on topics (TOPIC) and consumer groups (GROUP) only",
						resource_names[b->resource]);
	else if (b->pattern == PAT_PREFIXED)
		*why = pstrdup("pattern type PREFIXED is not supported: a mqlog grant names one topic or group (LITERAL)");
	else if (b->pattern != PAT_LITERAL)
		*why = psprintf("pattern type %s is a filter, not a pattern: a binding is LITERAL",
						name_of(pattern_names, lengthof(pattern_names), b->pattern));
	else if (b->name == NULL)
		*why = pstrdup("a binding must name its resource");
	else if (strcmp(b->name, "*") == 0)
		*why = pstrdup("the wildcard resource name \"*\" is not supported: a mqlog grant names one topic or group (members of mqlog_admin hold every privilege on every topic and group)");
	else if (!principal_grantee(b->principal, &c->grantee, why))
		 /* why is set */ ;
	else if (b->host == NULL || strcmp(b->host, "*") != 0)
		*why = psprintf("host \"%s\" is not supported: mqlog's privileges do not depend on the client's address (use *)",
						b->host ? b->host : "");
	else if (b->permission == PERM_DENY)
		*why = pstrdup("permission type DENY is not supported: mqlog's privileges are grants (ALLOW) only; delete the ALLOW binding instead");
	else if (b->permission != PERM_ALLOW)
		*why = psprintf("permission type %d is not a permission: a binding is ALLOW", b->permission);
	else if ((m = op_of(b->resource, b->operation)) == NULL)
		*why = psprintf("operation %s on a %s has no mqlog privilege: %s",
						name_of(operation_names, lengthof(operation_names), b->operation),
						b->resource == RES_TOPIC ? "topic" : "group",
						b->resource == RES_TOPIC ?
						"a topic's are ALL, READ, WRITE, DESCRIBE and ALTER (mqlog's all, consume, produce, describe and alter; alter also covers Delete and AlterConfigs)" :
						"a group's is ALL (mq_grant_group lets a role use the whole group: read, describe and delete it)");
	else
		c->privs = m->privs;
	return *why ? MQK_INVALID_REQUEST : MQK_NONE;
}

/* a change in a subtransaction (MqKafkaTryAdmin): the SQL functions' calls */
static void
change_unit(void *arg)
{
	Change	   *c = arg;

	if (c->resource == RES_TOPIC)
		MqTopicChangeAcl(MqTopicLookup(c->name, false), c->grantee, c->privs, c->grant);
	else
	{
		MqCheckGroupName(c->name);
		MqGroupGrant(c->name, c->grantee, c->grant);
	}
}

/* a change's refusal: who may not grant is refused as Kafka refuses it */
static int16
change_error(int sqlerrcode, void *arg)
{
	Change	   *c = arg;

	switch (sqlerrcode)
	{
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return MQK_CLUSTER_AUTHORIZATION_FAILED;
		case ERRCODE_UNDEFINED_OBJECT:
			return c->resource == RES_TOPIC ? MQK_UNKNOWN_TOPIC_OR_PARTITION : MQK_INVALID_REQUEST;
		case ERRCODE_INVALID_NAME:
			return MQK_INVALID_REQUEST;
		default:
			return MqKafkaErrorOf(sqlerrcode, MQK_INVALID_REQUEST);
	}
}

#define NOT_ATTEMPTED "not attempted: the request's time was up; send it again"

/* run a change, unless the request's time is up */
static void
run_change(MqKafkaRequest *req, Change *c, int *attempted)
{
	if (MqKafkaOutOfTime(req, attempted))
	{
		c->error = MQK_REQUEST_TIMED_OUT;
		c->message = pstrdup(NOT_ATTEMPTED);
		return;
	}
	c->error = MqKafkaTryAdmin(change_unit, c, change_error, true, &c->message);
}

/*
 * A filter's bindings in *found, or its error (none: mqlog's absence) and
 * *message.  The listing counts as units of the request's time, a unit
 * per page of grants read (matching): a DescribeAcls that matches a
 * million grants, or a DeleteAcls of thousands of filters, reads the
 * catalog for MQK_REQUEST_TIME_MS at most.  A filter whose listing the
 * time cut short is REQUEST_TIMED_OUT with none of its bindings, so a
 * DeleteAcls revokes nothing for it.
 */
static int16
filter_run(MqKafkaRequest *req, const Binding *filter, char *none, int *attempted,
		   char **message, List **found)
{
	*found = NIL;
	if ((*message = none) != NULL)
		return MQK_SECURITY_DISABLED;
	if ((*message = filter_invalid(filter)) != NULL)
		return MQK_INVALID_REQUEST;
	if (MqKafkaOutOfTime(req, attempted))
	{
		*message = pstrdup(NOT_ATTEMPTED);
		return MQK_REQUEST_TIMED_OUT;
	}
	if (!matching(req, filter, attempted, found))
	{
		*found = NIL;
		*message = psprintf("the filter matches more grants than the request's time (%d ms) could read: narrow it to a resource name or a principal",
							MQK_REQUEST_TIME_MS);
		return MQK_REQUEST_TIMED_OUT;
	}
	return MQK_NONE;
}

/* without mqlog in the database there are no grants: Kafka's "no authorizer" */
static char *
no_grants(void)
{
	if (OidIsValid(get_extension_oid("mqlog", true)))
		return NULL;
	return psprintf("mqlog is not installed in database \"%s\": there are no grants",
					get_database_name(MyDatabaseId));
}

static void
write_binding_of(StringInfo out, MqKafkaRequest *req, const Change *c, bool resource)
{
	bool		f = req->flexible;

	if (resource)
	{
		MqKafkaWriteInt8(out, c->resource);
		MqKafkaWriteString(out, f, c->name);
		if (req->api_version >= 1)
			MqKafkaWriteInt8(out, PAT_LITERAL);
	}
	MqKafkaWriteString(out, f, principal_of(c->grantee));
	MqKafkaWriteString(out, f, "*");
	MqKafkaWriteInt8(out, c->operation);
	MqKafkaWriteInt8(out, PERM_ALLOW);
}

static bool
same_resource(List *changes, int i, int j)
{
	Change	   *a = list_nth(changes, i);
	Change	   *b = list_nth(changes, j);

	return a->resource == b->resource && strcmp(a->name, b->name) == 0;
}

MqKafkaOutcome
MqKafkaDescribeAcls(MqKafkaRequest *req, StringInfo out)
{
	bool		f = req->flexible;
	Binding		filter;
	char	   *message;
	int16		code;
	List	   *found;
	int			nfound;
	int			nresources = 0;
	int			attempted = 0;

	read_binding(req, &filter);
	if (req->body.failed)
		return MQK_CLOSE;
	code = filter_run(req, &filter, no_grants(), &attempted, &message, &found);

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, code);
	MqKafkaWriteString(out, f, message);
	/* the bindings come ordered by resource: one entry for each resource */
	nfound = list_length(found);
	for (int i = 0; i < nfound; i++)
		if (i == 0 || !same_resource(found, i - 1, i))
			nresources++;
	MqKafkaWriteArrayLen(out, f, nresources);
	for (int i = 0, j; i < nfound; i = j)
	{
		Change	   *c = list_nth(found, i);

		for (j = i + 1; j < nfound && same_resource(found, i, j); j++)
			;
		MqKafkaWriteInt8(out, c->resource);
		MqKafkaWriteString(out, f, c->name);
		if (req->api_version >= 1)
			MqKafkaWriteInt8(out, PAT_LITERAL);
		MqKafkaWriteArrayLen(out, f, j - i);
		for (int k = i; k < j; k++)
		{
			write_binding_of(out, req, list_nth(found, k), false);
			MqKafkaWriteTags(out, f);
		}
		MqKafkaWriteTags(out, f);
	}
	MqKafkaWriteTags(out, f);
	return MQK_RESPOND;
}

/* one CreateAcls creation's result: the binding made, or why not */
static void
write_creation(StringInfo out, MqKafkaRequest *req, const Binding *binding, char *none,
			   int *attempted)
{
	Change		c = {0};

	if ((c.error = creation_of(binding, &c, &c.message)) == MQK_NONE)
	{
		if (none)
		{
			c.error = MQK_SECURITY_DISABLED;
			c.message = none;
		}
		else
			run_change(req, &c, attempted);
	}
	MqKafkaWriteInt16(out, c.error);
	MqKafkaWriteString(out, req->flexible, c.message);
}

/*
 * One DeleteAcls filter's result: each binding the filter matched,
 * revoked on its own, with the outcome of each
 */
static void
write_deletion(StringInfo out, MqKafkaRequest *req, const Binding *filter, char *none,
			   int *attempted)
{
	bool		f = req->flexible;
	char	   *message;
	List	   *found;
	int16		code = filter_run(req, filter, none, attempted, &message, &found);
	ListCell   *lc;

	foreach(lc, found)
		run_change(req, lfirst(lc), attempted);
	MqKafkaWriteInt16(out, code);
	MqKafkaWriteString(out, f, message);
	MqKafkaWriteArrayLen(out, f, list_length(found));
	foreach(lc, found)
	{
		Change	   *c = lfirst(lc);

		MqKafkaWriteInt16(out, c->error);
		MqKafkaWriteString(out, f, c->message);
		write_binding_of(out, req, c, true);
		MqKafkaWriteTags(out, f);
	}
}

/*
 * CreateAcls and DeleteAcls alike: a list of bindings (filters, for a
 * deletion), each answered in its turn, all within the request's time
 */
static MqKafkaOutcome
change_acls(MqKafkaRequest *req, StringInfo out, bool deleting)
{
	bool		f = req->flexible;
	int32		n;
	Binding    *bindings = read_bindings(req, &n);
	char	   *none;
	int			attempted = 0;

	if (bindings == NULL)
		return MQK_CLOSE;
	none = no_grants();
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, f, n);
	for (int i = 0; i < n; i++)
	{
		if (deleting)
			write_deletion(out, req, &bindings[i], none, &attempted);
		else
			write_creation(out, req, &bindings[i], none, &attempted);
		MqKafkaWriteTags(out, f);
	}
	MqKafkaWriteTags(out, f);
	return MQK_RESPOND;
}

MqKafkaOutcome
MqKafkaCreateAcls(MqKafkaRequest *req, StringInfo out)
{
	return change_acls(req, out, false);
}

MqKafkaOutcome
MqKafkaDeleteAcls(MqKafkaRequest *req, StringInfo out)
{
	return change_acls(req, out, true);
}
