# Topic auto-creation (doc/kafka.md, "Topic auto-creation"): a Metadata
# request that allows it and names a topic no node has creates it, as the
# request's role, with mqlog.kafka_num_partitions partitions; a Produce
# never does.  Real clients (kcat and confluent-kafka on librdkafka,
# kafka-python, kafkajs) produce to fresh topics, raw frames check the
# answers, SQL checks the catalog.
#
# Checks:
#  - on by default: kcat, confluent-kafka, kafka-python and kafkajs each
#    produce to a topic that does not exist, and the records are there, in
#    a topic of mqlog.kafka_num_partitions partitions owned by the role;
#  - Metadata v4 with allow_auto_topic_creation false creates nothing
#    (UNKNOWN_TOPIC_OR_PARTITION), true and v1 (always) create, and the
#    answer names the new topic's leader at once;
#  - a raw Produce to an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and
#    creates nothing;
#  - an invalid name is INVALID_TOPIC_EXCEPTION, a default replication
#    factor a single node cannot have INVALID_REPLICATION_FACTOR, and
#    neither creates anything;
#  - two kcat producers of one new topic at once both deliver, into one
#    topic; a Metadata request naming a topic that a SQL transaction is
#    creating meanwhile waits for it and describes that topic, no error,
#    or, if the transaction stays open, waits 500 ms at most and answers
#    LEADER_NOT_AVAILABLE;
#  - a Metadata request naming thousands of unknown topics is answered
#    within the request time budget (MQK_REQUEST_TIME_MS) plus a margin,
#    the names it had no time for LEADER_NOT_AVAILABLE;
#  - mqlog.kafka_auto_create_topics = off: kcat's records to a new topic
#    fail and nothing is created; DescribeConfigs shows the setting;
#  - a role that may not create topics (no EXECUTE on mq_create_topic):
#    TOPIC_AUTHORIZATION_FAILED, kcat fails, nothing created;
#  - a cluster of two nodes with mqlog.kafka_default_replication_factor
#    = 2: the same Metadata of 12 unknown names sent to both at once, round
#    after round, is always answered (never a closed connection, only 0 or
#    LEADER_NOT_AVAILABLE), and ends with one replicated topic per name on
#    both nodes and in etcd.
use strict;
use warnings;

use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use lib dirname(__FILE__);
use MqCluster;
use MqKafka qw(kafka_node kstr frame response connect_listener wait_for);

my $python = '/usr/bin/python3';
my $clients = dirname(__FILE__) . '/../kafka/clients.py';
my $admin_py = dirname(__FILE__) . '/../kafka/admin_clients.py';
my $kafkajs = dirname(__FILE__) . '/../kafka/kafkajs_client.js';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $node = kafka_node('autocreate', $kport, "mqlog.kafka_role = 'kafka_admin'\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_admin LOGIN IN ROLE mqlog_admin;
CREATE ROLE kafka_app LOGIN;
});

sub q1 { return $node->safe_psql('postgres', $_[0]) }

sub run_cmd
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return ($ok, $out, $err);
}

sub topic_row
{
	my ($t) = @_;
	return q1(qq{SELECT partitions || ' ' || replication_factor || ' ' || owner::regrole FROM mqlog.topic WHERE name = '$t'});
}

sub topic_count { return q1(q{SELECT count(*) FROM mqlog.topics}) }

# a Metadata v$v (1 or 4) frame naming @names
sub metadata_frame
{
	my ($v, $allow, @names) = @_;
	my $body = pack('N', scalar @names) . join('', map { kstr($_) } @names);
	$body .= pack('c', $allow) if $v >= 4;
	return frame(3, $v, $body);
}

# Metadata v$v (1 or 4) naming @names: {name => [error, partitions, leader of 0]}
sub metadata
{
	my ($v, $allow, @names) = @_;
	my $s = connect_listener($kport);
	print $s metadata_frame($v, $allow, @names);
	my $a = response($s);
	close $s;
	return parse_metadata($v, $a);
}

