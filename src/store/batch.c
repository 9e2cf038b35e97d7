/*-------------------------------------------------------------------------
 *
 * batch.c
 *		Encoding and decoding Kafka's record batch v2 (see batch.h for the
 *		stored layout), and Kafka's murmur2 hash.
 *
 * A record inside a batch is what Kafka's DefaultRecord writes, every
 * integer a zigzag varint:
 *
 *		varint	length of the rest of the record
 *		int8	attributes (unused, zero)
 *		varlong	timestamp delta from the batch's base timestamp
 *		varint	offset delta from the batch's base offset
 *		varint	key length, -1 for no key, then the key
 *		varint	value length, -1 for a tombstone, then the value
 *		varint	header count, then per header: key length, key, value
 *				length (-1 for null), value
 *
 * A 100-byte value without key or headers thus costs 109 bytes, and a batch
 * adds 69 (Kafka's 61 and mqlog's prefix of 8).  Decoding checks every
 * length against the batch bounds, so a corrupt batch is an error, never a
 * crash.  Timestamps are Kafka's milliseconds: a record's timestamp keeps
 * millisecond precision, as in Kafka.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "port/pg_bswap.h"
#include "utils/memutils.h"
#include "port/pg_crc32c.h"

#include "store/batch.h"

/* ------------------------------------------------------------------------
 * Big-endian fields and zigzag varints, as Kafka writes them
 * ------------------------------------------------------------------------ */

static inline void
put16(char *p, int16 v)
{
	uint16		be = pg_hton16((uint16) v);

	memcpy(p, &be, 2);
}

static inline void
put32(char *p, int32 v)
{
	uint32		be = pg_hton32((uint32) v);

	memcpy(p, &be, 4);
}

static inline void
put64(char *p, int64 v)
{
	uint64		be = pg_hton64((uint64) v);

	memcpy(p, &be, 8);
}

static inline int16
get16(const char *p)
{
	uint16		v;

	memcpy(&v, p, 2);
	return (int16) pg_ntoh16(v);
}

static inline int32
get32(const char *p)
{
	uint32		v;

	memcpy(&v, p, 4);
	return (int32) pg_ntoh32(v);
}

static inline int64
get64(const char *p)
{
	uint64		v;

	memcpy(&v, p, 8);
	return (int64) pg_ntoh64(v);
}

/* Writes a zigzag varint at p (at most MQ_VARINT_MAX bytes); returns its size. */
int
MqVarintPut(char *p, int64 v)
{
	uint64		u = ((uint64) v << 1) ^ (uint64) (v >> 63);
	int			n = 0;

	while (u >= 0x80)
	{
		p[n++] = (char) ((u & 0x7F) | 0x80);
		u >>= 7;
	}
	p[n++] = (char) u;
	return n;
}

static inline void
put_varint(StringInfo buf, int64 v)
{
	char		tmp[MQ_VARINT_MAX];

	appendBinaryStringInfoNT(buf, tmp, MqVarintPut(tmp, v));
}

static inline int
varint_size(int64 v)
{
	uint64		u = ((uint64) v << 1) ^ (uint64) (v >> 63);
	int			n = 1;

	while (u >= 0x80)
	{
		u >>= 7;
		n++;
	}
	return n;
}

