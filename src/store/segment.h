/*-------------------------------------------------------------------------
 *
 * segment.h
 *		The segment page format, the reader over a segment's batches, tail
 *		discovery and repair, batch visibility and freezing (segment.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_SEGMENT_H
#define MQLOG_SEGMENT_H

#include "datatype/timestamp.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#include "store/batch.h"
#include "store/wal.h"

/* ------------------------------------------------------------------------
 * Segment pages (segment.c)
 *
 * A segment is a byte log laid over standard pages: the data area of page
 * n holds log bytes [n * MQ_PAGE_DATA, (n + 1) * MQ_PAGE_DATA).  The special
 * space names the batch that covers the page's first byte, so an offset is
 * found by a binary search over pages.
 * ------------------------------------------------------------------------ */

#define MQ_PAGE_MAGIC			0x4D51	/* "MQ" */

/*
 * The segment format: 1 was mqlog 0.1.0's own batch format, 2 is Kafka's
 * record batch v2 behind mqlog's prefix.  Every page says which it holds.
 */
#define MQ_SEGMENT_FORMAT		2
#define MQ_SEGMENT_FORMAT_V1_SPECIAL 16	/* 0.1.0's special space, no version */

typedef struct MqPageOpaque
{
	int64		cover_offset;	/* base offset of the batch holding the first
								 * data byte of this page */
	BlockNumber cover_block;	/* where that batch starts */
	uint16		cover_pos;		/* ... and at which byte of that page */
	uint16		magic;
	uint16		format;			/* MQ_SEGMENT_FORMAT */
	uint16		reserved[3];
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
extern bool MqSegmentCutAt(Relation rel, int64 offset);
extern bool MqSegmentCutting(Oid relid);
extern BlockNumber MqSegmentAppend(Relation rel, int32 topic_id, int32 partition,
								   uint64 lpos, const char *batch, uint32 length,
								   int64 lso, uint16 xlflags);
extern BlockNumber MqSegmentExtend(Relation rel, BlockNumber target, BlockNumber step);
extern BlockNumber MqSegmentUsedBlocks(Relation rel);
extern void MqSegmentRepairTail(Relation rel, MqSegmentTail *tail);
extern int64 MqSegmentFirstOffset(Relation rel);
extern int64 MqSegmentOffsetAtBlock(Relation rel, BlockNumber blkno);
extern bool MqSegmentFirstTimestamp(Relation rel, TimestampTz *ts);

/*
 * Sequential reader over the batches of one segment.  Each batch is handed
 * over whole and contiguous (batches may span pages): from the backend's
 * cache of batches read and checked before, or copied from the pages.  It
 * stops at the physical end.
 */
typedef struct MqSegmentReader
{
	Relation	rel;
	BlockNumber nblocks;
	uint64		end_lpos;		/* physical end of data */
	uint64		lpos;			/* next batch starts here */
	uint64		batch_lpos;		/* where the current batch started */
	MqBatchHeader hdr;			/* the current batch's header */
	const char *batch;			/* the current batch's bytes, valid until
								 * the next MqReaderNext or MqReaderEnd */
	bool		from_pages;		/* never from the cache (the verifier) */
	int			entry;			/* the cache entry it is in, or -1 */
	uint64		checked_serial; /* cache entry fill this reader looked at */
	StringInfo	ownbuf;			/* when no cache entry was free */
} MqSegmentReader;

extern void MqReaderInit(MqSegmentReader *reader, Relation rel, uint64 known_end);
extern void MqReaderSeek(MqSegmentReader *reader, int64 offset);
extern bool MqReaderNext(MqSegmentReader *reader, bool verify_crc);
extern bool MqReaderNextHeader(MqSegmentReader *reader, MqBatchHeader *hdr);
extern void MqReaderEnd(MqSegmentReader *reader);
extern void MqReaderAtXactEnd(void);

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


extern void MqPageInit(Page page, int64 cover_offset, BlockNumber cover_block, uint16 cover_pos);
extern void MqPageWriteChunk(Page page, BlockNumber blkno, bool init,
							 const xl_mqlog_append *xlrec, uint16 pos,
							 const char *data, uint32 len);

#endif							/* MQLOG_SEGMENT_H */
