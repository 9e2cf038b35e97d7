/*-------------------------------------------------------------------------
 *
 * segment.c
 *		The on-disk format of a segment: a byte log over standard pages.
 *
 * A segment relation (table access method "mqlog") holds one stretch of a
 * partition's log.  Its main fork is a sequence of ordinary 8 kB pages, each
 * with the standard page header (so checksums, full-page writes and
 * pg_checksums work unchanged) and a small special space.  The bytes between
 * the page header and the special space form the data area; the data areas
 * of pages 0, 1, 2, ... concatenated are the segment's byte log, and a
 * logical position ("lpos") in it maps to (block, byte) arithmetically.
 * pd_lower marks how much of a page's data area is used; pd_upper stays at
 * the special space so the unused tail is a "hole" that full-page images
 * leave out.
 *
 * The byte log is a sequence of record batches (batch.c).  Batches are laid
 * end to end and may span any number of pages, so records up to the topic's
 * max.message.bytes fit.  Each page's special space names the batch covering
 * its first data byte (base offset, and the block and byte where that batch
 * starts).  Because batches are appended in offset order these cover offsets
 * never decrease from page to page, so finding an offset is a binary search
 * over pages followed by a short walk from the covering batch, never a scan
 * from the start and never a B-tree.
 *
 * Invariants:
 *	- Only the partition's appender writes, holding the partition lock, and
 *	  only at the tail: written bytes are never rewritten, except the fate
 *	  flags in a batch header, which VACUUM sets with WAL (xl_mqlog_freeze).
 *	- Every change is WAL-logged by our resource manager (wal.c): an append
 *	  record carries the batch bytes once, in its main data, for at most
 *	  MQ_WAL_MAX_BLOCKS pages; larger batches take several records.
 *	- A crash between those records leaves a torn batch at the tail.  Its
 *	  transaction never committed; readers stop at it, and the next appender
 *	  cuts it off (MqSegmentRepairTail) before writing.
 *	- Initialized pages form a prefix of the relation; the pages after it
 *	  are new (all zeroes) and not part of the log: pages the maintenance
 *	  worker extended ahead of the appender (MqSegmentExtend, not
 *	  WAL-logged) or a crash left behind.  The appender initializes them in
 *	  order, without reading them (RBM_ZERO_AND_LOCK, REGBUF_WILL_INIT);
 *	  readers find the end of the log by a galloping search for the last
 *	  initialized page (segment_end).  Why the prefix holds after a crash
 *	  and on a standby: doc/architecture.md, "Segment growth".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "catalog/storage.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "storage/smgr.h"
#include "utils/relcache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"

/* ------------------------------------------------------------------------
 * Pages
 * ------------------------------------------------------------------------ */

void
MqPageInit(Page page, int64 cover_offset, BlockNumber cover_block, uint16 cover_pos)
{
	MqPageOpaque *opaque;

	PageInit(page, BLCKSZ, sizeof(MqPageOpaque));
	((PageHeader) page)->pd_lower = MQ_PAGE_DATA_START;
	opaque = (MqPageOpaque *) PageGetSpecialPointer(page);
	opaque->cover_offset = cover_offset;
	opaque->cover_block = cover_block;
	opaque->cover_pos = cover_pos;
	opaque->magic = MQ_PAGE_MAGIC;
	opaque->format = MQ_SEGMENT_FORMAT;
}

/*
 * Write len bytes of a batch chunk at pos on a page: shared by the appender
 * and by redo, so that both produce the same page byte for byte.
 */
void
MqPageWriteChunk(Page page, BlockNumber blkno, bool init,
				 const xl_mqlog_append *xlrec, uint16 pos,
				 const char *data, uint32 len)
{
	if (init)
		MqPageInit(page, xlrec->base_offset, xlrec->batch_block, xlrec->batch_pos);
	Assert(pos + len <= MQ_PAGE_DATA_END);
	memcpy((char *) page + pos, data, len);
	((PageHeader) page)->pd_lower = pos + len;
}

/*
 * A page's special space, checked: a page of another segment format (one
 * written by mqlog 0.1.0) is refused with a hint, never misread.
 */
static MqPageOpaque *
page_opaque(Relation rel, Page page, BlockNumber blkno)
{
	MqPageOpaque *opaque;

	if (!PageIsNew(page) &&
		PageGetSpecialSize(page) == MQ_SEGMENT_FORMAT_V1_SPECIAL &&
		*(uint16 *) ((char *) page + BLCKSZ - sizeof(uint16)) == MQ_PAGE_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog segment \"%s\" is in segment format 1 (mqlog 0.1.0), which this mqlog cannot read",
						RelationGetRelationName(rel)),
				 errdetail("This mqlog stores Kafka's record batch v2 (segment format %d).",
						   MQ_SEGMENT_FORMAT),
				 errhint("Read the records out with mqlog 0.1.0, then DROP EXTENSION mqlog and CREATE EXTENSION mqlog with this version and produce them again.")));
	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(sizeof(MqPageOpaque)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mqlog segment \"%s\" has an invalid page at block %u",
						RelationGetRelationName(rel), blkno)));
	opaque = (MqPageOpaque *) PageGetSpecialPointer(page);
	if (opaque->magic != MQ_PAGE_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mqlog segment \"%s\" has a page with a bad magic number at block %u",
						RelationGetRelationName(rel), blkno)));
	if (opaque->format != MQ_SEGMENT_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog segment \"%s\" is in segment format %u, which this mqlog cannot read",
						RelationGetRelationName(rel), opaque->format),
				 errdetail("This mqlog reads segment format %d.", MQ_SEGMENT_FORMAT)));
	return opaque;
}

/* ------------------------------------------------------------------------
 * Appending
 * ------------------------------------------------------------------------ */

/*
 * The appender needs block blk, at or past the end it last saw (*nblocks).
 * The maintenance worker may have extended the segment since
 * (MqSegmentExtend), so look again under the extension lock and extend by
 * this one page only if it is still missing: then return it pinned and
 * exclusively locked; else InvalidBuffer, and *nblocks is the new length.
 */
