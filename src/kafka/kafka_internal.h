/*-------------------------------------------------------------------------
 *
 * kafka_internal.h
 *		What the files of kafka/ share and nothing else calls: the
 *		settings, a request being served, the API table and handlers, and
 *		the units of work a handler runs (request.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_INTERNAL_H
#define MQLOG_KAFKA_INTERNAL_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

#include "kafka/protocol.h"

struct MqTopic;

/* settings (kafka_settings.c) */
extern char *mqlog_kafka_listen;
extern char *mqlog_kafka_database;
extern char *mqlog_kafka_role;
extern char *mqlog_kafka_advertised_listener;
extern int	mqlog_kafka_max_frame_size;
extern int	mqlog_kafka_max_connections;
extern int	mqlog_kafka_max_request_memory;
extern int	mqlog_kafka_max_buffered_size;
extern int	mqlog_kafka_auth_timeout;
extern int	mqlog_kafka_idle_timeout;
extern int	mqlog_kafka_transactional_id_expiration;
extern bool mqlog_kafka_allow_remote;
extern char *mqlog_kafka_sasl_mechanisms;
extern bool mqlog_kafka_ssl;
extern char *mqlog_kafka_ssl_cert_file;
extern char *mqlog_kafka_ssl_key_file;
extern char *mqlog_kafka_ssl_ca_file;
extern int	mqlog_kafka_ssl_client_auth;

/* mqlog.kafka_ssl_client_auth: Kafka's ssl.client.auth */
typedef enum MqKafkaClientAuth
{
	MQK_CLIENT_AUTH_NONE,
	MQK_CLIENT_AUTH_REQUESTED,	/* a certificate if the client has one */
	MQK_CLIENT_AUTH_REQUIRED	/* no certificate, no connection */
} MqKafkaClientAuth;

/*
 * Does the listener authenticate every client (SASL, or TLS requiring a
 * client certificate)?  Only then may it listen beyond loopback without
 * mqlog.kafka_allow_remote (kafka_settings.c).
 */
extern bool MqKafkaAuthenticatesAll(void);

extern bool mqlog_kafka_auto_create_topics;
extern int	mqlog_kafka_num_partitions;
extern int	mqlog_kafka_default_replication_factor;

/*
 * SASL (kafka_settings.c): is any mechanism configured, is this one, which are
 * (at most max names, their count)
 */
extern bool MqKafkaSaslRequired(void);
extern bool MqKafkaSaslEnabled(const char *mechanism);
extern int	MqKafkaSaslList(const char **names, int max);

/* "host:port" or "[v6]:port" -> host and port; false if malformed */
extern bool MqKafkaSplitAddress(const char *addr, char *host, int hostlen, int *port);

/*
 * Where a connection is in SASL authentication (api_sasl.c).  OFF: no SASL is
 * configured, requests run as mqlog.kafka_role.  WAIT_HANDSHAKE: SASL is
 * required and no mechanism is chosen yet.  WAIT_AUTHENTICATE:
 * SaslHandshake v1 chose one, SaslAuthenticate carries the tokens.
 * WAIT_RAW: SaslHandshake v0 chose one, the next frames are bare tokens
 * (Kafka's legacy form).  DONE: authenticated, requests run as role.
 */
typedef enum MqKafkaSaslState
{
	MQK_SASL_OFF,
	MQK_SASL_WAIT_HANDSHAKE,
	MQK_SASL_WAIT_AUTHENTICATE,
	MQK_SASL_WAIT_RAW,
	MQK_SASL_DONE
} MqKafkaSaslState;

#define MQK_SCRAM_KEY_LEN 32	/* SCRAM_KEY_LEN, SHA-256 */
#define MQK_SCRAM_MAX_MESSAGE 1024

/* SCRAM-SHA-256 between its client-first and client-final messages */
typedef struct MqKafkaScram
{
	bool		started;		/* the server-first message was sent */
	bool		doomed;			/* no usable secret: fail at client-final */
	Oid			role;
	char		user[64];		/* NAMEDATALEN */
	char		cbind[64];		/* base64 of the client's gs2 header */
	char		nonce[256];		/* client's and server's */
	char		auth[MQK_SCRAM_MAX_MESSAGE];	/* client-first-bare,server-first */
	char		why[256];		/* doomed: the log's detail */
	uint8		stored_key[MQK_SCRAM_KEY_LEN];
	uint8		server_key[MQK_SCRAM_KEY_LEN];
} MqKafkaScram;

