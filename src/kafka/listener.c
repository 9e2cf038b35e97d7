/*-------------------------------------------------------------------------
 *
 * listener.c
 *		The Kafka listener's background worker: one process, connected to
 *		mqlog.kafka_database, multiplexing non-blocking client sockets.
 *
 * Why one process and not a worker per connection: PostgreSQL's backend
 * code is not thread-safe, so a connection is served by a process either
 * way, and a Kafka client keeps its connections open for its whole life
 * (librdkafka opens one per broker, plus one for bootstrap): a process
 * per connection would hold a backend slot, a snapshot's worth of shared
 * state and a database connection for every idle client.  One process
 * serving every connection in turn, each request in a transaction of its
 * own (request.c), holds one.  Requests are short (a produce is an append
 * and a commit; a fetch reads what is there); the one that waits, a Fetch
 * with max_wait_ms, is parked instead of blocking.  Every commit that
 * produced broadcasts mqlog's data condition variable, which sets this
 * process's latch (the same latch WaitEventSet waits on); on each turn the
 * loop then asks each parked Fetch's watch (watch.c) whether one of its
 * partitions' change counters or the catalog generation moved, and serves
 * again only those, and those whose max_wait_ms is up: a commit to another
 * topic costs a parked Fetch one comparison per topic it names.  A
 * JoinGroup or SyncGroup waiting for the other members of its group parks
 * too (api_groups.c) and is served again once its member's answer is
 * ready or the member ended (MqKafkaParkedGroupReady), or at its
 * deadline, and the loop runs
 * the groups' timeouts on every turn (MqKafkaGroupsTick), which comes at
 * least every second.
 *
 * A Fetch served again first probes (watch.c): it reads again only the
 * partitions that moved, and all of them only to answer.
 *
 * Fairness: a turn re-runs parked requests of at most RERUN_BUDGET
 * partitions in all, each counted at the partitions it names (the first
 * one that starts always runs whole, however many partitions it names);
 * the others that are due wait for the next turn, which comes at once,
 * after every connection that is ready has been served, and starts where
 * this one stopped.  So between two requests of another connection the
 * listener spends at most one budget's worth of parked re-runs, or one
 * request if it names more.  The cost that remains: a slow request (a
 * produce with acks = all waiting for replicas, a large fetch, a parked
 * one's answer) delays the other connections.
 *
 * The loop follows autoprewarm's: SIGTERM ends it, SIGHUP reloads the
 * settings (and the TLS files, tls.c), postmaster death ends it
 * (WL_EXIT_ON_PM_DEATH).
 *
 * TLS (mqlog.kafka_ssl): each connection's bytes go through tls.c, whose
 * reads and writes behave as non-blocking recv and send but may wait for
 * the other direction's socket event; the loop waits for what tls.c asks
 * (client_events), tries both directions on any event of a TLS
 * connection (client_io), and does not sleep while a connection that
 * wants to read has decrypted bytes waiting in its TLS state
 * (has_pending): no socket event would announce them.
 *
 * Framing: a request is a 4-byte big-endian size and that many bytes.  A
 * connection's requests are served one at a time and in order (Kafka
 * answers in order): nothing more is read from it while a request is
 * parked or its last answer is still being sent.
 *
 * What a client can cost (doc/kafka.md, "What a client can cost"):
 *
 *	- Before a connection is admitted (it has authenticated with SASL or,
 *	  without SASL, sent its first whole request) its frames may be at most
 *	  PREAUTH_MAX_FRAME and it has mqlog.kafka_auth_timeout to be admitted;
 *	  then it is closed.  With TLS its handshake comes first, within the
 *	  same time (tls.c), and holds at most a ClientHello of 128 kB or a
 *	  certificate chain of 32 kB in OpenSSL's buffers (measured: about
 *	  175 kB a connection); once done, a connection's TLS holds two record
 *	  buffers of about 17 kB while it reads or writes (none while idle).
 *	  When every connection slot is taken, a new connection closes the
 *	  oldest one not admitted yet, so connections that never authenticate
 *	  (or never finish their handshake) cannot keep clients out.
 *	- A size that is negative or larger than the frame cap
 *	  (mqlog.kafka_max_frame_size, and never more than
 *	  mqlog.kafka_max_buffered_size) closes the connection before a byte of
 *	  the frame is buffered.
 *	- Each connection reads into a buffer of at most BASE_IN bytes, which
 *	  holds small frames (and the start of the next few: pipelined
 *	  requests are read together).  A larger frame first reserves its whole
 *	  size against mqlog.kafka_max_buffered_size, shared by every
 *	  connection, and gets a buffer of exactly that size; while the
 *	  reservation is not to be had, nothing more is read from that
 *	  connection (Kafka's queued.max.request.bytes mutes it the same way).
 *	  Once the frame is served the buffer shrinks back and the reservation
 *	  is returned.  A frame is read as it arrives, but its reservation is
 *	  taken at once: a slow client holds what it announced.
 *	- A request of an API or version mqlog does not serve (answered
 *	  UNSUPPORTED_VERSION, or its connection closed: unsupported.c)
 *	  counts against its address: the next such request from the address,
 *	  on any connection, waits 100 ms, twice as long after each one, at
 *	  most 5 s (backoff.c), so a client that reconnects and asks again at
 *	  once gets one answer per 5 s instead of a hundred, and one log
 *	  line.  Requests that are served are never held, whatever their
 *	  address did; a new connection held so is not admitted, so held
 *	  connections cannot keep clients out either.
 *	- A connection that sends nothing and waits for nothing for
 *	  mqlog.kafka_idle_timeout is closed (Kafka's connections.max.idle.ms).
 *	- What a request may expand to (decompressed batches) is bounded by
 *	  mqlog.kafka_max_request_memory (api_produce.c), and freed after each
 *	  partition entry.  What any request's units answer (a partition's
 *	  metadata, a group's members) stops at the same bound (request.c),
 *	  the rest answered REQUEST_TIMED_OUT.  A group member's protocols and
 *	  assignment take at most 1 MB each (64 protocols at most), a group
 *	  1,000 pending member ids, the groups 64 MB (api_groups.c).
 *	- An idempotent producer's batch costs a lookup in the producers'
 *	  shared state (log/producers.c, mqlog.max_producer_states entries in
 *	  all, the least recently used evicted); the first one to a partition
 *	  after a restart reads the headers of at most
 *	  mqlog.kafka_producer_state_window bytes of its log, once per
 *	  partition.  InitProducerId costs one sequence value.
 *	- A Kafka transaction (txn_coordinator.c) holds at most
 *	  mqlog.max_inflight_partitions partitions, 100 groups and 1,000
 *	  pending offsets; its EndTxn writes a marker a partition and reads
 *	  the offsets at once (4 MB at most); the timeout pass aborts at most
 *	  16 transactions a turn, once a second.  A read that meets
 *	  transactional batches holds one window of 256 aborted ranges.
 *	- Answers not sent yet count against mqlog.kafka_max_buffered_size
 *	  too: a Fetch takes at most what is left (MqKafkaAnswerRoom), so
 *	  clients that do not read their answers cannot make the listener
 *	  buffer more; and a connection that reads nothing of its answer for
 *	  mqlog.kafka_idle_timeout is closed.
 *
 * Fairness between connections: a turn serves each connection's whole
 * frames for at most SERVE_SLICE_MS (always at least one), then moves on;
 * the next turn comes at once and serves the rest.  One request is not
 * split: the budgets above bound it.  Reading is bounded the same way: a
 * turn reads what a connection's socket holds of its front frame, never
 * past that frame's end (read_client).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "log/partition.h"
#include "kafka/kafka_internal.h"

PGDLLEXPORT void mqlog_kafka_main(Datum main_arg);

#define MAX_LISTEN	8
#define MAX_TIMEOUT_MS 1000L
#define RERUN_BUDGET 2000		/* partitions re-run per turn (see above) */
#define BASE_IN		(65536 - 1) /* a connection's buffer outside the
								 * reservations (with its zero, 64 kB) */
