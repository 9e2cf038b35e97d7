# Leader epochs as Kafka clients use them (KIP-320, doc/kafka.md "Leader
# epochs"), with raw frames (Metadata v7, ListOffsets v4, Fetch v9 and
# v12, OffsetForLeaderEpoch v0-v3) and confluent-kafka:
#  - a single node: every partition is at epoch 0 in Metadata and
#    ListOffsets; a current_leader_epoch of 0 or -1 is served, 1 (newer)
#    is UNKNOWN_LEADER_EPOCH in Fetch, ListOffsets and OffsetForLeaderEpoch
#    and changes nothing; OffsetForLeaderEpoch answers epoch 0 ending at
#    the log end, -1/-1 for an epoch not yet seen; a topic the role may not
#    describe is TOPIC_AUTHORIZATION_FAILED;
#  - three nodes on one etcd: a confluent-kafka consumer reads half of a
#    replicated partition, its leader is killed (kill -9) and the partition
#    fails over to epoch 1; Metadata shows epoch 1, a raw Fetch with epoch
#    0 to the new leader is FENCED_LEADER_EPOCH, with 2 UNKNOWN_LEADER_EPOCH,
#    OffsetForLeaderEpoch of epoch 0 answers the offset where epoch 1
#    began, ListOffsets the epochs of the earliest and latest offsets, and
#    the consumer (librdkafka 2.0.2, which sends no leader epochs) goes on
#    at the right offset, every record once;
#  - an unclean election (a topic with unclean.leader.election.enable whose
#    ISR had shrunk to the leader): a record read from the old leader at
#    epoch 0 is gone from the new leader's log, and OffsetForLeaderEpoch of
#    epoch 0 at the new leader answers the truncation point, below the
#    reader's position, which is how a KIP-320 client detects it, and a
#    Fetch v12 from that position with last_fetched_epoch 0 answers
#    diverging_epoch with it instead of records.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use MqKafka qw(kafka_node kstr frame response connect_listener);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use constant {
	FENCED => 74,
	UNKNOWN_EPOCH => 76,
	NOT_LEADER => 6,
	AUTHZ => 29,
};

my ($script, $python) = ($MqKafka::SCRIPT, $MqKafka::PYTHON);

# --- raw requests ----------------------------------------------------------

# a request on a new connection to host:port, its answer after the correlation id
# (flexible: request header v2, and the answer's header tags are skipped)
sub ask
{
	my ($hostport, $key, $version, $body, $flexible) = @_;
	my ($port) = $hostport =~ /:(\d+)$/;
	my $s = connect_listener($port);
	if ($flexible)
	{
		my $payload = pack('nnN', $key, $version, 7) . kstr('raw') . "\0" . $body;
		print $s pack('N', length $payload) . $payload;
	}
	else
	{
		print $s frame($key, $version, $body);
	}
	my $answer = response($s);
	close $s;
	die "no answer to API $key v$version at $hostport" unless defined $answer;
	return substr($answer, $flexible ? 5 : 4);
}

# Fetch v12 (flexible) of one partition from an offset, with the epoch of
# the last record the client read: "error high_watermark records_bytes",
# then " diverging EPOCH END_OFFSET" when the answer has one
sub fetch12
{
	my ($hostport, $topic, $p, $current, $offset, $last_epoch) = @_;
	my $body = pack('l>l>l>l>c', -1, 0, 1, 1 << 20, 0) . pack('l>l>', 0, -1)
	  . pack('C', 2) . pack('C', length($topic) + 1) . $topic . pack('C', 2)
	  . pack('l>l>q>l>q>l>', $p, $current, $offset, $last_epoch, -1, 1 << 20) . "\0" . "\0"
	  . pack('C', 1)       # forgotten topics: none
	  . pack('C', 1)       # rack_id ''
	  . "\0";
	my $r = reader(ask($hostport, 1, 12, $body, 1));
	$r->{take}->('l>');    # throttle
	my $top = $r->{take}->('s>');
	$r->{take}->('l>');    # session
	return "top $top" if $top;
	$r->{uvarint}->();
	$r->{bytes}->($r->{uvarint}->() - 1);
	$r->{uvarint}->();
	$r->{take}->('l>');    # partition
	my $err = $r->{take}->('s>');
	my $hw = $r->{take}->('q>');
	$r->{take}->('q>');    # last stable
	$r->{take}->('q>');    # log start
	my $naborted = $r->{uvarint}->() - 1;
	$r->{bytes}->(16 * $naborted + $naborted) if $naborted > 0;
	$r->{take}->('l>');    # preferred read replica
	my $len = $r->{uvarint}->() - 1;
	$r->{bytes}->($len) if $len > 0;
	my $answer = "$err $hw " . ($len < 0 ? 0 : $len);
	foreach (1 .. $r->{uvarint}->())
	{
		my ($tag, $size) = ($r->{uvarint}->(), $r->{uvarint}->());
		if ($tag == 0)
		{
			my ($e, $end) = ($r->{take}->('l>'), $r->{take}->('q>'));
			$r->{uvarint}->();
			$answer .= " diverging $e $end";
		}
		else
		{
			$r->{bytes}->($size);
		}
	}
	return $answer;
}

