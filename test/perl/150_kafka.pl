# The Kafka wire protocol listener (doc/kafka.md), with unmodified Kafka
# clients from Debian: kcat and python3-confluent-kafka (librdkafka 2.0),
# python3-kafka (kafka-python 2.0), driven by test/kafka/clients.py.
#
# Checks:
#  - kcat -L lists the topics the role may describe, with their partitions,
#    and not a topic it may not describe;
#  - kcat produces keyed records and consumes them back, and mq_fetch shows
#    them at the offsets kcat was told;
#  - confluent-kafka and kafka-python produce with every codec (none, gzip,
#    snappy, lz4, zstd); each record comes out of mq_fetch with its key,
#    value, header and timestamp at the partition and offset the client was
#    told, and that partition is mq_partition_for_key's (murmur2 agrees);
#  - both clients consume everything back with explicit assignment;
#  - records produced with mq_produce reach a Kafka consumer, key, value,
#    headers and timestamp included;
#  - a read_committed consumer never sees records of an aborted SQL
#    transaction, and sees the committed ones after them;
#  - ListOffsets by timestamp (kcat -Q) agrees with mq_offsets_for_times;
#  - produce without privilege fails with TOPIC_AUTHORIZATION_FAILED and
#    writes nothing;
#  - a Fetch waiting for data (max_wait_ms) does not hold up other
#    connections, and a commit ends its wait early;
#  - kafkajs (npm): Metadata, keyed produce (none, gzip) placed where
#    murmur2 puts it, and a subscribe()d group consumer whose commits show in
#    mqlog.consumer_lag;
#  - after a seeded fuzz of frames, the listener (the same process) still
#    answers, no transaction is left open and no process died.
use strict;
use warnings;

use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $clients = dirname(__FILE__) . '/../kafka/clients.py';
my $fuzz = dirname(__FILE__) . '/../kafka/fuzz.py';
my $python = '/usr/bin/python3';
my @codecs = qw(none gzip snappy lz4 zstd);

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $max_frame = 1024 * 1024;

my $node = PostgreSQL::Test::Cluster->new('kafka');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.kafka_listen = '$bootstrap'
mqlog.kafka_role = 'kafka_app'
mqlog.kafka_max_frame_size = $max_frame
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('orders', 4);
SELECT mq_create_topic('codecs', 4, config => '{"compression.type": "producer"}');
SELECT mq_create_topic('from_sql', 2);
SELECT mq_create_topic('txn', 1);
SELECT mq_create_topic('secret', 1);
SELECT mq_create_topic('readonly', 1);
SELECT mq_grant(t, 'kafka_app', 'produce') FROM unnest(ARRAY['orders','codecs','from_sql','txn']) t;
SELECT mq_grant(t, 'kafka_app', 'consume') FROM unnest(ARRAY['orders','codecs','from_sql','txn','readonly']) t;
});

