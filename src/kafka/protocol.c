/*-------------------------------------------------------------------------
 *
 * protocol.c
 *		Kafka's primitive types on the wire: bounds-checked readers over
 *		one request frame, and writers into a response buffer (the rules
 *		are at the top of protocol.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "kafka/protocol.h"

void
MqKafkaReaderInit(MqKafkaReader *r, const char *data, int len)
{
	r->data = data;
	r->len = len;
	r->pos = 0;
	r->failed = false;
	r->elements = 0;
}

/* true when n more bytes are there; otherwise the reader fails */
static inline bool
have(MqKafkaReader *r, int64 n)
{
	if (r->failed || n < 0 || n > (int64) (r->len - r->pos))
	{
		r->failed = true;
		return false;
	}
	return true;
}

static uint64
read_be(MqKafkaReader *r, int n)
{
	uint64		v = 0;

	if (!have(r, n))
		return 0;
	for (int i = 0; i < n; i++)
		v = (v << 8) | (uint8) r->data[r->pos + i];
	r->pos += n;
	return v;
}

int8
MqKafkaReadInt8(MqKafkaReader *r)
{
	return (int8) read_be(r, 1);
}

int16
MqKafkaReadInt16(MqKafkaReader *r)
{
	return (int16) read_be(r, 2);
}

int32
MqKafkaReadInt32(MqKafkaReader *r)
{
	return (int32) read_be(r, 4);
}

int64
MqKafkaReadInt64(MqKafkaReader *r)
{
	return (int64) read_be(r, 8);
}

/* an unsigned varint of at most 5 bytes (what a uint32 needs) */
uint32
MqKafkaReadUVarint(MqKafkaReader *r)
{
	uint32		v = 0;

	for (int shift = 0; shift < 35; shift += 7)
	{
		uint8		b;

		if (!have(r, 1))
			return 0;
		b = (uint8) r->data[r->pos++];
		v |= (uint32) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return v;
	}
	r->failed = true;
	return 0;
}

/* a length: int16/int32 classic, uvarint(len + 1) compact; -1 is null */
static int64
read_length(MqKafkaReader *r, bool flexible, bool wide)
{
	if (flexible)
		return (int64) MqKafkaReadUVarint(r) - 1;
	return wide ? (int64) MqKafkaReadInt32(r) : (int64) MqKafkaReadInt16(r);
}

/*
 * A string, copied and NUL-terminated; NULL for a null string.  A zero
 * byte inside is malformed here, and so is a sequence not valid in the
 * database's encoding (Kafka's strings are UTF-8): every string mqlog
 * reads is a name or goes into a text column or a view (group ids, a
 * commit's metadata, client ids), where PostgreSQL could not store it,
 * and an invalid one stored would make a restore of its whole table fail.
 */
char *
MqKafkaReadString(MqKafkaReader *r, bool flexible, bool *isnull)
{
	int64		n = read_length(r, flexible, false);
	char	   *s;

	if (isnull)
		*isnull = false;
	if (r->failed)
		return NULL;
	if (n == -1)
	{
		if (isnull)
			*isnull = true;
		return NULL;
	}
	if (!have(r, n))
		return NULL;
	if (memchr(r->data + r->pos, '\0', n) != NULL ||
		!pg_verifymbstr(r->data + r->pos, (int) n, true))
	{
		r->failed = true;
		return NULL;
	}
	s = palloc(n + 1);
	memcpy(s, r->data + r->pos, n);
	s[n] = '\0';
	r->pos += n;
	return s;
}

/* bytes, in place (pointing into the frame); NULL and -1 when null */
const char *
MqKafkaReadBytes(MqKafkaReader *r, bool flexible, int *len)
{
	int64		n = read_length(r, flexible, true);
	const char *p;

	*len = -1;
	if (r->failed || n == -1)
		return NULL;
	if (!have(r, n))
		return NULL;
	p = r->data + r->pos;
	r->pos += n;
	*len = (int) n;
	return p;
}

/*
 * An array's element count, -1 for null.  More elements than the bytes
 * left could hold at min_elem_size each is malformed.
 */
