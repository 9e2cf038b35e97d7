/*-------------------------------------------------------------------------
 *
 * api_sasl.c
 *		SASL authentication of Kafka connections: SaslHandshake (key 17,
 *		v0-v1) and SaslAuthenticate (key 36, v0-v2), and the mechanisms
 *		PLAIN (RFC 4616) and SCRAM-SHA-256 (RFC 5802, 7677) checked against
 *		a PostgreSQL role's password.
 *
 * With mqlog.kafka_sasl_mechanisms set, a connection starts in
 * WAIT_HANDSHAKE and request.c lets through only ApiVersions and the two
 * SASL APIs until it is DONE; any other request closes the connection.
 * SaslHandshake v1 is followed by SaslAuthenticate requests; v0 (Kafka's
 * legacy form, kafka-python 2.0's) by bare token frames, each answered by
 * a bare token, a failure by a closed connection, as Kafka's broker does.  A failed SaslAuthenticate is answered with
 * SASL_AUTHENTICATION_FAILED and a message, then the connection closes.
 *
 * PLAIN's password is checked as PostgreSQL's own password authentication
 * checks one (libpq/crypt.h): get_role_password refuses a role with no
 * password or whose rolvaliduntil has passed, plain_crypt_verify compares
 * against a SCRAM-SHA-256 or md5 secret; a role without rolcanlogin is
 * refused as by InitializeSessionUserId.  Checking a SCRAM secret costs
 * its PBKDF2 iterations (tens of milliseconds), an md5 one or a missing
 * one next to nothing: so an attempt that has no SCRAM secret to check
 * checks the password against a mock secret (made once, with the default
 * iterations) all the same, and a failed attempt takes as long whether or
 * not the role exists.  Repeated failures from one address are slowed
 * down by the listener (backoff.c).  This reads pg_authid's syscache,
 * so SaslAuthenticate runs in a transaction (request.c), as the worker's
 * own user: nothing of the client's runs before it is authenticated.  The
 * client learns only that authentication failed; the server log says why.
 *
 * SCRAM-SHA-256 verifies the client's proof against the role's stored
 * SCRAM secret (parse_scram_secret: its salt, iterations, StoredKey and
 * ServerKey), as PostgreSQL's own SCRAM exchange does, with PostgreSQL's
 * scram_H, HMAC and base64 functions; it needs a SCRAM secret (a role with
 * an md5 one can use PLAIN only).  A role that cannot authenticate (none,
 * NOLOGIN, no or expired or md5 password) still gets a server-first
 * message, with a salt derived from its name, and fails at the proof, so
 * the exchange does not tell which roles exist.  No channel binding
 * (SCRAM-SHA-256-PLUS, even over TLS): a gs2 header asking for it ("p=")
 * is refused.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "common/base64.h"
#include "common/hmac.h"
#include "common/scram-common.h"
#include "libpq/crypt.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "kafka/kafka_internal.h"

#define PLAIN_FAILED "Authentication failed: Invalid username or password"

/*
 * libpq/scram.h's, declared here: that header pulls in libpq-be.h, which
 * needs GSSAPI's headers, absent where PostgreSQL was built without them.
 */
extern bool parse_scram_secret(const char *secret, int *iterations, char **salt,
							   uint8 *stored_key, uint8 *server_key);
extern char *pg_be_scram_build_secret(const char *password);

StaticAssertDecl(MQK_SCRAM_KEY_LEN == SCRAM_KEY_LEN, "SCRAM key length");

/* a step of a mechanism's exchange */
typedef enum SaslStep
{
	STEP_DONE,					/* authenticated */
	STEP_CONTINUE,				/* a server token sent, another expected */
	STEP_FAILED
} SaslStep;

static const char *
client_name(MqKafkaRequest *req)
{
	return req->client_id ? req->client_id : "";
}

static void
log_failure(MqKafkaRequest *req, const char *mechanism, const char *user, const char *detail)
{
	ereport(LOG,
			(errcode(ERRCODE_INVALID_PASSWORD),
			 errmsg("Kafka client \"%s\": SASL %s authentication failed for user \"%s\"",
					client_name(req), mechanism, user),
			 detail ? errdetail_log("%s", detail) : 0));
}

