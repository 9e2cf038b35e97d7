# The Kafka transaction coordinator's housekeeping (doc/kafka.md,
# "Transactions"): what 164_kafka_transactions.pl leaves out.
#
# Checks:
#  - TxnOffsetCommit v3 checks its generation and member id against the
#    group as Kafka's coordinator does: an unknown member is
#    UNKNOWN_MEMBER_ID, another generation ILLEGAL_GENERATION, a generation
#    of a group with no members ILLEGAL_GENERATION; generation -1 with no
#    member id and v2 (no group metadata) are not checked; a rebalance in
#    progress does not matter; only the admitted offsets are committed;
#  - compaction of a compacted topic follows Kafka's cleaner for
#    transactions: an aborted transaction's record is removed and does not
#    supersede the committed record of its key, a committed transaction's
#    batch stays transactional, the markers are kept, so a read_committed
#    consumer still reads the producer's next transaction after the ABORT;
#  - a marker goes as with Kafka's delete horizon (KIP-534): the first
#    compaction that finds none of its transaction's batches left (not the
#    one that removed them) keeps it, however old it is, and records a
#    horizon delete.retention.ms later (mqlog.kafka_marker_horizon); a
#    compaction before the horizon keeps it, the first one after removes
#    it, with its horizon and its ABORT's aborted range; a marker of a
#    transaction with a kept batch stays; mq_fetch and read_committed
#    consumers read the same records before and after; a horizon goes
#    with its topic, and below the log start (mq_delete_records) with the
#    maintenance pass;
#    a sealed segment in which an open transaction began is compacted only
#    once the transaction has ended, and keeps its records;
#  - the rows of mqlog.kafka_aborted_transaction whose ABORT marker is below
#    the log start offset (mq_delete_records) are removed by maintenance,
#    and the others kept;
#  - mqlog.kafka_transactional_id_expiration removes a transactional id
#    unused that long but not one whose transaction is open; the expired
#    id's producer cannot commit, a raw AddPartitionsToTxn of its producer
#    id is INVALID_PRODUCER_ID_MAPPING, and a new producer of the id gets a
#    new producer id.
use strict;
use warnings;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqTxn;
use MqKafka qw(kafka_node wait_for connect_listener kstr frame response);

my ($python, $script) = ($MqTxn::PYTHON, $MqTxn::SCRIPT);
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = kafka_node('txc', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('tg', 1);
SELECT mq_create_topic('cz', 1, config => '{"cleanup.policy": "compact"}');
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['cr', 'te']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['tg', 'cz', 'cr', 'te']) t;
SELECT mq_grant_group(g, 'kafka_app') FROM unnest(ARRAY['g1', 'g2']) g;
});

sub py { return MqTxn::txn_py(@_) }
sub consume { return MqTxn::txn_consume($addr, @_) }
sub sql_values { return MqTxn::txn_values($node, @_) }

# a producer that runs one transaction per line it is given (steps)
sub start_steps
{
	my ($topic, $txn) = @_;
	my $h = { in => '', out => '', err => '' };
	$h->{run} = IPC::Run::start([ $python, $script, 'steps', $addr, $topic, $txn ],
		'<', \$h->{in}, '>', \$h->{out}, '2>', \$h->{err}, IPC::Run::timeout(300));
	wait_for(60, sub { $h->{run}->pump_nb; $h->{out} =~ /ready\n/ }) or diag("steps: $h->{err}");
	$h->{out} = '';
	return $h;
}

# one transaction of a steps producer: what it printed for it
sub step
{
	my ($h, $line) = @_;
	$h->{in} .= "$line\n";
	wait_for(120, sub { $h->{run}->pump_nb; $h->{out} =~ /step\n/ }) or diag("step $line: $h->{err}");
	my $r = $h->{out} =~ s/step\n$//r;
	$h->{out} = '';
	chomp $r;
	return $r;
}

sub end_steps
{
	my ($h) = @_;
	$h->{in} .= "end\n";
	$h->{run}->finish;
}

# ---------------------------------------------------------------------------
# raw frames
# ---------------------------------------------------------------------------
sub cstr { return chr(length($_[0]) + 1) . $_[0] }    # compact string (< 127 bytes)