struct MqKafkaTls;

typedef struct MqKafkaSession
{
	MqKafkaSaslState state;
	struct MqKafkaTls *tls;		/* its TLS (tls.c); NULL: plaintext */
	bool		scram;			/* the mechanism chosen: SCRAM-SHA-256, else PLAIN */
	bool		failed;			/* an authentication failed (the connection
								 * closes) */
	Oid			role;			/* DONE: the authenticated role */
	MqKafkaScram scram_state;
	const char *peer;			/* the client's address and port, for logs */
	bool		violated;		/* it sent a request mqlog does not serve
								 * (unsupported.c), or one that needs
								 * authentication before authenticating:
								 * count it (backoff.c) */
	bool		unsupported_logged; /* that is logged at LOG, once */
} MqKafkaSession;

/* A request being served: its header, its body and, for Fetch, its wait. */
typedef struct MqKafkaRequest
{
	int16		api_key;
	int16		api_version;
	int32		correlation_id;
	char	   *client_id;
	const char *client_host;	/* the connection's address (listener.c) */
	bool		flexible;		/* body in KIP-482's flexible form */
	MqKafkaSession *session;	/* the connection's authentication */
	MqKafkaReader body;			/* positioned after the header */

	TimestampTz received;		/* when the listener first read it */
	TimestampTz began;			/* when this run of it began */
	bool		final;			/* a parked Fetch's last run: answer now */
	TimestampTz wake_at;		/* set by a handler that parks */
	uint64		park_token;		/* a parked handler's note to its next run */
	MemoryContext park_cxt;		/* the listener's, kept while the request is
								 * parked (NULL: none) */
	struct MqKafkaWatch *watch; /* what a parked Fetch waits for (watch.c),
								 * in park_cxt; NULL: re-run on every wake-up */
	bool		park_group;		/* a parked JoinGroup or SyncGroup: re-run
								 * when its member's answer is ready or the
								 * member ended (MqKafkaParkedGroupReady,
								 * api_groups.c), or at wake_at */

	/*
	 * Set by a handler whose answer depends on its commit (Produce with
	 * acks=all): run right after the request's transaction committed, to
	 * write the answer into out then.
	 */
	void		(*after_commit) (struct MqKafkaRequest *req, StringInfo out);
	void	   *after_commit_arg;
} MqKafkaRequest;

typedef enum MqKafkaOutcome
{
	MQK_RESPOND,				/* the body is written: send it */
	MQK_NO_RESPONSE,			/* Produce with acks 0 */
	MQK_PARK,					/* Fetch without enough data, a JoinGroup or
								 * SyncGroup waiting for the group: run again
								 * later */
	MQK_RESPOND_CLOSE,			/* send the body, then close (a failed
								 * authentication, as Kafka does) */
	MQK_CLOSE					/* malformed: close the connection */
} MqKafkaOutcome;

typedef MqKafkaOutcome (*MqKafkaHandler) (MqKafkaRequest *req, StringInfo out);

typedef struct MqKafkaApi
{
	int16		key;
	int16		min_version;
	int16		max_version;
	int16		first_flexible; /* first flexible version; > max: none */
	const char *name;
	MqKafkaHandler handler;
} MqKafkaApi;

/* the APIs served (api_versions.c); may one come before SASL authentication? */
extern const MqKafkaApi *MqKafkaFindApi(int16 key);
extern bool MqKafkaPreAuthApi(int16 api_key);

