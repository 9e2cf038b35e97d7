/*-------------------------------------------------------------------------
 *
 * mqlog.h
 *		Declarations shared between mqlog's source files: the record batch
 *		format, the segment page layout, the WAL records, partition state in
 *		shared memory and the topic metadata cache.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_H
#define MQLOG_H

#include "postgres.h"

#include "access/xlogreader.h"
#include "datatype/timestamp.h"
#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/condition_variable.h"
#include "storage/lockdefs.h"
#include "storage/lwlock.h"
#include "utils/relcache.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/tuplestore.h"
#include "utils/relcache.h"

/* ------------------------------------------------------------------------
 * Settings (mqlog.c)
 * ------------------------------------------------------------------------ */
extern int	mqlog_max_partitions;
extern int	mqlog_max_inflight;
extern bool mqlog_preloaded;

/* consumer group settings (groups.c) */
typedef enum MqAssignor
{
	MQ_ASSIGN_RANGE,
	MQ_ASSIGN_ROUNDROBIN,
	MQ_ASSIGN_STICKY
} MqAssignor;

typedef enum MqOffsetReset
{
	MQ_RESET_EARLIEST,
	MQ_RESET_LATEST,
	MQ_RESET_NONE				/* an error, as Kafka's auto.offset.reset=none */
} MqOffsetReset;

struct Latch;
extern int	mqlog_assignor;
extern int	mqlog_offset_reset;
extern int	mqlog_max_poll_interval_ms;
extern int	mqlog_max_groups_per_session;
extern int	mqlog_poll_recheck_interval;

extern Size MqGroupsShmemSize(void);
extern void MqGroupsShmemInit(void);
extern void MqGroupsInitCallbacks(void);
extern int	MqGroupsCoordinate(void);
extern void MqGroupsSetCoordinatorLatch(struct Latch *latch);
extern void MqCoordinatorRegister(void);
extern int	mqlog_maintenance_naptime;
extern void MqMaintenanceRegister(void);

extern void MqlogCatalogChanged(void);
extern uint64 MqlogCatalogGeneration(void);

/* ------------------------------------------------------------------------
 * Record batches (batch.c)
 *
 * A batch is the unit of append: one per partition per produce call.  Its
 * header is fixed-size and little-endian as the machine stores it; the
 * records that follow are varint-encoded like Kafka's v2 format.
 * ------------------------------------------------------------------------ */

#define MQ_BATCH_MAGIC			1

/* flags byte: the batch's fate, set by VACUUM with WAL (not covered by CRC) */
#define MQ_BATCH_COMMITTED		0x01
#define MQ_BATCH_ABORTED		0x02

/* attributes (covered by CRC) */
#define MQ_ATTR_LOG_APPEND_TIME 0x0001

typedef struct MqBatchHeader
{
	uint8		flags;			/* MQ_BATCH_COMMITTED / MQ_BATCH_ABORTED */
	uint8		magic;			/* MQ_BATCH_MAGIC */
	uint16		reserved1;
	uint32		length;			/* whole batch in bytes, header included */
	int64		base_offset;	/* offset of the first record */
	int32		leader_epoch;	/* for replication; 0 on a single node */
	uint32		crc;			/* CRC32C of bytes [MQ_BATCH_CRC_START, length) */
	/* everything below is covered by the CRC */
	uint16		attributes;		/* MQ_ATTR_* */
	uint16		reserved2;
	TransactionId xid;			/* (sub)transaction that appended it */
	int32		last_offset_delta;	/* last record's offset - base_offset */
	int32		record_count;	/* records in the batch */
	TimestampTz first_timestamp;
	TimestampTz max_timestamp;
} MqBatchHeader;

/*
 * The CRC leaves out the fate flags (VACUUM sets them later) and the base
 * offset and epoch, so that a batch can be encoded and checksummed before
 * the partition lock is taken and its offset is known, as in Kafka.
 */
#define MQ_BATCH_HEADER_SIZE	sizeof(MqBatchHeader)
#define MQ_BATCH_CRC_START		offsetof(MqBatchHeader, attributes)

static inline int64
MqBatchNextOffset(const MqBatchHeader *h)
{
	return h->base_offset + h->last_offset_delta + 1;
}