# a request and its answer after the correlation id; flexible versions
# (request header v2) put the header's empty tagged fields before the
# body, their answers (header v1) theirs before the rest
sub call
{
	my ($sock, $key, $version, $body, $flex) = @_;
	print $sock frame($key, $version, ($flex ? "\0" : '') . $body);
	my $r = response($sock);
	die 'the listener closed the connection' unless defined $r;
	return substr($r, 4);
}

my $sock = connect_listener($kport);

# InitProducerId v0: (error, producer id, epoch)
sub init_pid
{
	my ($txn) = @_;
	my $r = call($sock, 22, 0, kstr($txn) . pack('N', 60000));
	my ($err, $pid_hi, $pid_lo, $epoch) = unpack('x4 n N N n', $r);
	return ($err, $pid_hi * 4294967296 + $pid_lo, $epoch);
}

sub pid64 { my ($pid) = @_; return pack('NN', int($pid / 4294967296), $pid % 4294967296) }

# AddOffsetsToTxn v0: its error
sub add_offsets
{
	my ($txn, $pid, $epoch, $group) = @_;
	my $r = call($sock, 25, 0, kstr($txn) . pid64($pid) . pack('n', $epoch) . kstr($group));
	return unpack('x4 n', $r);
}

# AddPartitionsToTxn v0 of partition 0 of $topic: its error
sub add_partition
{
	my ($txn, $pid, $epoch, $topic) = @_;
	my $r = call($sock, 24, 0,
		kstr($txn) . pid64($pid) . pack('n', $epoch) . pack('N', 1) . kstr($topic) . pack('NN', 1, 0));
	return (unpack('x4 x4 n/a x4 x4 n', $r))[1];
}

# EndTxn v0: its error
sub end_txn
{
	my ($txn, $pid, $epoch, $commit) = @_;
	my $r = call($sock, 26, 0, kstr($txn) . pid64($pid) . pack('nC', $epoch, $commit ? 1 : 0));
	return unpack('x4 n', $r);
}

# TxnOffsetCommit of partition 0 of tg at $offset: v3 with a generation and
# member id, or v2 (undef generation): its error
sub txn_commit
{
	my ($txn, $pid, $epoch, $group, $offset, $generation, $member) = @_;
	if (defined $generation)
	{
		my $body =
			cstr($txn) . cstr($group) . pid64($pid) . pack('n', $epoch)
		  . pack('N', $generation & 0xffffffff) . cstr($member) . "\0"    # no instance id
		  . "\x02" . cstr('tg') . "\x02" . pack('N', 0) . pid64($offset) . pack('N', 0xffffffff) . "\0" . "\0"
		  . "\0" . "\0";
		my $r = call($sock, 28, 3, $body, 1);
		# header tags, throttle, one topic (compact array), its name, one partition, index; error
		my $pos = 1 + 4 + 1;
		$pos += 1 + (ord(substr($r, $pos, 1)) - 1);
		$pos += 1 + 4;
		return unpack('n', substr($r, $pos, 2));
	}
	my $body =
		kstr($txn) . kstr($group) . pid64($pid) . pack('n', $epoch)
	  . pack('N', 1) . kstr('tg') . pack('N', 1) . pack('N', 0) . pid64($offset) . pack('N', 0xffffffff)
	  . pack('n', 0xffff);
	my $r = call($sock, 28, 2, $body);
	return (unpack('x4 x4 n/a x4 x4 n', $r))[1];
}

# JoinGroup v0 of a consumer of tg, as the only member: (error, generation, member id)
sub join_group
{
	my ($group) = @_;
	my $meta = pack('n', 0) . pack('N', 1) . kstr('tg') . pack('N', 0xffffffff);
	my $r = call($sock, 11, 0,
		kstr($group) . pack('N', 300000) . kstr('') . kstr('consumer') . pack('N', 1) . kstr('range')
		  . pack('N', length $meta) . $meta);
	my ($err, $gen, $proto, $leader, $member) = unpack('n N n/a n/a n/a', $r);
	return ($err, $gen, $member);
}

# ---------------------------------------------------------------------------
# TxnOffsetCommit v3: generation and member id against the group
# ---------------------------------------------------------------------------
my ($jerr, $gen, $member) = join_group('g1');
is($jerr, 0, 'a consumer joins group g1');
ok($member ne '' && $gen > 0, "... with a member id and generation $gen");