static Buffer
extend_for_append(Relation rel, BlockNumber blk, BlockNumber *nblocks)
{
	volatile Buffer buf = InvalidBuffer;

	LockRelationForExtension(rel, ExclusiveLock);

	/*
	 * An extension that fails (a full disk) lets go of the extension lock
	 * at once, not when the transaction's locks go: its abort then waits
	 * for the partition lock to release its in-flight entries
	 * (log/partition.c), and the next appender, which took the partition
	 * lock the error released, would wait for this extension lock, each
	 * for the other, for ever.
	 */
	PG_TRY();
	{
		*nblocks = RelationGetNumberOfBlocks(rel);
		if (blk == *nblocks)
		{
			buf = ReadBuffer(rel, P_NEW);
			LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
			*nblocks = blk + 1;
		}
	}
	PG_CATCH();
	{
		UnlockRelationForExtension(rel, ExclusiveLock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	UnlockRelationForExtension(rel, ExclusiveLock);
	if (blk > *nblocks)
		elog(ERROR, "mqlog segment \"%s\" has %u blocks, an append at block %u would leave a gap",
			 RelationGetRelationName(rel), *nblocks, blk);
	if (BufferIsValid(buf) && BufferGetBlockNumber(buf) != blk)
		elog(ERROR, "mqlog segment \"%s\" extended to block %u, expected %u",
			 RelationGetRelationName(rel), BufferGetBlockNumber(buf), blk);
	return buf;
}

/*
 * Append a whole batch at lpos, the segment's current end.  The caller
 * holds the partition lock and a lock on the relation, and has assigned an
 * xid.  Pages are filled in chunks of at most MQ_WAL_MAX_BLOCKS, each chunk
 * one critical section and one WAL record.  Returns the segment's length
 * in blocks as the append left it (trailing pages extended ahead included).
 */
BlockNumber
MqSegmentAppend(Relation rel, int32 topic_id, int32 partition,
				uint64 lpos, const char *batch, uint32 length, int64 lso,
				uint16 xlflags)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	uint32		done = 0;
	xl_mqlog_append xlrec;
	Buffer		bufs[MQ_WAL_MAX_BLOCKS];
	uint16		poss[MQ_WAL_MAX_BLOCKS];
	uint32		lens[MQ_WAL_MAX_BLOCKS];
	bool		inits[MQ_WAL_MAX_BLOCKS];

	memset(&xlrec, 0, sizeof(xlrec));
	xlrec.topic_id = topic_id;
	xlrec.partition = partition;
	{
		MqBatchHeader hdr;

		if (!MqBatchParseHeader(batch, length, &hdr))
			elog(ERROR, "mqlog: appending a malformed batch");
		xlrec.base_offset = hdr.base_offset;
	}
	xlrec.lso = lso;
	xlrec.flags = xlflags;
	xlrec.format = MQ_SEGMENT_FORMAT;
	xlrec.batch_length = length;
	xlrec.batch_block = MqLposBlock(lpos);
	xlrec.batch_pos = MqLposPageOffset(lpos);

	XLogEnsureRecordSpace(MQ_WAL_MAX_BLOCKS - 1, 2);

	while (done < length)
	{
		int			nb = 0;
		uint32		chunk_start = done;
		XLogRecPtr	recptr;
		uint8		info;

		/* pin and lock the pages of this chunk, extending as needed */
		while (nb < MQ_WAL_MAX_BLOCKS && done < length)
		{
			BlockNumber blk = MqLposBlock(lpos);
			uint16		pos = MqLposPageOffset(lpos);
			uint32		n = Min((uint32) (MQ_PAGE_DATA_END - pos), length - done);
			Buffer		buf;

			buf = (blk >= nblocks) ? extend_for_append(rel, blk, &nblocks) : InvalidBuffer;
			if (BufferIsValid(buf))
				Assert(BufferGetBlockNumber(buf) == blk);
			else if (pos == MQ_PAGE_DATA_START)
			{
				/*
				 * A page that exists (extended ahead, or left new by a
				 * crash) and that this chunk initializes: neither read it
				 * nor zero it on disk.  RBM_ZERO_AND_LOCK hands back the
				 * buffer exclusively locked: zeroed if the block was not in
				 * shared buffers, as it is if it was (new, as the worker's
				 * extension leaves it).  MqPageInit overwrites it whole.
				 */
				buf = ReadBufferExtended(rel, MAIN_FORKNUM, blk, RBM_ZERO_AND_LOCK, NULL);
			}
			else
			{
				buf = ReadBuffer(rel, blk);
				LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
			}
			bufs[nb] = buf;
			poss[nb] = pos;
			lens[nb] = n;
			inits[nb] = (pos == MQ_PAGE_DATA_START);
			lpos += n;
			done += n;
			nb++;
		}

		xlrec.chunk_start = chunk_start;
		xlrec.chunk_length = done - chunk_start;
		xlrec.first_pos = poss[0];

		START_CRIT_SECTION();

		for (int i = 0, off = chunk_start; i < nb; off += lens[i], i++)
		{
			MqPageWriteChunk(BufferGetPage(bufs[i]), BufferGetBlockNumber(bufs[i]),
							 inits[i], &xlrec, poss[i], batch + off, lens[i]);
			MarkBufferDirty(bufs[i]);
		}

		XLogBeginInsert();
		info = MqWalRegisterAppend(&xlrec, batch + chunk_start);
		for (int i = 0; i < nb; i++)
			XLogRegisterBuffer(i, bufs[i],
							   REGBUF_STANDARD | (inits[i] ? REGBUF_WILL_INIT : 0));
		recptr = XLogInsert(RM_MQLOG_ID, info);
		for (int i = 0; i < nb; i++)
			PageSetLSN(BufferGetPage(bufs[i]), recptr);

		END_CRIT_SECTION();

		for (int i = 0; i < nb; i++)
			UnlockReleaseBuffer(bufs[i]);
	}
	return nblocks;
}

/*
 * Extend the segment with new (all-zero) pages towards target blocks, at
 * most step of them, under the extension lock; returns the segment's
 * length in blocks afterwards.  The maintenance worker calls this ahead of
 * the appender, which then takes the pages with RBM_ZERO_AND_LOCK instead
 * of paying PostgreSQL 15's zero-filling pwrite itself.  The pages are
 * written to the file as P_NEW writes them, but not into shared buffers:
 * through them (as at first), the pages ahead of a thousand partitions'
 * appenders, a megabyte each, went through a 256 MB pool and pushed the
 * log's own pages out, and readers of many partitions read from the
 * kernel instead (the scale bench, 2026-12-02).  The appender's
 * RBM_ZERO_AND_LOCK takes a buffer for the page without reading it.  No
 * stale buffer can name a block past the end: truncation drops them
 * (RelationTruncate).  The pages are not WAL-logged, as heap's extension
 * is not: the first record that touches each page initializes it
 * (REGBUF_WILL_INIT), so a page new on disk, on a standby or after a
 * crash is never read as data.  The caller holds a lock on the relation
 * that keeps truncation out.
 */
BlockNumber
MqSegmentExtend(Relation rel, BlockNumber target, BlockNumber step)
{
	BlockNumber nblocks;
	PGAlignedBlock zero;

	memset(zero.data, 0, BLCKSZ);
	LockRelationForExtension(rel, ExclusiveLock);
	nblocks = RelationGetNumberOfBlocks(rel);
	for (BlockNumber i = 0; i < step && nblocks < target; i++)
	{
		/* what P_NEW writes, without a shared buffer for the page */
		smgrextend(RelationGetSmgr(rel), MAIN_FORKNUM, nblocks, zero.data, false);
		nblocks++;
	}
	UnlockRelationForExtension(rel, ExclusiveLock);
	return nblocks;
}

/* ------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------ */

/*
 * Copy n log bytes starting at lpos into dst, page by page; *lsn (if not
 * NULL) is the first page's LSN as it was when its bytes were copied.
 */
static void
read_bytes(MqSegmentReader *reader, uint64 lpos, char *dst, uint32 n, XLogRecPtr *lsn)
{
	while (n > 0)
	{
		BlockNumber blk = MqLposBlock(lpos);
		uint16		pos = MqLposPageOffset(lpos);
		uint32		chunk = Min((uint32) (MQ_PAGE_DATA_END - pos), n);
		Buffer		buf;

		buf = ReadBuffer(reader->rel, blk);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		memcpy(dst, BufferGetPage(buf) + pos, chunk);
		if (lsn)
		{
			*lsn = PageGetLSN(BufferGetPage(buf));
			lsn = NULL;
		}
		UnlockReleaseBuffer(buf);
		dst += chunk;
		lpos += chunk;
		n -= chunk;
	}
}

/*
 * Is block blkno initialized (part of the log)?  If so, *lower is its
 * pd_lower.  A page that is still new is a page extended ahead of the
 * appender, or one a crash left extended without its WAL.
 */
static bool
page_initialized(Relation rel, BlockNumber blkno, uint16 *lower)
{
	Buffer		buf = ReadBuffer(rel, blkno);
	Page		page;
	bool		init;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	init = !PageIsNew(page);
	if (init)
	{
		(void) page_opaque(rel, page, blkno);
		*lower = ((PageHeader) page)->pd_lower;
	}
	UnlockReleaseBuffer(buf);
	return init;
}

/*
 * Physical end of the byte log: the last initialized page's pd_lower.
 * Trailing pages that are still new are not part of the log: the
 * maintenance worker extends the active segment ahead of its appender
 * (MqSegmentExtend), and a crash can leave a relation extended by an
 * append whose WAL never reached the disk.  They are dropped from
 * *nblocks, and the appender initializes them when it gets there.
 *
 * Initialized pages form a prefix of the relation (doc/architecture.md,
 * "Segment growth"): the appender initializes page n + 1 only after page n,
 * redo replays in the same order, and nothing but a truncation under
 * AccessExclusiveLock ever makes an initialized page new again.  So the end
 * is found by galloping back from the last page (1, 2, 4, ... pages) to an
 * initialized one and bisecting between: one page read when nothing is
 * extended ahead, about 2 log2(n) for n new pages, never a walk over all of
 * them.  Pages an appender initializes meanwhile only move the boundary
 * forward, so the answer is the end at some instant during the search.
 */
static uint64
segment_end(Relation rel, BlockNumber *nblocks, BlockNumber hint)
{
	int64		known_new;		/* a page seen new */
	int64		known_init = -1;	/* a page seen initialized, or -1 */
	uint16		lower = 0;
	uint16		l;
	int64		step = 1;

	if (*nblocks == 0)
		return 0;
	if (page_initialized(rel, *nblocks - 1, &lower))
		return MqLpos(*nblocks - 1, lower);
	known_new = (int64) *nblocks - 1;

	/*
	 * A reader that found the end before (hint) gallops forward from there
	 * instead: the end has moved by what was appended since, usually a few
	 * pages, not by the pages extended ahead.  The hint is only where to
	 * start: an initialized page is below the end whatever it is.
	 */
	if (hint != InvalidBlockNumber && (int64) hint < known_new &&
		page_initialized(rel, hint, &l))
	{
		known_init = hint;
		lower = l;
		while (known_init + step < known_new)
		{
			int64		probe = known_init + step;

			if (!page_initialized(rel, (BlockNumber) probe, &l))
			{
				known_new = probe;
				break;
			}
			known_init = probe;
			lower = l;
			step *= 2;
		}
	}
	while (known_init < 0 && known_new - step >= 0)
	{
		int64		probe = known_new - step;

		if (page_initialized(rel, (BlockNumber) probe, &l))
		{
			known_init = probe;
			lower = l;
			break;
		}
		known_new = probe;
		step *= 2;
	}
	while (known_new - known_init > 1)
	{
		int64		mid = known_init + (known_new - known_init) / 2;

		if (page_initialized(rel, (BlockNumber) mid, &l))
		{
			known_init = mid;
			lower = l;
		}
		else
			known_new = mid;
	}
	*nblocks = (BlockNumber) (known_init + 1);
	return known_init < 0 ? 0 : MqLpos((BlockNumber) known_init, lower);
}

/*
 * The blocks of the segment that hold its log, trailing new pages left
 * out: what its size is (mqlog.segment_size), and whether it is empty.
 */
BlockNumber
MqSegmentUsedBlocks(Relation rel)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

	(void) segment_end(rel, &nblocks, InvalidBlockNumber);
	return nblocks;
}

