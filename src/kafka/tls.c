/*-------------------------------------------------------------------------
 *
 * tls.c
 *		TLS on the Kafka listener's connections (mqlog.kafka_ssl): the
 *		OpenSSL context of the certificate, key and CA files, a
 *		connection's non-blocking handshake, reads and writes, and the
 *		role a client certificate authenticates it as.
 *
 * The listener stays one process multiplexing non-blocking sockets
 * (listener.c).  A connection's TLS is an SSL object over its socket,
 * and an OpenSSL call that cannot go on until the network moves returns
 * SSL_ERROR_WANT_READ or SSL_ERROR_WANT_WRITE instead of blocking; the
 * listener then waits for the socket event that call needs
 * (MqKafkaTlsEvents), which may be the other direction's: a read may have
 * to write (a handshake's flight) and a write to read.  The handshake is
 * no step of its own: the connection's first read drives it
 * (SSL_do_handshake), so a client that sends half a ClientHello, or none,
 * costs one WANT_READ and the others are served meanwhile.  Until the
 * handshake is done the connection is not admitted (it has sent no
 * request), so mqlog.kafka_auth_timeout closes one that never finishes,
 * as one that never authenticates, and a new connection may take its
 * slot when all are taken.
 *
 * A read returns what the records hold up to the room the listener
 * gives; what a record holds beyond it stays decrypted in the SSL object,
 * off the socket, where no socket event announces it: the listener asks
 * MqKafkaTlsPending before it sleeps.
 *
 * The context follows PostgreSQL's own (be-secure-openssl.c): the
 * server's ssl_min_protocol_version, ssl_max_protocol_version and
 * ssl_ciphers, no session cache or tickets, no renegotiation, the key
 * file's permissions checked as PostgreSQL checks ssl_key_file's.  A key
 * with a passphrase is refused (ssl_passphrase_command is the
 * postmaster's, run at its start; the listener cannot prompt).  SIGHUP
 * builds a new context for the connections to come, as PostgreSQL does:
 * open connections keep theirs (an SSL object holds a reference to its
 * context), and when the new one cannot be built the one in use stays
 * and the log says why.
 *
 * Client certificates (mqlog.kafka_ssl_client_auth, Kafka's
 * ssl.client.auth): 'requested' asks for one, 'required' refuses the
 * handshake without one, and either refuses a certificate that does not
 * verify against mqlog.kafka_ssl_ca_file.  Without SASL, a verified
 * certificate authenticates its connection as the role its subject's
 * Common Name names, verbatim, as PostgreSQL's clientcert=verify-full
 * (cert authentication without a user map) would for that role: the role
 * must exist and have LOGIN (MqKafkaLoginRole), else the connection
 * closes at its first request that needs a role.  A connection without a
 * certificate acts as mqlog.kafka_role.  With SASL the role is SASL's, as
 * on Kafka's SASL_SSL listeners.
 *
 * What a connection costs here, beyond listener.c's buffers: OpenSSL's
 * state (a few kB), its record buffers (about 17 kB each way, released
 * while the connection is idle: SSL_MODE_RELEASE_BUFFERS) and, while it
 * handshakes, the handshake message being read: a ClientHello of at most
 * 128 kB (OpenSSL's own cap) or a certificate chain of at most
 * MAX_CERT_LIST.  OpenSSL allocates these with malloc, outside the
 * listener's memory contexts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "mb/pg_wchar.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kafka/kafka_internal.h"

/* the largest certificate chain a client may send */
#define MAX_CERT_LIST	(32 * 1024)
/* failed handshakes logged a second at most (handshake_failure_level) */
#define HANDSHAKE_LOG_BURST 10

/*
 * libpq/libpq.h's, declared here: that header pulls in libpq-be.h, which
 * needs GSSAPI's headers (see api_sasl.c).
 */
extern bool check_ssl_key_file_permissions(const char *ssl_key_file, bool isServerStart);

typedef struct MqKafkaTls MqKafkaTls;

struct MqKafkaTls
{
	SSL		   *ssl;
	char		peer[NI_MAXHOST + 8];	/* host:port, for the log */
	bool		established;	/* the handshake is done */
	bool		broken;			/* a fatal error: no close_notify */
	uint32		read_needs;		/* WL_SOCKET_* the blocked read waits for */
	uint32		write_needs;	/* ... the blocked send */
	bool		has_cert;		/* a client certificate that verified */
	char		cn[NAMEDATALEN];	/* its Common Name, "" if none fits */
};

static SSL_CTX *context = NULL;
static bool passphrase_asked;

/* the setting, or the server's own setting of that name when it is empty */
static const char *
file_setting(const char *mine, const char *servers)
{
	if (mine != NULL && mine[0] != '\0')
		return mine;
	return GetConfigOption(servers, true, false);
}