my ($ierr, $pid, $epoch) = init_pid('tx-g');
is($ierr, 0, 'InitProducerId of tx-g');
is(add_offsets('tx-g', $pid, $epoch, 'g1'), 0, 'AddOffsetsToTxn of g1');
is(add_offsets('tx-g', $pid, $epoch, 'g2'), 0, 'AddOffsetsToTxn of g2 (a group with no members)');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 1, $gen + 1, $member), 22,
	'another generation of the member is ILLEGAL_GENERATION');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 2, $gen, 'no-such-member'), 25,
	'an unknown member id is UNKNOWN_MEMBER_ID');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 3, -1, 'no-such-member'), 25,
	'... also without a generation');
is(txn_commit('tx-g', $pid, $epoch, 'g2', 4, 5, 'someone'), 22,
	'a generation of a group with no members is ILLEGAL_GENERATION');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 5, $gen, $member), 0,
	'the member at its generation commits (while its group awaits the SyncGroup)');
is($node->safe_psql('postgres', q{SELECT committed_offset FROM mqlog.kafka_transaction_offset WHERE group_id = 'g1'}),
	'5', '... and only its offset is pending');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 6, -1, ''), 0,
	'generation -1 without a member id is not checked, members or not');
is(txn_commit('tx-g', $pid, $epoch, 'g2', 7, -1, ''), 0, '... nor on a group with no members');
is(txn_commit('tx-g', $pid, $epoch, 'g1', 8, undef, undef), 0, 'v2 (no group metadata) is not checked');
is(end_txn('tx-g', $pid, $epoch, 1), 0, 'EndTxn commits');
is($node->safe_psql('postgres',
		q{SELECT string_agg(group_id || '=' || committed_offset, ',' ORDER BY group_id) FROM mqlog.committed_offset}),
	'g1=8,g2=7', 'the group offsets are the admitted ones');

# ---------------------------------------------------------------------------
# compaction: Kafka's rules for transactions
# ---------------------------------------------------------------------------
my $cz = start_steps('cz', 'tx-cz');
is(step($cz, 'commit k1 v1'), 'ok', 'a transaction commits k1=v1 on a compacted topic');
is(step($cz, 'abort k1 bad'), 'ok', 'the same producer aborts k1=bad');
$node->safe_psql('postgres', q{SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'cz'});
is(step($cz, 'commit k2 w'), 'ok', '... and commits k2=w in the next segment');
end_steps($cz);
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cz'}),
	'1', 'the abort is recorded');
ok( $node->poll_query_until(
		'postgres', q{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('cz'))
SELECT (SELECT count(*) FROM pass) >= 0 AND EXISTS (
  SELECT FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
   WHERE t.name = 'cz' AND s.compacted_at IS NOT NULL AND s.base_offset = 0)}),
	'the sealed segment is compacted');
is(sql_values('cz'), 'v1,w', 'mq_fetch reads the committed k1 and k2, not the aborted k1');
is(consume('cz', 'read_committed'), 'v1,w',
	'a read_committed consumer reads the producer\'s transaction after the ABORT marker');
is(consume('cz', 'read_uncommitted'), 'v1,w', 'the aborted record is gone from the log');
is($node->safe_psql('postgres', q{
SELECT string_agg(base_offset || ':' || (get_byte(batch, 22) & 48), ',' ORDER BY base_offset)
  FROM mq_fetch_kafka_batches('cz', 0, 0)}),
	'0:16,1:48,3:48,4:16,5:48',
	'the committed batches stay transactional (16) and the three markers (48) are kept');
my $cz_id = $node->safe_psql('postgres', q{SELECT topic_id FROM mqlog.topic WHERE name = 'cz'});
$node->safe_psql('postgres', q{SELECT mq_produce('cz', 'n', key => 'k3', partition => 0);
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'cz'});
ok( $node->poll_query_until(
		'postgres', qq{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('cz'))
SELECT (SELECT count(*) FROM pass) >= 0 AND (
  SELECT string_agg(h.marker_offset::text, ',') FROM mqlog.kafka_marker_horizon h WHERE h.topic_id = $cz_id) = '3'}),
	'the next compaction finds the ABORT at 3 empty and records its horizon');