#define PREAUTH_MAX_FRAME 16384 /* frame cap until a connection is admitted */
#define SERVE_SLICE_MS 20		/* a connection's share of a turn */
#define HEAP_KEPT	(16 * 1024 * 1024)	/* see keep_heap */

typedef struct Client
{
	pgsocket	sock;
	char		peer[NI_MAXHOST + 8];
	char		host[NI_MAXHOST];	/* its address, without the port */
	MemoryContext cxt;			/* the connection's buffers */
	StringInfoData in;			/* read, not yet served */
	StringInfoData out;			/* answers not yet sent */
	int			out_sent;
	bool		parked;			/* the first frame of in is a parked Fetch */
	MemoryContext park_cxt;		/* what the parked request watches */
	bool		closing;		/* close once out is sent */
	MqKafkaSession session;		/* its SASL authentication, its TLS */
	MqKafkaRequest req;
	TimestampTz connected;		/* when it was accepted */
	TimestampTz active;			/* when it last sent or was sent a byte */
	bool		admitted;		/* authenticated, or sent a whole request */
	TimestampTz held_until;		/* its authentication, or its first request,
								 * waits (backoff.c) */
	bool		served;			/* a request of it was served */
	int			reserved;		/* bytes of mqlog.kafka_max_buffered_size its
								 * frame holds (0: it fits in BASE_IN) */
} Client;