/* OpenSSL's first queued error, as PostgreSQL's SSLerrmessage words it */
static const char *
ssl_error(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error();

	if (e == 0)
		return "no SSL error reported";
	ERR_error_string_n(e, buf, sizeof(buf));
	return buf;
}

/* the listener cannot prompt for a key's passphrase: refuse it */
static int
no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	passphrase_asked = true;
	if (size > 0)
		buf[0] = '\0';
	return 0;
}

/* ssl_min_protocol_version's spelling -> OpenSSL's, 0: any */
static int
protocol_version(const char *setting)
{
	static const struct
	{
		const char *name;
		int			version;
	}			versions[] = {
		{"TLSv1", TLS1_VERSION},
		{"TLSv1.1", TLS1_1_VERSION},
		{"TLSv1.2", TLS1_2_VERSION},
		{"TLSv1.3", TLS1_3_VERSION},
	};

	for (int i = 0; i < lengthof(versions); i++)
		if (setting != NULL && strcmp(setting, versions[i].name) == 0)
			return versions[i].version;
	return 0;
}

/* the server's ssl_*_protocol_version setting in OpenSSL's terms, 0: any */
static int
server_version(const char *name)
{
	return protocol_version(GetConfigOption(name, true, false));
}

/* a new context from the settings, or NULL (logged) when one cannot be built */
static SSL_CTX *
build_context(void)
{
	const char *cert = file_setting(mqlog_kafka_ssl_cert_file, "ssl_cert_file");
	const char *key = file_setting(mqlog_kafka_ssl_key_file, "ssl_key_file");
	const char *ca = file_setting(mqlog_kafka_ssl_ca_file, "ssl_ca_file");
	SSL_CTX    *ctx;
	const char *what;
	const char *file;

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL)
	{
		ereport(LOG,
				(errmsg("could not create the Kafka listener's TLS context: %s", ssl_error())));
		return NULL;
	}
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);

	file = cert;
	what = "certificate";
	if (cert == NULL || cert[0] == '\0' || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		goto failed;
	file = key;
	what = "private key";
	if (key == NULL || key[0] == '\0')
		goto failed;
	if (!check_ssl_key_file_permissions(key, false))
	{
		SSL_CTX_free(ctx);		/* it logged why */
		return NULL;
	}
	passphrase_asked = false;
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
	{
		if (passphrase_asked)
		{
			ereport(LOG,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("the Kafka listener's private key file \"%s\" is protected by a passphrase", key),
					 errhint("The listener cannot ask for a passphrase: give it a key without one.")));
			SSL_CTX_free(ctx);
			return NULL;
		}
		goto failed;
	}
	what = "private key, which does not match the certificate";
	if (SSL_CTX_check_private_key(ctx) != 1)
		goto failed;

	if (server_version("ssl_min_protocol_version") != 0)
		SSL_CTX_set_min_proto_version(ctx, server_version("ssl_min_protocol_version"));
	if (server_version("ssl_max_protocol_version") != 0)
		SSL_CTX_set_max_proto_version(ctx, server_version("ssl_max_protocol_version"));
	file = GetConfigOption("ssl_ciphers", true, false);
	what = "cipher list (ssl_ciphers)";
	if (file != NULL && SSL_CTX_set_cipher_list(ctx, file) != 1)
		goto failed;

	/* PostgreSQL's choices: nothing kept across connections, no renegotiation */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
						SSL_OP_SINGLE_DH_USE | SSL_OP_SINGLE_ECDH_USE);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_max_cert_list(ctx, MAX_CERT_LIST);

	if (mqlog_kafka_ssl_client_auth != MQK_CLIENT_AUTH_NONE)
	{
		STACK_OF(X509_NAME) *names;

		if (ca == NULL || ca[0] == '\0')
		{
			ereport(LOG,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("mqlog.kafka_ssl_client_auth needs a CA file to verify client certificates"),
					 errhint("Set mqlog.kafka_ssl_ca_file or ssl_ca_file.")));
			SSL_CTX_free(ctx);
			return NULL;
		}
		file = ca;
		what = "CA";
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 ||
			(names = SSL_load_client_CA_file(ca)) == NULL)
			goto failed;
		/* the CAs the server names in its CertificateRequest */
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
						   (mqlog_kafka_ssl_client_auth == MQK_CLIENT_AUTH_REQUIRED ?
							SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
	}
	return ctx;

failed:
	ereport(LOG,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("could not load the Kafka listener's TLS %s \"%s\": %s", what,
					file ? file : "", ssl_error())));
	SSL_CTX_free(ctx);
	return NULL;
}

