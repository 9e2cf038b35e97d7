/*-------------------------------------------------------------------------
 *
 * backoff.c
 *		Failed SASL authentications per client address, and how long the
 *		address's next attempt waits: password guessing from one address
 *		is slowed down, whatever connections it opens.
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
 * The table lives in the listener process, at most NSLOTS addresses; when
 * it is full, the address whose last failure is oldest makes room.
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

static Slot slots[NSLOTS];

/* the address's slot, or NULL; forgotten failures free theirs */
static Slot *
find(const char *address, TimestampTz now)
{
	for (int i = 0; i < NSLOTS; i++)
	{
		Slot	   *s = &slots[i];

		if (s->failures > 0 && TimestampDifferenceExceeds(s->last, now, FORGET_MS))
			s->failures = 0;
		if (s->failures > 0 && strcmp(s->address, address) == 0)
			return s;
	}
	return NULL;
}

void
MqKafkaAuthFailed(const char *address)
{
	TimestampTz now = GetCurrentTimestamp();
	Slot	   *s = find(address, now);
	int64		delay;

	if (s == NULL)
	{
		s = &slots[0];
		for (int i = 0; i < NSLOTS && s->failures > 0; i++)
			if (slots[i].failures == 0 || slots[i].last < s->last)
				s = &slots[i];
		strlcpy(s->address, address, sizeof(s->address));
		s->failures = 0;
	}
	s->failures++;
	s->last = now;
	delay = (int64) FIRST_DELAY_MS << Min(s->failures - 1, 16);
	s->held_until = TimestampTzPlusMilliseconds(now, Min(delay, MAX_DELAY_MS));
	if (s->failures == 10)
		ereport(LOG,
				(errmsg("10 failed Kafka authentications in a row from %s: its attempts now wait %d ms each",
						address, MAX_DELAY_MS)));
}

void
MqKafkaAuthSucceeded(const char *address)
{
	Slot	   *s = find(address, GetCurrentTimestamp());

	if (s != NULL)
		s->failures = 0;
}

TimestampTz
MqKafkaAuthHeldUntil(const char *address)
{
	TimestampTz now = GetCurrentTimestamp();
	Slot	   *s = find(address, now);

	return s != NULL && s->held_until > now ? s->held_until : 0;
}