static pgsocket listen_socks[MAX_LISTEN];
static int	nlisten = 0;
static Client **clients;
static int	nclients = 0;
static MemoryContext request_cxt;
static Client **turn;			/* the clients in the order a turn re-runs them */
static int64 reserved_total = 0;	/* of mqlog.kafka_max_buffered_size */
static bool serve_left = false; /* a connection has whole frames left to serve */
static int	rerun_next = 0;		/* where the next turn starts */
static char listen_tag;			/* user_data of the listening sockets' events */

static bool
is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
	{
		const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
			(IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/*
 * Bind every address mqlog.kafka_listen resolves to.  A setting that
 * cannot work ends the worker for good (exit 0: it is not restarted, the
 * settings need a server restart anyway); a bind that fails (the port is
 * taken) ends it with an error, and the postmaster tries again later.
 */
static void
open_listeners(void)
{
	char		host[256];
	char		port_str[16];
	int			port;
	struct addrinfo hints;
	struct addrinfo *res;
	int			rc;
	bool		remote = false;

	if (!MqKafkaSplitAddress(mqlog_kafka_listen, host, sizeof(host), &port))
	{
		ereport(LOG,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid mqlog.kafka_listen \"%s\"; the Kafka listener does not start",
						mqlog_kafka_listen)));
		proc_exit(0);
	}
	snprintf(port_str, sizeof(port_str), "%d", port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host, port_str, &hints, &res);
	if (rc != 0)
		ereport(ERROR,
				(errmsg("could not resolve mqlog.kafka_listen host \"%s\": %s", host,
						gai_strerror(rc))));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
		remote |= !is_loopback(ai->ai_addr);
	if (remote && !mqlog_kafka_allow_remote && !MqKafkaAuthenticatesAll())
	{
		freeaddrinfo(res);
		ereport(LOG,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("mqlog.kafka_listen \"%s\" is not a loopback address; the Kafka listener does not start",
						mqlog_kafka_listen),
				 errdetail("Neither mqlog.kafka_sasl_mechanisms nor mqlog.kafka_ssl_client_auth = required is set: clients that do not authenticate act as mqlog.kafka_role."),
				 errhint("Listen on 127.0.0.1 or [::1], set mqlog.kafka_sasl_mechanisms or mqlog.kafka_ssl_client_auth = required, or set mqlog.kafka_allow_remote = on if only trusted clients can reach the address.")));
		proc_exit(0);
	}
	/* PLAIN's passwords in clear beyond loopback: said at each start */
	if (remote && !mqlog_kafka_allow_remote && !mqlog_kafka_ssl && MqKafkaSaslEnabled("PLAIN"))
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the Kafka listener on \"%s\", not a loopback address, takes SASL PLAIN without TLS: passwords cross the network in clear",
						mqlog_kafka_listen),
				 errhint("Set mqlog.kafka_ssl = on, use SCRAM-SHA-256 only, or set mqlog.kafka_allow_remote = on if the network cannot be sniffed.")));
	for (struct addrinfo *ai = res; ai && nlisten < MAX_LISTEN; ai = ai->ai_next)
	{
		pgsocket	s = socket(ai->ai_family, SOCK_STREAM, 0);
		int			one = 1;

		if (s == PGINVALID_SOCKET)
			continue;
		(void) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			(void) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) < 0 || listen(s, 128) < 0 ||
			!pg_set_noblock(s))
		{
			int			save = errno;

			closesocket(s);
			freeaddrinfo(res);
			errno = save;
			ereport(ERROR,
					(errcode_for_socket_access(),
					 errmsg("could not listen on mqlog.kafka_listen \"%s\": %m",
							mqlog_kafka_listen)));
		}
		listen_socks[nlisten++] = s;
	}
	freeaddrinfo(res);
	if (nlisten == 0)
		ereport(ERROR,
				(errmsg("mqlog.kafka_listen \"%s\" gave no address to listen on",
						mqlog_kafka_listen)));
	if (MqKafkaSaslRequired())
		ereport(LOG,
				(errmsg("mqlog Kafka listener on %s serving database \"%s\" to clients authenticated with SASL (%s)%s",
						mqlog_kafka_listen, mqlog_kafka_database, mqlog_kafka_sasl_mechanisms,
						mqlog_kafka_ssl ? " over TLS" : "")));
	else if (mqlog_kafka_ssl && mqlog_kafka_ssl_client_auth != MQK_CLIENT_AUTH_NONE)
		ereport(LOG,
				(errmsg("mqlog Kafka listener on %s serving database \"%s\" over TLS to clients authenticated by their certificate%s",
						mqlog_kafka_listen, mqlog_kafka_database,
						mqlog_kafka_ssl_client_auth == MQK_CLIENT_AUTH_REQUIRED ? "" :
						psprintf(", and as role \"%s\" to those without one", mqlog_kafka_role))));
	else
		ereport(LOG,
				(errmsg("mqlog Kafka listener on %s serving database \"%s\" as role \"%s\"%s",
						mqlog_kafka_listen, mqlog_kafka_database, mqlog_kafka_role,
						mqlog_kafka_ssl ? " over TLS" : "")));
}