# a reader over an answer: take('N') etc., str() for a Kafka string
sub reader
{
	my ($buf) = @_;
	my $pos = 0;
	my %r;
	$r{take} = sub {
		my ($fmt) = @_;
		my $len = length pack($fmt, (0) x 1);
		my ($v) = unpack($fmt, substr($buf, $pos, $len));
		$pos += $len;
		return $v;
	};
	$r{str} = sub {
		my $len = $r{take}->('s>');
		return undef if $len < 0;
		my $v = substr($buf, $pos, $len);
		$pos += $len;
		return $v;
	};
	$r{uvarint} = sub {
		my ($v, $shift) = (0, 0);
		while (1)
		{
			my $b = ord(substr($buf, $pos++, 1));
			$v |= ($b & 0x7f) << $shift;
			return $v unless $b & 0x80;
			$shift += 7;
		}
	};
	$r{bytes} = sub {
		my $v = substr($buf, $pos, $_[0]);
		$pos += $_[0];
		return $v;
	};
	return \%r;
}

# ListOffsets v4 of one partition: "error offset epoch"
sub list_offsets
{
	my ($hostport, $topic, $p, $current, $ts) = @_;
	my $body = pack('l>c', -1, 0) . pack('l>', 1) . kstr($topic) . pack('l>', 1)
	  . pack('l>l>q>', $p, $current, $ts);
	my $r = reader(ask($hostport, 2, 4, $body));
	$r->{take}->('l>');    # throttle
	$r->{take}->('l>');
	$r->{str}->();
	$r->{take}->('l>');
	$r->{take}->('l>');    # partition
	my $err = $r->{take}->('s>');
	$r->{take}->('q>');    # timestamp
	my $offset = $r->{take}->('q>');
	my $epoch = $r->{take}->('l>');
	return "$err $offset $epoch";
}

# Fetch v9 of one partition from an offset: "error high_watermark
# records_bytes", and in @$batches the (base offset, epoch) of each batch
sub fetch
{
	my ($hostport, $topic, $p, $current, $offset, $batches) = @_;
	my $body = pack('l>l>l>l>c', -1, 0, 1, 1 << 20, 0) . pack('l>l>', 0, -1)
	  . pack('l>', 1) . kstr($topic) . pack('l>', 1)
	  . pack('l>l>q>q>l>', $p, $current, $offset, -1, 1 << 20)
	  . pack('l>', 0);     # forgotten topics
	my $r = reader(ask($hostport, 1, 9, $body));
	$r->{take}->('l>');    # throttle
	my $top = $r->{take}->('s>');
	$r->{take}->('l>');    # session
	return "top $top" if $top;
	$r->{take}->('l>');
	$r->{str}->();
	$r->{take}->('l>');
	$r->{take}->('l>');    # partition
	my $err = $r->{take}->('s>');
	my $hw = $r->{take}->('q>');
	$r->{take}->('q>');    # last stable
	$r->{take}->('q>');    # log start
	my $naborted = $r->{take}->('l>');
	$r->{bytes}->(16 * $naborted) if $naborted > 0;
	my $len = $r->{take}->('l>');
	if ($len > 0 && $batches)
	{
		my $raw = $r->{bytes}->($len);
		while (length $raw >= 61)
		{
			my ($base, $blen, $epoch) = unpack('q>l>l>', $raw);
			push @$batches, [ $base, $epoch ];
			substr($raw, 0, 12 + $blen) = '';
		}
	}
	return "$err $hw " . ($len < 0 ? 0 : $len);
}