# a Metadata v$v answer: {name => [error, partitions, leader of 0]}
sub parse_metadata
{
	my ($v, $a) = @_;
	return undef unless defined $a;
	my $at = 4;
	$at += 4 if $v >= 3;    # throttle
	my $str = sub {
		my $l = unpack('n', substr($a, $at, 2));
		$at += 2;
		return undef if $l == 0xffff;
		my $x = substr($a, $at, $l);
		$at += $l;
		return $x;
	};
	my $nb = unpack('N', substr($a, $at, 4));
	$at += 4;
	foreach (1 .. $nb) { $at += 4; $str->(); $at += 4; $str->(); }
	$str->() if $v >= 2;    # cluster id
	$at += 4;                 # controller
	my %t;
	my $nt = unpack('N', substr($a, $at, 4));
	$at += 4;
	foreach (1 .. $nt)
	{
		my $err = unpack('n', substr($a, $at, 2));
		$at += 2;
		my $name = $str->();
		$at += 1;
		my $np = unpack('N', substr($a, $at, 4));
		$at += 4;
		my $leader0;
		foreach my $p (1 .. $np)
		{
			my ($perr, $idx, $leader) = unpack('nNl>', substr($a, $at, 10));
			$leader0 = $leader if $idx == 0;
			$at += 10;
			foreach (1 .. 2) { my $k = unpack('N', substr($a, $at, 4)); $at += 4 + 4 * $k; }
		}
		$t{$name} = [ $err, $np, $leader0 ];
	}
	return \%t;
}

