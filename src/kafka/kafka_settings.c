/*-------------------------------------------------------------------------
 *
 * kafka_settings.c
 *		The Kafka listener's settings (mqlog.kafka_*), the syntax of its
 *		addresses, and the registration of its background worker, which
 *		happens only when mqlog.kafka_listen names an address.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "cluster/metadata.h"
#include "workers/workers.h"
#include "kafka/kafka.h"
#include "kafka/kafka_internal.h"

char	   *mqlog_kafka_listen = NULL;
char	   *mqlog_kafka_database = NULL;
char	   *mqlog_kafka_role = NULL;
char	   *mqlog_kafka_advertised_listener = NULL;
int			mqlog_kafka_max_frame_size = 100 * 1024 * 1024;
int			mqlog_kafka_max_connections = 256;
int			mqlog_kafka_max_request_memory = 32 * 1024 * 1024;
int			mqlog_kafka_max_buffered_size = 128 * 1024 * 1024;
int			mqlog_kafka_auth_timeout = 10000;
int			mqlog_kafka_idle_timeout = 600000;
int			mqlog_kafka_transactional_id_expiration = 604800000;
bool		mqlog_kafka_allow_remote = false;
char	   *mqlog_kafka_sasl_mechanisms = NULL;
bool		mqlog_kafka_ssl = false;
char	   *mqlog_kafka_ssl_cert_file = NULL;
char	   *mqlog_kafka_ssl_key_file = NULL;
char	   *mqlog_kafka_ssl_ca_file = NULL;
int			mqlog_kafka_ssl_client_auth = MQK_CLIENT_AUTH_NONE;

/* Kafka's ssl.client.auth values */
static const struct config_enum_entry client_auth_options[] = {
	{"none", MQK_CLIENT_AUTH_NONE, false},
	{"requested", MQK_CLIENT_AUTH_REQUESTED, false},
	{"required", MQK_CLIENT_AUTH_REQUIRED, false},
	{NULL, 0, false}
};

bool		mqlog_kafka_auto_create_topics = true;
int			mqlog_kafka_num_partitions = 1;
int			mqlog_kafka_default_replication_factor = 1;

/* the mechanisms api_sasl.c verifies */
static const char *const sasl_built[] = {"PLAIN", "SCRAM-SHA-256"};

/*
 * The next name of a comma-separated list (spaces around names allowed):
 * its start, *len its length, *p moved past it; NULL at the end.
 */
static const char *
next_name(const char **p, int *len)
{
	const char *start = *p;
	const char *end;
	const char *e;

	while (*start == ' ' || *start == ',')
		start++;
	if (*start == '\0')
		return NULL;
	end = strchr(start, ',');
	if (end == NULL)
		end = start + strlen(start);
	for (e = end; e > start && e[-1] == ' '; e--)
		;
	*len = (int) (e - start);
	*p = end;
	return start;
}

static bool
name_is(const char *name, int len, const char *s)
{
	return strlen(s) == len && strncmp(name, s, len) == 0;
}

/* names as Kafka spells them: upper case */
bool
MqKafkaSaslEnabled(const char *mechanism)
{
	const char *p = mqlog_kafka_sasl_mechanisms ? mqlog_kafka_sasl_mechanisms : "";
	const char *name;
	int			len;

	while ((name = next_name(&p, &len)) != NULL)
		if (name_is(name, len, mechanism))
			return true;
	return false;
}

int
MqKafkaSaslList(const char **names, int max)
{
	int			n = 0;

	for (int i = 0; i < lengthof(sasl_built) && n < max; i++)
		if (MqKafkaSaslEnabled(sasl_built[i]))
			names[n++] = sasl_built[i];
	return n;
}

bool
MqKafkaSaslRequired(void)
{
	const char *names[lengthof(sasl_built)];

	return MqKafkaSaslList(names, lengthof(names)) > 0;
}

/*
 * A client certificate authenticates only without SASL (with SASL the
 * connection is SASL's role, as on Kafka's SASL_SSL listeners), and
 * only when every client must present one.
 */
bool
MqKafkaAuthenticatesAll(void)
{
	return MqKafkaSaslRequired() ||
		(mqlog_kafka_ssl && mqlog_kafka_ssl_client_auth == MQK_CLIENT_AUTH_REQUIRED);
}

/* every name in the list is a mechanism api_sasl.c verifies */
static bool
check_sasl_mechanisms(char **newval, void **extra, GucSource source)
{
	const char *p = *newval ? *newval : "";
	const char *name;
	int			len;

	while ((name = next_name(&p, &len)) != NULL)
	{
		bool		known = false;

		for (int i = 0; i < lengthof(sasl_built); i++)
			known |= name_is(name, len, sasl_built[i]);
		if (!known)
		{
			GUC_check_errdetail("Unsupported SASL mechanism \"%.*s\": the listener verifies PLAIN and SCRAM-SHA-256.",
								len, name);
			return false;
		}
	}
	return true;
}