# OffsetForLeaderEpoch v$version (0-3) of one partition: "error epoch end_offset"
# (v0 has no epoch: "error - end_offset")
sub epoch_end
{
	my ($hostport, $topic, $p, $current, $epoch, $version) = @_;
	$version //= 3;
	my $body = ($version >= 3 ? pack('l>', -1) : '') . pack('l>', 1) . kstr($topic) . pack('l>', 1)
	  . pack('l>', $p) . ($version >= 2 ? pack('l>', $current) : '') . pack('l>', $epoch);
	my $r = reader(ask($hostport, 23, $version, $body));
	$r->{take}->('l>') if $version >= 2;    # throttle
	$r->{take}->('l>');
	$r->{str}->();
	$r->{take}->('l>');
	my $err = $r->{take}->('s>');
	$r->{take}->('l>');                     # partition
	my $e = $version >= 1 ? $r->{take}->('l>') : '-';
	my $end = $r->{take}->('q>');
	return "$err $e $end";
}

# OffsetForLeaderEpoch v4 (flexible) of one partition: "error epoch end_offset"
sub epoch_end4
{
	my ($hostport, $topic, $p, $current, $epoch) = @_;
	my $body = pack('l>', -1) . pack('C', 2) . pack('C', length($topic) + 1) . $topic . pack('C', 2)
	  . pack('l>l>l>', $p, $current, $epoch) . "\0\0\0";
	my $r = reader(ask($hostport, 23, 4, $body, 1));
	$r->{take}->('l>');    # throttle
	$r->{uvarint}->();
	$r->{bytes}->($r->{uvarint}->() - 1);
	$r->{uvarint}->();
	my $err = $r->{take}->('s>');
	$r->{take}->('l>');    # partition
	my $e = $r->{take}->('l>');
	my $end = $r->{take}->('q>');
	return "$err $e $end";
}

# --- one node ----------------------------------------------------------------

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $single = "127.0.0.1:$kport";
my $node = kafka_node('single', $kport);
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('le1', 2);
SELECT mq_create_topic('hidden', 1);
SELECT mq_grant('le1', 'kafka_app', 'consume');
SELECT mq_produce_text('le1', 'r' || i, partition => 0) FROM generate_series(1, 5) i;
SELECT mq_produce_text('hidden', 'h', partition => 0);
});