bool
MqKafkaLoginRole(const char *user, Oid *role, const char **logdetail)
{
	HeapTuple	tup;
	bool		canlogin;

	*logdetail = NULL;
	if (user[0] == '\0')
	{
		*logdetail = "The user name is empty.";
		return false;
	}
	tup = SearchSysCache1(AUTHNAME, CStringGetDatum(user));
	if (!HeapTupleIsValid(tup))
	{
		*logdetail = "Role does not exist.";
		return false;
	}
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	*role = ((Form_pg_authid) GETSTRUCT(tup))->oid;
	ReleaseSysCache(tup);
	if (!canlogin)
	{
		*logdetail = "Role is not permitted to log in.";
		return false;
	}
	return true;
}

/*
 * The stored password of a role that may log in, as PostgreSQL's password
 * authentication finds it; NULL with *logdetail when there is none (no
 * such role, NOLOGIN, no password, rolvaliduntil passed).
 */
static char *
role_secret(const char *user, Oid *role, const char **logdetail)
{
	if (!MqKafkaLoginRole(user, role, logdetail))
		return NULL;
	return get_role_password(user, logdetail);
}

/*
 * The same work as checking a password against a SCRAM secret, for an
 * attempt that has none to check (see the top of the file)
 */
static void
check_mock_secret(const char *user, const char *password)
{
	static char *mock = NULL;
	const char *ignored;

	if (mock == NULL)
		mock = MemoryContextStrdup(TopMemoryContext,
								   pg_be_scram_build_secret("mqlog kafka mock secret"));
	(void) plain_crypt_verify(user, mock, password, &ignored);
}

/* PLAIN: one token, authzid NUL authcid NUL password */
static SaslStep
plain_step(MqKafkaRequest *req, const char *token, int len, Oid *role,
		   const char **message)
{
	const char *nul1 = token ? memchr(token, '\0', len) : NULL;
	const char *nul2 = NULL;
	const char *logdetail = NULL;
	char	   *user;
	char	   *password;
	char	   *shadow = NULL;

	if (nul1)
		nul2 = memchr(nul1 + 1, '\0', len - (nul1 + 1 - token));
	if (nul2 == NULL || memchr(nul2 + 1, '\0', len - (nul2 + 1 - token)) != NULL)
	{
		*message = "Authentication failed: malformed PLAIN token";
		ereport(LOG,
				(errmsg("Kafka client \"%s\" sent a malformed SASL PLAIN token",
						client_name(req))));
		return STEP_FAILED;
	}
	user = pstrdup(nul1 + 1);
	password = pnstrdup(nul2 + 1, len - (nul2 + 1 - token));
	*message = PLAIN_FAILED;
	if (nul1 != token && strcmp(token, user) != 0)
	{
		*message = "Authentication failed: the authorization id differs from the user name";
		logdetail = "PLAIN's authorization id names another role than its user name.";
	}
	else if (password[0] == '\0')
		logdetail = "The password is empty.";
	else if ((shadow = role_secret(user, role, &logdetail)) == NULL ||
			 get_password_type(shadow) != PASSWORD_TYPE_SCRAM_SHA_256)
		check_mock_secret(user, password);
	if (logdetail == NULL && shadow != NULL &&
		plain_crypt_verify(user, shadow, password, &logdetail) == STATUS_OK)
	{
		ereport(DEBUG1,
				(errmsg("Kafka client \"%s\" authenticated as role \"%s\" with SASL PLAIN",
						client_name(req), user)));
		return STEP_DONE;
	}
	log_failure(req, "PLAIN", user, logdetail);
	return STEP_FAILED;
}

/* ------------------------------------------------------------------------
 * SCRAM-SHA-256
 * ------------------------------------------------------------------------ */

/* base64 of len bytes into a palloc'd string */
static char *
b64(const uint8 *data, int len)
{
	char	   *out = palloc(pg_b64_enc_len(len) + 1);
	int			n = pg_b64_encode((const char *) data, len, out, pg_b64_enc_len(len));

	out[Max(n, 0)] = '\0';
	return out;
}

