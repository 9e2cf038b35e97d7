/*-------------------------------------------------------------------------
 *
 * wal.h
 *		mqlog's WAL records, its custom resource manager and rm_decode
 *		(wal.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_WAL_H
#define MQLOG_WAL_H

#include "access/xlogdefs.h"
#include "storage/block.h"

/* ------------------------------------------------------------------------
 * WAL (wal.c)
 * ------------------------------------------------------------------------ */

/* the prefix of the logical decoding messages rm_decode emits */
#define MQLOG_MESSAGE_PREFIX	"mqlog"
/* a leader's last stable offset, logged for its followers (replica.c) */
#define MQLOG_LSO_PREFIX		"mqlog.lso"

/*
 * How rm_decode hands appends to a decoding plugin.
 *
 * Committed mode (every plugin: test_decoding, pgoutput, mqlog's text
 * output): one transactional message per append record, delivered at
 * commit, nothing for aborted transactions.
 *
 * Replica mode (mqlog's plugin with replica 'true', what a follower
 * streams): every append record at once as a non-transactional message,
 * in WAL order, which is offset order, aborted transactions included; and
 * a transactional "commit marker" (the record's header alone) for the
 * first chunk of each batch, delivered when the batch's transaction
 * commits.  A follower thus copies the raw log, holes and all, and learns
 * each batch's fate from the markers and the LSOs.
 */
struct LogicalDecodingContext;
extern void MqSetReplicaDecoding(struct LogicalDecodingContext *ctx, void *plugin_state);
extern bool MqDecodedOwnMessage(struct LogicalDecodingContext *ctx, bool transactional,
								XLogRecPtr lsn);

/* the two message kinds of replica mode, by prefix */
#define MQLOG_APPEND_PREFIX		"mqlog.append"
#define MQLOG_COMMIT_PREFIX		"mqlog.commit"

/*
 * A group's committed offset on a replicated topic, logged transactionally
 * with the commit that wrote it (groups/offsets.c), for every other node.
 * offset < 0: the group's offset of that partition was deleted.  The
 * group's name (group_len bytes) follows.
 */
#define MQLOG_OFFSET_PREFIX		"mqlog.offset"

typedef struct MqOffsetMark
{
	char		uuid[40];		/* mqlog.replicated_topic.uuid, NUL-padded */
	int32		partition;
	int32		group_len;
	int64		offset;
	int64		etcd_revision;	/* the writer's stamp (groups/offsets.c) */
} MqOffsetMark;

/* the content of a MQLOG_LSO_PREFIX message */
typedef struct MqLsoMark
{
	int32		topic_id;
	int32		partition;
	int64		lso;
} MqLsoMark;

#define RM_MQLOG_ID				RM_EXPERIMENTAL_ID

#define XLOG_MQLOG_APPEND		0x00
#define XLOG_MQLOG_TRUNCATE		0x10
#define XLOG_MQLOG_FREEZE		0x20
#define XLOG_MQLOG_MESSAGE		0x30	/* for the replica streams; no page */
#define XLOG_MQLOG_APPEND_WHOLE	0x40	/* a whole batch, short header (below) */
#define XLOG_MQLOG_APPEND_PACKED 0x50	/* a whole new batch, packed (below) */

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
	uint16		format;			/* MQ_SEGMENT_FORMAT of the batch bytes: the
								 * decoding stream's version too */
	/* chunk bytes follow */
} xl_mqlog_append;

#define SizeOfMqlogAppend	(offsetof(xl_mqlog_append, format) + sizeof(uint16))

/*
 * XLOG_MQLOG_APPEND_WHOLE: the common case, a whole batch in one record
 * (a batch of up to MQ_WAL_MAX_BLOCKS pages), with a short header.  Of
 * xl_mqlog_append it leaves out what the record holds anyway: the base
 * offset and the length (the batch's own header, the record's data
 * length), where the batch starts (block reference 0 at first_pos), the
 * chunk's place (all of it); and it keeps the LSO as its distance below
 * the base offset.  22 bytes less WAL per append, which is most of what a
 * single-record produce writes beyond the heap's insert (doc/benchmarks.md).
 * MqWalReadAppend gives both forms as an xl_mqlog_append.
 */
typedef struct xl_mqlog_append_whole
{
	int32		topic_id;
	int32		partition;
	uint32		lso_lag;		/* base_offset - lso */
	uint16		first_pos;
	uint16		flags;			/* XLMQ_* */
	uint16		format;			/* MQ_SEGMENT_FORMAT */
	/* the batch follows */
} xl_mqlog_append_whole;

#define SizeOfMqlogAppendWhole	(offsetof(xl_mqlog_append_whole, format) + sizeof(uint16))

/*
 * XLOG_MQLOG_APPEND_PACKED: what most appends are, a new batch (no fate
 * flags, the record's own xid in its prefix) that fits one record, with
 * nothing the record or the batch holds twice.  The main data is zigzag
 * varints, topic id, partition, first_pos and the LSO's distance below the
 * base offset, then the batch with its 69-byte header packed
 * (MqBatchPackHeader: about 13 bytes for a batch produced from SQL), then
 * its records as they are.  Redo and decoding rebuild the batch byte for
 * byte (MqBatchUnpack), so the pages, the decoding messages, the output
 * plugin and the apply worker are as with the other forms.  For a single
 * 100-byte record, 18 bytes of header instead of APPEND_WHOLE's 87.
 */

struct XLogReaderState;

/*
 * Register an append record's data (after XLogBeginInsert; the caller
 * registers the buffers, and keeps xlrec and chunk until XLogInsert);
 * returns the info to XLogInsert it with.  The packed form is chosen when
 * it can be, else the short header, else the long one.
 */
extern uint8 MqWalRegisterAppend(const xl_mqlog_append *xlrec, const char *chunk);

/*
 * An append record of any form as an xl_mqlog_append and its chunk (in
 * the record, or rebuilt in scratch for the packed form); NULL if the
 * record is not one this build's segment format can read.
 */
struct StringInfoData;
extern const char *MqWalReadAppend(struct XLogReaderState *record, xl_mqlog_append *xlrec,
								   struct StringInfoData *scratch);

/* a rewrite by compaction: records the log already had, not new ones */
#define XLMQ_COMPACTION			0x0001
/* a restore (COPY FROM of a segment, log/dump.c): the log's own batches again */
#define XLMQ_RESTORE			0x0002

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

/* a message for the replica streams (an LSO mark, a committed offset) */
typedef struct xl_mqlog_message
{
	Oid			dbid;
	uint16		kind;			/* MQ_MSG_* */
	uint16		pad;
	uint32		length;			/* of the content that follows */
} xl_mqlog_message;

#define SizeOfMqlogMessage	(offsetof(xl_mqlog_message, length) + sizeof(uint32))
#define MQ_MSG_LSO			1	/* MqLsoMark, at once */
#define MQ_MSG_OFFSET		2	/* MqOffsetMark + group, at commit */

extern XLogRecPtr MqLogMessage(uint16 kind, const char *data, uint32 len);

extern void MqlogRegisterRmgr(void);

/* rm_decode (wal.c): appends to logical decoding */
struct LogicalDecodingContext;
struct XLogRecordBuffer;
extern void MqlogDecode(struct LogicalDecodingContext *ctx, struct XLogRecordBuffer *buf);

#endif							/* MQLOG_WAL_H */
