/*-------------------------------------------------------------------------
 *
 * sasl.c
 *		SASL authentication of Kafka connections: SaslHandshake (key 17,
 *		v0-v1) and SaslAuthenticate (key 36, v0-v2), and the mechanism
 *		PLAIN (RFC 4616) checked against a PostgreSQL role's password.
 *
 * With mqlog.kafka_sasl_mechanisms set, a connection starts in
 * WAIT_HANDSHAKE and request.c lets through only ApiVersions and the two
 * SASL APIs until it is DONE; any other request closes the connection.
 * SaslHandshake v1 is followed by SaslAuthenticate requests; v0 (Kafka's
 * legacy form, kafka-python 2.0's) by one bare token frame, answered by a
 * bare (empty) token on success and a closed connection on failure, as
 * Kafka's broker does.  A failed SaslAuthenticate is answered with
 * SASL_AUTHENTICATION_FAILED and a message, then the connection closes.
 *
 * PLAIN's password is checked as PostgreSQL's own password authentication
 * checks one (libpq/crypt.h): get_role_password refuses a role with no
 * password or whose rolvaliduntil has passed, plain_crypt_verify compares
 * against a SCRAM-SHA-256 or md5 secret; a role without rolcanlogin is
 * refused as by InitializeSessionUserId.  This reads pg_authid's syscache,
 * so SaslAuthenticate runs in a transaction (request.c), as the worker's
 * own user: nothing of the client's runs before it is authenticated.  The
 * client learns only that authentication failed; the server log says why.
 *
 * Not built: SCRAM-SHA-256 (its server side in PostgreSQL, libpq/scram.h,
 * is written for the frontend protocol's SASL exchange).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "libpq/crypt.h"
#include "utils/syscache.h"

#include "kafka/internal.h"

#define PLAIN_FAILED "Authentication failed: Invalid username or password"

/*
 * Check a PLAIN token (authzid NUL authcid NUL password).  true with *role
 * set; false with *message for the client and a LOG line saying why.
 */
static bool
plain_authenticate(MqKafkaRequest *req, const char *token, int len, Oid *role,
				   const char **message)
{
	const char *nul1 = token ? memchr(token, '\0', len) : NULL;
	const char *nul2 = NULL;
	const char *logdetail = NULL;
	char	   *user;
	char	   *password;
	char	   *shadow;
	HeapTuple	tup;
	bool		canlogin;
	Oid			roleid;

	if (nul1)
		nul2 = memchr(nul1 + 1, '\0', len - (nul1 + 1 - token));
	if (nul2 == NULL || memchr(nul2 + 1, '\0', len - (nul2 + 1 - token)) != NULL)
	{
		*message = "Authentication failed: malformed PLAIN token";
		ereport(LOG,
				(errmsg("Kafka client \"%s\" sent a malformed SASL PLAIN token",
						req->client_id ? req->client_id : "")));
		return false;
	}
	user = pstrdup(nul1 + 1);
	password = pnstrdup(nul2 + 1, len - (nul2 + 1 - token));
	*message = PLAIN_FAILED;
	if (nul1 != token && strcmp(token, user) != 0)
	{
		*message = "Authentication failed: the authorization id differs from the user name";
		logdetail = "PLAIN's authorization id names another role than its user name.";
	}
	else if (user[0] == '\0' || password[0] == '\0')
		logdetail = "The user name or the password is empty.";
	else if (!HeapTupleIsValid(tup = SearchSysCache1(AUTHNAME, CStringGetDatum(user))))
		logdetail = "Role does not exist.";
	else
	{
		canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
		roleid = ((Form_pg_authid) GETSTRUCT(tup))->oid;
		ReleaseSysCache(tup);
		if (!canlogin)
			logdetail = "Role is not permitted to log in.";
		else if ((shadow = get_role_password(user, &logdetail)) != NULL &&
				 plain_crypt_verify(user, shadow, password, &logdetail) == STATUS_OK)
		{
			*role = roleid;
			ereport(DEBUG1,
					(errmsg("Kafka client \"%s\" authenticated as role \"%s\" with SASL PLAIN",
							req->client_id ? req->client_id : "", user)));
			return true;
		}
	}
	ereport(LOG,
			(errcode(ERRCODE_INVALID_PASSWORD),
			 errmsg("Kafka client \"%s\": SASL PLAIN authentication failed for user \"%s\"",
					req->client_id ? req->client_id : "", user),
			 logdetail ? errdetail_log("%s", logdetail) : 0));
	return false;
}