static void
hmac_sha256(const uint8 *key, const char *msg, int msglen, uint8 *result)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL || pg_hmac_init(ctx, key, SCRAM_KEY_LEN) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) msg, msglen) < 0 ||
		pg_hmac_final(ctx, result, SCRAM_KEY_LEN) < 0)
		elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	pg_hmac_free(ctx);
}

/*
 * A saslname (RFC 5802: "=2C" for ",", "=3D" for "="), up to the next ','
 * or the end; NULL if malformed.  *p moves past it.
 */
static char *
read_saslname(const char **p)
{
	StringInfoData buf;
	const char *s = *p;

	initStringInfo(&buf);
	while (*s && *s != ',')
	{
		if (*s == '=')
		{
			if (strncmp(s, "=2C", 3) == 0)
				appendStringInfoChar(&buf, ',');
			else if (strncmp(s, "=3D", 3) == 0)
				appendStringInfoChar(&buf, '=');
			else
				return NULL;
			s += 3;
		}
		else
			appendStringInfoChar(&buf, *s++);
	}
	*p = s;
	return buf.data;
}

/* an attribute "x=value" at *p (value up to ',' or the end), or NULL */
static char *
read_attr(const char **p, char attr)
{
	const char *s = *p;
	const char *end;

	if (s[0] != attr || s[1] != '=')
		return NULL;
	s += 2;
	end = strchr(s, ',');
	if (end == NULL)
		end = s + strlen(s);
	*p = end;
	return pnstrdup(s, end - s);
}

/*
 * The client-first message: gs2 header ("n,," or "y,," with an optional
 * "a=authzid"), then "n=user,r=nonce" and extensions.  Answers the
 * server-first message.
 */
static SaslStep
scram_first(MqKafkaRequest *req, MqKafkaScram *sc, const char *msg, StringInfo reply,
			const char **message)
{
	const char *p = msg;
	const char *bare;
	char	   *authzid = NULL;
	char	   *user;
	char	   *cnonce;
	char	   *shadow;
	const char *logdetail = NULL;
	char	   *salt = NULL;
	int			iterations = 0;
	uint8		raw[SCRAM_RAW_NONCE_LEN];
	char	   *server_first;
	Oid			role = InvalidOid;

	*message = "Authentication failed: malformed SCRAM client-first message";
	if ((p[0] != 'n' && p[0] != 'y') || p[1] != ',')
		goto malformed;		/* 'p': channel binding, not offered */
	p += 2;
	if (p[0] == 'a')
	{
		const char *q = p + 2;

		if (p[1] != '=' || (authzid = read_saslname(&q)) == NULL)
			goto malformed;
		p = q;
	}
	if (*p++ != ',')
		goto malformed;
	bare = p;
	if (p[0] != 'n' || p[1] != '=')
		goto malformed;
	p += 2;
	if ((user = read_saslname(&p)) == NULL || *p++ != ',' ||
		(cnonce = read_attr(&p, 'r')) == NULL || cnonce[0] == '\0')
		goto malformed;
	for (const char *c = cnonce; *c; c++)
		if (*c < 0x21 || *c > 0x7e || *c == ',')
			goto malformed;
	if (strlen(bare) > MQK_SCRAM_MAX_MESSAGE / 2 || strlen(user) >= sizeof(sc->user) ||
		strlen(cnonce) > 128 || bare - msg >= 48)
		goto malformed;

	memset(sc, 0, sizeof(*sc));
	strlcpy(sc->user, user, sizeof(sc->user));
	{
		uint8		gs2[48];

		memcpy(gs2, msg, bare - msg);
		strlcpy(sc->cbind, b64(gs2, bare - msg), sizeof(sc->cbind));
	}

	if (authzid && authzid[0] && strcmp(authzid, user) != 0)
		logdetail = "SCRAM's authorization id names another role than its user name.";
	else if ((shadow = role_secret(user, &role, &logdetail)) == NULL)
		;
	else if (get_password_type(shadow) != PASSWORD_TYPE_SCRAM_SHA_256 ||
			 !parse_scram_secret(shadow, &iterations, &salt, sc->stored_key, sc->server_key))
		logdetail = "The role's password is not a SCRAM-SHA-256 secret (use PLAIN, or set the password again with password_encryption = 'scram-sha-256').";
	if (logdetail != NULL || salt == NULL)
	{
		/* a salt of the name, the same at every attempt, as PostgreSQL's mock */
		uint8		mock[SCRAM_KEY_LEN];
		char	   *seed = psprintf("mqlog kafka scram %s " UINT64_FORMAT, user,
									GetSystemIdentifier());
		const char *errstr;

		if (scram_H((const uint8 *) seed, strlen(seed), mock, &errstr) < 0)
			elog(ERROR, "could not compute a SCRAM mock salt: %s", errstr);
		salt = b64(mock, SCRAM_DEFAULT_SALT_LEN);
		iterations = SCRAM_DEFAULT_ITERATIONS;
		sc->doomed = true;
		strlcpy(sc->why, logdetail ? logdetail : "No usable secret.", sizeof(sc->why));
	}
	sc->role = role;

	if (!pg_strong_random(raw, sizeof(raw)))
		elog(ERROR, "could not generate a SCRAM nonce");
	snprintf(sc->nonce, sizeof(sc->nonce), "%s%s", cnonce, b64(raw, sizeof(raw)));
	server_first = psprintf("r=%s,s=%s,i=%d", sc->nonce, salt, iterations);
	if (strlen(bare) + 1 + strlen(server_first) >= sizeof(sc->auth))
		goto malformed;
	snprintf(sc->auth, sizeof(sc->auth), "%s,%s", bare, server_first);
	sc->started = true;
	appendStringInfoString(reply, server_first);
	return STEP_CONTINUE;

malformed:
	ereport(LOG,
			(errmsg("Kafka client \"%s\" sent a malformed SASL SCRAM-SHA-256 client-first message",
					client_name(req))));
	return STEP_FAILED;
}

