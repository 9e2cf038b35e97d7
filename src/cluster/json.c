/*-------------------------------------------------------------------------
 *
 * json.c
 *		Reading JSON documents with PostgreSQL's jsonb (jsonb_in parses, the
 *		container functions look fields up), and writing string fields.
 *
 * A field that is absent reads as NULL, 0 or false, which is also how
 * etcd's gateway writes a field at its protobuf default.  etcd writes its
 * int64 fields as JSON strings; both strings and numbers are read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "cluster/json.h"

/* the root of a parsed document; invalid JSON raises jsonb_in's error */
JsonbContainer *
MqJsonParse(const char *text)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));

	return &jb->root;
}

JsonbValue *
MqJsonField(JsonbContainer *c, const char *key)
{
	if (c == NULL || !JsonContainerIsObject(c))
		return NULL;
	return getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
}

/* a field that is an object or an array, or NULL */
JsonbContainer *
MqJsonObject(JsonbContainer *c, const char *key)
{
	JsonbValue *v = MqJsonField(c, key);

	if (v == NULL || v->type != jbvBinary)
		return NULL;
	return v->val.binary.data;
}

char *
MqJsonString(JsonbContainer *c, const char *key)
{
	JsonbValue *v = MqJsonField(c, key);

	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

int64
MqJsonInt64(JsonbContainer *c, const char *key)
{
	JsonbValue *v = MqJsonField(c, key);

	if (v == NULL)
		return 0;
	if (v->type == jbvString)
		return pg_strtoint64(pnstrdup(v->val.string.val, v->val.string.len));
	if (v->type == jbvNumeric)
		return DatumGetInt64(DirectFunctionCall1(numeric_int8,
												 NumericGetDatum(v->val.numeric)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("JSON field \"%s\" is not a number", key)));
	return 0;					/* keep compiler quiet */
}

bool
MqJsonBool(JsonbContainer *c, const char *key)
{
	JsonbValue *v = MqJsonField(c, key);

	return v != NULL && v->type == jbvBool && v->val.boolean;
}

/* an array of strings (other elements are skipped); NIL if absent */
List *
MqJsonStringArray(JsonbContainer *c, const char *key)
{
	JsonbContainer *arr = MqJsonObject(c, key);
	List	   *result = NIL;
	uint32		n;

	if (arr == NULL || !JsonContainerIsArray(arr))
		return NIL;
	n = JsonContainerSize(arr);
	for (uint32 i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		if (e != NULL && e->type == jbvString)
			result = lappend(result, pnstrdup(e->val.string.val, e->val.string.len));
	}
	return result;
}

/* a field of any type as JSON text (an object stays an object), or NULL */
char *
MqJsonText(JsonbContainer *c, const char *key)
{
	JsonbValue *v = MqJsonField(c, key);

	if (v == NULL)
		return NULL;
	if (v->type == jbvBinary)
		return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	return JsonbToCString(NULL, &JsonbValueToJsonb(v)->root, 0);
}

/* "key":"value" (value escaped; NULL writes null), with a comma unless first */
void
MqJsonAppendField(StringInfo buf, bool first, const char *key, const char *value)
{
	if (!first)
		appendStringInfoChar(buf, ',');
	escape_json(buf, key);
	appendStringInfoChar(buf, ':');
	if (value)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

/*
 * A document that may not be JSON at all (a value some other program put
 * in etcd): NULL then, instead of an error.
 */
JsonbContainer *
MqJsonTryParse(const char *text)
{
	MemoryContext cxt = CurrentMemoryContext;
	JsonbContainer *volatile result = NULL;

	PG_TRY();
	{
		result = MqJsonParse(text);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		result = NULL;
	}
	PG_END_TRY();
	return result;
}

/* a string field of such a document, or NULL */
char *
MqJsonTryString(const char *text, const char *key)
{
	return MqJsonString(MqJsonTryParse(text), key);
}