/* the connection's frame buffer back to BASE_IN, its reservation returned */
static void
release_frame(Client *c)
{
	if (c->reserved == 0)
		return;
	reserved_total -= c->reserved;
	c->reserved = 0;
	if (c->in.len <= BASE_IN)
	{
		c->in.data = repalloc(c->in.data, BASE_IN + 1);
		c->in.maxlen = BASE_IN + 1;
	}
}

static void
close_client(Client *c)
{
	for (int i = 0; i < nclients; i++)
		if (clients[i] == c)
		{
			clients[i] = clients[--nclients];
			break;
		}
	reserved_total -= c->reserved;
	MqKafkaTlsClose(c->session.tls);
	closesocket(c->sock);
	MemoryContextDelete(c->cxt);
	pfree(c);
}

/* the oldest connection not admitted yet, or NULL */
static Client *
oldest_unadmitted(void)
{
	Client	   *oldest = NULL;

	for (int i = 0; i < nclients; i++)
		if (!clients[i]->admitted && !clients[i]->closing &&
			(oldest == NULL || clients[i]->connected < oldest->connected))
			oldest = clients[i];
	return oldest;
}

/*
 * Accept what the listening socket has.  With every slot taken, a new
 * connection takes the slot of the oldest one that is not admitted yet
 * (the caller has handled this turn's events of the clients, so closing
 * one here leaves no event pointing at it); without one, it is refused.
 */