/*
 * The client-final message: "c=cbind,r=nonce[,extensions],p=proof".
 * Answers the server-final message "v=signature" when the proof holds.
 */
static SaslStep
scram_final(MqKafkaRequest *req, MqKafkaScram *sc, const char *msg, StringInfo reply,
			Oid *role, const char **message)
{
	const char *p = msg;
	const char *proof_at = strstr(msg, ",p=");
	char	   *cbind;
	char	   *nonce;
	char	   *auth;
	uint8		proof[SCRAM_KEY_LEN + 4];
	uint8		signature[SCRAM_KEY_LEN];
	uint8		client_key[SCRAM_KEY_LEN];
	uint8		stored[SCRAM_KEY_LEN];
	const char *errstr;
	int			n;

	*message = "Authentication failed: malformed SCRAM client-final message";
	if (proof_at == NULL || strchr(proof_at + 3, ',') != NULL ||
		(cbind = read_attr(&p, 'c')) == NULL || *p++ != ',' ||
		(nonce = read_attr(&p, 'r')) == NULL || p > proof_at)
	{
		ereport(LOG,
				(errmsg("Kafka client \"%s\" sent a malformed SASL SCRAM-SHA-256 client-final message",
						client_name(req))));
		return STEP_FAILED;
	}
	*message = PLAIN_FAILED;

	/*
	 * The nonce must end with the server-first message's, as Kafka's broker
	 * checks it (ScramSaslServer): librdkafka 2.0 sends its own nonce
	 * before the combined one.  The proof covers the message as sent.
	 */
	if (strcmp(cbind, sc->cbind) != 0 || strlen(nonce) < strlen(sc->nonce) ||
		strcmp(nonce + strlen(nonce) - strlen(sc->nonce), sc->nonce) != 0)
	{
		log_failure(req, "SCRAM-SHA-256", sc->user,
					"The channel binding or the nonce differs from the exchange's.");
		return STEP_FAILED;
	}
	n = pg_b64_dec_len(strlen(proof_at + 3));
	if (n > (int) sizeof(proof) ||
		pg_b64_decode(proof_at + 3, strlen(proof_at + 3), (char *) proof, sizeof(proof)) != SCRAM_KEY_LEN)
	{
		log_failure(req, "SCRAM-SHA-256", sc->user, "The proof is not a SHA-256 digest.");
		return STEP_FAILED;
	}
	if (sc->doomed)
	{
		log_failure(req, "SCRAM-SHA-256", sc->user, sc->why);
		return STEP_FAILED;
	}

	/* ClientKey = proof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) = StoredKey? */
	auth = psprintf("%s,%.*s", sc->auth, (int) (proof_at - msg), msg);
	hmac_sha256(sc->stored_key, auth, strlen(auth), signature);
	for (int i = 0; i < SCRAM_KEY_LEN; i++)
		client_key[i] = proof[i] ^ signature[i];
	if (scram_H(client_key, SCRAM_KEY_LEN, stored, &errstr) < 0)
		elog(ERROR, "could not hash a SCRAM client key: %s", errstr);
	if (memcmp(stored, sc->stored_key, SCRAM_KEY_LEN) != 0)
	{
		log_failure(req, "SCRAM-SHA-256", sc->user, "The SCRAM proof does not match the role's password.");
		return STEP_FAILED;
	}
	hmac_sha256(sc->server_key, auth, strlen(auth), signature);
	appendStringInfo(reply, "v=%s", b64(signature, SCRAM_KEY_LEN));
	*role = sc->role;
	ereport(DEBUG1,
			(errmsg("Kafka client \"%s\" authenticated as role \"%s\" with SASL SCRAM-SHA-256",
					client_name(req), sc->user)));
	return STEP_DONE;
}