# a kcat producer of @lines to $topic: (ok, stdout, stderr)
sub kcat_produce
{
	my ($topic, @lines) = @_;
	my ($out, $err) = ('', '');
	my $in = join("\n", @lines) . "\n";
	my $ok = IPC::Run::run([ 'kcat', '-P', '-b', $bootstrap, '-t', $topic,
			'-X', 'message.timeout.ms=8000', '-X', 'topic.metadata.refresh.interval.ms=500' ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	return ($ok, $out, $err);
}

sub records
{
	my ($t) = @_;
	return q1(qq{SELECT count(*) FROM mqlog.partitions p, mq_fetch(p.topic, p."partition", 0, 100000, 100000000)
		WHERE p.topic = '$t'});
}

# the listener's broker config as DescribeConfigs (confluent-kafka) shows it
sub broker_config
{
	my ($ok, $out, $err) = run_cmd($python, $admin_py, $bootstrap, 'confluent-describe', 'broker', '0');
	my %c;
	foreach my $line (grep { /^\{/ } split /\n/, $out)
	{
		my $e = decode_json($line);
		$c{ $e->{name} } = $e->{value} if defined $e->{name};
	}
	return \%c;
}

sub reload_and_wait
{
	my ($sql, $key, $want) = @_;
	q1("$sql; SELECT pg_reload_conf()");
	ok(wait_for(60, sub { (broker_config()->{$key} // '') eq $want }),
		"the listener took $key = $want");
}

connect_listener($kport);

# --- on by default: real clients produce to fresh topics ----------------------

is(broker_config()->{'auto.create.topics.enable'}, 'true', 'DescribeConfigs: auto.create.topics.enable is true by default');

my ($ok, $out, $err) = kcat_produce('kcat_auto', 'a', 'b', 'c');
ok($ok, 'kcat produces to a topic that did not exist') or diag($err);
is(topic_row('kcat_auto'), '1 1 kafka_admin', '... which Metadata created: 1 partition, factor 1, owned by the role');
is(records('kcat_auto'), 3, '... holding the 3 records');
like(slurp_file($node->logfile), qr/LOG:  Kafka client "rdkafka" created topic "kcat_auto" as role "kafka_admin" \(auto-creation/,
	'the creation is logged, with the client and the role');

($ok, $out, $err) = run_cmd($python, $clients, $bootstrap, 'confluent-produce', 'conf_auto', 'none', 5);
ok($ok, 'confluent-kafka produces to a fresh topic') or diag($err);
is(scalar(split /\n/, $out), 5, '... every record acknowledged');
is(records('conf_auto'), 5, '... and stored');

($ok, $out, $err) = run_cmd($python, $clients, $bootstrap, 'kafka-python-produce', 'kp_auto', 'none', 4);
ok($ok, 'kafka-python produces to a fresh topic') or diag($err);
is(records('kp_auto'), 4, '... and the records are there');

SKIP:
{
	skip 'kafkajs is not installed', 2 unless -d dirname(__FILE__) . '/../kafka/node_modules/kafkajs';
	($ok, $out, $err) = run_cmd('node', $kafkajs, $bootstrap, 'produce', 'js_auto', 'none', 3);
	ok($ok, 'kafkajs produces to a fresh topic') or diag($err);
	is(records('js_auto'), 3, '... and the records are there');
}

# --- raw Metadata and Produce ---------------------------------------------------

my $n = topic_count();
is_deeply(metadata(4, 0, 'v4_off'), { v4_off => [ 3, 0, undef ] },
	'Metadata v4 with allow_auto_topic_creation false: UNKNOWN_TOPIC_OR_PARTITION');
is(topic_count(), $n, '... and nothing is created');
is_deeply(metadata(4, 1, 'v4_on'), { v4_on => [ 0, 1, 0 ] },
	'Metadata v4 allowing it: created, partition 0 led by broker 0 in the same answer');
is_deeply(metadata(1, 0, 'v1_on'), { v1_on => [ 0, 1, 0 ] }, 'Metadata v1 (always allowed): created');
is(topic_count(), $n + 2, 'two topics more');

{
	# Produce v3 of one record batch to a topic nobody created
	my $s = connect_listener($kport);
	my $batch = pack('q>N', 0, 49) . pack('N', 0) . pack('C', 2) . pack('N', 0) . pack('n', 0)
	  . pack('N', 0) . pack('q>q>', 0, 0) . pack('q>nN', -1, -1, -1) . pack('N', 0);
	print $s frame(0, 3, pack('n', 0xffff) . pack('n', 1) . pack('N', 1000) . pack('N', 1)
		  . kstr('produce_only') . pack('N', 1) . pack('N', 0) . pack('N', length $batch) . $batch);
	my $a = response($s);
	my ($nt, $tl) = unpack('Nn', substr($a, 4, 6));
	my $perr = unpack('n', substr($a, 4 + 6 + $tl + 4 + 4, 2));
	is($perr, 3, 'a Produce to an unknown topic: UNKNOWN_TOPIC_OR_PARTITION');
	is(topic_count(), $n + 2, '... and it creates nothing');
}

is_deeply(metadata(1, 1, 'bad name'), { 'bad name' => [ 17, 0, undef ] }, 'an invalid name: INVALID_TOPIC_EXCEPTION');
is(topic_count(), $n + 2, '... nothing created');

# Kafka's rules beyond the characters: a name that collides with a topic's
# modulo '.' and '_' is INVALID_TOPIC_EXCEPTION, and Kafka's internal
# topics are never a client's ordinary topic (mqlog has none of them: the
# answer is as for a topic that does not exist and will not be created)
q1(q{SELECT mq_create_topic('dotted_name')});
$n = topic_count();
is_deeply(metadata(4, 1, 'dotted.name', 'dotted_name'), { 'dotted.name' => [ 17, 0, undef ], 'dotted_name' => [ 0, 1, 0 ] },
	'dotted.name beside dotted_name: INVALID_TOPIC_EXCEPTION (and dotted_name described)');
is_deeply(metadata(1, 1, '__consumer_offsets', '__transaction_state'),
	{ '__consumer_offsets' => [ 3, 0, undef ], '__transaction_state' => [ 3, 0, undef ] },
	'__consumer_offsets and __transaction_state: UNKNOWN_TOPIC_OR_PARTITION, not created');
{
	my ($ok, $out, $err) = kcat_produce('dotted.name', 'x');
	ok(!$ok, 'kcat cannot produce to dotted.name') or diag($err);
}
is(topic_count(), $n, '... nothing created');
my ($sql_ret, $sql_out, $sql_err) = $node->psql('postgres', q{SELECT mq_create_topic('dotted.name')});
like($sql_err, qr/topic "dotted\.name" collides with existing topic "dotted_name"/, 'mq_create_topic refuses the collision too');
# a replicated topic of the cluster held elsewhere (a row of this node's
# copy of the directory, as the cluster sync writes it) collides too
q1(q{INSERT INTO mqlog.cluster_partition VALUES ('far.away', 0, 'u-1', '{n2}', 'n2', 0, '{n2}', 1)});
($sql_ret, $sql_out, $sql_err) = $node->psql('postgres', q{SELECT mq_create_topic('far_away')});
like($sql_err, qr/topic "far_away" collides with existing topic "far\.away"/, 'and with a replicated topic of the cluster held elsewhere');
q1(q{DELETE FROM mqlog.cluster_partition});
($sql_ret, $sql_out, $sql_err) = $node->psql('postgres', q{SELECT mq_create_topic('__consumer_offsets')});
like($sql_err, qr/topic name "__consumer_offsets" is reserved/, 'and Kafka\'s internal names');
is(topic_count(), $n, '... nothing created');
{
	# a SQL transaction creating race.dot, still open: the listener's
	# creation of race_dot waits on the collision index, 500 ms at most,
	# then the collision once it commits
	my $bg = $node->background_psql('postgres', on_error_stop => 1);
	$bg->query_safe(q{BEGIN; SELECT mq_create_topic('race.dot')});
	is_deeply(metadata(4, 1, 'race_dot'), { race_dot => [ 5, 0, undef ] },
		'race_dot while race.dot is being created: LEADER_NOT_AVAILABLE');
	$bg->query_safe('COMMIT');
	$bg->quit;
	is_deeply(metadata(4, 1, 'race_dot'), { race_dot => [ 17, 0, undef ] }, '... then INVALID_TOPIC_EXCEPTION');
	is(q1(q{SELECT string_agg(topic, ',') FROM mqlog.topics WHERE topic LIKE 'race_dot' OR topic = 'race.dot'}),
		'race.dot', '... race.dot alone was created');
}
$n = topic_count();

# --- concurrent creators -----------------------------------------------------------

{
	my @h;
	my @res;
	foreach my $i (0, 1)
	{
		my $in = join("\n", map { "r$i-$_" } 1 .. 10) . "\n";
		$res[$i] = { out => '', err => '' };
		push @h, IPC::Run::start([ 'kcat', '-P', '-b', $bootstrap, '-t', 'race2', '-X', 'message.timeout.ms=8000' ],
			'<', \$in, '>', \$res[$i]{out}, '2>', \$res[$i]{err}, IPC::Run::timeout(60));
	}
	my @ok = map { $_->finish } @h;
	ok($ok[0] && $ok[1], 'two kcat producers of one new topic at once: both succeed')
	  or diag($res[0]{err}, $res[1]{err});
	is(q1(q{SELECT count(*) FROM mqlog.topics WHERE topic = 'race2'}), 1, '... one topic');
	is(records('race2'), 20, '... holding the records of both');
}

{
	# a SQL transaction creates "race_sql" and commits as soon as the
	# listener's creation of the same name waits for it: the listener then
	# finds the topic SQL made
	my $bg = $node->background_psql('postgres', on_error_stop => 1);
	$bg->query_safe(q{BEGIN; SELECT mq_create_topic('race_sql', 2)});
	my $s = connect_listener($kport);
	print $s frame(3, 1, pack('N', 1) . kstr('race_sql'));
	$bg->query_until(qr/committed/, q{
DO $$ BEGIN
  WHILE NOT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                     WHERE NOT l.granted AND a.backend_type = 'mqlog kafka listener') LOOP
    PERFORM pg_sleep(0.005);
  END LOOP;
END $$;
COMMIT;
\echo committed
});
	is_deeply(parse_metadata(1, response($s)), { race_sql => [ 0, 2, 0 ] },
		'a Metadata naming a topic SQL is creating waits, then describes the topic SQL created: 2 partitions, no error');
	is(q1(q{SELECT count(*) FROM mqlog.topics WHERE topic = 'race_sql'}), 1, '... one topic');

	# one that stays open: the listener waits no longer than its lock_timeout
	$bg->query_safe(q{BEGIN; SELECT mq_create_topic('race_open', 3)});
	my $t0 = time;
	is_deeply(metadata(1, 1, 'race_open'), { race_open => [ 5, 0, undef ] },
		'a topic an open SQL transaction is creating: LEADER_NOT_AVAILABLE, the client asks again');
	my $waited = time - $t0;
	cmp_ok($waited, '<', 3, "... after a bounded wait (${waited}s; lock_timeout 500 ms)");
	$bg->query_safe('COMMIT');
	$bg->quit;
	is_deeply(metadata(1, 1, 'race_open'), { race_open => [ 0, 3, 0 ] }, '... and once it commits, the topic');
}

# --- bounded: thousands of unknown names ---------------------------------------------

{
	my $names = 5000;
	my $t0 = time;
	my $md = metadata(1, 1, map { sprintf('many-%05d', $_) } 1 .. $names);
	my $secs = time - $t0;
	ok(defined $md && keys %$md == $names, "Metadata naming $names unknown topics is answered, every name");
	my $created = grep { $_->[0] == 0 } values %$md;
	my $later = grep { $_->[0] == 5 } values %$md;
	note("created $created of $names in ${secs}s, $later LEADER_NOT_AVAILABLE");
	cmp_ok($created, '>=', 1, '... at least one created');
	is($created + $later, $names, '... the rest LEADER_NOT_AVAILABLE, to be asked again');
	cmp_ok($secs, '<', 20, '... within the time budget and the answer\'s cost');
	is(q1(q{SELECT count(*) FROM mqlog.topics WHERE topic LIKE 'many-%'}), $created,
		'... the topics answered as created are those created');
}

# --- the settings -----------------------------------------------------------------

reload_and_wait(q{ALTER SYSTEM SET mqlog.kafka_num_partitions = 3}, 'num.partitions', '3');
($ok, $out, $err) = kcat_produce('three', 'x', 'y');
ok($ok, 'kcat produces to a fresh topic with mqlog.kafka_num_partitions = 3') or diag($err);
is(topic_row('three'), '3 1 kafka_admin', '... created with 3 partitions');

reload_and_wait(q{ALTER SYSTEM SET mqlog.kafka_default_replication_factor = 2},
	'default.replication.factor', '2');
$n = topic_count();
is_deeply(metadata(1, 1, 'rf_two'), { rf_two => [ 38, 0, undef ] },
	'a default replication factor of 2 on a single node: INVALID_REPLICATION_FACTOR');
is(topic_count(), $n, '... nothing created');
q1(q{ALTER SYSTEM RESET mqlog.kafka_default_replication_factor});

reload_and_wait(q{ALTER SYSTEM SET mqlog.kafka_auto_create_topics = off}, 'auto.create.topics.enable', 'false');
$n = topic_count();
is_deeply(metadata(1, 1, 'off_raw'), { off_raw => [ 3, 0, undef ] },
	'auto-creation off: UNKNOWN_TOPIC_OR_PARTITION');
($ok, $out, $err) = kcat_produce('off_kcat', 'a');
like($err, qr/Delivery failed/,
	'auto-creation off: kcat\'s record to a new topic fails (librdkafka waits for the topic, then times out)') or diag("ok=$ok out=$out err=$err");
is(topic_count(), $n, '... nothing created');
reload_and_wait(q{ALTER SYSTEM RESET mqlog.kafka_auto_create_topics}, 'auto.create.topics.enable', 'true');

# --- a role that may not create topics -------------------------------------------------

q1(q{ALTER SYSTEM SET mqlog.kafka_role = 'kafka_app'; SELECT pg_reload_conf()});
ok(wait_for(60, sub { (metadata(1, 1, 'kcat_auto')->{kcat_auto}[0] // -1) == 29 }),
	'the listener acts as kafka_app');
$n = topic_count();
is_deeply(metadata(1, 1, 'app_new'), { app_new => [ 29, 0, undef ] },
	'a role without EXECUTE on mq_create_topic: TOPIC_AUTHORIZATION_FAILED');
is_deeply(metadata(4, 0, 'app_new'), { app_new => [ 3, 0, undef ] },
	'... and UNKNOWN_TOPIC_OR_PARTITION when the request does not allow creation');
($ok, $out, $err) = kcat_produce('app_kcat', 'a');
like($err, qr/authoriz/i, 'kcat as that role: its record fails, not authorized') or diag("out=$out err=$err");
is(topic_count(), $n, '... nothing created');

q1(q{GRANT EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) TO kafka_app});
is_deeply(metadata(1, 1, 'app_new'), { app_new => [ 0, 3, 0 ] }, 'granted EXECUTE, it creates');
is(topic_row('app_new'), '3 1 kafka_app', '... owned by kafka_app, with num.partitions 3');

# the answer describes the new topic whatever the transactions' isolation
q1(q{ALTER SYSTEM SET default_transaction_isolation = 'repeatable read'; SELECT pg_reload_conf()});
sleep 1;
metadata(1, 1, 'app_new');    # a turn of the listener's loop: it has reloaded
is_deeply(metadata(1, 1, 'rr_new'), { rr_new => [ 0, 3, 0 ] },
	'repeatable read: a topic created by the request is described in its answer');

$node->stop;

# --- a cluster: two nodes auto-create the same replicated names at once ------------

{
	my $etcd = MqCluster::start_etcd();
	my ($cnodes, $ckafka) = MqKafka::new_nodes($etcd, 2, "mqlog.kafka_default_replication_factor = 2\n");
	my @cn = @$cnodes;
	my @ports = map { ($ckafka->{ $_->name } =~ /:(\d+)$/)[0] } @cn;
	$_->start for @cn;
	foreach my $n (@cn)
	{
		MqCluster::create_extension($n);
		$n->safe_psql('postgres', q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app;});
	}
	ok(MqCluster::wait_alive($cn[0], 2) && MqCluster::wait_alive($cn[1], 2), 'a cluster of two nodes');
	ok(MqCluster::wait_until(sub {
			$cn[1]->safe_psql('postgres', q{SELECT count(*) FROM mqlog.nodes WHERE broker_id IS NOT NULL}) == 2 }, 30),
		'both listeners have broker ids');

	# each round: the same Metadata v1 of 12 names to both nodes at once,
	# until both describe every name; a request creates one replicated
	# topic at most, the rest LEADER_NOT_AVAILABLE
	my @names = map { sprintf('both-%02d', $_) } 1 .. 12;
	my ($rounds, $closed, $bad) = (0, 0, 0);
	my $done = 0;
	my $deadline = time + 90;
	while (!$done && time < $deadline)
	{
		$rounds++;
		my @socks = map { connect_listener($_) } @ports;
		print $_ metadata_frame(1, 1, @names) for @socks;
		my @answers = map { parse_metadata(1, response($_)) } @socks;
		close $_ for @socks;
		$done = 1;
		foreach my $md (@answers)
		{
			if (!defined $md) { $closed++; $done = 0; next; }
			foreach my $t (@names)
			{
				my $e = $md->{$t}[0] // -1;
				$bad++ if $e != 0 && $e != 5;
				$done = 0 if $e != 0;
			}
		}
		usleep(200_000) unless $done;
	}
	ok($done, "both nodes describe all 12 names after $rounds rounds");
	is($closed, 0, 'no request of either client was closed');
	is($bad, 0, 'no answer had an error other than LEADER_NOT_AVAILABLE meanwhile');
	# Metadata answers from the cluster's view (etcd); a node's own catalog
	# takes a topic its cluster worker has not placed yet a moment later,
	# so wait for it (the name is unique: a count never passes 12)
	my $both = q{SELECT count(*) || ' ' || min(replication_factor) FROM mqlog.topics WHERE topic LIKE 'both-%'};
	foreach my $n (@cn)
	{
		MqCluster::wait_until(sub { $n->safe_psql('postgres', $both) eq '12 2' }, 60);
		is($n->safe_psql('postgres', $both), '12 2', $n->name . ': one replicated topic per name (factor 2)');
	}
	is(scalar(split /\n/, MqCluster::etcd_keys($etcd, 'topics/both-')), 12, 'etcd: one topic key per name');
	foreach my $n (@cn)
	{
		unlike(slurp_file($n->logfile), qr/failed, closing its connection/, $n->name . ': no request failed');
	}
	$_->stop for @cn;
	MqCluster::stop_etcd($etcd);
}

done_testing();