$node->safe_psql('postgres', q{SELECT mq_drop_topic('cz')});
is($node->safe_psql('postgres', qq{SELECT count(*) FROM mqlog.kafka_marker_horizon h WHERE h.topic_id = $cz_id}),
	'0', '... which goes when the topic is dropped');

# ---------------------------------------------------------------------------
# compaction removes a marker as Kafka's cleaner does: once no batch of its
# transaction is left when a compaction begins, and delete.retention.ms
# after the first compaction that found so; an ABORT's range goes with it
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_create_topic('cm', 1, config => '{"cleanup.policy": "compact"}');
SELECT mq_grant('cm', 'kafka_app', 'all');});
my $cm = start_steps('cm', 'tx-cm');
is(step($cm, 'commit a v1'),   'ok', 'a transaction commits a=v1 (offset 0, COMMIT 1)');
is(step($cm, 'abort b bad'),   'ok', 'one aborts b=bad (2, ABORT 3)');
is(step($cm, 'commit c keep'), 'ok', 'one commits c=keep, never superseded (4, COMMIT 5)');
is(step($cm, 'commit a v2'),   'ok', 'one commits a=v2, superseding a=v1 (6, COMMIT 7)');
my $cm_written = $node->safe_psql('postgres', q{SELECT clock_timestamp()});
my $cm_batches = q{SELECT string_agg(base_offset || ':' || (get_byte(batch, 22) & 48), ',' ORDER BY base_offset)
  FROM mq_fetch_kafka_batches('cm', 0, 0)};
my $cm_ranges = q{SELECT coalesce(string_agg(first_offset || '-' || last_offset, ',' ORDER BY first_offset), '')
  FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cm'};
is($node->safe_psql('postgres', $cm_batches), '0:16,1:48,3:48,4:16,5:48,6:16,7:48',
	'the committed transactional batches (16) and the markers (48), not the aborted batch');
is(sql_values('cm'), 'v1,keep,v2', 'mq_fetch reads the committed records');
is(consume('cm', 'read_committed'), 'v1,keep,v2', 'so does a read_committed consumer');
is(consume('cm', 'read_uncommitted'), 'v1,bad,keep,v2', 'a read_uncommitted one reads the aborted one too');

# roll the partition at $next (after a record of SQL's, if given; a roll
# finding the partition busy is tried again) and run maintenance until the
# first segment (or the one at $base) is compacted after the roll
sub cm_roll_compact
{
	my ($value, $next, $name, $base) = @_;
	$base //= 0;
	my $rolled = qq{SELECT count(*) FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
  WHERE t.name = 'cm' AND s.base_offset = $next};
	$node->safe_psql('postgres', qq{SELECT mq_produce('cm', '$value', key => '$value', partition => 0)})
	  if defined $value;
	wait_for(60, sub {
		$node->safe_psql('postgres', q{SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'cm'});
		$node->safe_psql('postgres', $rolled) eq '1';
	}) or diag("the partition did not roll at $next");
	ok( $node->poll_query_until(
			'postgres', qq{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('cm'))
SELECT (SELECT count(*) FROM pass) >= 0 AND EXISTS (
  SELECT FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
   WHERE t.name = 'cm' AND s.base_offset = $base AND s.compacted_at >= (
         SELECT max(x.sealed_at) FROM mqlog.segment x WHERE x.topic_id = s.topic_id))}),
		$name);
}

# the stored batches (transactional 16, marker 48), the aborted ranges,
# and what mq_fetch and read_committed and read_uncommitted consumers read
sub cm_state
{
	my ($batches, $ranges, $values, $what) = @_;
	is($node->safe_psql('postgres', $cm_batches), $batches, "batches: $what");
	is($node->safe_psql('postgres', $cm_ranges), $ranges, "aborted ranges: $what");
	is(sql_values('cm'), $values, "mq_fetch reads $values");
	is(consume('cm', 'read_committed'), $values, "... so does a read_committed consumer");
	is(consume('cm', 'read_uncommitted'), $values, "... and a read_uncommitted one");
}

cm_roll_compact(undef, 8, 'the first segment is compacted');
cm_state('1:48,3:48,4:16,5:48,6:16,7:48', '2-3', 'keep,v2',
	'the superseded and the aborted batch go, every marker and the range stay (their batches were there when it began)');