static SaslStep
scram_step(MqKafkaRequest *req, const char *token, int len, StringInfo reply, Oid *role,
		   const char **message)
{
	MqKafkaScram *sc = &req->session->scram_state;
	char	   *msg;

	if (token == NULL || len <= 0 || len > MQK_SCRAM_MAX_MESSAGE ||
		memchr(token, '\0', len) != NULL)
	{
		*message = "Authentication failed: malformed SCRAM message";
		ereport(LOG,
				(errmsg("Kafka client \"%s\" sent a malformed SASL SCRAM-SHA-256 message",
						client_name(req))));
		return STEP_FAILED;
	}
	msg = pnstrdup(token, len);
	if (!sc->started)
		return scram_first(req, sc, msg, reply, message);
	sc->started = false;
	return scram_final(req, sc, msg, reply, role, message);
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
		s->scram = strcmp(mechanism, SCRAM_SHA_256_NAME) == 0;
		s->scram_state.started = false;
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
	StringInfoData reply;
	SaslStep	step = STEP_FAILED;

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
	initStringInfo(&reply);
	if (!raw && s->state != MQK_SASL_WAIT_AUTHENTICATE)
	{
		code = MQK_ILLEGAL_SASL_STATE;
		message = s->state == MQK_SASL_DONE ? "Already authenticated" :
			"SaslAuthenticate before SaslHandshake";
	}
	else
	{
		step = s->scram ? scram_step(req, token, len, &reply, &role, &message)
			: plain_step(req, token, len, &role, &message);
		if (step == STEP_FAILED)
		{
			code = MQK_SASL_AUTHENTICATION_FAILED;
			s->failed = true;
		}
		else if (step == STEP_DONE)
		{
			s->state = MQK_SASL_DONE;
			s->role = role;
			message = NULL;
		}
		else
			message = NULL;
	}

	if (raw)
	{
		if (code != MQK_NONE)
			return MQK_CLOSE;
		appendBinaryStringInfo(out, reply.data, reply.len);
		return MQK_RESPOND;
	}
	MqKafkaWriteInt16(out, code);
	MqKafkaWriteString(out, req->flexible, message);
	MqKafkaWriteBytes(out, req->flexible, reply.data, reply.len);
	if (req->api_version >= 1)
		MqKafkaWriteInt64(out, 0);	/* session_lifetime_ms: no re-authentication */
	MqKafkaWriteTags(out, req->flexible);
	return code == MQK_NONE ? MQK_RESPOND : MQK_RESPOND_CLOSE;
}
