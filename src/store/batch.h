/*-------------------------------------------------------------------------
 *
 * batch.h
 *		The stored record batch: mqlog's 8-byte prefix followed by a Kafka
 *		record batch v2, byte for byte (batch.c, codec.c).
 *
 * Stored layout (all Kafka fields big-endian, as Kafka writes them):
 *
 *	  mqlog prefix (not Kafka's, never sent to a Kafka client)
 *		 0	uint8	fate flags (MQ_BATCH_COMMITTED / MQ_BATCH_ABORTED), set
 *					later by VACUUM with WAL, hence outside every checksum
 *		 1	uint8	MQ_PREFIX_MAGIC
 *		 2	uint16	reserved, zero
 *		 4	uint32	xid of the (sub)transaction that appended the batch,
 *					in the machine's byte order
 *	  Kafka record batch v2 (offsets below are from its first byte)
 *		 0	int64	baseOffset
 *		 8	int32	batchLength: bytes after this field
 *		12	int32	partitionLeaderEpoch
 *		16	int8	magic = 2
 *		17	uint32	crc: CRC-32C of bytes [21, end)
 *		21	int16	attributes: codec (bits 0-2), timestamp type (bit 3),
 *					transactional (bit 4), control (bit 5)
 *		23	int32	lastOffsetDelta
 *		27	int64	baseTimestamp, milliseconds since 1970
 *		35	int64	maxTimestamp
 *		43	int64	producerId
 *		51	int16	producerEpoch
 *		53	int32	baseSequence
 *		57	int32	records count
 *		61	records, compressed as one stream when the codec is not none
 *
 * The CRC leaves out the base offset and the leader epoch, so a batch is
 * encoded and checksummed before the partition lock is taken, and the
 * offset stamped under it, as Kafka's broker does.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_BATCH_H
#define MQLOG_BATCH_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

/* prefix */
#define MQ_PREFIX_SIZE			8
#define MQ_PREFIX_MAGIC			0xB2	/* "batch, Kafka v2" */
#define MQ_BATCH_COMMITTED		0x01
#define MQ_BATCH_ABORTED		0x02

/* Kafka's header */
#define MQ_KAFKA_MAGIC			2
#define MQ_KAFKA_HEADER_SIZE	61
#define MQ_KAFKA_LOG_OVERHEAD	12	/* baseOffset + batchLength */
#define MQ_KAFKA_CRC_START		21
#define MQ_BATCH_HEADER_SIZE	(MQ_PREFIX_SIZE + MQ_KAFKA_HEADER_SIZE)

/* attributes */
#define MQ_ATTR_CODEC_MASK		0x0007
#define MQ_ATTR_LOG_APPEND_TIME 0x0008
#define MQ_ATTR_TRANSACTIONAL	0x0010
#define MQ_ATTR_CONTROL			0x0020

/* Kafka's compression codecs, as numbered in the attributes */
typedef enum MqCodec
{
	MQ_CODEC_NONE = 0,
	MQ_CODEC_GZIP = 1,
	MQ_CODEC_SNAPPY = 2,
	MQ_CODEC_LZ4 = 3,
	MQ_CODEC_ZSTD = 4
} MqCodec;

#define MQ_CODEC_PRODUCER		(-1)	/* topic config: keep the producer's */

/* record headers in one batch, at most (see MqBatchDecodeRecords) */
#define MQ_MAX_BATCH_HEADERS	1000000

/* A stored batch's header in host order, timestamps as PostgreSQL's. */
typedef struct MqBatchHeader
{
	uint8		flags;			/* prefix: fate */
	uint8		magic;			/* prefix: MQ_PREFIX_MAGIC (0: torn/zeroed) */
	TransactionId xid;			/* prefix */
	uint32		length;			/* stored length, prefix included */
	int64		base_offset;
	int32		leader_epoch;
	int8		kafka_magic;
	uint32		crc;
	int16		attributes;
	int32		last_offset_delta;
	TimestampTz first_timestamp;	/* baseTimestamp */
	TimestampTz max_timestamp;
	int64		producer_id;
	int16		producer_epoch;
	int32		base_sequence;
	int32		record_count;
} MqBatchHeader;

static inline int64
MqBatchNextOffset(const MqBatchHeader *h)
{
	return h->base_offset + h->last_offset_delta + 1;
}

static inline MqCodec
MqBatchCodec(const MqBatchHeader *h)
{
	return (MqCodec) (h->attributes & MQ_ATTR_CODEC_MASK);
}

/* A record in memory, as produce builds it and readers decode it. */
typedef struct MqHeaderKV
{
	const char *key;
	int			keylen;
	const char *value;			/* NULL for a null header value */
	int			valuelen;
} MqHeaderKV;

typedef struct MqRecord
{
	int64		offset;
	TimestampTz ts;
	const char *key;			/* NULL: no key */
	int			keylen;
	const char *value;			/* NULL: tombstone */
	int			valuelen;
	int			nheaders;
	MqHeaderKV *headers;
} MqRecord;