/* A record in memory, as produce builds it and fetch decodes it. */
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

extern void MqBatchBuild(StringInfo buf, MqRecord *records, int nrecords,
						 TransactionId xid, uint16 attributes, bool keep_offsets);
extern void MqBatchSetOffset(char *batch, int64 base_offset);
extern bool MqBatchCheckCrc(const char *batch, uint32 length);
extern uint32 MqBatchComputeCrc(const char *batch, uint32 length);
extern int	MqBatchDecode(const char *batch, MqRecord *records, int maxrecords);
extern int	MqBatchDecodeFrom(const char *batch, int64 from_offset, MqRecord *records,
							  int maxrecords);
extern Size MqRecordEncodedSize(const MqRecord *rec);

/* Kafka's murmur2 */
extern int32 MqMurmur2(const char *data, int len);

/* ------------------------------------------------------------------------
 * Segment pages (segment.c)
 *
 * A segment is a byte log laid over standard pages: the data area of page
 * n holds log bytes [n * MQ_PAGE_DATA, (n + 1) * MQ_PAGE_DATA).  The special
 * space names the batch that covers the page's first byte, so an offset is
 * found by a binary search over pages.
 * ------------------------------------------------------------------------ */

#define MQ_PAGE_MAGIC			0x4D51	/* "MQ" */

typedef struct MqPageOpaque
{
	int64		cover_offset;	/* base offset of the batch holding the first
								 * data byte of this page */
	BlockNumber cover_block;	/* where that batch starts */
	uint16		cover_pos;		/* ... and at which byte of that page */
	uint16		magic;
} MqPageOpaque;

#define MQ_PAGE_DATA_START		MAXALIGN(SizeOfPageHeaderData)
#define MQ_PAGE_DATA_END		(BLCKSZ - MAXALIGN(sizeof(MqPageOpaque)))
#define MQ_PAGE_DATA			(MQ_PAGE_DATA_END - MQ_PAGE_DATA_START)

/* logical byte position in a segment <-> (block, byte in page) */
static inline BlockNumber
MqLposBlock(uint64 lpos)
{
	return (BlockNumber) (lpos / MQ_PAGE_DATA);
}

static inline uint16
MqLposPageOffset(uint64 lpos)
{
	return (uint16) (MQ_PAGE_DATA_START + lpos % MQ_PAGE_DATA);
}

static inline uint64
MqLpos(BlockNumber blkno, uint16 pos)
{
	return (uint64) blkno * MQ_PAGE_DATA + (pos - MQ_PAGE_DATA_START);
}

/* the state of a segment's tail, as a scan from the last pages finds it */
typedef struct MqSegmentTail
{
	uint64		end_lpos;		/* where the next batch goes */
	int64		next_offset;	/* offset the next batch gets */
	uint64		torn_lpos;		/* physical end when a crash tore the last
								 * batch, else equal to end_lpos */
} MqSegmentTail;

extern void MqSegmentReadTail(Relation rel, int64 base_offset, MqSegmentTail *tail);
extern void MqSegmentAppend(Relation rel, int32 topic_id, int32 partition,
							uint64 lpos, const char *batch, uint32 length,
							int64 lso, uint16 xlflags);
extern void MqSegmentRepairTail(Relation rel, MqSegmentTail *tail);

/*
 * Sequential reader over the batches of one segment.  It copies each batch
 * into batchbuf (batches may span pages) and stops at the physical end.
 */
typedef struct MqSegmentReader
{
	Relation	rel;
	BlockNumber nblocks;
	uint64		end_lpos;		/* physical end of data */
	uint64		lpos;			/* next batch starts here */
	uint64		batch_lpos;		/* where the current batch started */
	StringInfoData batchbuf;	/* the current batch, contiguous */
	bool		borrowed;		/* batchbuf is the backend's spare buffer */
} MqSegmentReader;

extern void MqReaderInit(MqSegmentReader *reader, Relation rel);
extern void MqReaderSeek(MqSegmentReader *reader, int64 offset);
extern bool MqReaderNext(MqSegmentReader *reader, bool verify_crc);
extern bool MqReaderNextHeader(MqSegmentReader *reader, MqBatchHeader *hdr);
extern void MqReaderEnd(MqSegmentReader *reader);
extern void MqReaderAtAbort(void);