/*
 * "host:port", with an IPv6 host in brackets ("[::1]:9092").  The host
 * may be a name; the port 1 to 65535.
 */
bool
MqKafkaSplitAddress(const char *addr, char *host, int hostlen, int *port)
{
	const char *colon;
	const char *hend;
	const char *hstart = addr;
	char	   *end;
	long		p;

	if (addr == NULL || addr[0] == '\0')
		return false;
	if (addr[0] == '[')
	{
		hstart = addr + 1;
		hend = strchr(hstart, ']');
		if (hend == NULL || hend[1] != ':')
			return false;
		colon = hend + 1;
	}
	else
	{
		colon = strrchr(addr, ':');
		if (colon == NULL || memchr(addr, ':', colon - addr) != NULL)
			return false;		/* IPv6 needs brackets */
		hend = colon;
	}
	if (hend == hstart || hend - hstart >= hostlen)
		return false;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 1 || p > 65535)
		return false;
	memcpy(host, hstart, hend - hstart);
	host[hend - hstart] = '\0';
	*port = (int) p;
	return true;
}

static bool
check_address(char **newval, void **extra, GucSource source)
{
	char		host[256];
	int			port;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!MqKafkaSplitAddress(*newval, host, sizeof(host), &port))
	{
		GUC_check_errdetail("An address is host:port, with an IPv6 address in brackets, for example 127.0.0.1:9092 or [::1]:9092.");
		return false;
	}
	return true;
}

/* what Metadata tells clients to connect to */
void
MqKafkaAdvertised(char *host, int hostlen, int *port)
{
	const char *addr = (mqlog_kafka_advertised_listener && mqlog_kafka_advertised_listener[0])
		? mqlog_kafka_advertised_listener : mqlog_kafka_listen;

	if (!MqKafkaSplitAddress(addr, host, hostlen, port))
	{
		strlcpy(host, "localhost", hostlen);
		*port = 9092;
	}
}

/*
 * This node's listener as clients should reach it, "" when none runs here:
 * what the node's record in etcd says (cluster/nodes.c asks through the
 * function mqlog.c hands it, MqClusterSetKafkaListener).
 */
const char *
MqKafkaListener(void)
{
	if (mqlog_kafka_listen == NULL || mqlog_kafka_listen[0] == '\0')
		return "";
	if (mqlog_kafka_advertised_listener != NULL && mqlog_kafka_advertised_listener[0] != '\0')
		return mqlog_kafka_advertised_listener;
	return mqlog_kafka_listen;
}