sub run_cmd
{
	my (@cmd) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return ($ok, $out // '', $err // '');
}

sub client
{
	my ($ok, $out, $err) = run_cmd($python, $clients, $bootstrap, @_);
	die "clients.py @_ failed: $err$out" unless $ok;
	return [ grep { length } split /\n/, $out ];
}

sub kcat
{
	my ($in, @args) = @_;
	my ($out, $err);
	IPC::Run::run([ 'kcat', '-b', $bootstrap, @args ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "kcat @args failed: $err";
	return $out;
}

# the listener is up once kcat lists a topic
my $listing = '';
foreach (1 .. 60)
{
	my ($ok, $out) = run_cmd('kcat', '-b', $bootstrap, '-L', '-m', '5');
	$listing = $out;
	last if $ok && $out =~ /topic "orders"/;
	sleep 1;
}
my $listener_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
like($listener_pid, qr/^\d+$/, 'the listener is a background worker in pg_stat_activity');

# --- Metadata ------------------------------------------------------------
like($listing, qr/broker 0 at 127\.0\.0\.1:$kport/, 'kcat -L: the advertised broker');
like($listing, qr/topic "orders" with 4 partitions:.*?partition 3, leader 0, replicas: 0, isrs: 0/s,
	'kcat -L: a topic and its partitions, led by broker 0');
like($listing, qr/topic "readonly" with 1 partitions/, 'kcat -L: a topic the role may only consume');
unlike($listing, qr/"secret"/, 'kcat -L: no topic the role may not describe');

# --- kcat round trip -----------------------------------------------------
my $kout = kcat("alpha:one\nbeta:two\ngamma:three\n", '-P', '-t', 'orders', '-K', ':',
	'-X', 'partitioner=murmur2_random');
my $consumed = kcat('', '-C', '-t', 'orders', '-o', 'beginning', '-e', '-q', '-f', '%p %o %k %s\n');
my %kc = map { my @f = split / /; ($f[2] => [ $f[0], $f[1], $f[3] ]) } grep { length } split /\n/, $consumed;
is_deeply([ sort keys %kc ], [qw(alpha beta gamma)], 'kcat consumes the three keyed records');
my $bad = 0;
foreach my $k (keys %kc)
{
	my ($p, $o, $v) = @{ $kc{$k} };
	my $sql = $node->safe_psql('postgres',
		"SELECT convert_from(key, 'UTF8') || ' ' || convert_from(value, 'UTF8') || ' ' || mq_partition_for_key('$k', 4)
		   FROM mq_fetch('orders', $p, $o, 1, 100000)");
	$bad++ unless $sql eq "$k $v $p";
}
is($bad, 0, 'kcat\'s records are in mq_fetch at the partition and offset kcat read, murmur2 agreeing');

# --- confluent-kafka and kafka-python, every codec ------------------------
my %produced;    # key -> [partition, offset]
foreach my $lib (qw(confluent kafka-python))
{
	foreach my $codec (@codecs)
	{
		my $lines = client("$lib-produce", 'codecs', $codec, 8);
		my $prefix = $lib eq 'confluent' ? 'c' : 'p';
		is(scalar(@$lines), 8, "$lib produced 8 records with $codec");
		foreach (@$lines)
		{
			my ($key, $p, $o) = split / /;
			$produced{"$lib/$key"} = [ $key, $p, $o ];
		}
	}
}
my ($mismatch, $checked) = (0, 0);
foreach my $id (sort keys %produced)
{
	my ($key, $p, $o) = @{ $produced{$id} };
	my ($codec, $i) = split /-/, $key;
	my $row = $node->safe_psql('postgres',
		"SELECT convert_from(key, 'UTF8'), convert_from(value, 'UTF8'),
		        (SELECT string_agg(h.key || '=' || convert_from(h.value, 'UTF8'), ',') FROM unnest(headers) h),
		        (extract(epoch FROM ts) * 1000)::bigint, mq_partition_for_key(key, 4)
		   FROM mq_fetch('codecs', $p, $o, 1, 100000) WHERE \"offset\" = $o");
	my $want = join('|', $key, "value-$key", "h=$i", 1700000000000 + $i, $p);
	$checked++;
	if ($row ne $want)
	{
		diag("$id at $p/$o: got '$row', want '$want'");
		$mismatch++;
	}
}
is($checked, 80, 'every record produced by a Kafka client was checked');
is($mismatch, 0,
	'each is in mq_fetch with its key, value, header and timestamp, where the client was told, in murmur2\'s partition');
my $codecs_stored = $node->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(0, 3) p, mq_fetch('codecs', p, 0, 1000, 10000000)});
is($codecs_stored, 80, 'the topic holds exactly those 80 records');

foreach my $lib (qw(confluent kafka-python))
{
	my $got = client("$lib-consume", 'codecs', 4, 80);
	my %seen = map { my @f = split / /, $_, 6; ("$f[0]/$f[1]" => "$f[2] $f[3] $f[4] $f[5]") } @$got;
	my $wrong = 0;
	foreach my $id (keys %produced)
	{
		my ($key, $p, $o) = @{ $produced{$id} };
		my (undef, $i) = split /-/, $key;
		my $want = sprintf('%s value-%s %d [["h", "%d"]]', $key, $key, 1700000000000 + $i, $i);
		$wrong++ unless ($seen{"$p/$o"} // '') eq $want;
	}
	is(scalar(@$got), 80, "$lib consumes the 80 records with explicit assignment");
	is($wrong, 0, "$lib reads each record's key, value, timestamp and header at its offset");
}

# --- SQL to Kafka --------------------------------------------------------
$node->safe_psql('postgres',
	q{SELECT mq_produce('from_sql', convert_to('sql-value-' || i, 'UTF8'), key => convert_to('sql-key-' || i, 'UTF8'),
	                    headers => ARRAY[('origin', 'sql'::bytea)]::mqlog.header[],
	                    ts => timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second')
	    FROM generate_series(1, 6) i});
my $from_sql = client('confluent-consume', 'from_sql', 2, 6);
my @want_sql = map {
	sprintf('sql-key-%d sql-value-%d %d [["origin", "sql"]]', $_, $_, 1704067200000 + 1000 * $_)
} 1 .. 6;
my @got_sql = sort map { (split / /, $_, 3)[2] } @$from_sql;
is_deeply(\@got_sql, [ sort @want_sql ], 'records produced with mq_produce reach a Kafka consumer whole');
my $parts_ok = 1;
foreach (@$from_sql)
{
	my ($p, undef, $k) = split / /;
	my $want = $node->safe_psql('postgres', "SELECT mq_partition_for_key('$k', 2)");
	$parts_ok = 0 unless $want == $p;
}
ok($parts_ok, 'mq_produce put each keyed record where Kafka\'s partitioner would');

# --- read_committed never sees an aborted SQL transaction -------------------
$node->safe_psql('postgres', q{
BEGIN; SELECT mq_produce('txn', convert_to('aborted-' || i, 'UTF8'), key => 'a') FROM generate_series(1, 3) i; ROLLBACK;
SELECT mq_produce('txn', convert_to('committed-' || i, 'UTF8'), key => 'c') FROM generate_series(1, 2) i;
});
my $txn = client('confluent-consume', 'txn', 1, 2, 'read_committed');
is_deeply([ map { (split / /)[3] } @$txn ], [qw(committed-1 committed-2)],
	'read_committed: the committed records after an aborted transaction, at offsets 3 and 4');
is_deeply([ map { (split / /)[1] } @$txn ], [ 3, 4 ], 'their offsets are past the aborted ones');
my ($ok_u, $out_u) = run_cmd($python, $clients, $bootstrap, 'confluent-consume', 'txn', 1, 3,
	'read_uncommitted');
unlike($out_u, qr/aborted-/, 'read_uncommitted does not see the aborted records either');

# --- ListOffsets by time --------------------------------------------------
my $q = kcat('', '-Q', '-t', 'from_sql:0:1704067203000', '-t', 'from_sql:1:1704067203000');
my %by_time = $q =~ /\[(\d+)\] offset (-?\d+)/g;
my %sql_time = split /[|\n]/, $node->safe_psql('postgres',
	q{SELECT partition, coalesce("offset", -1) FROM mq_offsets_for_times('from_sql', '2024-01-01 00:00:03+00')});
is_deeply(\%by_time, \%sql_time, 'ListOffsets by timestamp (kcat -Q) agrees with mq_offsets_for_times')
  or diag($q);

# --- privileges ------------------------------------------------------------
my ($ok_s, $out_s, $err_s) = run_cmd($python, $clients, $bootstrap, 'confluent-produce', 'readonly', 'none', 1);
ok(!$ok_s && "$out_s$err_s" =~ /authorization/i,
	'produce to a topic the role may only consume fails with an authorization error')
  or diag("$out_s$err_s");
is($node->safe_psql('postgres', q{SELECT count(*) FROM mq_fetch('readonly', 0, 0, 10, 1000)}), 0,
	'and writes nothing');

# --- a waiting Fetch holds up nobody ------------------------------------------
{
	my $h = IPC::Run::start([ 'kcat', '-b', $bootstrap, '-C', '-t', 'txn', '-p', '0', '-o', 'end',
		'-c', '1', '-q', '-f', '%s\n', '-X', 'fetch.wait.max.ms=10000' ],
		'>', \my $waiter_out, '2>', \my $waiter_err, IPC::Run::timeout(60));
	sleep 2;
	my $t0 = time;
	my $l = kcat('', '-L', '-t', 'orders');
	my $elapsed = time - $t0;
	like($l, qr/topic "orders"/, 'Metadata is answered while a Fetch waits');
	cmp_ok($elapsed, '<', 5, 'and without waiting for the Fetch\'s 10 s');
	$t0 = time;
	$node->safe_psql('postgres', q{SELECT mq_produce('txn', 'wake-up')});
	$h->finish;
	like($waiter_out, qr/wake-up/, 'the waiting consumer gets the record committed meanwhile');
	cmp_ok(time - $t0, '<', 8, 'before its max_wait_ms is up: the commit woke it');
}

# --- kafkajs (npm) -----------------------------------------------------------
# Metadata, keyed produce (none and gzip, the codecs kafkajs has without
# plugins) and a subscribe()d group consumer that commits; the records sit in
# mq_fetch where kafkajs was told, in murmur2's partitions, and the group's
# offsets in mqlog.consumer_lag.
{
	my $kafkajs = dirname(__FILE__) . '/../kafka/kafkajs_client.js';
	my $js = sub {
		my ($ok, $out, $err) = run_cmd('node', $kafkajs, $bootstrap, @_);
		die "kafkajs_client.js @_ failed: $err$out" unless $ok;
		return [ map { decode_json($_) } grep { length } split /\n/, $out ];
	};
	$node->safe_psql('postgres', q{SELECT mq_create_topic('js', 4);
SELECT mq_grant('js', 'kafka_app', 'produce'); SELECT mq_grant('js', 'kafka_app', 'consume');});
	my $md = $js->('metadata', 'js');
	is_deeply($md, [ { topic => 'js', partitions => 4 } ], 'kafkajs: Metadata of a topic of 4 partitions');
	my @sent = (@{ $js->('produce', 'js', 'none', 4) }, @{ $js->('produce', 'js', 'gzip', 4) });
	is(scalar(@sent), 8, 'kafkajs: 8 records produced, 4 plain and 4 gzip');
	my $placed = join(',', map { "$_->{partition}:$_->{offset}:$_->{key}:$_->{value}" }
		sort { $a->{partition} <=> $b->{partition} || $a->{offset} <=> $b->{offset} } @sent);
	is($node->safe_psql('postgres', q{
SELECT string_agg(f.partition || ':' || f."offset" || ':' || convert_from(f.key, 'UTF8') || ':'
                  || convert_from(f.value, 'UTF8'), ',' ORDER BY f.partition, f."offset")
  FROM generate_series(0, 3) p, mq_fetch('js', p, 0) f
 WHERE (f.headers[1]).key = 'via' AND convert_from((f.headers[1]).value, 'UTF8') = 'kafkajs'}),
		$placed, 'kafkajs: each record is in mq_fetch at the partition and offset kafkajs was told, with its header');
	my %want = map { $_->{key} => $_->{partition} } @sent;
	my %sqlp = split /[|\n]/, $node->safe_psql('postgres',
		"SELECT k, mq_partition_for_key(convert_to(k, 'UTF8'), 4) FROM unnest(ARRAY['" . join("','", sort keys %want) . "']) k");
	is_deeply(\%sqlp, \%want, 'kafkajs\'s default partitioner and mq_partition_for_key agree');
	my $got = $js->('consume', 'js', 'jsgroup', 8);
	is(join(',', sort map { "$_->{partition}:$_->{offset}:$_->{value}" } @$got),
		join(',', sort map { "$_->{partition}:$_->{offset}:$_->{value}" } @sent),
		'kafkajs: a subscribe()d group consumer gets every record once');
	my %per = ();
	$per{ $_->{partition} } = $_->{offset} + 1 for sort { $a->{offset} <=> $b->{offset} } @sent;
	is($node->safe_psql('postgres',
		q{SELECT string_agg("partition" || ':' || committed_offset, ',' ORDER BY "partition") FROM mqlog.consumer_lag WHERE group_id = 'jsgroup'}),
		join(',', map { "$_:$per{$_}" } sort { $a <=> $b } keys %per),
		'kafkajs: the group\'s commits are in mqlog.consumer_lag');
}

# --- fuzz ----------------------------------------------------------------
my ($ok_f, $out_f, $err_f) = run_cmd($python, $fuzz, '127.0.0.1', $kport, 15, 500, $max_frame, 'orders');
ok($ok_f, "500 fuzzed connections: $out_f") or diag($err_f);
my ($ok_l, $out_l) = run_cmd('kcat', '-b', $bootstrap, '-L', '-t', 'orders', '-m', '10');
like($out_l, qr/topic "orders" with 4 partitions/, 'the listener still answers after the fuzz');
is($node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	$listener_pid, 'the same listener process: no error ended it');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'}),
	0, 'no transaction is left open');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|was terminated by exception/, 'no server process died');
unlike($log, qr/kafka \w+ request from client .* failed, closing/,
	'no request ended in an error that escaped its handler');

$node->stop;
done_testing();