/* batch visibility for readers */
typedef enum MqBatchFate
{
	MQ_FATE_VISIBLE,
	MQ_FATE_INVISIBLE,			/* aborted: a hole, read on */
	MQ_FATE_IN_PROGRESS			/* stop here */
} MqBatchFate;

extern MqBatchFate MqBatchGetFate(const MqBatchHeader *h, int64 lso);

extern void MqSegmentFreeze(Relation rel, TransactionId horizon,
							TransactionId *oldest_unfrozen);

/* ------------------------------------------------------------------------
 * WAL (wal.c)
 * ------------------------------------------------------------------------ */

#define RM_MQLOG_ID				RM_EXPERIMENTAL_ID

#define XLOG_MQLOG_APPEND		0x00
#define XLOG_MQLOG_TRUNCATE		0x10
#define XLOG_MQLOG_FREEZE		0x20

/*
 * An append record carries one chunk of a batch: the bytes for up to
 * MQ_WAL_MAX_BLOCKS consecutive pages.  Most batches fit in one chunk.
 */
#define MQ_WAL_MAX_BLOCKS		32

typedef struct xl_mqlog_append
{
	int32		topic_id;
	int32		partition;
	int64		base_offset;	/* the batch this chunk belongs to */
	int64		lso;			/* partition LSO when appended (replication) */
	uint32		batch_length;
	uint32		chunk_start;	/* position of this chunk in the batch */
	uint32		chunk_length;
	BlockNumber batch_block;	/* where the batch starts */
	uint16		batch_pos;
	uint16		first_pos;		/* where the chunk starts in block ref 0 */
	uint16		flags;			/* XLMQ_* */
	/* chunk bytes follow */
} xl_mqlog_append;

#define SizeOfMqlogAppend	(offsetof(xl_mqlog_append, flags) + sizeof(uint16))

/* a rewrite by compaction: records the log already had, not new ones */
#define XLMQ_COMPACTION			0x0001

/* reset the end of data on one page (block ref 0) after a torn batch */
typedef struct xl_mqlog_truncate
{
	uint16		end_pos;
} xl_mqlog_truncate;

/* record the fate of batches starting on one page (block ref 0) */
typedef struct xl_mqlog_freeze
{
	uint16		nbatches;
	/* nbatches MqFreezeItem follow */
} xl_mqlog_freeze;

typedef struct MqFreezeItem
{
	uint16		pos;			/* where the batch header starts on the page */
	uint8		flags;			/* MQ_BATCH_COMMITTED or MQ_BATCH_ABORTED */
	uint8		pad;
} MqFreezeItem;

extern void MqlogRegisterRmgr(void);
extern void MqPageInit(Page page, int64 cover_offset, BlockNumber cover_block, uint16 cover_pos);
extern void MqPageWriteChunk(Page page, BlockNumber blkno, bool init,
							 const xl_mqlog_append *xlrec, uint16 pos,
							 const char *data, uint32 len);

/* logical decoding (decode.c) */
struct LogicalDecodingContext;
struct XLogRecordBuffer;
extern void MqlogDecode(struct LogicalDecodingContext *ctx, struct XLogRecordBuffer *buf);

/* ------------------------------------------------------------------------
 * Partition state in shared memory (partition.c)
 * ------------------------------------------------------------------------ */

/*
 * Topic ids are per database and start again at 1 when the extension is
 * dropped and created again, so the key also names the database and the
 * catalog table's relation (a new one for each incarnation).
 */
typedef struct MqPartitionKey
{
	Oid			dboid;
	Oid			catalog_relid;
	int32		topic_id;
	int32		partition;
} MqPartitionKey;

typedef struct MqPartition
{
	MqPartitionKey key;			/* hash key: must be first */
	LWLock		lock;			/* serializes appends; protects what follows */
	bool		loaded;			/* tail read from disk */
	bool		dirty;			/* an append failed midway: re-read the tail */
	Oid			active_relid;	/* segment where appends go */
	int64		active_base;
	uint64		end_lpos;		/* append position in the active segment */
	uint64		torn_lpos;		/* > end_lpos when a crash tore the tail */
	int64		next_offset;	/* offset the next batch gets */
	dlist_head	inflight;		/* MqInflight, ascending first offset */
	ConditionVariable cv;		/* broadcast when appends commit */
} MqPartition;