# Kafka's delete horizon (KIP-534): delete.retention.ms counts from the
# compaction that first finds a marker's transaction empty, not from the
# marker's own timestamp.  The markers at 1 and 3 are older than
# delete.retention.ms by the time the next compaction finds their
# transactions empty: it keeps them and records a horizon for each.
$node->safe_psql('postgres', q{SELECT mq_alter_topic('cm', '{"delete.retention.ms": 5000}')});
ok( $node->poll_query_until(
		'postgres', qq{SELECT clock_timestamp() > '$cm_written'::timestamptz + interval '5.5 s'}),
	'the markers are older than delete.retention.ms (5000 ms)');
my $cm_horizons = q{SELECT coalesce(string_agg(h.marker_offset::text, ',' ORDER BY h.marker_offset), '')
  FROM mqlog.kafka_marker_horizon h JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cm'};
my $cm_before = $node->safe_psql('postgres', q{SELECT clock_timestamp()});
cm_roll_compact('x', 9, '... and compacted again after the next roll');
my $cm_after = $node->safe_psql('postgres', q{SELECT clock_timestamp()});
# (what readers read is checked after the next compaction: their clients
# take seconds, which the horizon would not wait for)
is($node->safe_psql('postgres', $cm_batches), '1:48,3:48,4:16,5:48,6:16,7:48,8:0',
	'the compaction that first finds the transactions of 1 and 3 empty keeps their markers, old as they are');
is($node->safe_psql('postgres', $cm_ranges), '2-3', '... and the range');
is($node->safe_psql('postgres', $cm_horizons), '1,3',
	'... and records a delete horizon for each of them (not for 5 and 7, whose batches are kept)');
is($node->safe_psql('postgres', qq{
SELECT bool_and(h.delete_horizon BETWEEN '$cm_before'::timestamptz + interval '5 s'
                                     AND '$cm_after'::timestamptz + interval '5 s')
  FROM mqlog.kafka_marker_horizon h JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cm'}),
	't', '... delete.retention.ms after that compaction');
my $cm_horizon = $node->safe_psql('postgres', q{SELECT max(h.delete_horizon)
  FROM mqlog.kafka_marker_horizon h JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cm'});

# a compaction before the horizon keeps them; whether it began before is
# known only after it (on a slow machine the horizon may pass first)
cm_roll_compact('y', 10, 'the first segment is compacted after one more roll');
SKIP:
{
	skip 'the compaction ended after the horizon (a slow machine)', 3
	  unless $node->safe_psql('postgres', qq{SELECT clock_timestamp() < '$cm_horizon'::timestamptz}) eq 't';
	is($node->safe_psql('postgres', $cm_batches), '1:48,3:48,4:16,5:48,6:16,7:48,8:0,9:0',
		'a compaction before the horizon keeps the markers');
	is($node->safe_psql('postgres', $cm_ranges), '2-3', '... and the range');
	is($node->safe_psql('postgres', $cm_horizons), '1,3', '... and their horizons');
}
is(sql_values('cm'), 'keep,v2,x,y', 'mq_fetch reads keep,v2,x,y');
is(consume('cm', 'read_committed'), 'keep,v2,x,y', '... so does a read_committed consumer');
is(consume('cm', 'read_uncommitted'), 'keep,v2,x,y', '... and a read_uncommitted one');

ok( $node->poll_query_until(
		'postgres', qq{SELECT clock_timestamp() > '$cm_horizon'::timestamptz}),
	'the delete horizons pass');
cm_roll_compact('w', 11, 'the first segment is compacted after one more roll');
cm_state('4:16,5:48,6:16,7:48,8:0,9:0,10:0', '', 'keep,v2,x,y,w',
	'the COMMIT and the ABORT of the emptied transactions go, with the range; the markers of kept batches stay');
is($node->safe_psql('postgres', $cm_horizons), '', '... and so do their horizons');
is(step($cm, 'abort d bad2'), 'ok', 'the producer aborts d=bad2 (11, ABORT 12)');
is(step($cm, 'commit e z'),   'ok', '... and commits e=z (13, COMMIT 14)');
end_steps($cm);
is($node->safe_psql('postgres', $cm_ranges), '11-12', 'the new abort is recorded');
is(sql_values('cm'), 'keep,v2,x,y,w,z', 'mq_fetch skips the new abort only');
is(consume('cm', 'read_committed'), 'keep,v2,x,y,w,z',
	'a read_committed consumer skips it and reads the producer\'s next transaction');

# a horizon below the log start goes with the maintenance pass, as the
# aborted range does
cm_roll_compact(undef, 15, 'the partition rolls at 15', 11);
is($node->safe_psql('postgres', $cm_horizons), '', 'the compaction that removed the aborted batch at 11 records no horizon');
cm_roll_compact('v', 16, 'the segment at 11 is compacted again after one more roll', 11);
is($node->safe_psql('postgres', $cm_horizons), '12', 'the next one records the horizon of the ABORT at 12');
$node->safe_psql('postgres', q{SELECT mq_delete_records('cm', 0, 13)});
$node->safe_psql('postgres', q{SELECT count(*) FROM mq_run_maintenance('cm')});
is($node->safe_psql('postgres', $cm_horizons), '', 'maintenance removes the horizon below the log start (13)');
is($node->safe_psql('postgres', $cm_ranges), '', '... and the range');

# an open transaction that began in a segment since rolled: compaction
# waits for its end (the segment's batches above the LSO have no fate yet,
# and a rewrite then lost them)
$node->safe_psql('postgres', q{SELECT mq_create_topic('co', 1, config => '{"cleanup.policy": "compact"}');
SELECT mq_grant('co', 'kafka_app', 'all');
SELECT mq_produce('co', 'old', key => 'x', partition => 0);
SELECT mq_produce('co', 'new', key => 'x', partition => 0);});
my ($oin, $oout, $oerr) = ('', '', '');
my $open = IPC::Run::start([ $python, $script, 'open', $addr, 'co', 'tx-co', 1, 'open', 600000, 'y' ],
	'<', \$oin, '>', \$oout, '2>', \$oerr, IPC::Run::timeout(300));
wait_for(60, sub { $open->pump_nb; $oout =~ /open/ }) or diag("open: $oerr");
# the appender's roll at segment.ms, into a spare the worker prepared: the
# worker's own roll waits for the partition's in-flight entries, the
# appender's does not
$node->safe_psql('postgres', q{SELECT mq_alter_topic('co', '{"segment.ms": 1}')});
ok( $node->poll_query_until(
		'postgres', q{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('co'))
SELECT (SELECT count(*) FROM pass) >= 0 AND EXISTS (
  SELECT FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'co' AND s.base_offset < 0)}),
	'a spare segment is prepared for the partition with a transaction open');
$node->safe_psql('postgres', q{SELECT mq_produce('co', 'z', key => 'z', partition => 0)});
ok( $node->poll_query_until(
		'postgres', q{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('co'))
SELECT (SELECT count(*) FROM pass) >= 0 AND EXISTS (
  SELECT FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'co' AND s.base_offset = 0 AND s.sealed)}),
	'... the next record rolls into it, sealing the segment the transaction began in');
my $co_compacted = q{SELECT count(*) FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
   WHERE t.name = 'co' AND s.compacted_at IS NOT NULL AND s.base_offset = 0};
$node->safe_psql('postgres', q{SELECT count(*) FROM mq_run_maintenance('co')});
is($node->safe_psql('postgres', $co_compacted), '0',
	'a sealed segment holding an open transaction\'s batch is not compacted');
$oin .= "\n";
wait_for(60, sub { $open->pump_nb; $oout =~ /open\n.+\n/ });
$open->finish;
like($oout, qr/open\nok\n/, '... until the transaction commits');
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'co'}),
	'5 5', '... which moves the last stable offset past its marker');