/* The same in a batch's records, which errors out rather than read past end. */
static inline int64
get_varint(const char **p, const char *end)
{
	int64		v;

	if (!MqVarintGet(p, end, &v))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mqlog record batch is malformed: truncated varint")));
	return v;
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

/* Timestamps: MqKafkaTime and MqPgTime are inline in batch.h */

/* Is a Kafka timestamp one PostgreSQL's timestamptz can hold? */
static bool
kafka_time_valid(int64 kafka_ms)
{
	return kafka_ms >= MQ_KAFKA_TIME_MIN && kafka_ms < MQ_KAFKA_TIME_END;
}

/* ------------------------------------------------------------------------
 * Encoding
 * ------------------------------------------------------------------------ */

static Size
record_body_size(const MqRecord *rec, int64 ts_delta, int delta)
{
	Size		sz = 1;			/* attributes */

	sz += varint_size(ts_delta);
	sz += varint_size(delta);
	sz += varint_size(rec->key ? rec->keylen : -1) + (rec->key ? rec->keylen : 0);
	sz += varint_size(rec->value ? rec->valuelen : -1) + (rec->value ? rec->valuelen : 0);
	sz += varint_size(rec->nheaders);
	for (int i = 0; i < rec->nheaders; i++)
	{
		MqHeaderKV *h = &rec->headers[i];

		sz += varint_size(h->keylen) + h->keylen;
		sz += varint_size(h->value ? h->valuelen : -1) + (h->value ? h->valuelen : 0);
	}
	return sz;
}

/*
 * One record's encoded size in a batch of its own, which is what Kafka
 * compares with max.message.bytes (a record batch's overhead included).
 */
Size
MqRecordEncodedSize(const MqRecord *rec)
{
	Size		body = record_body_size(rec, 0, 0);

	return MQ_KAFKA_HEADER_SIZE + body + varint_size(body);
}

static void
encode_records(StringInfo buf, MqRecord *records, int nrecords, int64 base_ms,
			   bool keep_offsets)
{
	for (int i = 0; i < nrecords; i++)
	{
		MqRecord   *rec = &records[i];
		int			delta = keep_offsets ? (int) (rec->offset - records[0].offset) : i;
		int64		ts_delta = MqKafkaTime(rec->ts) - base_ms;

		put_varint(buf, record_body_size(rec, ts_delta, delta));
		appendStringInfoCharMacro(buf, 0);
		put_varint(buf, ts_delta);
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
		put_varint(buf, rec->nheaders);
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
}

static uint32
kafka_crc(const char *kafka, uint32 kafka_len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, kafka + MQ_KAFKA_CRC_START, kafka_len - MQ_KAFKA_CRC_START);
	FIN_CRC32C(crc);
	return crc;
}

static void
put_prefix(char *p, TransactionId xid)
{
	p[0] = 0;
	p[1] = (char) MQ_PREFIX_MAGIC;
	p[2] = p[3] = 0;
	memcpy(p + 4, &xid, sizeof(TransactionId));
}

/*
 * Encode records as one stored batch appended to buf.  Normally the
 * records get consecutive offsets and the base offset is left zero: the
 * caller stamps it under the partition lock with MqBatchSetOffset, which
 * leaves the CRC valid.  With keep_offsets (compaction) each record keeps
 * rec->offset, gaps and all, and the base offset is the first record's.
 * The codec in attributes compresses the records.
 */
void
MqBatchBuild(StringInfo buf, MqRecord *records, int nrecords,
			 TransactionId xid, int16 attributes, bool keep_offsets)
{
	int			start = buf->len;
	int64		base_ms = MqKafkaTime(records[0].ts);
	int64		max_ms = base_ms;
	MqCodec		codec = (MqCodec) (attributes & MQ_ATTR_CODEC_MASK);
	char	   *k;
	uint32		kafka_len;

	Assert(nrecords > 0);
	for (int i = 1; i < nrecords; i++)
		max_ms = Max(max_ms, MqKafkaTime(records[i].ts));

	enlargeStringInfo(buf, MQ_BATCH_HEADER_SIZE);
	memset(buf->data + buf->len, 0, MQ_BATCH_HEADER_SIZE);
	buf->len += MQ_BATCH_HEADER_SIZE;
	if (codec == MQ_CODEC_NONE)
		encode_records(buf, records, nrecords, base_ms, keep_offsets);
	else
	{
		StringInfoData raw;

		initStringInfo(&raw);
		encode_records(&raw, records, nrecords, base_ms, keep_offsets);
		MqCompress(codec, raw.data, raw.len, buf);
		pfree(raw.data);
	}

	put_prefix(buf->data + start, xid);
	k = buf->data + start + MQ_PREFIX_SIZE;
	kafka_len = buf->len - start - MQ_PREFIX_SIZE;
	put64(k + 0, keep_offsets ? records[0].offset : 0);
	put32(k + 8, (int32) (kafka_len - MQ_KAFKA_LOG_OVERHEAD));
	put32(k + 12, 0);
	k[16] = MQ_KAFKA_MAGIC;
	put16(k + 21, attributes);
	put32(k + 23, keep_offsets ? (int32) (records[nrecords - 1].offset - records[0].offset)
		  : nrecords - 1);
	put64(k + 27, base_ms);
	put64(k + 35, max_ms);
	put64(k + 43, -1);			/* producerId: none, no idempotence */
	put16(k + 51, -1);
	put32(k + 53, -1);
	put32(k + 57, nrecords);
	put32(k + 17, (int32) kafka_crc(k, kafka_len));
}

/*
 * Give a batch built here (MqBatchBuild) the producer id, epoch and base
 * sequence of the batch it re-encodes, as a broker's recompression keeps
 * them: the log is where an idempotent producer's state is loaded from.
 * The CRC covers them, so it is computed again.
 */
void
MqBatchSetProducer(char *batch, int64 producer_id, int16 producer_epoch, int32 base_sequence)
{
	char	   *k = batch + MQ_PREFIX_SIZE;
	uint32		kafka_len = (uint32) get32(k + 8) + MQ_KAFKA_LOG_OVERHEAD;

	put64(k + 43, producer_id);
	put16(k + 51, producer_epoch);
	put32(k + 53, base_sequence);
	put32(k + 17, (int32) kafka_crc(k, kafka_len));
}

void
MqBatchSetOffset(char *batch, int64 base_offset)
{
	put64(batch + MQ_PREFIX_SIZE, base_offset);
}

void
MqBatchSetEpoch(char *batch, int32 leader_epoch)
{
	put32(batch + MQ_PREFIX_SIZE + 12, leader_epoch);
}

/*
 * The writing transaction of a stored batch (its prefix), once it has one:
 * a Kafka batch is copied into its stored form before it is checked, and
 * an xid is assigned only to a batch that is appended.  The CRC does not
 * cover the prefix.
 */
void
MqBatchSetXid(char *batch, TransactionId xid)
{
	put_prefix(batch, xid);
}

/*
 * Store a Kafka batch that someone else encoded (a Kafka client, a
 * leader): mqlog's prefix, then the bytes as they are.  The caller has
 * checked them with MqBatchCheckKafka.
 */
void
MqBatchWrapKafka(StringInfo buf, const char *kafka, uint32 len, TransactionId xid)
{
	enlargeStringInfo(buf, MQ_PREFIX_SIZE + len);
	put_prefix(buf->data + buf->len, xid);
	buf->len += MQ_PREFIX_SIZE;
	appendBinaryStringInfoNT(buf, kafka, len);
}

/* ------------------------------------------------------------------------
 * Header and checks
 * ------------------------------------------------------------------------ */

/*
 * Parse the stored header at stored (avail bytes readable).  Returns false
 * if the bytes are not a batch header: all zeroes (a torn or never written
 * tail; then h->magic is 0) or a bad magic or length.
 */
bool
MqBatchParseHeader(const char *stored, Size avail, MqBatchHeader *h)
{
	const char *k = stored + MQ_PREFIX_SIZE;
	int32		blen;

	memset(h, 0, sizeof(*h));
	if (avail < MQ_BATCH_HEADER_SIZE)
		return false;
	h->flags = (uint8) stored[0];
	h->magic = (uint8) stored[1];
	memcpy(&h->xid, stored + 4, sizeof(TransactionId));
	h->base_offset = get64(k);
	blen = get32(k + 8);
	h->leader_epoch = get32(k + 12);
	h->kafka_magic = (int8) k[16];
	h->crc = (uint32) get32(k + 17);
	h->attributes = get16(k + 21);
	h->last_offset_delta = get32(k + 23);
	h->first_timestamp = MqPgTime(get64(k + 27));
	h->max_timestamp = MqPgTime(get64(k + 35));
	h->producer_id = get64(k + 43);
	h->producer_epoch = get16(k + 51);
	h->base_sequence = get32(k + 53);
	h->record_count = get32(k + 57);
	if (h->magic != MQ_PREFIX_MAGIC || h->kafka_magic != MQ_KAFKA_MAGIC ||
		blen < MQ_KAFKA_HEADER_SIZE - MQ_KAFKA_LOG_OVERHEAD ||
		(Size) blen > MaxAllocSize)
		return false;
	h->length = MQ_PREFIX_SIZE + MQ_KAFKA_LOG_OVERHEAD + (uint32) blen;
	return true;
}

bool
MqBatchCheckCrc(const char *stored, uint32 length)
{
	MqBatchHeader h;

	if (!MqBatchParseHeader(stored, length, &h) || h.length != length)
		return false;
	return h.crc == kafka_crc(stored + MQ_PREFIX_SIZE, length - MQ_PREFIX_SIZE);
}

/*
 * Check a Kafka batch from outside (a client's produce, a leader's log)
 * before it is stored: what is wrong, or NULL.  The records are checked by
 * decoding them later; here the frame, the magic and the CRC.
 */
const char *
MqBatchCheckKafka(const char *kafka, Size len)
{
	int32		blen;

	if (len < MQ_KAFKA_HEADER_SIZE)
		return "it is shorter than a record batch header";
	if (kafka[16] != MQ_KAFKA_MAGIC)
		return psprintf("its magic byte is %d; only record batch v2 (magic 2) is supported",
						(int) kafka[16]);
	blen = get32(kafka + 8);
	if (blen < 0 || (Size) blen + MQ_KAFKA_LOG_OVERHEAD != len)
		return psprintf("its batchLength field says %d bytes, but %zu follow it",
						blen, len - MQ_KAFKA_LOG_OVERHEAD);
	if ((uint32) get32(kafka + 17) != kafka_crc(kafka, (uint32) len))
		return "its CRC-32C does not match";
	if (get32(kafka + 57) <= 0)
		return "it holds no records";
	if (!kafka_time_valid(get64(kafka + 27)) || !kafka_time_valid(get64(kafka + 35)))
		return "its base or max timestamp is outside the range of timestamptz";
	return NULL;
}

/* ------------------------------------------------------------------------
 * A header packed for WAL
 *
 * Of a stored batch's 69-byte header, a WAL record of the whole batch
 * (wal.c's APPEND_PACKED) needs only what it cannot derive: the prefix is
 * that of every new batch (no fate flags, the xid the record carries
 * anyway), the batch length follows from the record's, the magic is
 * Kafka's 2, the CRC can be computed again from the bytes it covers, and a
 * batch produced from SQL has leader epoch 0 (unless it is replicated), no
 * producer id, as many records as offsets and, for one record, the same
 * base and max timestamp.  So the packed header is a byte saying which of
 * those defaults do not hold, then zigzag varints: base offset,
 * attributes, last offset delta, base timestamp, and only then what
 * differs from a default (leader epoch, max timestamp as a distance from
 * the base, producer id, epoch and sequence, record count, and the CRC as
 * it is, four bytes, for a batch larger than MQ_PACK_CRC_LIMIT, whose
 * checksum would cost the appender more than four bytes of WAL).  For one
 * 100-byte record that is 13 bytes instead of 69.
 * ------------------------------------------------------------------------ */

#define PACK_EPOCH		0x01	/* leader epoch, not 0 */
#define PACK_MAX_TS		0x02	/* max timestamp, not the base one */
#define PACK_PRODUCER	0x04	/* producer id, epoch, sequence, not -1 */
#define PACK_COUNT		0x08	/* record count, not last offset delta + 1 */
#define PACK_CRC		0x10	/* the CRC itself */
#define PACK_KNOWN		0x1F

#define MQ_PACK_CRC_LIMIT	BLCKSZ

int
MqBatchPackHeader(const char *stored, uint32 length, TransactionId xid, char *packed)
{
	const char *k = stored + MQ_PREFIX_SIZE;
	MqBatchHeader h;
	int64		base_ms,
				max_ms,
				dist_ms;
	uint8		mask = 0;
	char	   *p = packed + 1;

	if (!MqBatchParseHeader(stored, length, &h) || h.length != length ||
		h.flags != 0 || stored[2] != 0 || stored[3] != 0 || h.xid != xid)
		return -1;
	base_ms = get64(k + 27);
	max_ms = get64(k + 35);
	if (pg_sub_s64_overflow(max_ms, base_ms, &dist_ms))
		return -1;
	if (h.leader_epoch != 0)
		mask |= PACK_EPOCH;
	if (dist_ms != 0)
		mask |= PACK_MAX_TS;
	if (h.producer_id != -1 || h.producer_epoch != -1 || h.base_sequence != -1)
		mask |= PACK_PRODUCER;
	if ((int64) h.record_count != (int64) h.last_offset_delta + 1)
		mask |= PACK_COUNT;
	if (length > MQ_PACK_CRC_LIMIT || h.crc != kafka_crc(k, length - MQ_PREFIX_SIZE))
		mask |= PACK_CRC;

	packed[0] = (char) mask;
	p += MqVarintPut(p, h.base_offset);
	p += MqVarintPut(p, h.attributes);
	p += MqVarintPut(p, h.last_offset_delta);
	p += MqVarintPut(p, base_ms);
	if (mask & PACK_EPOCH)
		p += MqVarintPut(p, h.leader_epoch);
	if (mask & PACK_MAX_TS)
		p += MqVarintPut(p, dist_ms);
	if (mask & PACK_PRODUCER)
	{
		p += MqVarintPut(p, h.producer_id);
		p += MqVarintPut(p, h.producer_epoch);
		p += MqVarintPut(p, h.base_sequence);
	}
	if (mask & PACK_COUNT)
		p += MqVarintPut(p, h.record_count);
	if (mask & PACK_CRC)
	{
		memcpy(p, k + 17, 4);
		p += 4;
	}
	Assert(p - packed <= MQ_PACKED_HEADER_MAX);
	return (int) (p - packed);
}

/* a packed field that must fit the header's field of bits bits */
static bool
unpack_field(const char **p, const char *end, int bits, int64 *v)
{
	if (!MqVarintGet(p, end, v))
		return false;
	return bits == 64 || (*v >= -((int64) 1 << (bits - 1)) && *v < ((int64) 1 << (bits - 1)));
}

bool
MqBatchUnpack(const char *packed, Size len, TransactionId xid, StringInfo out)
{
	const char *p = packed + 1;
	const char *end = packed + len;
	char	   *k;
	uint8		mask;
	uint32		length;
	int64		base_offset,
				attributes,
				lod,
				base_ms,
				epoch = 0,
				dist_ms = 0,
				pid = -1,
				pepoch = -1,
				seq = -1,
				count,
				max_ms;
	char		crc[4] = {0};

	if (len < 1)
		return false;
	mask = (uint8) packed[0];
	if ((mask & ~PACK_KNOWN) != 0 ||
		!unpack_field(&p, end, 64, &base_offset) ||
		!unpack_field(&p, end, 16, &attributes) ||
		!unpack_field(&p, end, 32, &lod) ||
		!unpack_field(&p, end, 64, &base_ms) ||
		((mask & PACK_EPOCH) && !unpack_field(&p, end, 32, &epoch)) ||
		((mask & PACK_MAX_TS) && !unpack_field(&p, end, 64, &dist_ms)) ||
		((mask & PACK_PRODUCER) && (!unpack_field(&p, end, 64, &pid) ||
									!unpack_field(&p, end, 16, &pepoch) ||
									!unpack_field(&p, end, 32, &seq))))
		return false;
	count = lod + 1;
	if (((mask & PACK_COUNT) && !unpack_field(&p, end, 32, &count)) ||
		pg_add_s64_overflow(base_ms, dist_ms, &max_ms) ||
		((mask & PACK_CRC) && end - p < 4))
		return false;
	if (mask & PACK_CRC)
	{
		memcpy(crc, p, 4);
		p += 4;
	}
	if ((Size) (end - p) > MaxAllocSize - MQ_BATCH_HEADER_SIZE)
		return false;
	length = MQ_BATCH_HEADER_SIZE + (uint32) (end - p);

	resetStringInfo(out);
	enlargeStringInfo(out, length);
	put_prefix(out->data, xid);
	k = out->data + MQ_PREFIX_SIZE;
	put64(k + 0, base_offset);
	put32(k + 8, (int32) (length - MQ_PREFIX_SIZE - MQ_KAFKA_LOG_OVERHEAD));
	put32(k + 12, (int32) epoch);
	k[16] = MQ_KAFKA_MAGIC;
	put16(k + 21, (int16) attributes);
	put32(k + 23, (int32) lod);
	put64(k + 27, base_ms);
	put64(k + 35, max_ms);
	put64(k + 43, pid);
	put16(k + 51, (int16) pepoch);
	put32(k + 53, (int32) seq);
	put32(k + 57, (int32) count);
	memcpy(out->data + MQ_BATCH_HEADER_SIZE, p, end - p);
	out->len = length;
	out->data[length] = '\0';
	if (mask & PACK_CRC)
		memcpy(k + 17, crc, 4);
	else
		put32(k + 17, (int32) kafka_crc(k, length - MQ_PREFIX_SIZE));
	return true;
}

/* ------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------ */

const char *
MqBatchRecords(const char *stored, const MqBatchHeader *h, StringInfo scratch, Size limit,
			   Size *len)
{
	const char *data = stored + MQ_BATCH_HEADER_SIZE;
	Size		n = h->length - MQ_BATCH_HEADER_SIZE;

	if (MqBatchCodec(h) == MQ_CODEC_NONE)
	{
		*len = n;
		return data;
	}
	resetStringInfo(scratch);
	MqDecompress(MqBatchCodec(h), data, n, scratch, h->base_offset, limit);
	*len = scratch->len;
	return scratch->data;
}

/*
 * The records of a stored batch at or after from_offset, at most maxrecs of
 * them, decompressed and decoded into a new array; everything (the array,
 * decompressed bytes, header arrays) is allocated in CurrentMemoryContext,
 * which the records point into.  Returns how many were decoded.
 */
int
MqBatchDecodeAll(const char *stored, const MqBatchHeader *h, int64 from_offset,
				 int maxrecs, MqRecord **recs)
{
	StringInfoData scratch;
	const char *data;
	Size		len;

	if (MqBatchCodec(h) != MQ_CODEC_NONE)
		initStringInfo(&scratch);
	data = MqBatchRecords(stored, h, &scratch, MaxAllocSize - 1, &len);
	*recs = palloc(sizeof(MqRecord) * Max(maxrecs, 1));
	return MqBatchDecodeRecords(h, data, len, from_offset, *recs, maxrecs);
}

/*
 * Decode up to maxrecords records at or after from_offset from a batch's
 * record bytes into records[]; keys, values and headers point into data.
 * Records before from_offset are skipped by their length, which is what a
 * reader resuming inside a large batch needs.  Returns how many were
 * decoded.
 */
int
MqBatchDecodeRecords(const MqBatchHeader *h, const char *data, Size len,
					 int64 from_offset, MqRecord *records, int maxrecords)
{
	const char *p = data;
	const char *end = data + len;
	int64		base_ms = MqKafkaTime(h->first_timestamp);
	int			n = 0;
	int64		nheaders = 0;
	int64		ms;

	while (p < end && n < maxrecords)
	{
		MqRecord   *rec = &records[n];
		int64		reclen = get_varint(&p, end);
		int64		flen;
		const char *recend;
		int64		nh;

		if (reclen < 1 || reclen > end - p)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: record length out of bounds")));
		recend = p + reclen;
		p++;					/* attributes */
		if (pg_add_s64_overflow(base_ms, get_varint(&p, recend), &ms) || !kafka_time_valid(ms))
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("record timestamp " INT64_FORMAT " ms of the batch at offset " INT64_FORMAT " is out of range",
							ms, h->base_offset),
					 errdetail("A record's timestamp must be one timestamptz can hold.")));
		rec->ts = MqPgTime(ms);
		rec->offset = h->base_offset + get_varint(&p, recend);
		if (rec->offset < from_offset)
		{
			p = recend;
			continue;
		}
		if (h->attributes & MQ_ATTR_LOG_APPEND_TIME)
			rec->ts = h->max_timestamp;
		flen = get_varint(&p, recend);
		rec->key = get_bytes(&p, recend, flen, true);
		rec->keylen = rec->key ? (int) flen : 0;
		flen = get_varint(&p, recend);
		rec->value = get_bytes(&p, recend, flen, true);
		rec->valuelen = rec->value ? (int) flen : 0;
		nh = get_varint(&p, recend);
		if (nh < 0 || nh > recend - p)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: header count out of bounds")));
		/*
		 * A header may take two bytes of the batch and costs a MqHeaderKV
		 * decoded: a batch of a million tiny headers would make every
		 * reader allocate gigabytes.  Kafka sets no bound; mqlog does.
		 */
		nheaders += nh;
		if (nheaders > MQ_MAX_BATCH_HEADERS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("record batch at offset " INT64_FORMAT " has more than %d record headers",
							h->base_offset, MQ_MAX_BATCH_HEADERS)));
		rec->nheaders = (int) nh;
		rec->headers = nh > 0 ? palloc(sizeof(MqHeaderKV) * nh) : NULL;
		for (int i = 0; i < (int) nh; i++)
		{
			MqHeaderKV *hk = &rec->headers[i];

			flen = get_varint(&p, recend);
			hk->key = get_bytes(&p, recend, flen, false);
			hk->keylen = (int) flen;
			flen = get_varint(&p, recend);
			hk->value = get_bytes(&p, recend, flen, true);
			hk->valuelen = hk->value ? (int) flen : 0;
		}
		if (p != recend)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mqlog record batch is malformed: a record is longer than its fields")));
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