/* ------------------------------------------------------------------------
 * The batch cache
 *
 * A reader copies each batch it reads into one contiguous buffer and checks
 * its CRC.  A consumer's next read very often starts inside the batch the
 * previous one read (a poll of 500 records in batches of 1,000) or right
 * after it, and would pay for the same pages and the same CRC again, and
 * for a binary search to find its place.  So the backend keeps the last
 * few batches it read, whole and checked, and a reader that arrives at one
 * of them again takes it from here.
 *
 * A cached batch is named by the segment's relation oid and relfilenode
 * and its byte position, and it is served only while the page it starts
 * on still carries the LSN it had when the batch was read and still begins
 * with the same header bytes (prefix, base offset, length, CRC).  That is
 * what makes it safe across everything that changes a segment:
 *	- the bytes of a whole batch never change in place (only the appender
 *	  writes, at the tail), except its fate flags, which VACUUM sets with
 *	  WAL on the page the batch starts on: a new page LSN;
 *	- a cut of a torn batch off the tail WAL-logs the page it cuts at and
 *	  truncates the pages after it: a batch at or past the cut either
 *	  starts on that page (new LSN) or on a page that is gone (past the
 *	  end) or written again later by a newer WAL record (new LSN); a
 *	  follower truncated to its leader gets a new relfilenode;
 *	- a restore gives the segment a new relfilenode; compaction writes a
 *	  new relation; a dropped segment's oid and relfilenode could come back
 *	  only on a relation whose pages are all written anew, by newer WAL.
 * Every change of a segment page sets its LSN (segment.c, wal.c), and in a
 * running server no two versions of a page carry the same LSN, so an equal
 * LSN and header mean the batch is the one that was read.  What a batch
 * means to a reader, its fate, is not cached: the caller decides it again
 * at every read from the flags and the clog (MqBatchGetFate), so an
 * aborted or still running batch is treated as it is now.
 *
 * An entry is pinned while it is some reader's current batch (its records
 * point into it) and only unpinned entries are refilled; with all of them
 * pinned a reader reads into a buffer of its own.  The buffers live in
 * TopMemoryContext and are bounded together by MQ_CACHE_BYTES.  A reader
 * that fails leaves its entry pinned; the end of the transaction unpins
 * everything (MqReaderAtXactEnd), and an entry is marked valid only once
 * its batch is read whole and, if asked, checked.
 * ------------------------------------------------------------------------ */