ok( $node->poll_query_until(
		'postgres', qq{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance('co'))
SELECT (SELECT count(*) FROM pass) >= 0 AND ($co_compacted) = 1}),
	'... then it is');
is(sql_values('co'), 'new,open-0,z', 'compaction removed the superseded record and kept the transaction\'s');
$node->safe_psql('postgres', q{SELECT mq_alter_topic('co', '{"segment.ms": null}')});

# ---------------------------------------------------------------------------
# retention: the aborted transactions below the log start go
# ---------------------------------------------------------------------------
my $cr = start_steps('cr', 'tx-cr');
is(step($cr, 'abort a x1'),   'ok', 'an aborted transaction at offset 0 (marker 1)');
is(step($cr, 'commit b y'),   'ok', 'a committed one at 2 (marker 3)');
is(step($cr, 'abort c x2'),   'ok', 'an aborted one at 4 (marker 5)');
end_steps($cr);
my $cr_rows = q{SELECT string_agg(first_offset || '-' || last_offset, ',' ORDER BY first_offset)
  FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'cr'};
is($node->safe_psql('postgres', $cr_rows), '0-1,4-5', 'two aborts are recorded');
$node->safe_psql('postgres', q{SELECT mq_delete_records('cr', 0, 2)});
$node->safe_psql('postgres', q{SELECT count(*) FROM mq_run_maintenance('cr')});
is($node->safe_psql('postgres', $cr_rows), '4-5',
	'maintenance removes the abort below the log start and keeps the other');