void
MqKafkaTlsStart(void)
{
	if (!mqlog_kafka_ssl)
		return;
	context = build_context();
	if (context == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("the Kafka listener cannot start without its TLS configuration"),
				 errhint("Fix the files mqlog.kafka_ssl_cert_file, mqlog.kafka_ssl_key_file and mqlog.kafka_ssl_ca_file (or the server's ssl_* settings) name; the listener tries again in a few seconds.")));
}

void
MqKafkaTlsReload(void)
{
	SSL_CTX    *ctx;

	if (!mqlog_kafka_ssl)
		return;
	ctx = build_context();
	if (ctx == NULL)
	{
		ereport(LOG,
				(errmsg("the Kafka listener's TLS configuration was not reloaded; new connections keep the previous one")));
		return;
	}
	SSL_CTX_free(context);		/* open connections hold their own reference */
	context = ctx;
}

MqKafkaTls *
MqKafkaTlsNew(pgsocket sock, const char *peer, MemoryContext cxt)
{
	MqKafkaTls *t;

	if (!mqlog_kafka_ssl)
		return NULL;
	t = MemoryContextAllocZero(cxt, sizeof(MqKafkaTls));
	strlcpy(t->peer, peer, sizeof(t->peer));
	ERR_clear_error();
	if ((t->ssl = SSL_new(context)) == NULL || SSL_set_fd(t->ssl, sock) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not set up TLS for Kafka client %s: %s", peer, ssl_error())));
	SSL_set_accept_state(t->ssl);
	return t;
}

void
MqKafkaTlsClose(MqKafkaTls *t)
{
	if (t == NULL)
		return;
	/* a close_notify if the socket takes it now; the peer needs no more */
	if (t->established && !t->broken)
	{
		ERR_clear_error();
		(void) SSL_shutdown(t->ssl);
	}
	SSL_free(t->ssl);
	ERR_clear_error();
}

/*
 * The verified client certificate's Common Name, which must fit a role
 * name and hold no zero byte (a name with one would compare equal to a
 * shorter one)
 */
static void
note_certificate(MqKafkaTls *t)
{
	X509	   *cert = SSL_get0_peer_certificate(t->ssl);
	X509_NAME  *subject;
	int			i;
	unsigned char *utf8 = NULL;
	int			len;

	if (cert == NULL || SSL_get_verify_result(t->ssl) != X509_V_OK)
		return;
	t->has_cert = true;
	subject = X509_get_subject_name(cert);
	if ((i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1)) < 0)
		return;
	len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
	if (len > 0 && len < NAMEDATALEN && memchr(utf8, '\0', len) == NULL &&
		pg_verify_mbstr(PG_UTF8, (const char *) utf8, len, true))
	{
		memcpy(t->cn, utf8, len);
		t->cn[len] = '\0';
	}
	OPENSSL_free(utf8);
}

/*
 * The level of a failed handshake's line: LOG for the first
 * HANDSHAKE_LOG_BURST of each second, DEBUG1 past them, counted and
 * reported with the next second's first.  A failed handshake costs a
 * client one connection and a few bytes: one reconnecting at once (a
 * plaintext client, or a hostile one) wrote 4,800 lines a second.
 */
static int
handshake_failure_level(void)
{
	static TimestampTz window = 0;
	static int	logged = 0;
	static int	skipped = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (TimestampDifferenceExceeds(window, now, 1000))
	{
		if (skipped > 0)
			ereport(LOG,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("%d more TLS handshakes with Kafka clients failed and were not logged (%d are logged a second at most)",
							skipped, HANDSHAKE_LOG_BURST)));
		window = now;
		logged = 0;
		skipped = 0;
	}
	if (logged < HANDSHAKE_LOG_BURST)
	{
		logged++;
		return LOG;
	}
	skipped++;
	return DEBUG1;
}

/*
 * After a call that returned n <= 0: true when it only waits for the
 * network (*needs says for which event), false when the connection is
 * closed or broken (errno set for the listener, the reason logged)
 */