{
	my $md = MqKafka::metadata($single);
	is_deeply({ map { $_ => $md->{topics}{le1}{partitions}{$_}{epoch} } 0, 1 }, { 0 => 0, 1 => 0 },
		'single node: Metadata v7 answers leader epoch 0 for every partition, not -1');
}
is(list_offsets($single, 'le1', 0, -1, -1), '0 5 0', 'ListOffsets v4 latest, no epoch check: offset 5 at epoch 0');
is(list_offsets($single, 'le1', 0, 0, -2), '0 0 0', '... earliest with current_leader_epoch 0: offset 0 at epoch 0');
is(list_offsets($single, 'le1', 0, 1, -1), UNKNOWN_EPOCH . ' -1 -1', '... with current_leader_epoch 1 (newer): UNKNOWN_LEADER_EPOCH');
like(fetch($single, 'le1', 0, 0, 0), qr/^0 5 [1-9]\d*$/, 'Fetch v9 with current_leader_epoch 0 is served, with records');
like(fetch($single, 'le1', 0, -1, 0), qr/^0 5 [1-9]\d*$/, '... and with -1 (no check)');
is(fetch($single, 'le1', 0, 1, 0), UNKNOWN_EPOCH . ' -1 0', '... with 1 (newer): UNKNOWN_LEADER_EPOCH, no records');
like(fetch12($single, 'le1', 0, 0, 5, 0), qr/^0 5 0$/, 'Fetch v12 from offset 5 after a record of epoch 0: no divergence, nothing new');
like(fetch12($single, 'le1', 0, 0, 2, -1), qr/^0 5 [1-9]\d*$/, '... from offset 2 without a last fetched epoch: records');
is(fetch12($single, 'le1', 0, 0, 2, 3), '1 -1 0', '... with last_fetched_epoch 3, which this log never had: OFFSET_OUT_OF_RANGE');
is(fetch12($single, 'le1', 0, 1, 2, 0), UNKNOWN_EPOCH . ' -1 0', '... at current_leader_epoch 1: UNKNOWN_LEADER_EPOCH');
is(epoch_end($single, 'le1', 0, 0, 0), '0 0 5', 'OffsetForLeaderEpoch v3 of epoch 0: epoch 0 ends at the log end (5)');
is(epoch_end($single, 'le1', 1, -1, 0), '0 0 0', '... of an empty partition: at 0');
is(epoch_end($single, 'le1', 0, -1, 3), '0 -1 -1', '... of epoch 3, not seen yet: -1, -1');
is(epoch_end($single, 'le1', 0, -1, -1), '0 -1 -1', '... of epoch -1: -1, -1');
is(epoch_end($single, 'le1', 0, 1, 0), UNKNOWN_EPOCH . ' -1 -1', '... with current_leader_epoch 1: UNKNOWN_LEADER_EPOCH');
is(epoch_end($single, 'le1', 0, 0, 0, 2), '0 0 5', '... v2 answers the same');
is(epoch_end4($single, 'le1', 0, 0, 0), '0 0 5', '... and v4 (flexible)');
is(epoch_end4($single, 'le1', 0, 1, 0), UNKNOWN_EPOCH . ' -1 -1', '... v4 with current_leader_epoch 1: UNKNOWN_LEADER_EPOCH');
is(epoch_end($single, 'le1', 0, 0, 0, 0), '0 - 5', '... and v0, without the epoch');
is(epoch_end($single, 'le1', 7, -1, 0), '3 -1 -1', '... of a partition le1 does not have: UNKNOWN_TOPIC_OR_PARTITION');
is(epoch_end($single, 'nosuch', 0, -1, 0), '3 -1 -1', '... of a topic no node has: UNKNOWN_TOPIC_OR_PARTITION');
is(epoch_end($single, 'hidden', 0, -1, 0), AUTHZ . ' -1 -1', '... of a topic the role may not describe: TOPIC_AUTHORIZATION_FAILED');
is(list_offsets($single, 'hidden', 0, -1, -1), AUTHZ . ' -1 -1', 'ListOffsets of it too');
is($node->safe_psql('postgres', q{SELECT mq_latest_offset('le1', 0)}), '5', 'none of it changed the log');
$node->stop;

# --- three nodes -----------------------------------------------------------------

my $etcd = MqCluster::start_etcd();
my ($nodes, $kafka) = MqKafka::start_nodes($etcd, 3, "mqlog.acks_timeout = 3000\n");
my ($n1, $n2, $n3) = @$nodes;
my %kafka = %$kafka;
my %by_name = map { $_->name => $_ } @$nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub leader_of
{
	my ($n, $topic) = @_;
	return q1($n, qq{SELECT leader || '/' || leader_epoch FROM mqlog.partitions WHERE topic = '$topic' AND "partition" = 0});
}

sub values_of
{
	my ($n, $topic) = @_;
	return q1($n, qq{
SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '')
  FROM mq_fetch('$topic', 0, mq_earliest_offset('$topic', 0), 100000)});
}

# le: led by n1 on all three; lu: on n1 (leader) and n2, unclean election allowed
q1($n1, q{SELECT mq_create_topic('le', 1, replication_factor => 3, config => '{"min.insync.replicas": 2}')});
q1($n1, q{SELECT mq_create_topic('lu', 1, replication_factor => 2,
	config => '{"replica.lag.time.max.ms": 1000, "unclean.leader.election.enable": true}')});
ok(MqCluster::wait_topic($_, 'le', 1) && ($_ == $n3 || MqCluster::wait_topic($_, 'lu', 1)), $_->name . ' holds le (and lu)')
  for @$nodes;
is(leader_of($n1, 'le') . ' ' . leader_of($n1, 'lu'), 'n1/0 n1/0', 'n1 leads le/0 and lu/0 at epoch 0');
is(q1($n1, q{SELECT replicas FROM mqlog.partitions WHERE topic = 'lu'}), '{n1,n2}', 'lu/0 is on n1 and n2');

my $out = MqKafka::cluster_py($kafka{n2}, 'produce', 'le', 0, 'a', 10);
is(scalar(() = $out =~ /^ack /mg), 10, 'a confluent-kafka producer has 10 records of le/0 acknowledged (acks=all)')
  or diag($out);