is(consume('cr', 'read_committed'), 'y', 'read_committed still hides the aborted transaction above it');

# ---------------------------------------------------------------------------
# transactional.id.expiration.ms
# ---------------------------------------------------------------------------
my $te = start_steps('te', 'tx-exp');
is(step($te, 'commit k e0'), 'ok', 'a producer of tx-exp commits');
my ($pid0) = $node->safe_psql('postgres', q{SELECT producer_id FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-exp'});
# an open transaction, older than the expiration by the time it passes
my ($lin, $lout, $lerr) = ('', '', '');
my $long = IPC::Run::start([ $python, $script, 'open', $addr, 'te', 'tx-long', 1, 'long', 600000 ],
	'<', \$lin, '>', \$lout, '2>', \$lerr, IPC::Run::timeout(300));
wait_for(60, sub { $long->pump_nb; $lout =~ /open/ }) or diag("open: $lerr");
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.kafka_transaction WHERE transactional_id IN ('tx-exp', 'tx-long', 'tx-g')}),
	'3', 'the ids are kept under the default expiration (7 days)');
$node->safe_psql('postgres', q{ALTER SYSTEM SET mqlog.kafka_transactional_id_expiration = '2s'; SELECT pg_reload_conf()});
ok( $node->poll_query_until(
		'postgres', q{SELECT NOT EXISTS (SELECT FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-exp')}),
	'with mqlog.kafka_transactional_id_expiration at 2s the unused id is removed');
ok( $node->poll_query_until(
		'postgres', q{SELECT NOT EXISTS (SELECT FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-g')}),
	'... and so is tx-g');
ok($node->log_contains(qr/Kafka transactional ids unused for mqlog.kafka_transactional_id_expiration \(2000 ms\) were removed/),
	'... which the server log says');
sleep 3;
is($node->safe_psql('postgres', q{SELECT state FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-long'}),
	'Ongoing', 'the id whose transaction is open is kept');
$lin .= "\n";
wait_for(60, sub { $long->pump_nb; $lout =~ /open\n.+\n/ });
$long->finish;
like($lout, qr/open\nok\n/, '... and its producer commits');

is(add_partition('tx-exp', $pid0, 0, 'te'), 49,
	'a raw AddPartitionsToTxn of the expired id\'s producer is INVALID_PRODUCER_ID_MAPPING');
my $late = step($te, 'commit k e1');
like($late, qr/^INVALID_PRODUCER_ID_MAPPING fatal=False abortable=True/,
	"the expired id's producer cannot commit: an abortable INVALID_PRODUCER_ID_MAPPING, as from Kafka");
end_steps($te);
is(py('commit', $addr, 'te', 'tx-exp', 1, 'e2'), "ok\n", 'a new producer of tx-exp commits');
# (librdkafka's abort after the refusal asks for a new epoch (KIP-360) and
# gets a new id already; with ids expiring every 2 s which one is left
# and at which epoch depends on timing, so only the id is checked)
my $pid1 = $node->safe_psql('postgres', q{SELECT producer_id FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-exp'});
ok($pid1 ne '' && $pid1 != $pid0, "... with a new producer id ($pid1, was $pid0)");
is(consume('te', 'read_committed'), 'e0,long-0,e2-0', 'read_committed reads the committed transactions only');

done_testing();