#define MQ_CACHE_ENTRIES	4
#define MQ_CACHE_BYTES		(8 * 1024 * 1024)

typedef struct CachedBatch
{
	StringInfoData buf;			/* the batch (data NULL: no buffer) */
	bool		valid;			/* holds the batch named below */
	bool		crc_checked;
	int			pins;			/* readers whose current batch it is */
	uint64		serial;			/* which fill: a refilled entry differs */
	uint64		used;			/* for least recently used */
	Oid			relid;
	RelFileNode rnode;
	uint64		lpos;
	XLogRecPtr	lsn;			/* of the page the batch starts on */
	MqBatchHeader hdr;
} CachedBatch;

static CachedBatch batch_cache[MQ_CACHE_ENTRIES];
static uint64 cache_clock = 0;

/* give an unpinned entry's buffer back */
static void
cache_free(CachedBatch *e)
{
	Assert(e->pins == 0);
	if (e->buf.data)
		pfree(e->buf.data);
	e->buf.data = NULL;
	e->valid = false;
}

/* keep the buffers of unpinned entries within MQ_CACHE_BYTES, oldest first */
static void
cache_trim(void)
{
	for (;;)
	{
		Size		total = 0;
		CachedBatch *oldest = NULL;

		for (int i = 0; i < MQ_CACHE_ENTRIES; i++)
		{
			CachedBatch *e = &batch_cache[i];

			if (e->buf.data == NULL)
				continue;
			total += e->buf.maxlen;
			if (e->pins == 0 && (oldest == NULL || e->used < oldest->used))
				oldest = e;
		}
		if (total <= MQ_CACHE_BYTES || oldest == NULL)
			return;
		cache_free(oldest);
	}
}

static void
reader_release(MqSegmentReader *reader)
{
	if (reader->entry >= 0)
	{
		Assert(batch_cache[reader->entry].pins > 0);
		batch_cache[reader->entry].pins--;
		reader->entry = -1;
		cache_trim();
	}
	reader->batch = NULL;
}

/*
 * Is entry e the batch at its position in the reader's segment, as it is
 * there now?  One page is looked at: the one the batch starts on.
 */
static bool
cache_current(MqSegmentReader *reader, CachedBatch *e)
{
	uint16		pos = MqLposPageOffset(e->lpos);
	uint32		n = Min((uint32) (MQ_PAGE_DATA_END - pos), MQ_BATCH_HEADER_SIZE);
	Buffer		buf;
	Page		page;
	bool		same;

	if (!e->valid || e->relid != RelationGetRelid(reader->rel) ||
		!RelFileNodeEquals(e->rnode, reader->rel->rd_node) ||
		e->lpos + e->hdr.length > reader->end_lpos)
		return false;
	if (reader->checked_serial == e->serial)
		return true;			/* looked at by this reader already */
	buf = ReadBuffer(reader->rel, MqLposBlock(e->lpos));
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	same = PageGetLSN(page) == e->lsn && memcmp((char *) page + pos, e->buf.data, n) == 0;
	UnlockReleaseBuffer(buf);
	if (!same)
	{
		e->valid = false;		/* a reader that holds it keeps its copy */
		return false;
	}
	reader->checked_serial = e->serial;
	return true;
}

