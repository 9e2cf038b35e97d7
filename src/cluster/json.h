/*-------------------------------------------------------------------------
 *
 * json.h
 *		Reading JSON documents with PostgreSQL's jsonb, for etcd's answers
 *		and the values mqlog stores in etcd (json.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_CLUSTER_JSON_H
#define MQLOG_CLUSTER_JSON_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

extern JsonbContainer *MqJsonParse(const char *text);
extern JsonbValue *MqJsonField(JsonbContainer *c, const char *key);
extern JsonbContainer *MqJsonObject(JsonbContainer *c, const char *key);
extern char *MqJsonString(JsonbContainer *c, const char *key);
extern int64 MqJsonInt64(JsonbContainer *c, const char *key);
extern bool MqJsonBool(JsonbContainer *c, const char *key);
extern List *MqJsonStringArray(JsonbContainer *c, const char *key);
extern JsonbContainer *MqJsonTryParse(const char *text);
extern char *MqJsonTryString(const char *text, const char *key);
extern char *MqJsonText(JsonbContainer *c, const char *key);
extern void MqJsonAppendField(StringInfo buf, bool first, const char *key, const char *value);

#endif							/* MQLOG_CLUSTER_JSON_H */