int32
MqKafkaReadArrayLen(MqKafkaReader *r, bool flexible, int min_elem_size)
{
	int64		n = read_length(r, flexible, true);

	Assert(min_elem_size >= 1);
	if (r->failed)
		return 0;
	if (n == -1)
		return -1;
	if (n < -1 || n > (int64) (r->len - r->pos) / min_elem_size ||
		(r->elements += Max(n, 0)) > MQK_MAX_REQUEST_ELEMENTS)
	{
		r->failed = true;
		return 0;
	}
	return (int32) n;
}

/* tagged fields (flexible versions): none is known here, all are skipped */
void
MqKafkaSkipTags(MqKafkaReader *r, bool flexible)
{
	uint32		n;

	if (!flexible)
		return;
	n = MqKafkaReadUVarint(r);
	if (n > (uint32) (r->len - r->pos) / 2)
	{
		r->failed = true;
		return;
	}
	for (uint32 i = 0; i < n && !r->failed; i++)
	{
		uint32		size;

		(void) MqKafkaReadUVarint(r);	/* tag */
		size = MqKafkaReadUVarint(r);
		if (have(r, size))
			r->pos += size;
	}
}

/* ------------------------------------------------------------------------
 * Writers
 * ------------------------------------------------------------------------ */

static void
write_be(StringInfo buf, uint64 v, int n)
{
	char		b[8];

	for (int i = n - 1; i >= 0; i--)
	{
		b[i] = (char) (v & 0xff);
		v >>= 8;
	}
	appendBinaryStringInfo(buf, b, n);
}

void
MqKafkaWriteInt8(StringInfo buf, int8 v)
{
	write_be(buf, (uint8) v, 1);
}

void
MqKafkaWriteInt16(StringInfo buf, int16 v)
{
	write_be(buf, (uint16) v, 2);
}

void
MqKafkaWriteInt32(StringInfo buf, int32 v)
{
	write_be(buf, (uint32) v, 4);
}

void
MqKafkaWriteInt64(StringInfo buf, int64 v)
{
	write_be(buf, (uint64) v, 8);
}

void
MqKafkaWriteUVarint(StringInfo buf, uint32 v)
{
	while (v >= 0x80)
	{
		appendStringInfoChar(buf, (char) ((v & 0x7f) | 0x80));
		v >>= 7;
	}
	appendStringInfoChar(buf, (char) v);
}

/* a string; NULL writes a null string */
void
MqKafkaWriteString(StringInfo buf, bool flexible, const char *s)
{
	int			n = s ? (int) strlen(s) : -1;

	if (flexible)
		MqKafkaWriteUVarint(buf, (uint32) (n + 1));
	else
		MqKafkaWriteInt16(buf, (int16) n);
	if (n > 0)
		appendBinaryStringInfo(buf, s, n);
}

/* bytes; len -1 writes null */
void
MqKafkaWriteBytes(StringInfo buf, bool flexible, const char *data, int len)
{
	if (flexible)
		MqKafkaWriteUVarint(buf, (uint32) (len + 1));
	else
		MqKafkaWriteInt32(buf, len);
	if (len > 0)
		appendBinaryStringInfo(buf, data, len);
}

/* an array's count; -1 writes a null array */
void
MqKafkaWriteArrayLen(StringInfo buf, bool flexible, int32 n)
{
	if (flexible)
		MqKafkaWriteUVarint(buf, (uint32) (n + 1));
	else
		MqKafkaWriteInt32(buf, n);
}

/* no tagged fields (flexible versions only) */
void
MqKafkaWriteTags(StringInfo buf, bool flexible)
{
	if (flexible)
		MqKafkaWriteUVarint(buf, 0);
}

/* fill in an int32 written earlier as a placeholder (a count, a size) */
void
MqKafkaPatchInt32(StringInfo buf, int at, int32 v)
{
	uint32		u = (uint32) v;

	Assert(at >= 0 && at + 4 <= buf->len);
	buf->data[at] = (char) (u >> 24);
	buf->data[at + 1] = (char) (u >> 16);
	buf->data[at + 2] = (char) (u >> 8);
	buf->data[at + 3] = (char) u;
}