/*
 * Kafka timestamps (ms since 1970) <-> TimestampTz (us since 2000), inline:
 * every record read or written converts one.  Rounding is toward minus
 * infinity, so that a record's timestamp never moves past the time it was
 * given.
 *
 * Both saturate instead of overflowing, because their arguments are not
 * all records' times: a Kafka client's ListOffsets asks about any int64,
 * a corrupt header holds any int64, and mq_offsets_for_times is asked
 * about '-infinity'.  A time before timestamptz's range maps to the lowest
 * value of the other side ('-infinity' <-> PG_INT64_MIN) and a time at or
 * past its end to the highest ('infinity' <-> PG_INT64_MAX), so an
 * infinite time still compares below or above every record.  Inside the
 * range, [MQ_KAFKA_TIME_MIN, MQ_KAFKA_TIME_END) in milliseconds, they are
 * exact inverses to the millisecond and the multiplication cannot
 * overflow.
 */
#define MQ_EPOCH_DIFF_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)
/* MIN_TIMESTAMP and END_TIMESTAMP are whole milliseconds */
#define MQ_KAFKA_TIME_MIN	(MIN_TIMESTAMP / 1000 + MQ_EPOCH_DIFF_MS)
#define MQ_KAFKA_TIME_END	(END_TIMESTAMP / 1000 + MQ_EPOCH_DIFF_MS)

static inline int64
MqKafkaTime(TimestampTz ts)
{
	int64		ms;

	if (unlikely(ts < MIN_TIMESTAMP))
		return PG_INT64_MIN;
	if (unlikely(ts >= END_TIMESTAMP))
		return PG_INT64_MAX;
	ms = ts / 1000;
	if (ts < 0 && ts % 1000 != 0)
		ms--;
	return ms + MQ_EPOCH_DIFF_MS;
}

static inline TimestampTz
MqPgTime(int64 kafka_ms)
{
	if (unlikely(kafka_ms < MQ_KAFKA_TIME_MIN))
		return DT_NOBEGIN;
	if (unlikely(kafka_ms >= MQ_KAFKA_TIME_END))
		return DT_NOEND;
	return (kafka_ms - MQ_EPOCH_DIFF_MS) * 1000;
}

/* encoding */
extern void MqBatchBuild(StringInfo buf, MqRecord *records, int nrecords,
						 TransactionId xid, int16 attributes, bool keep_offsets);
extern void MqBatchSetOffset(char *batch, int64 base_offset);
extern void MqBatchSetProducer(char *batch, int64 producer_id, int16 producer_epoch,
							   int32 base_sequence);
extern void MqBatchSetEpoch(char *batch, int32 leader_epoch);
extern void MqBatchSetXid(char *batch, TransactionId xid);
extern void MqBatchWrapKafka(StringInfo buf, const char *kafka, uint32 len,
							 TransactionId xid);
extern Size MqRecordEncodedSize(const MqRecord *rec);

/* the header and its checks */
extern bool MqBatchParseHeader(const char *stored, Size avail, MqBatchHeader *h);
extern bool MqBatchCheckCrc(const char *stored, uint32 length);
extern const char *MqBatchCheckKafka(const char *kafka, Size len);

/*
 * Records of a stored batch: MqBatchRecords points at the record bytes,
 * decompressing into scratch when the batch is compressed, to no more than
 * limit bytes (an error names the codec and the offset; the caller's error
 * context names the rest).
 */
extern const char *MqBatchRecords(const char *stored, const MqBatchHeader *h,
								  StringInfo scratch, Size limit, Size *len);
extern int	MqBatchDecodeRecords(const MqBatchHeader *h, const char *data, Size len,
								 int64 from_offset, MqRecord *records, int maxrecords);
extern int	MqBatchDecodeAll(const char *stored, const MqBatchHeader *h, int64 from_offset,
							 int maxrecs, MqRecord **recs);

/*
 * A whole batch packed for WAL (see batch.c): MqBatchPackHeader writes
 * its header packed, at most MQ_PACKED_HEADER_MAX bytes, and returns how
 * many (the records follow it as they are), or -1 for a batch whose prefix
 * is not a new batch's of transaction xid (a restore's, with its fate
 * set).  MqBatchUnpack rebuilds the stored batch byte for byte into out
 * from the packed header and the records (len bytes in all); false if they
 * are malformed.
 */
#define MQ_PACKED_HEADER_MAX	96
extern int	MqBatchPackHeader(const char *stored, uint32 length, TransactionId xid,
							  char *packed);
extern bool MqBatchUnpack(const char *packed, Size len, TransactionId xid, StringInfo out);

/* zigzag varints, as in Kafka's records */
#define MQ_VARINT_MAX			10
extern int	MqVarintPut(char *p, int64 v);

/*
 * Reads a zigzag varint into *v; false, and *p unmoved, if it runs past
 * end.  Inline: a record's decoding reads five or more.
 */
static inline bool
MqVarintGet(const char **p, const char *end, int64 *v)
{
	const char *q = *p;
	uint64		u = 0;
	int			shift = 0;

	for (;;)
	{
		uint8		b;

		if (q >= end || shift > 63)
			return false;
		b = (uint8) *q++;
		u |= (uint64) (b & 0x7F) << shift;
		if ((b & 0x80) == 0)
			break;
		shift += 7;
	}
	*p = q;
	*v = (int64) (u >> 1) ^ -(int64) (u & 1);
	return true;
}

/* Kafka's murmur2 */
extern int32 MqMurmur2(const char *data, int len);

/* codecs (codec.c) */
extern const char *MqCodecName(int codec);
extern int	MqCodecFromName(const char *name);
extern void MqCompress(MqCodec codec, const char *src, Size len, StringInfo dst);
extern void MqDecompress(MqCodec codec, const char *src, Size len, StringInfo dst,
						 int64 base_offset, Size limit);

#endif							/* MQLOG_BATCH_H */