/* the cached batch of the reader's segment that starts at lpos, or NULL */
static CachedBatch *
cache_find(MqSegmentReader *reader, uint64 lpos)
{
	for (int i = 0; i < MQ_CACHE_ENTRIES; i++)
	{
		CachedBatch *e = &batch_cache[i];

		if (e->valid && e->lpos == lpos && cache_current(reader, e))
			return e;
	}
	return NULL;
}

/*
 * Where a cached batch puts offset in the reader's segment: at the cached
 * batch that holds it, or right after the one it follows.  False if no
 * cached batch of this segment says.
 */
static bool
cache_seek(MqSegmentReader *reader, int64 offset)
{
	for (int i = 0; i < MQ_CACHE_ENTRIES; i++)
	{
		CachedBatch *e = &batch_cache[i];
		uint64		lpos;

		if (!e->valid || e->relid != RelationGetRelid(reader->rel) ||
			offset < e->hdr.base_offset || offset > MqBatchNextOffset(&e->hdr))
			continue;
		lpos = offset < MqBatchNextOffset(&e->hdr) ? e->lpos : e->lpos + e->hdr.length;
		if (!cache_current(reader, e))
			continue;
		reader->lpos = lpos;
		return true;
	}
	return false;
}

/* an unpinned entry to read a batch into, the least recently used, or NULL */
static CachedBatch *
cache_victim(void)
{
	CachedBatch *victim = NULL;

	for (int i = 0; i < MQ_CACHE_ENTRIES; i++)
	{
		CachedBatch *e = &batch_cache[i];

		if (e->pins == 0 && (victim == NULL || !e->valid ||
							 (victim->valid && e->used < victim->used)))
			victim = e;
	}
	return victim;
}

static void
check_crc(MqSegmentReader *reader, const char *batch, const MqBatchHeader *hdr)
{
	if (!MqBatchCheckCrc(batch, hdr->length))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("CRC mismatch in mqlog segment \"%s\" at offset " INT64_FORMAT,
						RelationGetRelationName(reader->rel), hdr->base_offset),
				 errdetail("The batch of %d records starting at offset " INT64_FORMAT " is damaged.",
						   hdr->record_count, hdr->base_offset)));
}

/*
 * At the end of a transaction no reader is left (a held cursor is read to
 * its end before its transaction commits): entries still pinned belong to
 * readers that failed.
 */
void
MqReaderAtXactEnd(void)
{
	for (int i = 0; i < MQ_CACHE_ENTRIES; i++)
		batch_cache[i].pins = 0;
	cache_trim();
}

/*
 * Where the end of the last few segments read was, for segment_end to
 * start from (a hint only: it is checked against the pages).
 */
#define MQ_END_HINTS	8

typedef struct EndHint
{
	Oid			relid;
	RelFileNode rnode;
	BlockNumber last_init;		/* an initialized block; Invalid: unused */
	uint64		used;
} EndHint;

static EndHint end_hints[MQ_END_HINTS];

/*
 * Open a reader on a segment.  known_end, when not 0, is a position the
 * caller knows to be within the log (the partition's append position in
 * shared memory): segment_end starts from it when this backend has no
 * later end of its own, so the first read of a partition in a session
 * does not gallop back over the pages extended ahead.
 */
void
MqReaderInit(MqSegmentReader *reader, Relation rel, uint64 known_end)
{
	EndHint    *h = NULL;
	BlockNumber hint = InvalidBlockNumber;

	memset(reader, 0, sizeof(*reader));
	reader->rel = rel;
	reader->entry = -1;
	reader->lpos = 0;
	reader->nblocks = RelationGetNumberOfBlocks(rel);
	for (int i = 0; i < MQ_END_HINTS && h == NULL; i++)
		if (end_hints[i].used > 0 && end_hints[i].relid == RelationGetRelid(rel) &&
			RelFileNodeEquals(end_hints[i].rnode, rel->rd_node))
			h = &end_hints[i];
	if (h)
		hint = h->last_init;
	if (known_end > 0 && (hint == InvalidBlockNumber || MqLposBlock(known_end - 1) > hint))
		hint = MqLposBlock(known_end - 1);
	reader->end_lpos = segment_end(rel, &reader->nblocks, hint);
	if (h == NULL)
	{
		h = &end_hints[0];
		for (int i = 1; i < MQ_END_HINTS; i++)
			if (end_hints[i].used < h->used)
				h = &end_hints[i];
		h->relid = RelationGetRelid(rel);
		h->rnode = rel->rd_node;
	}
	h->last_init = reader->nblocks > 0 ? reader->nblocks - 1 : InvalidBlockNumber;
	h->used = ++cache_clock;
}

void
MqReaderEnd(MqSegmentReader *reader)
{
	reader_release(reader);
	if (reader->ownbuf != NULL)
	{
		pfree(reader->ownbuf->data);
		pfree(reader->ownbuf);
	}
	reader->ownbuf = NULL;
}

/* where the batch covering block blkno's first byte starts, and its offset */
static int64
page_cover(MqSegmentReader *reader, BlockNumber blkno, uint64 *cover_lpos)
{
	Buffer		buf = ReadBuffer(reader->rel, blkno);
	MqPageOpaque *opaque;
	int64		off;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	opaque = page_opaque(reader->rel, BufferGetPage(buf), blkno);
	off = opaque->cover_offset;
	*cover_lpos = MqLpos(opaque->cover_block, opaque->cover_pos);
	UnlockReleaseBuffer(buf);
	return off;
}

/*
 * Position the reader at the batch that holds offset, or at the first batch
 * after it: where a cached batch says, else by a binary search for the
 * last page whose covering batch starts at or below offset.
 */
void
MqReaderSeek(MqSegmentReader *reader, int64 offset)
{
	BlockNumber lo = 0,
				hi;
	uint64		best = 0;

	reader->lpos = 0;
	if (reader->nblocks == 0 || cache_seek(reader, offset))
		return;
	hi = reader->nblocks - 1;
	while (lo <= hi)
	{
		BlockNumber mid = lo + (hi - lo) / 2;
		uint64		cover_lpos;
		int64		cover = page_cover(reader, mid, &cover_lpos);

		if (cover <= offset)
		{
			best = cover_lpos;
			lo = mid + 1;
		}
		else
		{
			if (mid == 0)
				break;
			hi = mid - 1;
		}
	}
	reader->lpos = best;
}