static void
accept_clients(pgsocket ls)
{
	for (;;)
	{
		struct sockaddr_storage addr;
		socklen_t	alen = sizeof(addr);
		pgsocket	s = accept(ls, (struct sockaddr *) &addr, &alen);
		Client	   *c;
		int			one = 1;
		char		host[NI_MAXHOST];
		char		serv[NI_MAXSERV];

		if (s == PGINVALID_SOCKET)
			return;				/* EAGAIN, or a connection already gone */
		if (nclients >= mqlog_kafka_max_connections && (c = oldest_unadmitted()) != NULL)
		{
			ereport(LOG,
					(errmsg("closing the connection of Kafka client %s, which has not authenticated or sent a request, to accept a new one: mqlog.kafka_max_connections (%d) are open",
							c->peer, mqlog_kafka_max_connections)));
			close_client(c);
		}
		if (nclients >= mqlog_kafka_max_connections || !pg_set_noblock(s))
		{
			ereport(LOG,
					(errmsg("Kafka connection refused: mqlog.kafka_max_connections (%d) are open",
							mqlog_kafka_max_connections)));
			closesocket(s);
			continue;
		}
		(void) setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = MemoryContextAllocZero(TopMemoryContext, sizeof(Client));
		c->sock = s;
		c->session.state = MqKafkaSaslRequired() ? MQK_SASL_WAIT_HANDSHAKE : MQK_SASL_OFF;
		c->connected = c->active = GetCurrentTimestamp();
		c->cxt = AllocSetContextCreate(TopMemoryContext, "mqlog kafka connection",
									   ALLOCSET_SMALL_SIZES);
		c->park_cxt = AllocSetContextCreate(c->cxt, "mqlog kafka parked request",
											ALLOCSET_SMALL_SIZES);
		if (getnameinfo((struct sockaddr *) &addr, alen, host, sizeof(host), serv,
						sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		{
			snprintf(c->peer, sizeof(c->peer), "%s:%s", host, serv);
			strlcpy(c->host, host, sizeof(c->host));
		}
		c->session.peer = c->peer;
		{
			MemoryContext old = MemoryContextSwitchTo(c->cxt);

			initStringInfo(&c->in);
			initStringInfo(&c->out);
			MemoryContextSwitchTo(old);
		}
		c->session.tls = MqKafkaTlsNew(s, c->peer, c->cxt);
		clients[nclients++] = c;
	}
}

/* ------------------------------------------------------------------------
 * Reading frames, serving them, sending answers
 * ------------------------------------------------------------------------ */

static uint32
be32(const char *p)
{
	return ((uint32) (uint8) p[0] << 24) | ((uint32) (uint8) p[1] << 16) |
		((uint32) (uint8) p[2] << 8) | (uint32) (uint8) p[3];
}

static bool
authenticating(Client *c)
{
	return c->session.state != MQK_SASL_OFF && c->session.state != MQK_SASL_DONE;
}

/* the largest frame the connection may send now */
static int32
frame_cap(Client *c)
{
	if (authenticating(c))
		return PREAUTH_MAX_FRAME;
	return Min(mqlog_kafka_max_frame_size, mqlog_kafka_max_buffered_size - 4);
}

/* the size of the frame at the front of in, or -1 while incomplete */
static int
complete_frame(Client *c)
{
	int32		size;

	if (c->in.len < 4)
		return -1;
	size = (int32) be32(c->in.data);
	if (size < 0 || size > frame_cap(c) || c->in.len - 4 < size)
		return -1;
	return size;
}

/* false when the announced size is refused: the connection closes */
static bool
frame_size_ok(Client *c)
{
	int32		size;

	if (c->in.len < 4)
		return true;
	size = (int32) be32(c->in.data);
	if (size >= 0 && size <= frame_cap(c))
		return true;
	if (authenticating(c))
		ereport(LOG,
				(errmsg("Kafka client %s sent a frame of %d bytes before authenticating, over the %d bytes allowed until it has; closing its connection",
						c->peer, size, PREAUTH_MAX_FRAME)));
	else
		ereport(LOG,
				(errmsg("Kafka client %s sent a frame of %d bytes, over mqlog.kafka_max_frame_size (%d) or mqlog.kafka_max_buffered_size (%d); closing its connection",
						c->peer, size, mqlog_kafka_max_frame_size, mqlog_kafka_max_buffered_size)));
	return false;
}

/*
 * How many more bytes of the front frame the buffer may take now: up to
 * BASE_IN for a frame that fits in it (or whose size is not read yet),
 * else up to the frame's end once its reservation is held.  Takes the
 * reservation when it is to be had; 0 while it is not.
 */
static int
read_room(Client *c)
{
	int64		end;

	if (c->in.len < 4 || (end = 4 + (int64) be32(c->in.data)) <= BASE_IN)
		return BASE_IN - c->in.len;
	if (c->reserved == 0)
	{
		if (reserved_total + end > mqlog_kafka_max_buffered_size)
			return 0;
		c->reserved = (int) end;
		reserved_total += end;
		c->in.data = repalloc(c->in.data, end + 1);
		c->in.maxlen = (int) end + 1;
	}
	return (int) (end - c->in.len);
}

static bool
wants_read(Client *c)
{
	return !c->parked && !c->closing && c->out.len == 0 && complete_frame(c) < 0 &&
		read_room(c) > 0;
}

/*
 * The socket events the connection waits for: to read, to send its
 * answer; with TLS, whichever events tls.c says these wait for
 */
static uint32
client_events(Client *c)
{
	bool		reading = wants_read(c);
	bool		writing = c->out.len > 0;

	if (c->session.tls)
		return MqKafkaTlsEvents(c->session.tls, reading, writing);
	return (reading ? WL_SOCKET_READABLE : 0) | (writing ? WL_SOCKET_WRITEABLE : 0);
}

/*
 * Decrypted bytes of a connection that wants to read, left in its TLS
 * state by the last read: no socket event will announce them
 */
static bool
has_pending(Client *c)
{
	return c->session.tls && MqKafkaTlsPending(c->session.tls) && wants_read(c);
}

static bool read_client(Client *c);
static bool send_client(Client *c);

/*
 * A socket event of the connection: send what waits, read what comes.
 * With TLS either may have waited for either event, so both are tried.
 * false: close the connection.
 */
static bool
client_io(Client *c, uint32 events)
{
	bool		tls = c->session.tls != NULL;

	if ((tls ? c->out.len > 0 : (events & WL_SOCKET_WRITEABLE) != 0) && !send_client(c))
		return false;
	if (tls ? wants_read(c) : (events & WL_SOCKET_READABLE) != 0)
		return read_client(c);
	return true;
}

/*
 * What the socket holds of the front frame, read straight into the
 * connection's buffer, until the socket is drained or the frame (or the
 * buffer's 64 kB while its size is unknown) is complete: a frame of a
 * megabyte takes a few reads in one turn, not a turn of the loop (a wait
 * set built, waited on and freed) and a copy through the stack for each
 * 64 kB.  It reads no further than read_room allows, as before.
 * false: the peer is gone or the connection failed
 */
static bool
read_client(Client *c)
{
	int			room;

	while ((room = read_room(c)) > 0)
	{
		ssize_t		n;

		enlargeStringInfo(&c->in, room);
		n = c->session.tls ? MqKafkaTlsRecv(c->session.tls, c->in.data + c->in.len, room) :
			recv(c->sock, c->in.data + c->in.len, room, 0);
		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		c->in.len += (int) n;
		c->in.data[c->in.len] = '\0';
		c->active = GetCurrentTimestamp();
		if (!frame_size_ok(c))
			return false;
		/* without SASL a whole first request admits the connection */
		if (!c->admitted && !authenticating(c) && complete_frame(c) >= 0)
			c->admitted = true;
		/*
		 * A short read has most likely drained the socket; a TLS read
		 * returns one record at most, so TLS reads go on until EAGAIN.
		 */
		if (n < room && !c->session.tls)
			break;
	}
	return true;
}

/* false: the connection failed */
static bool
send_client(Client *c)
{
	while (c->out_sent < c->out.len)
	{
		const char *from = c->out.data + c->out_sent;
		ssize_t		n = c->session.tls ?
			MqKafkaTlsSend(c->session.tls, from, c->out.len - c->out_sent) :
			send(c->sock, from, c->out.len - c->out_sent, MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		c->out_sent += (int) n;
		c->active = GetCurrentTimestamp();
	}
	/* a large answer's buffer is not kept for the connection's life */
	if (c->out.maxlen > 4 * BASE_IN)
	{
		MemoryContext old = MemoryContextSwitchTo(c->cxt);

		pfree(c->out.data);
		initStringInfo(&c->out);
		MemoryContextSwitchTo(old);
	}
	resetStringInfo(&c->out);
	c->out_sent = 0;
	return true;
}

int64
MqKafkaAnswerRoom(void)
{
	int64		room = (int64) mqlog_kafka_max_buffered_size - reserved_total;

	for (int i = 0; i < nclients; i++)
		room -= clients[i]->out.len;
	return Max(room, 0);
}

/*
 * A connection that took too long to be admitted, or has been idle too
 * long: the reason for the log, or NULL
 */
static const char *
expired(Client *c, TimestampTz now)
{
	/* the time an authentication is held (backoff.c) does not count */
	if (!c->admitted &&
		TimestampDifferenceExceeds(Max(c->connected, c->held_until), now,
								   mqlog_kafka_auth_timeout))
		return !MqKafkaTlsEstablished(c->session.tls) ?
			"it did not complete its TLS handshake within mqlog.kafka_auth_timeout" :
			authenticating(c) ?
			"it did not authenticate within mqlog.kafka_auth_timeout" :
			"it sent no whole request within mqlog.kafka_auth_timeout";
	/* an answer it does not read is no activity either; a hold is */
	if (mqlog_kafka_idle_timeout > 0 && !c->parked &&
		TimestampDifferenceExceeds(Max(c->active, c->held_until), now,
								   mqlog_kafka_idle_timeout))
		return c->out.len > 0 ? "it read nothing of its answer for mqlog.kafka_idle_timeout" :
			"it was idle for mqlog.kafka_idle_timeout";
	return NULL;
}

/*
 * Serve the frames at the front of in, in order, while the last answer is
 * sent and nothing is parked, for at most SERVE_SLICE_MS after the first
 * (serve_left says some are left for the next turn).  false: close the
 * connection.
 */
static bool
serve_client(Client *c, bool rerun)
{
	int			size;
	int			served = 0;
	TimestampTz began = GetCurrentTimestamp();

	while ((size = complete_frame(c)) >= 0 && c->out.len == 0)
	{
		MqKafkaOutcome outcome;
		MemoryContext old;
		TimestampTz held;

		if (served++ > 0 &&
			TimestampDifferenceExceeds(began, GetCurrentTimestamp(), SERVE_SLICE_MS))
		{
			serve_left = true;
			break;
		}
		/*
		 * failed authentications from its address, or, for a request mqlog
		 * does not serve or one before authenticating that needs it,
		 * earlier ones from its address: wait (backoff.c).  (A bare SASL
		 * token after SaslHandshake v0 is no request to look into.)
		 * A new connection held so is not admitted: others may take its
		 * slot.
		 */
		held = Max(authenticating(c) ? MqKafkaAuthHeldUntil(c->host) : 0,
				   c->session.state != MQK_SASL_WAIT_RAW &&
				   MqKafkaFrameUnsupported(c->in.data + 4, size, authenticating(c)) ?
				   MqKafkaViolationHeldUntil(c->host) : 0);
		if (held != 0)
		{
			c->held_until = held;	/* kept: the auth deadline counts from it */
			if (!c->served && c->session.state == MQK_SASL_OFF)
				c->admitted = false;
			return true;
		}
		if (!rerun)
		{
			memset(&c->req, 0, sizeof(c->req));
			c->req.client_host = c->host;
			c->req.received = GetCurrentTimestamp();
			c->req.park_cxt = c->park_cxt;
		}
		else
			c->req.final = GetCurrentTimestamp() >= c->req.wake_at;
		rerun = false;

		old = MemoryContextSwitchTo(request_cxt);
		pgstat_report_activity(STATE_RUNNING, "kafka request");
		outcome = MqKafkaServe(c->in.data + 4, size, &c->session, &c->req, &c->out);
		pgstat_report_activity(STATE_IDLE, NULL);
		MemoryContextSwitchTo(old);
		MemoryContextReset(request_cxt);
		if (c->session.state == MQK_SASL_DONE && !c->admitted)
		{
			c->admitted = true;
			MqKafkaAuthSucceeded(c->host);
		}
		if (c->session.failed)
		{
			c->session.failed = false;
			MqKafkaAuthFailed(c->host);
		}
		if (c->session.violated)
		{
			c->session.violated = false;
			MqKafkaViolation(c->host);
		}
		if (!c->served)
		{
			c->served = true;
			if (c->session.state == MQK_SASL_OFF)
				c->admitted = true;
		}

		if (outcome == MQK_CLOSE)
			return false;
		c->parked = (outcome == MQK_PARK);
		if (c->parked)
			return true;
		/* answered: what it watched is of no more use */
		c->req.watch = NULL;
		MemoryContextReset(c->park_cxt);
		/* the frame is served: take it off, and give its buffer back */
		memmove(c->in.data, c->in.data + 4 + size, c->in.len - 4 - size);
		c->in.len -= 4 + size;
		release_frame(c);
		if (!send_client(c))
			return false;
		if (outcome == MQK_RESPOND_CLOSE)
		{
			/* the answer is sent or is being sent: read nothing more */
			c->closing = true;
			return c->out.len > 0;
		}
	}
	return frame_size_ok(c);
}

/*
 * Serve again the parked requests that may answer now: a Fetch whose watch
 * moved or whose time is up, any other parked request always, within the
 * turn's budget (see the top of the file).  The caller has prepared to
 * sleep on the data condition variable first, so a commit from now on sets
 * the latch.  true: some that were due are left for the next turn.
 */
static bool
rerun_parked(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int			n = nclients;
	int			start = n > 0 ? rerun_next % n : 0;
	int			budget = RERUN_BUDGET;
	int			nrerun = 0;
	int			left = 0;
	long		rerun_us = 0;

	/* closing a client reorders clients[]: go by a copy */
	for (int k = 0; k < n; k++)
		turn[k] = clients[(start + k) % n];
	for (int k = 0; k < n; k++)
	{
		Client	   *c = turn[k];
		TimestampTz began;

		if (!c->parked || (now < c->req.wake_at &&
						   (c->req.park_group ?
							!MqKafkaParkedGroupReady(c->req.park_token) :
							!MqKafkaWatchMoved(c->req.watch))))
			continue;
		if (budget <= 0)
		{
			if (left++ == 0)
				rerun_next = start + k;
			continue;
		}
		budget -= MqKafkaWatchSize(c->req.watch);
		nrerun++;
		began = GetCurrentTimestamp();
		c->parked = false;
		if (!serve_client(c, true))
			close_client(c);
		rerun_us += (long) (GetCurrentTimestamp() - began);
	}
	ereport(DEBUG2,
			(errmsg_internal("kafka listener turn: %d parked request(s) re-run (%d partitions), %d left for the next turn; %ld us re-running, %ld us in all",
							 nrerun, RERUN_BUDGET - budget, left, rerun_us,
							 (long) (GetCurrentTimestamp() - now))));
	return left > 0;
}

/*
 * until the earliest parked Fetch's time is up or a held authentication
 * may go on, at most a second
 */
static long
wait_timeout(void)
{
	TimestampTz now = GetCurrentTimestamp();
	long		timeout = MAX_TIMEOUT_MS;

	for (int i = 0; i < nclients; i++)
	{
		if (clients[i]->parked)
			timeout = Min(timeout, TimestampDifferenceMilliseconds(now, clients[i]->req.wake_at));
		if (clients[i]->held_until > now)
			timeout = Min(timeout, TimestampDifferenceMilliseconds(now, clients[i]->held_until) + 1);
	}
	return Max(timeout, 0);
}

static bool
any_parked(void)
{
	for (int i = 0; i < nclients; i++)
		if (clients[i]->parked)
			return true;
	return false;
}

/*
 * Keep freed heap memory mapped.  A Produce of a megabyte allocates and
 * frees a few megabytes (the frame's buffer, the batch's stored copy, its
 * decoded records), and with glibc's dynamic thresholds they were given
 * back to the kernel after some requests and not others, so that the next
 * request faulted them in again page by page: in some runs half of the
 * listener's CPU (doc/benchmarks.md, "The Kafka produce path").  So
 * allocations below HEAP_KEPT come from the heap, and up to HEAP_KEPT of
 * free heap stays mapped: the listener's resident size stays at the most
 * it used, plus at most that much.
 */
static void
keep_heap(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, HEAP_KEPT);
	mallopt(M_TRIM_THRESHOLD, HEAP_KEPT);
#endif
}

void
mqlog_kafka_main(Datum main_arg)
{
	MemoryContext loop_cxt;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(mqlog_kafka_database, NULL, 0);
	MqWorkerPinSearchPath();
	pgstat_report_appname("mqlog kafka listener");
	keep_heap();

	clients = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(Client *) * mqlog_kafka_max_connections);
	turn = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(Client *) * mqlog_kafka_max_connections);
	request_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog kafka request",
										ALLOCSET_DEFAULT_SIZES);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog kafka wait",
									 ALLOCSET_DEFAULT_SIZES);
	MqKafkaTlsStart();
	open_listeners();

	while (!ShutdownRequestPending)
	{
		WaitEventSet *set;
		WaitEvent  *events;
		int			nevents;
		int			nready;
		uint64		aborts;
		bool		more = false;
		bool		pending = false;
		pgsocket	listening[MAX_LISTEN];
		int			nlistening;
		TimestampTz now;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			MqKafkaTlsReload();
		}

		/* the groups' session timeouts and rebalance deadlines */
		MqKafkaGroupsTick();
		/* Kafka transactions past transaction.timeout.ms are aborted */
		MqKafkaTxnTick();

		/*
		 * Parked requests: prepare to sleep before looking again, so that a
		 * commit after the look wakes the wait below.  A (sub)transaction
		 * abort in between cancels the sleep; then look again at once.
		 */
		aborts = MqKafkaAbortCount();
		if (any_parked())
		{
			ConditionVariablePrepareToSleep(MqDataArrivedCV());
			more = rerun_parked();
		}

		MemoryContextReset(loop_cxt);
		set = CreateWaitEventSet(loop_cxt, 2 + nlisten + nclients);
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < nlisten; i++)
			AddWaitEventToSet(set, WL_SOCKET_READABLE, listen_socks[i], NULL, &listen_tag);
		for (int i = 0; i < nclients; i++)
		{
			uint32		ev = client_events(clients[i]);

			if (ev != 0)
				AddWaitEventToSet(set, ev, clients[i]->sock, NULL, clients[i]);
			pending |= has_pending(clients[i]);
		}
		nevents = 2 + nlisten + nclients;
		events = palloc(sizeof(WaitEvent) * nevents);
		nready = WaitEventSetWait(set,
								  MqKafkaAbortCount() != aborts || more || serve_left || pending ?
								  0 : wait_timeout(),
								  events, nevents, PG_WAIT_EXTENSION);
		serve_left = false;
		nlistening = 0;
		ConditionVariableCancelSleep();
		FreeWaitEventSet(set);	/* its epoll descriptor is not memory */

		for (int i = 0; i < nready; i++)
		{
			WaitEvent  *e = &events[i];
			Client	   *c = e->user_data;

			if (e->events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
				continue;
			}
			if (e->user_data == &listen_tag)
			{
				listening[nlistening++] = e->fd;	/* after the clients' events */
				continue;
			}
			if (c == NULL)
				continue;		/* a client closed above */
			if (!client_io(c, e->events))
			{
				close_client(c);
				/* a later event of the same client points at freed memory */
				for (int j = i + 1; j < nready; j++)
					if (events[j].user_data == c)
						events[j].user_data = NULL, events[j].events = 0;
			}
		}
		for (int i = 0; i < nlistening; i++)
			accept_clients(listening[i]);
		now = GetCurrentTimestamp();
		for (int i = 0; i < nclients; i++)
		{
			Client	   *c = clients[i];
			const char *why = expired(c, now);

			if (why != NULL)
				ereport(LOG,
						(errmsg("closing the connection of Kafka client %s: %s", c->peer, why)));
			if (why != NULL || (has_pending(c) && !read_client(c)) ||
				(c->closing ? c->out.len == 0 : (!c->parked && !serve_client(c, false))))
			{
				close_client(c);
				i--;
			}
		}
	}
	for (int i = 0; i < nlisten; i++)
		closesocket(listen_socks[i]);
	proc_exit(0);
}
