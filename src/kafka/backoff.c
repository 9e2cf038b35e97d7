/*-------------------------------------------------------------------------
 *
 * backoff.c
 *		What clients from one address did wrong, and how long the
 *		address's next attempt waits: failed SASL authentications (password
 *		guessing) and protocol violations (reconnect storms) from one
 *		address are slowed down, whatever connections it opens.
 *
 * Kafka's broker delays the answer to a failed authentication by
 * connection.failed.authentication.delay.ms (100 ms); a client that opens
 * connections in parallel guesses as fast as ever.  Here the delay is the
 * address's: after its n-th failure in a row, the next authentication
 * from the address, on any connection, is held for 100 ms * 2^(n-1), at
 * most MAX_DELAY_MS (the listener holds the frame, serving the others
 * meanwhile).  A success from the address forgets its failures, and so
 * does FORGET_MS without one.  So a password guesser gets one guess per
 * MAX_DELAY_MS (about 700 an hour) after the first ten, instead of
 * thousands a minute.  The price: a client that shares an address with
 * such a guesser (a NAT) is held as long; it is never refused.
 *
 * Requests of an API or version mqlog does not serve (unsupported.c), and
 * requests sent before SASL authentication that need it (request.c), are
 * counted the same way, in a table of their own, and hold the address's
 * next such request, on any connection: a client that reconnects at once
 * after each refusal (kafka-go 0.2.1 did, 125 times a second) gets one
 * answer per MAX_DELAY_MS after its first few, and the log one line.  A
 * request that is served is never held, so a good client behind the same
 * address is not slowed down; and nothing but FORGET_MS forgets these,
 * since that good client's requests say nothing of the bad one.
 *
 * Each table lives in the listener process, at most NSLOTS addresses;
 * when it is full, the address whose last failure is oldest makes room.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netdb.h>

#include "utils/timestamp.h"

#include "kafka/kafka_internal.h"

#define NSLOTS			1024
#define FIRST_DELAY_MS	100
#define MAX_DELAY_MS	5000
#define FORGET_MS		(10 * 60 * 1000)

typedef struct Slot
{
	char		address[NI_MAXHOST];
	int			failures;		/* in a row; 0: the slot is free */
	TimestampTz last;			/* the last failure */
	TimestampTz held_until;
} Slot;

typedef struct Table
{
	const char *what;			/* for the log: "failed Kafka authentications" */
	Slot		slots[NSLOTS];
} Table;

static Table auth = {"failed Kafka authentications"};
static Table violations = {"Kafka requests of an API or version mqlog does not serve"};

/* the address's slot, or NULL; forgotten failures free theirs */
static Slot *
find(Table *t, const char *address, TimestampTz now)
{
	for (int i = 0; i < NSLOTS; i++)
	{
		Slot	   *s = &t->slots[i];

		if (s->failures > 0 && TimestampDifferenceExceeds(s->last, now, FORGET_MS))
			s->failures = 0;
		if (s->failures > 0 && strcmp(s->address, address) == 0)
			return s;
	}
	return NULL;
}

/* one failure more: the address's next attempt waits twice as long */
static void
failed(Table *t, const char *address)
{
	TimestampTz now = GetCurrentTimestamp();
	Slot	   *s = find(t, address, now);
	int64		delay;

	if (s == NULL)
	{
		s = &t->slots[0];
		for (int i = 0; i < NSLOTS && s->failures > 0; i++)
			if (t->slots[i].failures == 0 || t->slots[i].last < s->last)
				s = &t->slots[i];
		strlcpy(s->address, address, sizeof(s->address));
		s->failures = 0;
	}
	s->failures++;
	s->last = now;
	delay = (int64) FIRST_DELAY_MS << Min(s->failures - 1, 16);
	s->held_until = TimestampTzPlusMilliseconds(now, Min(delay, MAX_DELAY_MS));
	if (s->failures == 10)
		ereport(LOG,
				(errmsg("10 %s in a row from %s: its attempts now wait %d ms each",
						t->what, address, MAX_DELAY_MS)));
}

static TimestampTz
held_until(Table *t, const char *address)
{
	TimestampTz now = GetCurrentTimestamp();
	Slot	   *s = find(t, address, now);

	return s != NULL && s->held_until > now ? s->held_until : 0;
}

void
MqKafkaAuthFailed(const char *address)
{
	failed(&auth, address);
}

void
MqKafkaAuthSucceeded(const char *address)
{
	Slot	   *s = find(&auth, address, GetCurrentTimestamp());

	if (s != NULL)
		s->failures = 0;
}

TimestampTz
MqKafkaAuthHeldUntil(const char *address)
{
	return held_until(&auth, address);
}

void
MqKafkaViolation(const char *address)
{
	failed(&violations, address);
}

TimestampTz
MqKafkaViolationHeldUntil(const char *address)
{
	return held_until(&violations, address);
}