/*
 * Make the next batch the reader's current one (reader->batch), whole and
 * contiguous: from the batch cache, or read into a cache entry or the
 * reader's own buffer.  Returns false at the end of the log, including at
 * a torn batch (one whose bytes run past the end).
 */
bool
MqReaderNext(MqSegmentReader *reader, bool verify_crc)
{
	MqBatchHeader hdr;
	char		raw[MQ_BATCH_HEADER_SIZE];
	CachedBatch *e;
	StringInfo	buf;
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	reader_release(reader);
	if (reader->lpos + MQ_BATCH_HEADER_SIZE > reader->end_lpos)
		return false;

	e = reader->from_pages ? NULL : cache_find(reader, reader->lpos);
	if (e != NULL)
	{
		if (verify_crc && !e->crc_checked)
		{
			check_crc(reader, e->buf.data, &e->hdr);
			e->crc_checked = true;
		}
		e->pins++;
		e->used = ++cache_clock;
		reader->entry = e - batch_cache;
		reader->batch = e->buf.data;
		reader->hdr = e->hdr;
		reader->batch_lpos = reader->lpos;
		reader->lpos += e->hdr.length;
		return true;
	}

	read_bytes(reader, reader->lpos, raw, MQ_BATCH_HEADER_SIZE, &lsn);
	if (!MqBatchParseHeader(raw, MQ_BATCH_HEADER_SIZE, &hdr))
	{
		/* a zeroed or cut-off header at the tail is a torn write */
		if (hdr.magic == 0)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mqlog segment \"%s\" has a malformed batch header at byte %llu",
						RelationGetRelationName(reader->rel),
						(unsigned long long) reader->lpos)));
	}
	if (reader->lpos + hdr.length > reader->end_lpos)
		return false;

	/* into the least recently used entry that no reader holds, if it fits */
	e = (!reader->from_pages && hdr.length < MQ_CACHE_BYTES / MQ_CACHE_ENTRIES) ?
		cache_victim() : NULL;
	if (e != NULL)
	{
		e->valid = false;
		e->pins++;
		reader->entry = e - batch_cache;
		if (e->buf.data == NULL)
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			initStringInfo(&e->buf);
			MemoryContextSwitchTo(old);
		}
		buf = &e->buf;
	}
	else
	{
		if (reader->ownbuf == NULL)
		{
			reader->ownbuf = palloc(sizeof(StringInfoData));
			initStringInfo(reader->ownbuf);
		}
		buf = reader->ownbuf;
	}
	resetStringInfo(buf);
	enlargeStringInfo(buf, hdr.length);
	memcpy(buf->data, raw, MQ_BATCH_HEADER_SIZE);
	read_bytes(reader, reader->lpos + MQ_BATCH_HEADER_SIZE,
			   buf->data + MQ_BATCH_HEADER_SIZE, hdr.length - MQ_BATCH_HEADER_SIZE, NULL);
	buf->len = hdr.length;

	if (verify_crc)
		check_crc(reader, buf->data, &hdr);

	if (e != NULL && !XLogRecPtrIsInvalid(lsn))
	{
		e->relid = RelationGetRelid(reader->rel);
		e->rnode = reader->rel->rd_node;
		e->lpos = reader->lpos;
		e->lsn = lsn;
		e->hdr = hdr;
		e->crc_checked = verify_crc;
		e->serial = ++cache_clock;
		e->used = e->serial;
		e->valid = true;
		reader->checked_serial = e->serial;
	}
	reader->batch = buf->data;
	reader->hdr = hdr;
	reader->batch_lpos = reader->lpos;
	reader->lpos += hdr.length;
	return true;
}

/*
 * Header-only walk used where the records are not needed: stats, tail
 * discovery, freezing.  Leaves the header in *hdr; false at the end or at a
 * torn batch (then *torn says so and *hdr holds its header if readable).
 */
static bool
next_header(MqSegmentReader *reader, MqBatchHeader *hdr, bool *torn)
{
	char		raw[MQ_BATCH_HEADER_SIZE];
	bool		ok;

	*torn = false;
	memset(hdr, 0, sizeof(*hdr));
	if (reader->lpos >= reader->end_lpos)
		return false;
	if (reader->lpos + MQ_BATCH_HEADER_SIZE > reader->end_lpos)
	{
		*torn = true;
		return false;
	}
	read_bytes(reader, reader->lpos, raw, MQ_BATCH_HEADER_SIZE, NULL);
	ok = MqBatchParseHeader(raw, MQ_BATCH_HEADER_SIZE, hdr);
	if (!ok || reader->lpos + hdr->length > reader->end_lpos)
	{
		*torn = true;
		if (!ok)
			hdr->magic = 0;
		return false;
	}
	reader->hdr = *hdr;
	reader->batch_lpos = reader->lpos;
	reader->lpos += hdr->length;
	return true;
}

/*
 * Find where the next batch goes and which offset it gets, by walking from
 * the batch that covers the last page.  A torn batch at the end (a crash in
 * the middle of a multi-record append) is reported in tail->torn_lpos; its
 * offsets are not handed out again.
 */
void
MqSegmentReadTail(Relation rel, int64 base_offset, MqSegmentTail *tail)
{
	MqSegmentReader reader;
	MqBatchHeader hdr;
	bool		torn;

	MqReaderInit(&reader, rel, 0);
	tail->next_offset = base_offset;
	tail->end_lpos = 0;
	tail->torn_lpos = reader.end_lpos;
	if (reader.nblocks > 0)
	{
		uint64		cover_lpos;
		int64		cover_offset = page_cover(&reader, reader.nblocks - 1, &cover_lpos);

		/*
		 * Walk from the batch covering the last page.  If that batch is torn
		 * and even its header is cut, its base offset from the page is still
		 * known; its offsets were never returned to anyone.
		 */
		tail->next_offset = Max(base_offset, cover_offset);
		reader.lpos = cover_lpos;
		tail->end_lpos = cover_lpos;
		while (next_header(&reader, &hdr, &torn))
		{
			tail->next_offset = MqBatchNextOffset(&hdr);
			tail->end_lpos = reader.lpos;
		}
		if (torn && hdr.magic == MQ_PREFIX_MAGIC)
			tail->next_offset = Max(tail->next_offset, MqBatchNextOffset(&hdr));
	}
	MqReaderEnd(&reader);
}