/* handlers, one file per API family */
extern MqKafkaOutcome MqKafkaApiVersions(MqKafkaRequest *req, StringInfo out);
extern void MqKafkaApiVersionsError(StringInfo out);
extern MqKafkaOutcome MqKafkaMetadata(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaProduce(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaFetch(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaListOffsets(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaFindCoordinator(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaJoinGroup(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaSyncGroup(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDescribeGroups(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaListGroups(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaHeartbeat(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaLeaveGroup(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaOffsetCommit(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaOffsetFetch(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaSaslHandshake(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaSaslAuthenticate(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaCreateTopics(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDeleteTopics(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDescribeAcls(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaCreateAcls(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDeleteAcls(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDescribeConfigs(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaCreatePartitions(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaAlterConfigs(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaIncrementalAlterConfigs(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDeleteRecords(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaInitProducerId(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDescribeCluster(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaAddPartitionsToTxn(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaAddOffsetsToTxn(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaEndTxn(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaTxnOffsetCommit(MqKafkaRequest *req, StringInfo out);

/*
 * A request's topics, each with partitions by index (offset_topics.c):
 * the shape OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit and
 * AddPartitionsToTxn read, and the per-partition errors they answer.
 */
typedef struct MqKafkaOffsetPartition
{
	int32		index;
	int64		offset;			/* a commit's, or the one read */
	char	   *metadata;		/* a commit's, or the one read; NULL: none */
	int16		error;
} MqKafkaOffsetPartition;

typedef struct MqKafkaOffsetTopic
{
	char	   *name;
	int32		npartitions;
	MqKafkaOffsetPartition *partitions;
} MqKafkaOffsetTopic;

/* reads one partition's fields after its index; version: the request's */
typedef void (*MqKafkaOffsetPartitionReader) (MqKafkaReader *r, bool flex, int16 version,
											  MqKafkaOffsetPartition *part);

extern MqKafkaOffsetTopic *MqKafkaReadOffsetTopics(MqKafkaReader *r, bool flex, int16 version,
												   int32 ntopics, int min_partition_size,
												   MqKafkaOffsetPartitionReader read_partition);
extern void MqKafkaWritePartitionErrors(StringInfo out, bool flex,
										const MqKafkaOffsetTopic *topics, int ntopics);

/*
 * The transaction coordinator (txn_coordinator.c): each call runs in the
 * request's (sub)transaction and answers a Kafka error code.  fenced_code:
 * the request's version knows PRODUCER_FENCED (else an older epoch is
 * INVALID_PRODUCER_EPOCH).
 */
extern bool MqKafkaTxnRefused(void);

/* what the transaction APIs share (txn_protocol.c) */
typedef struct MqKafkaTxnProducer
{
	const char *txn_id;
	int64		producer_id;
	int16		epoch;
	bool		fenced_code;
} MqKafkaTxnProducer;

extern void MqKafkaTxnReadProducer(MqKafkaReader *r, bool flex, int16 version, int16 fenced_from,
								   MqKafkaTxnProducer *p);
extern MqKafkaOutcome MqKafkaTxnAnswer(StringInfo out, bool flex, int16 error);
extern MqKafkaOutcome MqKafkaTxnAnswerPartitions(StringInfo out, bool flex,
												 const MqKafkaOffsetTopic *topics, int ntopics);
extern int16 MqKafkaTxnRun(int16 (*fn) (void *arg), void *arg);
extern int16 MqKafkaTxnInitProducer(const char *txn_id, int32 timeout_ms, int64 given_id,
									int16 given_epoch, bool fenced_code,
									int64 (*new_id) (void), int64 *producer_id, int16 *epoch);
extern int16 MqKafkaTxnCheck(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code);
extern int16 MqKafkaTxnAddPartition(const char *txn_id, struct MqTopic *topic, int32 partition);
extern int16 MqKafkaTxnAddGroup(const char *txn_id, int64 producer_id, int16 epoch,
								bool fenced_code, const char *group);
extern int16 MqKafkaTxnCheckGroup(const char *txn_id, int64 producer_id, int16 epoch,
								  bool fenced_code, const char *group);
extern void MqKafkaTxnStoreOffset(const char *txn_id, const char *group, struct MqTopic *topic,
								  int32 partition, int64 offset, const char *metadata);
extern int16 MqKafkaTxnEnd(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code,
						   bool commit);
extern int16 MqKafkaTxnCheckProduce(const char *txn_id, int64 producer_id, int16 epoch,
									struct MqTopic *topic, int32 partition, bool *first);
extern void MqKafkaTxnNoteWrite(const char *txn_id, struct MqTopic *topic, int32 partition,
								int64 offset);
extern int	MqKafkaTxnExpire(void);
extern int	MqKafkaTxnExpireIds(void);
extern void MqKafkaTxnRestoreHolds(void);
/* the listener's turn: restored holds, then timeouts (once a second) */
extern void MqKafkaTxnTick(void);
extern MqKafkaOutcome MqKafkaDescribeLogDirs(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaDeleteGroups(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaOffsetDelete(MqKafkaRequest *req, StringInfo out);
extern MqKafkaOutcome MqKafkaOffsetForLeaderEpoch(MqKafkaRequest *req, StringInfo out);

/*
 * The group coordinator (api_groups.c): the groups' state lives in the
 * listener process.  Tick: session timeouts and rebalance deadlines, run
 * by the listener's loop outside any transaction.  GroupAccess: may
 * the request's role use the group (a Kafka error code).  CommitCheck: may
 * this member commit offsets of the group at this generation now;
 * *standalone is set for a commit of no member (generation -1), which the
 * caller must fence against SQL members with MqGroupHostExternally.
 */
extern void MqKafkaGroupsTick(void);
extern int16 MqKafkaGroupAccess(const char *group);
/* GroupAccess's first checks: mqlog installed, a valid group id */
extern int16 MqKafkaGroupIdError(const char *group);

/*
 * Is this node a group's coordinator (coordinator.c)?  On a cluster, the
 * node that holds the group's claim in etcd: NOT_COORDINATOR elsewhere
 * (*holder: that node, when known), COORDINATOR_NOT_AVAILABLE when no
 * node can be named now.  How far it may go: CHECK, only a group with
 * members here (or claimed a moment ago) is this node's; CACHED, a free
 * group is claimed here (an etcd call, unless cached); FRESH, claimed
 * or confirmed in etcd whatever the cache says (a group starting here).
 * claimed_lease: the lease the group was claimed under by its members
 * here (0: none), which api_groups.c knows.  CoordinatesGroup
 * (api_groups.c): the check with a claim, for the offset and group admin
 * requests.
 */
typedef enum MqKafkaClaimMode
{
	MQK_CLAIM_CHECK,
	MQK_CLAIM_CACHED,
	MQK_CLAIM_FRESH
} MqKafkaClaimMode;

extern int16 MqKafkaCoordinatorError(const char *group, int64 claimed_lease,
									 MqKafkaClaimMode mode, char **holder);
extern int16 MqKafkaCoordinatesGroup(const char *group);
extern int16 MqKafkaGroupCommitCheck(const char *group, int32 generation,
									 const char *member_id, bool transactional,
									 bool *standalone);

/*
 * A group this listener coordinates, as DescribeGroups, ListGroups and
 * OffsetDelete see it (api_groups.c): false if it coordinates none of
 * that name.  The strings and bytes are the coordinator's, valid until
 * the group next changes (the end of the request); members is palloc'd.
 */
typedef struct MqKafkaGroupMember
{
	const char *member_id;
	const char *client_id;
	const char *client_host;	/* "/address", as Kafka shows it */
	const char *metadata;		/* for the group's protocol (else the member's
								 * first choice); NULL: none */
	int			metadata_len;
	const char *assignment;		/* once the group is Stable; NULL: none */
	int			assignment_len;
	TimestampTz joined_at;
	TimestampTz last_seen;		/* its last join, sync, heartbeat or commit */
} MqKafkaGroupMember;

typedef struct MqKafkaGroupInfo
{
	const char *state;			/* Kafka's name: Empty, PreparingRebalance, ... */
	const char *protocol_type;	/* "consumer" for consumers */
	const char *protocol;		/* the assignor; "" while rebalancing */
	int32		generation;
	int			nmembers;
	MqKafkaGroupMember *members;
} MqKafkaGroupInfo;

extern bool MqKafkaGroupInfoOf(const char *group, MqKafkaGroupInfo *info);
/*
 * Which of the topics names[0..n-1] a member of the group here names in
 * its subscription (subscribed[i]).  Each member's subscription is read
 * once, in a context deleted after: a request naming a topic thousands of
 * times costs a sort, not a read of every subscription per name.
 */
extern void MqKafkaGroupSubscribed(const char *group, const char **names, int n,
								   bool *subscribed);

/*
 * The state and protocol type ListGroups and DescribeGroups show for a
 * group (api_list_groups.c): its coordinator's here, else Stable with SQL
 * members, Empty without
 */
extern void MqKafkaGroupShownState(const char *group, int sql_members,
								   const char **state, const char **protocol_type);

/*
 * Failed authentications per client address (backoff.c): Failed and
 * Succeeded count them, HeldUntil says until when the address's next
 * attempt waits (0: it need not).
 */
extern void MqKafkaAuthFailed(const char *address);
extern void MqKafkaAuthSucceeded(const char *address);
extern TimestampTz MqKafkaAuthHeldUntil(const char *address);

/*
 * TLS on the listener's connections (tls.c).  Start builds the OpenSSL
 * context when the listener starts (an ERROR if it cannot); Reload builds
 * it again after SIGHUP for the connections to come (when it cannot, the
 * one in use stays, logged).  New: a connection's TLS over its socket, in
 * cxt (NULL without mqlog.kafka_ssl).  Recv and Send work as recv(2) and
 * send(2) on a non-blocking socket (-1 with errno EWOULDBLOCK while the
 * network must move first; the first Recv drives the handshake); Events
 * are the socket events the blocked read (reading) and send (writing)
 * wait for, which may be the other direction's; Pending: decrypted bytes
 * wait in the TLS state, which no socket event will announce;
 * Established: the handshake is done (true without TLS).  Login, in a
 * transaction: a connection its client certificate authenticates becomes
 * the role the certificate names (state DONE); false when that role may
 * not log in.
 */
extern void MqKafkaTlsStart(void);
extern void MqKafkaTlsReload(void);
extern struct MqKafkaTls *MqKafkaTlsNew(pgsocket sock, const char *peer, MemoryContext cxt);
extern void MqKafkaTlsClose(struct MqKafkaTls *t);
extern ssize_t MqKafkaTlsRecv(struct MqKafkaTls *t, char *buf, size_t len);
extern ssize_t MqKafkaTlsSend(struct MqKafkaTls *t, const char *buf, size_t len);
extern uint32 MqKafkaTlsEvents(struct MqKafkaTls *t, bool reading, bool writing);
extern bool MqKafkaTlsPending(struct MqKafkaTls *t);
extern bool MqKafkaTlsEstablished(struct MqKafkaTls *t);
extern bool MqKafkaTlsLogin(MqKafkaSession *s);

/*
 * A role a client may authenticate as (api_sasl.c): it exists and may
 * log in; else false with *logdetail saying why, for the log
 */
extern bool MqKafkaLoginRole(const char *user, Oid *role, const char **logdetail);

/*
 * Requests mqlog does not serve, per client address (backoff.c):
 * Violation counts one, ViolationHeldUntil says until when the address's
 * next such request waits (0: it need not).
 */
extern void MqKafkaViolation(const char *address);
extern TimestampTz MqKafkaViolationHeldUntil(const char *address);

/*
 * A request of an API key mqlog does not serve (api NULL) or of a version
 * outside api's range (unsupported.c): the body of its UNSUPPORTED_VERSION
 * answer where that version's layout is known, else MQK_CLOSE; logged
 * once per connection, and the session marked violated.
 */
extern MqKafkaOutcome MqKafkaUnsupported(MqKafkaRequest *req, const MqKafkaApi *api,
										 StringInfo out);

/*
 * is the frame (after its size) a request MqKafkaUnsupported will answer,
 * or, from a connection still authenticating (before_auth), one that
 * MqKafkaServe refuses before authentication?  Either is a violation
 * (backoff.c).
 */
extern bool MqKafkaFrameUnsupported(const char *frame, int len, bool before_auth);

/* serving a frame of a connection (request.c) */
extern MqKafkaOutcome MqKafkaServe(const char *frame, int len, MqKafkaSession *session,
								   MqKafkaRequest *req, StringInfo out);

/*
 * A request's per-partition units run for at most MQK_REQUEST_TIME_MS
 * (always at least one): the listener serves one request at a time, and
 * a frame naming thousands of partitions (or one partition thousands of
 * times) must not hold every other connection for as long as they take.
 * MqKafkaOutOfTime: true once a unit has run (*attempted counts them) and
 * the time is up; the caller answers the unit, and every later one,
 * REQUEST_TIMED_OUT without running it, so the client retries what was
 * not done.
 */
#define MQK_REQUEST_TIME_MS 500

/*
 * How long a request may wait for a lock another transaction holds
 * (lock_timeout, set for each request's transaction): the listener serves
 * every connection in one process, so a request that waited for a SQL
 * session's open transaction (an uncommitted mq_drop_topic, a LOCK TABLE
 * on a segment, a row of mqlog.committed_offset) would stall every
 * client until it ended.  A wait past it is an ERROR with 55P03: a
 * partition's unit answers REQUEST_TIMED_OUT (retriable), anything else
 * closes the connection.  The admin APIs, which take exclusive locks
 * themselves, wait up to MQK_REQUEST_TIME_MS (MqKafkaAdminBegin).
 */
#define MQK_LOCK_WAIT_MS 50
extern bool MqKafkaOutOfTime(MqKafkaRequest *req, int *attempted);

/*
 * A unit of a handler's work (one partition) in a subtransaction: an
 * ERROR in fn becomes a Kafka error code (by the SQLSTATE, with
 * invalid_code for 22023, whose meaning depends on the API) and the unit's
 * writes are undone; out, if given, is cut back to its length before.
 */
extern int16 MqKafkaTry(void (*fn) (void *arg), void *arg, int16 invalid_code,
						StringInfo out);

/*
 * MqKafkaTry for the admin APIs (api_create_delete_topics.c,
 * api_describe_configs.c): the unit's ERROR becomes the code map gives for
 * its SQLSTATE (map gets the unit's arg, which can say what the unit was
 * doing; NULL: MqKafkaErrorOf, 22023 as INVALID_REQUEST) and its message,
 * for the response's error_message, is in *message (NULL on success).
 * Unless keep, the unit is rolled back even when it succeeds
 * (validate_only).
 */
extern int16 MqKafkaTryAdmin(void (*fn) (void *arg), void *arg,
							 int16 (*map) (int sqlerrcode, void *arg),
							 bool keep, char **message);

/* the Kafka code of an ERROR's SQLSTATE, invalid_code for 22023 */
extern int16 MqKafkaErrorOf(int sqlerrcode, int16 invalid_code);

/*
 * Metadata's auto-creation of a topic (api_create_delete_topics.c): created
 * as CreateTopics creates one of -1 partitions and replicas, in a unit of
 * its own whose leftovers go with scratch; TOPIC_ALREADY_EXISTS when
 * another request created it meanwhile.  *message: why it failed, or NULL.
 */
extern int16 MqKafkaAutoCreateTopic(const char *name, MemoryContext scratch, char **message);

/*
 * the groups layer's refusals of a group as Kafka's codes (a MqKafkaTryAdmin
 * map, api_delete_groups.c): 42501 GROUP_AUTHORIZATION_FAILED, 55006
 * NON_EMPTY_GROUP, 42704 GROUP_ID_NOT_FOUND, 42602 INVALID_GROUP_ID
 */
extern int16 MqKafkaGroupErrorOf(int sqlerrcode, void *arg);
/* mq_delete_group(text, bool), whose EXECUTE deleting a group's offsets needs */
extern Oid	MqKafkaDeleteGroupFunction(void);
/* an array of group ids (DeleteGroups, DescribeGroups); NULL: malformed */
extern char **MqKafkaReadGroupIds(MqKafkaReader *r, bool flex, int32 *ngroups);


/* which of n names occur more than once (api_create_delete_topics.c) */
extern bool *MqKafkaDuplicates(char *const *names, int n);
extern bool *MqKafkaRepeats(char *const *names, int n);
extern char *MqKafkaNamedAgain(const char *kind, const char *name, bool *told);

/*
 * The topics there are, read once for a request that names many
 * (api_create_delete_topics.c): a name not among them is
 * UNKNOWN_TOPIC_OR_PARTITION without a lookup of its own, which would leave
 * an entry in the topic cache (log/topic.c caches misses) for every name a
 * client makes up.
 */
typedef struct MqKafkaTopicSet
{
	int			n;
	char	  **names;			/* sorted by strcmp */
} MqKafkaTopicSet;

extern void MqKafkaKnownTopics(MqKafkaTopicSet *set);
extern bool MqKafkaKnownTopic(const MqKafkaTopicSet *set, const char *name);

/*
 * The SQL functions as the admin handlers call them
 * (api_create_delete_topics.c).  ExtensionFunction: a function of the
 * extension's schema by name and argument types, InvalidOid when mqlog is
 * not installed in the database.  ConfigJson: configs as the JSON object
 * mq_create_topic and mq_alter_topic take, Kafka's names and values as
 * strings (a NULL value: JSON null, the default).  CheckExecute: the EXECUTE privilege on
 * it, which the request's role must have as a SQL caller would (42501
 * otherwise).  TryInScratch: MqKafkaTryAdmin in scratch, reset after the
 * unit so that a request of many topics costs memory for its answers
 * only; the error message is copied out.
 */
extern Oid	MqKafkaExtensionFunction(const char *name, int nargs, const Oid *argtypes);
extern Datum MqKafkaConfigJson(int n, char *const *names, char *const *values);
extern void MqKafkaCheckExecute(Oid fn);
extern int16 MqKafkaTryInScratch(void (*fn) (void *arg), void *arg,
								 int16 (*map) (int sqlerrcode, void *arg),
								 bool keep, MemoryContext scratch, char **message);

/*
 * A topic admin request's walk over its units (api_create_delete_topics.c):
 * Begin looks up the SQL function (fn: InvalidOid when mqlog is not
 * installed) and the topics held here, and makes the scratch context
 * (unit, a constant string, names what it holds).  Missing: MQK_NONE for a topic the function can
 * act on here, else its error (MqKafkaMissingTopicError).  Try: a unit
 * on the topic (the unit's fn set to walk->fn by its caller), in scratch
 * (MqKafkaTryInScratch), unless the topic is missing or the request is
 * out of time (REQUEST_TIMED_OUT).
 */
typedef struct MqKafkaAdminWalk
{
	MqKafkaRequest *req;
	Oid			fn;
	MqKafkaTopicSet known;
	MemoryContext scratch;
	int			attempted;		/* units tried (MqKafkaOutOfTime) */
	bool		elsewhere_ok;	/* a replicated topic held elsewhere is done
								 * through etcd (MqKafkaAdminHeldElsewhere) */
} MqKafkaAdminWalk;

extern void MqKafkaAdminBegin(MqKafkaAdminWalk *walk, MqKafkaRequest *req,
							  const char *function, int nargs, const Oid *argtypes,
							  const char *unit);
extern int16 MqKafkaAdminMissing(MqKafkaAdminWalk *walk, const char *topic,
								 const char *what, char **message);
extern bool MqKafkaAdminHeldElsewhere(MqKafkaAdminWalk *walk, const char *topic);
extern int16 MqKafkaAdminTry(MqKafkaAdminWalk *walk, const char *topic, const char *what,
							 void (*fn) (void *arg), void *arg,
							 int16 (*map) (int sqlerrcode, void *arg),
							 bool keep, char **message);

/*
 * A manual replica assignment of CreateTopics or CreatePartitions: one
 * partition's broker ids (brokers.c).  MqKafkaAssignmentRefusal: NULL when
 * mqlog can honour the assignments as given (each partition on this
 * broker alone: what a topic of replication factor 1 is here), else why
 * not, for INVALID_REPLICA_ASSIGNMENT's message; replicated is whether the
 * topic is (to be) replicated, whose replicas mqlog places itself.
 */
typedef struct MqKafkaAssignment
{
	int32		partition;		/* CreateTopics' partition_index; -1 in
								 * CreatePartitions, where it is the order */
	int32		nbrokers;
	int32	   *brokers;
} MqKafkaAssignment;

extern char *MqKafkaAssignmentRefusal(const char *topic, const MqKafkaAssignment *a, int n,
									  bool replicated);

/*
 * What a parked Fetch waits for (watch.c): Begin at the start of each run
 * (true: a probe), then for each partition in order Unmoved (true in a
 * probe: skip it, its bytes are those of the last read), else Partition
 * before its offsets are read and Bytes after; the listener re-runs the
 * request only when Moved (or its time is up), and counts a re-run's cost
 * by its Size in partitions.
 */
typedef struct MqKafkaWatch MqKafkaWatch;
struct MqPartition;
extern bool MqKafkaWatchBegin(MqKafkaRequest *req, bool may_park, bool may_probe,
							  int nparts);
extern bool MqKafkaWatchUnmoved(MqKafkaRequest *req, int64 *bytes);
extern void MqKafkaWatchPartition(MqKafkaRequest *req, struct MqPartition *part);
extern void MqKafkaWatchBytes(MqKafkaRequest *req, int64 bytes);
extern bool MqKafkaWatchMoved(MqKafkaWatch *w);
extern int	MqKafkaWatchSize(const MqKafkaWatch *w);

/*
 * Bytes the listener may still buffer for answers (listener.c):
 * mqlog.kafka_max_buffered_size less the frames reserved and the answers
 * not sent yet of every connection; at least 0.
 */
extern int64 MqKafkaAnswerRoom(void);
/* may a parked JoinGroup or SyncGroup answer now (api_groups.c) */
extern bool MqKafkaParkedGroupReady(uint64 serial);

/*
 * (Sub)transactions aborted so far: an abort cancels a condition variable
 * sleep the listener prepared (listener.c).
 */
extern uint64 MqKafkaAbortCount(void);

/*
 * a topic for a request: NULL with *error set when it cannot be used
 * (NOT_LEADER_OR_FOLLOWER for a replicated topic held on other nodes only:
 * MqKafkaClusterTopicError)
 */
extern struct MqTopic *MqKafkaTopic(const char *name, int priv, int16 *error);
extern struct MqTopic *MqKafkaLedPartition(const char *name, int priv, int32 partition,
										   int32 client_epoch, int16 *error);

/* this listener's advertised address (Metadata) */
extern void MqKafkaAdvertised(char *host, int hostlen, int *port);

/*
 * The brokers (brokers.c).  MQK_NODE_ID: a single node's broker id; on a
 * cluster each node has its own, from etcd (-1 until it is known).
 */
#define MQK_NODE_ID 0

typedef struct MqKafkaBroker
{
	int32		id;
	const char *node;			/* its node's name; NULL on a single node */
	char		host[256];
	int			port;
	bool		alive;
	bool		listed;			/* in Metadata: alive, with a listener */
	const char *rack;			/* its mqlog.node_rack; NULL: none */
} MqKafkaBroker;

extern int32 MqKafkaSelfBrokerId(void);
extern MqKafkaBroker *MqKafkaBrokers(int *nbrokers);

/*
 * What Metadata and DescribeCluster say of the cluster (brokers.c): its
 * id, one on every node, and its controller, the listed broker of the
 * lowest id (-1: none listed)
 */
extern char *MqKafkaClusterId(void);
extern int32 MqKafkaControllerId(const MqKafkaBroker *brokers, int nbrokers);
/* the listed brokers, as Metadata and DescribeCluster answer them */
extern void MqKafkaWriteBrokers(StringInfo out, const MqKafkaBroker *brokers, int nbrokers,
								bool flex, bool with_rack);
extern const MqKafkaBroker *MqKafkaBrokerOf(const MqKafkaBroker *brokers, int nbrokers,
											const char *node);
extern int16 MqKafkaCheckLeader(struct MqTopic **topicp, int32 partition);
extern int32 MqKafkaLeaderEpoch(struct MqTopic *topic, int32 partition);
extern int16 MqKafkaCheckLeaderEpoch(struct MqTopic *topic, int32 partition, int32 client_epoch);

/*
 * Where a leader epoch ends in a partition this node leads, as
 * OffsetForLeaderEpoch answers (api_offset_for_leader_epoch.c): the end
 * offset and in *end_epoch the largest epoch at most epoch; -1 and -1 for
 * an epoch not seen yet
 */
extern int64 MqKafkaEpochEnd(struct MqTopic *topic, int32 partition, int32 epoch, int32 *end_epoch);

/* fetching from followers, KIP-392 (read_replicas.c) */
extern int16 MqKafkaCheckFetchReplica(struct MqTopic **topicp, int32 partition, bool replica_aware,
									  bool *follower);
extern bool MqKafkaFollowerBehind(struct MqTopic *topic, int32 partition, int64 offset);
extern int32 MqKafkaLeaderBroker(struct MqTopic *topic, int32 partition);
extern int32 MqKafkaPreferredReplica(struct MqTopic *topic, int32 partition, int64 offset,
									 const char *rack);
extern void MqKafkaNoteFollowerFetch(MqKafkaRequest *req, const char *topic, int32 partition,
									 int64 offset, int64 high_watermark, int bytes);
extern bool MqKafkaSeesClusterTopics(void);
extern int16 MqKafkaClusterTopicError(const char *name);
extern int16 MqKafkaMissingTopicError(const char *name, const char *what, char **message);

#endif							/* MQLOG_KAFKA_INTERNAL_H */
