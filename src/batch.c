/*-------------------------------------------------------------------------
 *
 * batch.c
 *		Record batch encoding and decoding, and Kafka's murmur2 hash.
 *
 * A batch is a fixed MqBatchHeader followed by its records, each encoded
 * the way Kafka's v2 record format does it:
 *
 *		varint	length of the rest of the record
 *		varlong	timestamp delta from the batch's first timestamp (zigzag)
 *		varint	offset delta from the batch's base offset (zigzag)
 *		varint	key length, -1 for no key (zigzag), then the key
 *		varint	value length, -1 for a tombstone (zigzag), then the value
 *		varint	header count, then per header: key length, key, value
 *				length (-1 for null), value
 *
 * A 100-byte value without key or headers thus costs 107 bytes, and a batch
 * of many records adds one 56-byte header.  Decoding checks every length
 * against the batch bounds, so a corrupt batch is an error, never a crash.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_crc32c.h"

#include "mqlog.h"

/* ------------------------------------------------------------------------
 * Varints (zigzag, base 128), as Kafka writes them
 * ------------------------------------------------------------------------ */

static inline void
put_uvarint(StringInfo buf, uint64 v)
{
	char		tmp[10];
	int			n = 0;

	while (v >= 0x80)
	{
		tmp[n++] = (char) ((v & 0x7F) | 0x80);
		v >>= 7;
	}
	tmp[n++] = (char) v;
	appendBinaryStringInfoNT(buf, tmp, n);
}

static inline void
put_varint(StringInfo buf, int64 v)
{
	put_uvarint(buf, ((uint64) v << 1) ^ (uint64) (v >> 63));
}

static inline int
uvarint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline int
varint_size(int64 v)
{
	return uvarint_size(((uint64) v << 1) ^ (uint64) (v >> 63));
}

/* Reads an unsigned varint; errors out rather than read past end. */
static inline uint64
get_uvarint(const char **p, const char *end)
{
	uint64		v = 0;
	int			shift = 0;

	for (;;)
	{
		uint8		b;

		if (*p >= end || shift > 63)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: truncated varint")));
		b = (uint8) *(*p)++;
		v |= (uint64) (b & 0x7F) << shift;
		if ((b & 0x80) == 0)
			break;
		shift += 7;
	}
	return v;
}

static inline int64
get_varint(const char **p, const char *end)
{
	uint64		v = get_uvarint(p, end);

	return (int64) (v >> 1) ^ -(int64) (v & 1);
}

static inline const char *
get_bytes(const char **p, const char *end, int64 len, bool allow_null)
{
	const char *r = *p;

	if (len == -1 && allow_null)
		return NULL;
	if (len < 0 || len > end - *p)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mqlog record batch is malformed: field length %lld out of bounds",
						(long long) len)));
	*p += len;
	return r;
}

/* ------------------------------------------------------------------------
 * Encoding
 * ------------------------------------------------------------------------ */

static Size
record_body_size(const MqRecord *rec, TimestampTz first_ts, int delta)
{
	Size		sz = 0;

	sz += varint_size(rec->ts - first_ts);
	sz += varint_size(delta);
	sz += varint_size(rec->key ? rec->keylen : -1) + (rec->key ? rec->keylen : 0);
	sz += varint_size(rec->value ? rec->valuelen : -1) + (rec->value ? rec->valuelen : 0);
	sz += uvarint_size(rec->nheaders);
	for (int i = 0; i < rec->nheaders; i++)
	{
		MqHeaderKV *h = &rec->headers[i];

		sz += varint_size(h->keylen) + h->keylen;
		sz += varint_size(h->value ? h->valuelen : -1) + (h->value ? h->valuelen : 0);
	}
	return sz;
}

/* Upper bound of one record's encoded size, for max.message.bytes checks. */
Size
MqRecordEncodedSize(const MqRecord *rec)
{
	Size		body = record_body_size(rec, rec->ts, 0);

	return body + uvarint_size(body);
}

/*
 * Encode records into buf as one batch.  Normally the records get
 * consecutive offsets and the base offset is left zero: the caller sets it
 * under the partition lock with MqBatchSetOffset, which does not disturb
 * the CRC.  With keep_offsets (compaction) each record keeps rec->offset,
 * gaps and all, and the base offset is the first record's.
 */
void
MqBatchBuild(StringInfo buf, MqRecord *records, int nrecords,
			 TransactionId xid, uint16 attributes, bool keep_offsets)
{
	MqBatchHeader hdr;
	int			start = buf->len;
	TimestampTz first_ts = records[0].ts;
	TimestampTz max_ts = records[0].ts;
	MqBatchHeader *out;

	Assert(nrecords > 0);
	memset(&hdr, 0, sizeof(hdr));
	appendBinaryStringInfoNT(buf, (char *) &hdr, sizeof(hdr));

	for (int i = 0; i < nrecords; i++)
	{
		MqRecord   *rec = &records[i];

		int			delta = keep_offsets ? (int) (rec->offset - records[0].offset) : i;

		if (rec->ts > max_ts)
			max_ts = rec->ts;
		put_uvarint(buf, record_body_size(rec, first_ts, delta));
		put_varint(buf, rec->ts - first_ts);
		put_varint(buf, delta);
		if (rec->key)
		{
			put_varint(buf, rec->keylen);
			appendBinaryStringInfoNT(buf, rec->key, rec->keylen);
		}
		else
			put_varint(buf, -1);
		if (rec->value)
		{
			put_varint(buf, rec->valuelen);
			appendBinaryStringInfoNT(buf, rec->value, rec->valuelen);
		}
		else
			put_varint(buf, -1);
		put_uvarint(buf, rec->nheaders);
		for (int j = 0; j < rec->nheaders; j++)
		{
			MqHeaderKV *h = &rec->headers[j];

			put_varint(buf, h->keylen);
			appendBinaryStringInfoNT(buf, h->key, h->keylen);
			if (h->value)
			{
				put_varint(buf, h->valuelen);
				appendBinaryStringInfoNT(buf, h->value, h->valuelen);
			}
			else
				put_varint(buf, -1);
		}
	}

	hdr.magic = MQ_BATCH_MAGIC;
	hdr.length = buf->len - start;
	hdr.attributes = attributes;
	hdr.xid = xid;
	hdr.last_offset_delta = keep_offsets ? (int32) (records[nrecords - 1].offset - records[0].offset) : nrecords - 1;
	if (keep_offsets)
		hdr.base_offset = records[0].offset;
	hdr.record_count = nrecords;
	hdr.first_timestamp = first_ts;
	hdr.max_timestamp = max_ts;
	out = (MqBatchHeader *) (buf->data + start);
	memcpy(out, &hdr, sizeof(hdr));
	out->crc = MqBatchComputeCrc(buf->data + start, hdr.length);
}