/*
 * Cut a torn batch off the tail: reset pd_lower of the page where it began
 * (WAL-logged, zeroing the rest of that page) and truncate the pages after
 * it.  The caller holds AccessExclusiveLock on the segment, so no reader
 * has those pages pinned.
 */
void
MqSegmentRepairTail(Relation rel, MqSegmentTail *tail)
{
	BlockNumber blk = MqLposBlock(tail->end_lpos);
	uint16		pos = MqLposPageOffset(tail->end_lpos);
	BlockNumber keep = blk + (pos == MQ_PAGE_DATA_START ? 0 : 1);

	if (pos != MQ_PAGE_DATA_START)
	{
		Buffer		buf = ReadBuffer(rel, blk);
		Page		page;
		xl_mqlog_truncate xlrec;
		XLogRecPtr	recptr;

		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(buf);
		xlrec.end_pos = pos;

		START_CRIT_SECTION();
		memset((char *) page + pos, 0, MQ_PAGE_DATA_END - pos);
		((PageHeader) page)->pd_lower = pos;
		MarkBufferDirty(buf);
		XLogBeginInsert();
		XLogRegisterData((char *) &xlrec, sizeof(xlrec));
		XLogRegisterBuffer(0, buf, REGBUF_STANDARD);
		recptr = XLogInsert(RM_MQLOG_ID, XLOG_MQLOG_TRUNCATE);
		PageSetLSN(page, recptr);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buf);
	}
	if (RelationGetNumberOfBlocks(rel) > keep)
		RelationTruncate(rel, keep);
	tail->torn_lpos = tail->end_lpos;
}

/*
 * Give the segment a new relfilenode holding its log up to end_lpos: the
 * pages below the one end_lpos is on as they are, that page cut there, the
 * rest left out; each written whole to the WAL.  As TRUNCATE does, this is
 * transactional: if the caller's transaction aborts, the old file, whole,
 * is the segment again.  A cut in place (MqSegmentRepairTail's) is not
 * undone by an abort: a follower's mqlog._move_log_end that failed after it
 * had lost the committed records past the cut, while the partition's end
 * still said they were there, and the next append went past the cut pages
 * and could not be read (sql/move_log_end_abort.sql).  The caller holds
 * AccessExclusiveLock.
 */
static Oid	cutting_relid = InvalidOid;

/* is the segment being given its cut file (the access method lets it)? */
bool
MqSegmentCutting(Oid relid)
{
	return OidIsValid(relid) && relid == cutting_relid;
}

static void
cut_into_new_file(Relation rel, uint64 end_lpos)
{
	BlockNumber blk = MqLposBlock(end_lpos);
	uint16		pos = MqLposPageOffset(end_lpos);
	BlockNumber keep = blk + (pos == MQ_PAGE_DATA_START ? 0 : 1);
	RelFileNode old = rel->rd_node;
	bool		permanent;

	cutting_relid = RelationGetRelid(rel);
	PG_TRY();
	{
		RelationSetNewRelfilenode(rel, rel->rd_rel->relpersistence);
	}
	PG_FINALLY();
	{
		cutting_relid = InvalidOid;
	}
	PG_END_TRY();
	CommandCounterIncrement();
	permanent = rel->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;
	for (BlockNumber b = 0; b < keep; b++)
	{
		Buffer		src = ReadBufferWithoutRelcache(old, MAIN_FORKNUM, b, RBM_NORMAL, NULL,
													permanent);
		Buffer		dst;
		Page		page;

		LockBuffer(src, BUFFER_LOCK_SHARE);
		dst = ReadBufferExtended(rel, MAIN_FORKNUM, P_NEW, RBM_ZERO_AND_LOCK, NULL);
		Assert(BufferGetBlockNumber(dst) == b);
		page = BufferGetPage(dst);

		START_CRIT_SECTION();
		memcpy(page, BufferGetPage(src), BLCKSZ);
		if (b == blk)
		{
			memset((char *) page + pos, 0, MQ_PAGE_DATA_END - pos);
			((PageHeader) page)->pd_lower = pos;
		}
		MarkBufferDirty(dst);
		log_newpage_buffer(dst, true);
		END_CRIT_SECTION();

		UnlockReleaseBuffer(dst);
		UnlockReleaseBuffer(src);
	}

	/*
	 * The new file's relfrozenxid is now (the access method's), but its
	 * batches are the old file's: those of transactions before it get their
	 * fate in their headers, as VACUUM would, so that the clog may go.
	 */
	if (keep > 0)
	{
		TransactionId oldest;

		MqSegmentFreeze(rel, rel->rd_rel->relfrozenxid, &oldest);
	}
}

/*
 * Cut the segment so that it holds no batch at or past offset (a follower
 * truncating to its leader's log after a failover): everything from the
 * first batch that ends after offset goes.  False, changing nothing, when
 * that batch begins below offset: it straddles the point, which two logs
 * that agree below it cannot have.  A segment that already ends at or
 * before offset is left as it is.  The cut is undone if the transaction
 * aborts (cut_into_new_file).  As for a torn tail, the caller holds
 * AccessExclusiveLock on the segment.
 */
bool
MqSegmentCutAt(Relation rel, int64 offset)
{
	MqSegmentReader reader;
	MqBatchHeader hdr;
	MqSegmentTail tail = {0};
	bool		found = false;

	MqReaderInit(&reader, rel, 0);
	MqReaderSeek(&reader, offset);
	while (MqReaderNextHeader(&reader, &hdr))
	{
		if (MqBatchNextOffset(&hdr) > offset)
		{
			found = true;
			tail.end_lpos = reader.batch_lpos;
			break;
		}
	}
	MqReaderEnd(&reader);
	if (!found)
		return true;			/* nothing at or past offset */
	if (hdr.base_offset < offset)
		return false;
	cut_into_new_file(rel, tail.end_lpos);
	return true;
}