void
MqKafkaDefineSettings(void)
{
	DefineCustomStringVariable("mqlog.kafka_listen",
							   "Address the Kafka protocol listener binds, as host:port; empty turns it off.",
							   "For example '127.0.0.1:9092' or '[::1]:9092'.  A name binds every address it resolves to.  Unless clients authenticate (mqlog.kafka_sasl_mechanisms, or mqlog.kafka_ssl_client_auth = required) only loopback addresses are accepted, or mqlog.kafka_allow_remote is on.",
							   &mqlog_kafka_listen, "",
							   PGC_POSTMASTER, 0, check_address, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_database",
							   "The database whose topics the Kafka listener serves.",
							   NULL,
							   &mqlog_kafka_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_role",
							   "The role every Kafka request runs as when mqlog.kafka_sasl_mechanisms is empty; the listener then answers no request while it is empty or names no role.",
							   "Topic privileges apply to Kafka clients exactly as to a SQL session of this role.",
							   &mqlog_kafka_role, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_advertised_listener",
							   "The host:port Metadata responses tell Kafka clients to connect to; empty: mqlog.kafka_listen.",
							   NULL,
							   &mqlog_kafka_advertised_listener, "",
							   PGC_SIGHUP, 0, check_address, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_frame_size",
							"Largest Kafka request accepted; a client that announces a larger one is disconnected.",
							"Kafka's socket.request.max.bytes.",
							&mqlog_kafka_max_frame_size,
							100 * 1024 * 1024, 1024, MaxAllocSize - 1024,
							PGC_SIGHUP, GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_request_memory",
							"Memory the record batches of one Kafka Produce request may expand to once decompressed and decoded, in all.",
							"A batch that would pass it is answered MESSAGE_TOO_LARGE before anything is allocated for it; each batch's memory is freed before the next.  Other requests' answers stop there too: the partitions or groups after it are answered REQUEST_TIMED_OUT.",
							&mqlog_kafka_max_request_memory,
							32 * 1024 * 1024, 1024 * 1024, MaxAllocSize - 1,
							PGC_SIGHUP, GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_buffered_size",
							"Bytes of requests the Kafka listener buffers across all connections before it stops reading from those that need more.",
							"Kafka's queued.max.request.bytes.  Each connection's first 64 kB of a frame are outside it.  A frame larger than this is refused like one over mqlog.kafka_max_frame_size.",
							&mqlog_kafka_max_buffered_size,
							128 * 1024 * 1024, 1024 * 1024, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_auth_timeout",
							"Time a new Kafka connection has to authenticate with SASL or, without SASL, to send its first request; then it is closed.",
							"Until a connection has authenticated, its frames may be at most 64 kB.",
							&mqlog_kafka_auth_timeout,
							10000, 100, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_idle_timeout",
							"Kafka connections that send nothing and wait for nothing this long are closed; 0 keeps them open.",
							"Kafka's connections.max.idle.ms.",
							&mqlog_kafka_idle_timeout,
							600000, 0, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_transactional_id_expiration",
							"A Kafka transactional id with no transaction open that has not been used this long is removed.",
							"Kafka's transactional.id.expiration.ms.  A producer still using it is then answered INVALID_PRODUCER_ID_MAPPING; its next InitProducerId starts it again with a new producer id.",
							&mqlog_kafka_transactional_id_expiration,
							604800000, 1000, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_connections",
							"Kafka client connections served at once; more are closed at once.",
							NULL,
							&mqlog_kafka_max_connections,
							256, 1, 10000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_sasl_mechanisms",
							   "SASL mechanisms Kafka clients must authenticate with, comma-separated; empty: no authentication.",
							   "'PLAIN' and 'SCRAM-SHA-256' check a PostgreSQL role's password and run the connection's requests as that role.  Without mqlog.kafka_ssl PLAIN sends passwords in clear.",
							   &mqlog_kafka_sasl_mechanisms, "",
							   PGC_POSTMASTER, 0, check_sasl_mechanisms, NULL, NULL);
	DefineCustomBoolVariable("mqlog.kafka_ssl",
							 "Kafka clients connect with TLS: security.protocol SSL, or SASL_SSL with mqlog.kafka_sasl_mechanisms.",
							 "The listener then speaks TLS only, with the OpenSSL PostgreSQL is built with, the server's ssl_min_protocol_version and ssl_ciphers, and the files mqlog.kafka_ssl_cert_file, mqlog.kafka_ssl_key_file and mqlog.kafka_ssl_ca_file name.",
							 &mqlog_kafka_ssl, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_ssl_cert_file",
							   "The Kafka listener's TLS certificate file (PEM, the chain after the certificate); empty: the server's ssl_cert_file.",
							   "A reload reads the files again for new connections.",
							   &mqlog_kafka_ssl_cert_file, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_ssl_key_file",
							   "The Kafka listener's TLS private key file (PEM, without a passphrase); empty: the server's ssl_key_file.",
							   "Its permissions are checked as PostgreSQL checks ssl_key_file's.",
							   &mqlog_kafka_ssl_key_file, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.kafka_ssl_ca_file",
							   "The certificate authorities Kafka client certificates are verified against (PEM); empty: the server's ssl_ca_file.",
							   "Read only when mqlog.kafka_ssl_client_auth is not 'none'.",
							   &mqlog_kafka_ssl_ca_file, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("mqlog.kafka_ssl_client_auth",
							 "Whether Kafka clients present a TLS certificate: none, requested or required (Kafka's ssl.client.auth).",
							 "Without SASL, a verified client certificate authenticates its connection as the role its Common Name names, which must exist and have LOGIN; a connection without one acts as mqlog.kafka_role.  With SASL the connection is the SASL role's.",
							 &mqlog_kafka_ssl_client_auth, MQK_CLIENT_AUTH_NONE, client_auth_options,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.kafka_allow_remote",
							 "Lets the Kafka listener bind an address that is not loopback although it does not authenticate every client.",
							 "Without mqlog.kafka_sasl_mechanisms (or mqlog.kafka_ssl_client_auth = required) Kafka clients act as mqlog.kafka_role: only turn this on behind a network that admits trusted clients only.  It also silences the warning about SASL PLAIN without TLS beyond loopback.",
							 &mqlog_kafka_allow_remote, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.kafka_auto_create_topics",
							 "A Kafka Metadata request naming a topic that does not exist creates it, as the request's role, if that role may create topics.",
							 "Kafka's auto.create.topics.enable.  A role without the EXECUTE privilege on mq_create_topic (mqlog_admin) is answered TOPIC_AUTHORIZATION_FAILED and creates nothing.",
							 &mqlog_kafka_auto_create_topics, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_num_partitions",
							"Partitions of a topic created by Kafka auto-creation, or by CreateTopics with -1 partitions.",
							"Kafka's num.partitions.",
							&mqlog_kafka_num_partitions,
							1, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_default_replication_factor",
							"Replication factor of a topic created by Kafka auto-creation, or by CreateTopics with -1 replicas.",
							"Kafka's default.replication.factor.  Above 1 only on a cluster, where the replicas are placed as mq_create_topic places them.",
							&mqlog_kafka_default_replication_factor,
							1, 1, MQ_MAX_REPLICATION_FACTOR,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
}

void
MqKafkaRegister(void)
{
	if (mqlog_kafka_listen == NULL || mqlog_kafka_listen[0] == '\0')
		return;
	MqRegisterWorker("mqlog_kafka_main", "mqlog kafka listener", true, 5);
}