static bool
waits(MqKafkaTls *t, int n, uint32 *needs)
{
	int			err = SSL_get_error(t->ssl, n);
	int			save = errno;
	unsigned long e;

	switch (err)
	{
		case SSL_ERROR_WANT_READ:
			*needs = WL_SOCKET_READABLE;
			errno = EWOULDBLOCK;
			return true;
		case SSL_ERROR_WANT_WRITE:
			*needs = WL_SOCKET_WRITEABLE;
			errno = EWOULDBLOCK;
			return true;
		case SSL_ERROR_ZERO_RETURN:
			errno = 0;			/* the peer's close_notify */
			return false;
		default:
			break;
	}
	t->broken = true;
	e = ERR_peek_error();
	/* a peer that just went away: as quiet as a plaintext one */
	if (!t->established &&
		(err == SSL_ERROR_SSL && ERR_GET_REASON(e) != SSL_R_UNEXPECTED_EOF_WHILE_READING))
		ereport(handshake_failure_level(),
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("TLS handshake with Kafka client %s failed: %s", t->peer, ssl_error())));
	else
		ereport(DEBUG1,
				(errmsg_internal("TLS connection of Kafka client %s ended: %s", t->peer,
								 err == SSL_ERROR_SYSCALL && e == 0 ?
								 (save != 0 ? strerror(save) : "EOF") : ssl_error())));
	ERR_clear_error();
	errno = ECONNRESET;
	return false;
}

/* the handshake, as far as the network lets it go */
static bool
handshake(MqKafkaTls *t)
{
	int			n;

	ERR_clear_error();
	n = SSL_do_handshake(t->ssl);
	if (n != 1)
	{
		(void) waits(t, n, &t->read_needs);
		return false;
	}
	t->established = true;
	note_certificate(t);
	ereport(DEBUG1,
			(errmsg_internal("TLS connection of Kafka client %s: %s, %s%s%s", t->peer,
							 SSL_get_version(t->ssl), SSL_get_cipher(t->ssl),
							 t->has_cert ? ", certificate of " : "",
							 t->has_cert ? t->cn : "")));
	return true;
}

ssize_t
MqKafkaTlsRecv(MqKafkaTls *t, char *buf, size_t len)
{
	size_t		got = 0;

	t->read_needs = 0;
	if (!t->established && !handshake(t))
		return errno == 0 ? 0 : -1;
	/* records until the room is full or the socket has no more */
	while (got < len)
	{
		int			n;

		ERR_clear_error();
		n = SSL_read(t->ssl, buf + got, (int) Min(len - got, (size_t) PG_INT32_MAX));
		if (n > 0)
		{
			got += n;
			continue;
		}
		if (!waits(t, n, &t->read_needs) && got == 0)
			return errno == 0 ? 0 : -1;
		break;
	}
	if (got > 0)
		return (ssize_t) got;
	errno = EWOULDBLOCK;
	return -1;
}

ssize_t
MqKafkaTlsSend(MqKafkaTls *t, const char *buf, size_t len)
{
	int			n;

	t->write_needs = 0;
	if (!t->established)
	{
		errno = EWOULDBLOCK;	/* nothing is answered before a request */
		return -1;
	}
	ERR_clear_error();
	n = SSL_write(t->ssl, buf, (int) Min(len, (size_t) PG_INT32_MAX));
	if (n > 0)
		return n;
	if (!waits(t, n, &t->write_needs) && errno == 0)
		errno = ECONNRESET;		/* a close_notify: nothing more is sent */
	return -1;
}

uint32
MqKafkaTlsEvents(MqKafkaTls *t, bool reading, bool writing)
{
	uint32		ev = 0;

	if (reading)
		ev |= t->read_needs != 0 ? t->read_needs : WL_SOCKET_READABLE;
	if (writing)
		ev |= t->write_needs != 0 ? t->write_needs : WL_SOCKET_WRITEABLE;
	return ev;
}

bool
MqKafkaTlsPending(MqKafkaTls *t)
{
	return t != NULL && t->established && SSL_pending(t->ssl) > 0;
}

bool
MqKafkaTlsEstablished(MqKafkaTls *t)
{
	return t == NULL || t->established;
}

bool
MqKafkaTlsLogin(MqKafkaSession *s)
{
	MqKafkaTls *t = s->tls;
	const char *logdetail = NULL;
	Oid			role = InvalidOid;

	/* only a certificate authenticates, and only without SASL */
	if (t == NULL || !t->has_cert || mqlog_kafka_ssl_client_auth == MQK_CLIENT_AUTH_NONE ||
		MqKafkaSaslRequired() || s->state != MQK_SASL_OFF)
		return true;
	if (t->cn[0] == '\0')
		logdetail = "The certificate's subject has no Common Name that can be a role name.";
	else if (MqKafkaLoginRole(t->cn, &role, &logdetail))
	{
		s->state = MQK_SASL_DONE;
		s->role = role;
		ereport(DEBUG1,
				(errmsg_internal("Kafka client %s authenticated as role \"%s\" by its certificate",
								 t->peer, t->cn)));
		return true;
	}
	ereport(LOG,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg("Kafka client %s: certificate authentication failed for user \"%s\"; closing its connection",
					t->peer, t->cn),
			 logdetail ? errdetail_log("%s", logdetail) : 0));
	return false;
}