/* ------------------------------------------------------------------------
 * Visibility
 * ------------------------------------------------------------------------ */

/*
 * What a read-committed reader does with a batch.  With a last stable
 * offset from shared memory (lso >= 0) every batch below it belongs to a
 * finished transaction and the clog decides; without one (a hot standby, a
 * direct scan of a segment) the reader stops at the first batch whose
 * transaction is still running.
 */
MqBatchFate
MqBatchGetFate(const MqBatchHeader *h, int64 lso)
{
	/*
	 * At or past the bound nothing is decided for readers, whatever the
	 * flags say: a follower writes its batches with their fate set, and
	 * the bound (the high watermark) is below them until the in-sync
	 * replicas hold them.
	 */
	if (lso >= 0 && h->base_offset >= lso)
		return MQ_FATE_IN_PROGRESS;
	if (h->flags & MQ_BATCH_COMMITTED)
		return MQ_FATE_VISIBLE;
	if (h->flags & MQ_BATCH_ABORTED)
		return MQ_FATE_INVISIBLE;
	if (lso < 0 && (TransactionIdIsCurrentTransactionId(h->xid) ||
					TransactionIdIsInProgress(h->xid)))
		return MQ_FATE_IN_PROGRESS;
	return TransactionIdDidCommit(h->xid) ? MQ_FATE_VISIBLE : MQ_FATE_INVISIBLE;
}

/* ------------------------------------------------------------------------
 * Freezing
 * ------------------------------------------------------------------------ */

static void
freeze_page(Relation rel, BlockNumber blk, MqFreezeItem *items, int nitems)
{
	Buffer		buf = ReadBuffer(rel, blk);
	Page		page;
	xl_mqlog_freeze xlrec;
	XLogRecPtr	recptr;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	xlrec.nbatches = nitems;

	START_CRIT_SECTION();
	for (int i = 0; i < nitems; i++)
		((char *) page)[items[i].pos] |= items[i].flags;
	MarkBufferDirty(buf);
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	XLogRegisterData((char *) items, sizeof(MqFreezeItem) * nitems);
	XLogRegisterBuffer(0, buf, REGBUF_STANDARD);
	recptr = XLogInsert(RM_MQLOG_ID, XLOG_MQLOG_FREEZE);
	PageSetLSN(page, recptr);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
}

/*
 * Record in its header the fate of every batch whose transaction ended
 * before horizon, so that the clog can be truncated past it.  Returns in
 * *oldest_unfrozen the oldest xid still needing the clog (horizon if none),
 * which becomes the segment's relfrozenxid.
 */
void
MqSegmentFreeze(Relation rel, TransactionId horizon, TransactionId *oldest_unfrozen)
{
	MqSegmentReader reader;
	MqBatchHeader hdr;
	bool		torn;
	MqFreezeItem *items = palloc0(sizeof(MqFreezeItem) * (BLCKSZ / MQ_BATCH_HEADER_SIZE + 1));
	int			nitems = 0;
	BlockNumber cur = InvalidBlockNumber;

	*oldest_unfrozen = horizon;
	MqReaderInit(&reader, rel, 0);
	while (next_header(&reader, &hdr, &torn))
	{
		BlockNumber blk = MqLposBlock(reader.batch_lpos);

		CHECK_FOR_INTERRUPTS();
		if (hdr.flags & (MQ_BATCH_COMMITTED | MQ_BATCH_ABORTED))
			continue;
		if (!TransactionIdPrecedes(hdr.xid, horizon))
		{
			if (TransactionIdPrecedes(hdr.xid, *oldest_unfrozen))
				*oldest_unfrozen = hdr.xid;
			continue;
		}
		if (blk != cur && nitems > 0)
		{
			freeze_page(rel, cur, items, nitems);
			nitems = 0;
		}
		cur = blk;
		items[nitems].pos = MqLposPageOffset(reader.batch_lpos);
		items[nitems].flags = TransactionIdDidCommit(hdr.xid) ? MQ_BATCH_COMMITTED : MQ_BATCH_ABORTED;
		nitems++;
	}
	/* a torn batch at the tail never committed; it needs no clog either */
	if (nitems > 0)
		freeze_page(rel, cur, items, nitems);
	MqReaderEnd(&reader);
	pfree(items);
}

/* a header-only step, for readers that need no records (log/logiter.c) */
bool
MqReaderNextHeader(MqSegmentReader *reader, MqBatchHeader *hdr)
{
	bool		torn;

	return next_header(reader, hdr, &torn);
}

/*
 * Where a segment begins: the offset block 0 says its first batch has, or
 * -1 for a segment nothing was ever written to.  This is how a segment the
 * partition rolled into is placed in its chain after a restart, before the
 * maintenance worker has recorded its base offset in the catalog.
 */
int64
MqSegmentFirstOffset(Relation rel)
{
	return MqSegmentOffsetAtBlock(rel, 0);
}

/*
 * The offset of the batch that covers block blkno's first byte, or -1 past
 * the segment's end: where a read of the segment's last bytes starts (the
 * producers' loader reads a window of bytes at the log's end).
 */
int64
MqSegmentOffsetAtBlock(Relation rel, BlockNumber blkno)
{
	MqSegmentReader reader;
	int64		result = -1;
	uint64		cover_lpos;

	MqReaderInit(&reader, rel, 0);
	if (blkno < reader.nblocks)
		result = page_cover(&reader, blkno, &cover_lpos);
	MqReaderEnd(&reader);
	return result;
}

/*
 * The first batch's timestamp, what segment.ms counts from, as in Kafka;
 * false for an empty segment.  Reads one header only.
 */
bool
MqSegmentFirstTimestamp(Relation rel, TimestampTz *ts)
{
	MqSegmentReader reader;
	MqBatchHeader hdr;
	bool		found;

	MqReaderInit(&reader, rel, 0);
	found = MqReaderNextHeader(&reader, &hdr);
	if (found)
		*ts = hdr.first_timestamp;
	MqReaderEnd(&reader);
	return found;
}