q1($n1, q{SET mqlog.acks = 'all'; SELECT mq_produce_text('lu', 'u1', partition => 0)});
ok(MqCluster::wait_until(sub { values_of($n2, 'le') eq join(',', map { "a-$_" } 0 .. 9) && values_of($n3, 'le') eq values_of($n1, 'le') }, 30),
	'the followers hold le/0');

# a consumer assigned from the beginning reads the 10, then waits for 10 more
my $clog = PostgreSQL::Test::Utils::tempdir('epochs') . '/consumer.out';
my $consumer = MqCluster::fork_child(sub {
	open(STDOUT, '>', $clog) or die $!;
	exec($python, $script, $kafka{n3}, 'consume', 'le', 0, 20, 120) or die "exec: $!";
});
sub consumed { my @l = MqKafka::log_lines($clog); return grep { /^\d+ / } @l; }
ok(MqCluster::wait_until(sub { consumed() >= 10 }, 60), 'a confluent-kafka consumer read the 10 records from n1');

# kill -9 n1 with its walsenders (and the followers' apply workers) stopped
# first: lu's second record, which only n1 gets, is read by a Kafka client
# at epoch 0 once lu's ISR has shrunk to n1 (its high watermark then moves
# on n1 alone), and is lost by the unclean election
my @wal = split /\n/, q1($n1, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'});
my @apply = map { split /\n/, q1($_, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog apply'}) } ($n2, $n3);
kill 'STOP', @wal, @apply;
q1($n1, q{SELECT mq_produce_text('lu', 'u2', partition => 0)});
ok(MqCluster::wait_until(sub { q1($n1, q{SELECT isr FROM mqlog.partitions WHERE topic = 'lu'}) eq '{n1}' }, 30),
	'with n2 not receiving, the ISR of lu/0 shrinks to {n1}');
my @read_batches;
ok(MqCluster::wait_until(sub {
		@read_batches = ();
		return fetch($kafka{n1}, 'lu', 0, 0, 0, \@read_batches) =~ /^0 2 /;
	}, 30), 'a raw Fetch of lu/0 from n1 at epoch 0 reads up to offset 2');
is(join(' ', map { "$_->[0]\@$_->[1]" } @read_batches), '0@0 1@0', '... the batches at offsets 0 and 1, both of epoch 0');
$n1->kill9;
kill 'KILL', @wal;
kill 'CONT', @apply;

my $new;
ok(MqCluster::wait_until(sub {
		my $l2 = leader_of($n2, 'le');
		($new) = $l2 =~ m{^(n[23])/1$};
		return $new && leader_of($n3, 'le') eq $l2;
	}, 60), 'kill -9 of n1: le/0 fails over at epoch 1');
my ($other) = grep { $_ ne $new } qw(n2 n3);
ok(MqCluster::wait_until(sub { leader_of($n2, 'lu') eq 'n2/1' }, 60), 'lu/0: n2, not in sync, is elected (unclean) at epoch 1');

# epochs at the new leader
ok(MqCluster::wait_until(sub { (MqKafka::metadata($kafka{$new})->{topics}{le}{partitions}{0}{epoch} // -1) == 1 }, 30),
	"Metadata from $new shows le/0 at epoch 1");
ok(MqCluster::wait_until(sub { (MqKafka::metadata($kafka{$other})->{topics}{le}{partitions}{0}{epoch} // -1) == 1 }, 30),
	"... and from $other");
ok(MqCluster::wait_until(sub { fetch($kafka{$new}, 'le', 0, 1, 0) =~ /^0 10 / }, 30),
	"a raw Fetch v9 of le/0 at epoch 1 to $new is served");
is(fetch($kafka{$new}, 'le', 0, 0, 0), FENCED . ' -1 0', '... at epoch 0 (the old leader\'s): FENCED_LEADER_EPOCH');
is(fetch($kafka{$new}, 'le', 0, 2, 0), UNKNOWN_EPOCH . ' -1 0', '... at epoch 2: UNKNOWN_LEADER_EPOCH');
ok(MqCluster::wait_until(sub { fetch($kafka{$other}, 'le', 0, 0, 0) eq FENCED . ' -1 0' }, 30),
	"... at epoch 0 to $other, a follower: FENCED_LEADER_EPOCH");
is(fetch($kafka{$other}, 'le', 0, 1, 0), NOT_LEADER . ' -1 0', '... at epoch 1: NOT_LEADER_OR_FOLLOWER');
is(list_offsets($kafka{$new}, 'le', 0, 0, -1), FENCED . ' -1 -1', 'ListOffsets v4 at epoch 0: FENCED_LEADER_EPOCH');
is(epoch_end($kafka{$new}, 'le', 0, 0, 0), FENCED . ' -1 -1', 'OffsetForLeaderEpoch with current_leader_epoch 0: FENCED_LEADER_EPOCH');
is(epoch_end($kafka{$new}, 'le', 0, 1, 0), '0 0 10', 'OffsetForLeaderEpoch of epoch 0: it ends at 10, where epoch 1 began');

$out = MqKafka::cluster_py($kafka{$other}, 'produce', 'le', 0, 'b', 10);
is(scalar(() = $out =~ /^ack /mg), 10, "10 more records of le/0 acknowledged by $new") or diag($out);
is(epoch_end($kafka{$new}, 'le', 0, -1, 0), '0 0 10', 'OffsetForLeaderEpoch of epoch 0 still ends at 10');
is(epoch_end($kafka{$new}, 'le', 0, -1, 1), '0 1 20', '... epoch 1, the current one, at the log end');
is(list_offsets($kafka{$new}, 'le', 0, 1, -2), '0 0 0', 'ListOffsets v4 earliest: offset 0 of epoch 0');
is(list_offsets($kafka{$new}, 'le', 0, 1, -1), '0 20 1', '... latest: offset 20 at epoch 1');
like(fetch12($kafka{$new}, 'le', 0, 1, 10, 0), qr/^0 20 [1-9]\d*$/,
	'Fetch v12 from offset 10 after a record of epoch 0: no divergence (epoch 0 ends at 10), records');
is(fetch12($kafka{$new}, 'le', 0, 1, 12, 0), '0 20 0 diverging 0 10',
	'... from offset 12 after a record of epoch 0: diverging_epoch {0, 10}, no records');
like(fetch12($kafka{$new}, 'le', 0, 1, 12, 1), qr/^0 20 [1-9]\d*$/, '... from offset 12 after a record of epoch 1: records');
{
	my @b;
	fetch($kafka{$new}, 'le', 0, 1, 10, \@b);
	is((map { $_->[1] } @b)[0], 1, 'the records after the failover are in batches of epoch 1');
}

is(MqCluster::wait_child($consumer, 150), 0, 'the consumer ends');
my @got = consumed();
is(join(',', @got), join(',', (map { "$_ a-$_" } 0 .. 9), (map { ($_ + 10) . " b-$_" } 0 .. 9)),
	'it went on across the failover at offset 10: every record once, at its offset, in order')
  or diag(join("\n", MqKafka::log_lines($clog)));
my $libversion = qx{$python -c "import confluent_kafka; print(confluent_kafka.libversion()[0])"};
chomp $libversion;
note("librdkafka $libversion (2.0.2 in Debian 12)"
	  . ' sends current_leader_epoch -1 in Fetch (v11 at most) and never asks OffsetForLeaderEpoch');

# the unclean election truncated lu/0 at offset 1
q1($n2, q{SELECT mq_produce_text('lu', 'u3', partition => 0)});
is(values_of($n2, 'lu'), 'u1,u3', 'lu/0 on n2 lost u2, which only n1 had');
is(epoch_end($kafka{n2}, 'lu', 0, 1, 0), '0 0 1',
	'OffsetForLeaderEpoch of epoch 0 (of the last record the reader had) at n2: it ends at 1, below the reader\'s position 2: truncation detected');
is(fetch12($kafka{n2}, 'lu', 0, 1, 2, 0), '0 2 0 diverging 0 1',
	'a Fetch v12 at n2 from the reader\'s position 2 after its record of epoch 0: diverging_epoch {0, 1}, the truncation point');
is(epoch_end($kafka{n2}, 'lu', 0, 1, 1), '0 1 2', '... and epoch 1 runs from there to the log end');
{
	my @b;
	fetch($kafka{n2}, 'lu', 0, 1, 1, \@b);
	is(join(' ', map { "$_->[0]\@$_->[1]" } @b), '1@1', 'offset 1 is now a batch of epoch 1');
}

$_->stop for ($n2, $n3);
MqCluster::stop_etcd($etcd);
done_testing();