/* no transaction: it reads nothing of the database */
MqKafkaOutcome
MqKafkaSaslHandshake(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaSession *s = req->session;
	char	   *mechanism = MqKafkaReadString(&req->body, false, NULL);
	const char *names[8];
	int			n = MqKafkaSaslList(names, lengthof(names));
	int16		code;

	if (req->body.failed)
		return MQK_CLOSE;
	if (s->state != MQK_SASL_WAIT_HANDSHAKE)
		code = MQK_ILLEGAL_SASL_STATE;	/* no SASL here, or done already */
	else if (mechanism == NULL || !MqKafkaSaslEnabled(mechanism))
		code = MQK_UNSUPPORTED_SASL_MECHANISM;
	else
	{
		code = MQK_NONE;
		s->state = req->api_version == 0 ? MQK_SASL_WAIT_RAW : MQK_SASL_WAIT_AUTHENTICATE;
	}
	MqKafkaWriteInt16(out, code);
	MqKafkaWriteArrayLen(out, false, n);
	for (int i = 0; i < n; i++)
		MqKafkaWriteString(out, false, names[i]);
	if (code != MQK_NONE)
		ereport(LOG,
				(errmsg("Kafka client \"%s\" sent SaslHandshake for mechanism \"%s\", answered with error %d; closing its connection",
						req->client_id ? req->client_id : "", mechanism ? mechanism : "", code)));
	return code == MQK_NONE ? MQK_RESPOND : MQK_RESPOND_CLOSE;
}

/*
 * In a transaction, as the worker's user.  A bare token (after
 * SaslHandshake v0) comes with the whole frame as req->body.
 */
MqKafkaOutcome
MqKafkaSaslAuthenticate(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaSession *s = req->session;
	MqKafkaReader *r = &req->body;
	bool		raw = (s->state == MQK_SASL_WAIT_RAW);
	const char *token;
	int			len;
	int16		code = MQK_NONE;
	const char *message = NULL;
	Oid			role = InvalidOid;

	if (raw)
	{
		token = r->data;
		len = r->len;
	}
	else
	{
		token = MqKafkaReadBytes(r, req->flexible, &len);
		MqKafkaSkipTags(r, req->flexible);
		if (r->failed)
			return MQK_CLOSE;
	}
	if (!raw && s->state != MQK_SASL_WAIT_AUTHENTICATE)
	{
		code = MQK_ILLEGAL_SASL_STATE;
		message = s->state == MQK_SASL_DONE ? "Already authenticated" :
			"SaslAuthenticate before SaslHandshake";
	}
	else if (!plain_authenticate(req, token, len, &role, &message))
		code = MQK_SASL_AUTHENTICATION_FAILED;
	else
	{
		s->state = MQK_SASL_DONE;
		s->role = role;
	}

	if (raw)
		return code == MQK_NONE ? MQK_RESPOND : MQK_CLOSE;	/* empty token */
	MqKafkaWriteInt16(out, code);
	MqKafkaWriteString(out, req->flexible, message);
	MqKafkaWriteBytes(out, req->flexible, "", 0);	/* PLAIN's server token */
	if (req->api_version >= 1)
		MqKafkaWriteInt64(out, 0);	/* session_lifetime_ms: no re-authentication */
	MqKafkaWriteTags(out, req->flexible);
	return code == MQK_NONE ? MQK_RESPOND : MQK_RESPOND_CLOSE;
}