extern void MqPartitionShmemRequest(void);
extern void MqPartitionShmemInit(void);
extern MqPartition *MqPartitionGet(Oid catalog_relid, int32 topic_id, int32 partition);
extern void MqPartitionLoad(MqPartition *part, Relation rel, int64 base_offset);
extern int64 MqPartitionLso(MqPartition *part, int64 *high_watermark);
extern void MqPartitionRegisterInflight(MqPartition *part, int64 offset);
extern void MqPartitionCheckInflightRoom(MqPartition **parts, int nparts);

#define MQ_DDL_SLOTS 64
extern void MqAnnounceDdl(int32 topic_id);
extern uint64 MqDdlCount(int32 *topic_id);
extern void MqPartitionInitCallbacks(void);
extern void MqPartitionEnsureLoaded(MqPartition *part, Relation rel, int64 base_offset);
extern void MqPartitionSwitchAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionForgetAtCommit(Oid catalog_relid, int32 topic_id);

/* ------------------------------------------------------------------------
 * Topic metadata cache (topic.c)
 * ------------------------------------------------------------------------ */

typedef struct MqSegmentRef
{
	int64		base_offset;
	Oid			relid;
	bool		sealed;
} MqSegmentRef;

typedef struct MqTopic
{
	Oid			catalog_relid;	/* mqlog.topic, see MqPartitionKey */
	int32		topic_id;
	char	   *name;
	int			partitions;
	int64		max_message_bytes;
	bool		log_append_time;
	bool		compact;
	int64		delete_retention_ms;
	Oid			owner;			/* the role that created it */
	int			nacl;			/* mqlog.topic_acl rows, see acl.c */
	struct MqTopicAclItem *acl;
	/* per partition, the segment chain in ascending base offset */
	int		   *nsegments;
	MqSegmentRef **segments;
	struct MqPartition **parts;	/* shared state, looked up lazily */
} MqTopic;

extern MqTopic *MqTopicLookup(const char *name, bool missing_ok);
extern MqTopic *MqTopicLookupById(int32 topic_id);
extern const char *MqTopicNameOrId(int32 topic_id);
extern MqTopic *MqTopicRefresh(const char *name);
extern void MqCheckPartition(MqTopic *topic, int32 partition);
extern int32 MqTopicIdOfSegment(Oid relid);

/* segment relations (am.c) */
extern bool MqIsSegment(Oid relid);
extern Relation MqSegmentOpen(Oid relid, LOCKMODE lockmode);
extern void MqCheckSegment(Oid relid);
extern bool mqlog_allow_segment_ddl;
extern MqPartition *MqTopicPartition(MqTopic *topic, int32 partition);
extern const MqSegmentRef *MqTopicActiveSegment(MqTopic *topic, int32 partition);

/* offsets of a partition (fetch.c) */
extern void MqPartitionOffsets(MqTopic *topic, int32 partition, int64 *lso, int64 *hw);
extern int64 MqLogStartOffset(MqTopic *topic, int32 partition);
extern bytea *MqBytea(const char *data, int len);

typedef struct MqRecordOutput
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Oid			header_type;	/* mqlog.header */
	TupleDesc	header_desc;
	text	   *topic;			/* set by MqReadPartition */
} MqRecordOutput;

extern void MqInitRecordOutput(FunctionCallInfo fcinfo, MqRecordOutput *out);
extern int64 MqReadPartition(MqTopic *topic, int32 partition, int64 from_offset,
							 int max_records, int64 max_bytes, MqRecordOutput *out,
							 int *nread);
extern ConditionVariable *MqDataArrivedCV(void);
extern int64 MqOffsetForTime(MqTopic *topic, int32 partition, TimestampTz ts, TimestampTz *found_ts);
extern Datum MqHeadersDatum(Oid header_type, TupleDesc header_desc, MqRecord *rec);

#endif							/* MQLOG_H */