void
MqBatchSetOffset(char *batch, int64 base_offset)
{
	memcpy(batch + offsetof(MqBatchHeader, base_offset), &base_offset, sizeof(int64));
}

uint32
MqBatchComputeCrc(const char *batch, uint32 length)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, batch + MQ_BATCH_CRC_START, length - MQ_BATCH_CRC_START);
	FIN_CRC32C(crc);
	return crc;
}

bool
MqBatchCheckCrc(const char *batch, uint32 length)
{
	MqBatchHeader hdr;

	if (length < MQ_BATCH_HEADER_SIZE)
		return false;
	memcpy(&hdr, batch, sizeof(hdr));
	if (hdr.magic != MQ_BATCH_MAGIC || hdr.length != length)
		return false;
	return hdr.crc == MqBatchComputeCrc(batch, length);
}

/* ------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------ */

/*
 * Decode up to maxrecords records of a whole, CRC-checked batch into
 * records[]; keys, values and headers point into the batch.  Returns how
 * many were decoded.
 */
int
MqBatchDecode(const char *batch, MqRecord *records, int maxrecords)
{
	return MqBatchDecodeFrom(batch, PG_INT64_MIN, records, maxrecords);
}

/*
 * The same, for the records at or after from_offset only: records before
 * it are skipped by their length, which is what a reader resuming inside a
 * large batch needs.
 */
int
MqBatchDecodeFrom(const char *batch, int64 from_offset, MqRecord *records, int maxrecords)
{
	MqBatchHeader hdr;
	const char *p = batch + MQ_BATCH_HEADER_SIZE;
	const char *end;
	int			n = 0;

	memcpy(&hdr, batch, sizeof(hdr));
	end = batch + hdr.length;

	while (p < end && n < maxrecords)
	{
		MqRecord   *rec = &records[n];
		uint64		reclen = get_uvarint(&p, end);
		int64		len;
		const char *recend;
		uint64		nh;

		if (reclen > (uint64) (end - p))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: record length out of bounds")));
		recend = p + reclen;
		rec->ts = hdr.first_timestamp + get_varint(&p, recend);
		rec->offset = hdr.base_offset + get_varint(&p, recend);
		if (rec->offset < from_offset)
		{
			p = recend;
			continue;
		}
		len = get_varint(&p, recend);
		rec->key = get_bytes(&p, recend, len, true);
		rec->keylen = rec->key ? (int) len : 0;
		len = get_varint(&p, recend);
		rec->value = get_bytes(&p, recend, len, true);
		rec->valuelen = rec->value ? (int) len : 0;
		nh = get_uvarint(&p, recend);
		if (nh > (uint64) (recend - p))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: header count out of bounds")));
		rec->nheaders = (int) nh;
		rec->headers = nh > 0 ? palloc(sizeof(MqHeaderKV) * nh) : NULL;
		for (int i = 0; i < (int) nh; i++)
		{
			MqHeaderKV *h = &rec->headers[i];

			len = get_varint(&p, recend);
			h->key = get_bytes(&p, recend, len, false);
			h->keylen = (int) len;
			len = get_varint(&p, recend);
			h->value = get_bytes(&p, recend, len, true);
			h->valuelen = h->value ? (int) len : 0;
		}
		p = recend;
		n++;
	}
	return n;
}

/* ------------------------------------------------------------------------
 * Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): the hash
 * its default partitioner applies to keys.  Java's >>> is a logical shift,
 * hence the unsigned arithmetic.
 * ------------------------------------------------------------------------ */
int32
MqMurmur2(const char *data, int len)
{
	const uint32 m = 0x5bd1e995;
	const int	r = 24;
	uint32		h = 0x9747b28c ^ (uint32) len;
	int			len4 = len / 4;
	const uint8 *d = (const uint8 *) data;

	for (int i = 0; i < len4; i++)
	{
		int			i4 = i * 4;
		uint32		k = (uint32) d[i4] | ((uint32) d[i4 + 1] << 8) |
			((uint32) d[i4 + 2] << 16) | ((uint32) d[i4 + 3] << 24);

		k *= m;
		k ^= k >> r;
		k *= m;
		h *= m;
		h ^= k;
	}

	switch (len % 4)
	{
		case 3:
			h ^= (uint32) d[(len & ~3) + 2] << 16;
			/* FALLTHROUGH */
		case 2:
			h ^= (uint32) d[(len & ~3) + 1] << 8;
			/* FALLTHROUGH */
		case 1:
			h ^= (uint32) d[len & ~3];
			h *= m;
	}

	h ^= h >> 13;
	h *= m;
	h ^= h >> 15;
	return (int32) h;
}
