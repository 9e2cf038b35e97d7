# The Kafka listener on a cluster (doc/kafka.md, "Several nodes"), on one
# real etcd and three real nodes on loopback, each with a Kafka listener on
# a port of its own, driven by confluent-kafka (librdkafka 2.0) and raw
# requests (test/kafka/cluster.py):
#  - every node takes a broker id of its own in etcd (broker_ids/), shown
#    the same by mqlog.nodes on every node;
#  - Metadata from each node lists the three brokers with those ids and
#    addresses, one controller and cluster id, and each partition of a
#    replicated topic led by its leader node's broker, with its replicas,
#    ISR and leader epoch as etcd has them; confluent-kafka and kcat see
#    the same;
#  - Produce, Fetch and ListOffsets to a node that does not lead the
#    partition answer NOT_LEADER_OR_FOLLOWER; to the leader they work;
#  - a producer bootstrapped at a follower produces with acks=all and the
#    records are on the leader and on both followers (SQL on each); a
#    consumer bootstrapped at another node reads them (from the leader: the
#    others refuse its fetches);
#  - kill -9 of a leader while an idempotent producer (bootstrapped at a
#    follower) produces: the elector fails the partition over, Metadata
#    names the new leader at epoch 1 and no longer lists the dead broker,
#    the producer goes on through the new leader, a new producer too, and a
#    consumer reads every acknowledged record at the offset it was
#    acknowledged at; each of the producer's records is there once, in
#    order (the new leader rebuilt the producer's state from its log);
#  - acks=all below min.insync.replicas is NOT_ENOUGH_REPLICAS; one the
#    in-sync replicas do not acknowledge in time is REQUEST_TIMED_OUT;
#  - the dead node comes back with the same broker id, listed again, and
#    refuses Produce to the partition it no longer leads;
#  - mq_elect_leader under a running producer: nothing acknowledged lost;
#  - a reload of mqlog.kafka_advertised_listener reaches the others' Metadata;
#  - a Kafka commit's metadata string reaches the other nodes with its
#    offset, and a reset's offset clears it there.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use JSON::PP;
use MqCluster;
use MqKafka;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my ($script, $python) = ($MqKafka::SCRIPT, $MqKafka::PYTHON);

my $etcd = MqCluster::start_etcd();
my ($nodes, $kafka) = MqKafka::start_nodes($etcd, 3, "mqlog.acks_timeout = 3000\n");
my @nodes = @$nodes;
my %kafka = %$kafka;
my ($n1, $n2, $n3) = @nodes;
my %by_name = map { $_->name => $_ } @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub run_script { return MqKafka::cluster_py(@_) }
sub metadata { my ($n, $what) = @_; return MqKafka::metadata($kafka{$n}, $what) }

# --- broker ids ------------------------------------------------------------

# node => broker id, as etcd's broker_ids/ keys have them
sub etcd_broker_ids
{
	my ($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--prefix', "/mqlog/$MqCluster::CLUSTER_NAME/broker_ids/");
	my %ids;
	my @lines = split /\n/, $out;
	while (my ($k, $v) = splice(@lines, 0, 2))
	{
		$ids{ decode_json($v)->{node} } = $1 + 0 if $k =~ m{/broker_ids/(\d+)$};
	}
	return \%ids;
}

sub nodes_view
{
	my ($n) = @_;
	return q1($n, q{SELECT string_agg(node || '=' || coalesce(broker_id::text, '?') || '@' || coalesce(kafka_listener, '?'), ',' ORDER BY node) FROM mqlog.nodes});
}

my $want_view;
ok(MqCluster::wait_until(sub {
		my $ids = etcd_broker_ids();
		return 0 unless keys %$ids == 3;
		$want_view = join(',', map { "$_=$ids->{$_}\@$kafka{$_}" } sort keys %$ids);
		return !grep { nodes_view($_) ne $want_view } @nodes;
	}, 30), 'every node took a broker id in etcd, and mqlog.nodes on every node shows the ids and listeners')
  or diag(join("\n", map { nodes_view($_) } @nodes));
my %id = %{ etcd_broker_ids() };
note("broker ids: $want_view");
my %ids_seen = map { $_ => 1 } values %id;
is(scalar(keys %ids_seen), 3, 'three different broker ids');
ok(!grep({ $_ < 1 } values %id), 'cluster broker ids start at 1 (0 is a single node\'s)');
my %name_of = reverse %id;

# --- Metadata from every node ----------------------------------------------

q1($n1, q{SELECT mq_create_topic('kc', 3, replication_factor => 3, config => '{"min.insync.replicas": 2}')});
q1($n1, q{SELECT mq_create_topic('kc3', 1, replication_factor => 3, config => '{"min.insync.replicas": 3}')});
foreach my $n (@nodes)
{
	ok(MqCluster::wait_topic($n, 'kc', 3) && MqCluster::wait_topic($n, 'kc3', 1),
		$n->name . ' holds kc and kc3');
}

sub canon { return MqKafka::canon(@_) }

sub want_partitions { my ($n, $topic) = @_; return MqKafka::want_partitions($n, $topic, \%id) }

my %all_brokers = map { $id{$_} => $kafka{$_} } keys %id;
my ($lowest) = sort { $a <=> $b } values %id;
my %leader_of;
foreach my $p (0 .. 2)
{
	$leader_of{$p} = q1($n1, qq{SELECT leader FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = $p});
}
is_deeply([ map { $leader_of{$_} } 0 .. 2 ], [qw(n1 n2 n3)], 'kc is placed round-robin: partition p led by node p+1');
foreach my $n (@nodes)
{
	my $name = $n->name;
	my $md;
	my $want = want_partitions($n1, 'kc');
	ok(MqCluster::wait_until(sub {
			$md = metadata($name);
			return $md->{topics}{kc} && canon($md->{topics}{kc}{partitions}) eq canon($want);
		}, 20), "Metadata from $name: every partition of kc led by its leader's broker, epoch 0, replicas and ISR as broker ids")
	  or diag(explain($md));
	is_deeply($md->{brokers}, \%all_brokers, "... the three brokers with their ids and listeners");
	is($md->{controller}, $lowest, '... the controller is the lowest broker id');
	is($md->{cluster_id}, "mqlog-$MqCluster::CLUSTER_NAME", '... one cluster id on every node');
}
{
	my $md = metadata('n2', 'confluent-metadata');
	is_deeply($md->{brokers}, \%all_brokers, 'confluent-kafka sees the three brokers');
	is_deeply({ map { $_ => $md->{topics}{kc}{$_}{leader} } keys %{ $md->{topics}{kc} } },
		{ map { $_ => $id{ $leader_of{$_} } } 0 .. 2 }, '... and the leader of each partition of kc');
}

{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'kcat', '-b', $kafka{n3}, '-L', '-J', '-t', 'kc' ], '>', \$out, '2>', \$err,
				  IPC::Run::timeout(60));
	my $md = eval { decode_json($out) } // {};
	is_deeply({ map { $_->{id} => $_->{name} } @{ $md->{brokers} // [] } }, \%all_brokers,
		'kcat -L -J at n3 lists the three brokers');
	is_deeply({ map { $_->{partition} => $_->{leader} } @{ $md->{topics}[0]{partitions} // [] } },
		{ map { $_ => $id{ $leader_of{$_} } } 0 .. 2 }, '... and the leader of each partition of kc')
	  or diag($out, $err);
	IPC::Run::run([ 'kcat', '-b', $kafka{n2}, '-L', '-t', 'kc' ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	note("kcat -L at n2:\n$out");
}

# --- requests to a node that does not lead the partition ---------------------

is(run_script($kafka{n2}, 'raw-errors', 'kc', 0), "produce 6\nfetch 6\nlist_offsets 6\n",
	'Produce, Fetch and ListOffsets of kc/0 on n2, a follower: NOT_LEADER_OR_FOLLOWER');
is(q1($n2, q{SELECT log_end_offset FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 0}), '0',
	'... and nothing was written');

# --- produce through a follower, consume anywhere -----------------------------

sub values_of
{
	my ($n, $topic, $p) = @_;
	return q1($n, qq{
SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '')
  FROM mq_fetch('$topic', $p, mq_earliest_offset('$topic', $p), 100000)});
}

my %acked;    # partition => { offset => value }
foreach my $p (0 .. 2)
{
	my $leader = $leader_of{$p};
	my ($via) = grep { $_ ne $leader } map { $_->name } @nodes[ ($p + 1) % 3, ($p + 2) % 3 ];
	my $out = run_script($kafka{$via}, 'produce', 'kc', $p, "a$p", 20);
	my @acks = $out =~ /^ack (\S+) (\d+)$/mg;
	my %a = reverse @acks;
	is(scalar(keys %a), 20, "a producer bootstrapped at $via (a follower of kc/$p) has 20 records acknowledged (acks=all)")
	  or diag($out);
	is(join(',', map { $a{$_} } sort { $a <=> $b } keys %a), join(',', map { "a$p-$_" } 0 .. 19),
		'... at offsets 0 to 19, in order');
	$acked{$p} = \%a;
	my $want = join(',', map { "a$p-$_" } 0 .. 19);
	ok(MqCluster::wait_until(sub { !grep { values_of($_, 'kc', $p) ne $want } @nodes }, 30),
		"... and they are on the leader $leader and on both followers");
	my ($reader) = grep { $_ ne $via && $_ ne $leader } map { $_->name } @nodes;
	$out = run_script($kafka{$reader}, 'consume', 'kc', $p, 20);
	is($out, join('', map { "$_ a$p-$_\n" } 0 .. 19),
		"a consumer bootstrapped at $reader reads them from the leader $leader");
}
is(run_script($kafka{n1}, 'raw-errors', 'kc', 2), "produce 6\nfetch 6\nlist_offsets 6\n",
	'Produce, Fetch and ListOffsets of kc/2 on n1: NOT_LEADER_OR_FOLLOWER');

# acks=all that the in-sync replicas do not acknowledge within mqlog.acks_timeout
my @apply = map { split /\n/, q1($_, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog apply'}) } ($n1, $n3);
kill 'STOP', @apply;
my $raw = run_script($kafka{n2}, 'raw-errors', 'kc', 1);
kill 'CONT', @apply;
is($raw, "produce 7\nfetch 0\nlist_offsets 0\n",
	'acks=all to kc/1 on n2 while its followers apply nothing: REQUEST_TIMED_OUT after mqlog.acks_timeout, not an acknowledgement');
ok(MqCluster::wait_until(sub { values_of($n1, 'kc', 1) eq join(',', map({ "a1-$_" } 0 .. 19), 'raw') }, 30),
	'... though the record is committed on the leader, and reaches the followers afterwards');

# --- kill -9 of a leader, with a producer running ------------------------------

my $log = PostgreSQL::Test::Utils::tempdir('kafka') . '/producer.out';
my $producer = MqCluster::fork_child(sub {
	open(STDOUT, '>', $log) or die $!;
	$ENV{MQ_IDEMPOTENT} = 1;    # enable.idempotence: the new leader rebuilds its state
	exec($python, $script, $kafka{n3}, 'produce', 'kc', 0, 'f', 150, 40) or die "exec: $!";
});
sub producer_acks { my $t = -e $log ? slurp_file($log) : ''; my @a = $t =~ /^ack (\S+) (\d+)$/mg; return @a; }
ok(MqCluster::wait_until(sub { producer_acks() >= 20 }, 30), 'the producer bootstrapped at n3 has records acknowledged by n1');
$n1->kill9;
my $t_kill = time();
my $acks_at_kill = producer_acks() / 2;
my $new_leader;
ok(MqCluster::wait_until(sub {
		my $l2 = q1($n2, q{SELECT leader || '/' || leader_epoch FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 0});
		my $l3 = q1($n3, q{SELECT leader || '/' || leader_epoch FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 0});
		($new_leader) = $l2 =~ m{^(n[23])/1$};
		return $new_leader && $l2 eq $l3;
	}, 30), 'after kill -9 of n1 the elector fails kc/0 over at epoch 1');
note(sprintf('kill -9 to the new leader: %.1f s', time() - $t_kill));
my ($other) = grep { $_ ne $new_leader } qw(n2 n3);

is(MqCluster::wait_child($producer, 120), 0, 'the producer ends');
my $plog = slurp_file($log);
unlike($plog, qr/^fail/m, '... with no record failed') or diag($plog);
like($plog, qr/^done$/m, '... and flushed');
my %f = reverse(producer_acks());
is(scalar(keys %f), 150, '... every record acknowledged, those produced after the kill through the new leader');
cmp_ok($acks_at_kill, '<', 150, "... $acks_at_kill of them before the kill");

my $out = run_script($kafka{$other}, 'produce', 'kc', 0, 'g', 10);
my %g = reverse($out =~ /^ack (\S+) (\d+)$/mg);
is(scalar(keys %g), 10, "a new producer bootstrapped at $other produces to kc/0 on the new leader $new_leader");

my ($md, $want);
ok(MqCluster::wait_until(sub {
		$md = metadata($other);
		$want = want_partitions($by_name{$other}, 'kc');
		$_->{offline} = [ $id{n1} ] for values %$want;
		return $md->{topics}{kc} && canon($md->{topics}{kc}{partitions}) eq canon($want);
	}, 20), "Metadata from $other: every partition of kc as $other has it, n1 offline")
  or diag(explain($md), explain($want));
is($md->{topics}{kc}{partitions}{0}{leader}, $id{$new_leader}, '... the new leader');
is($md->{topics}{kc}{partitions}{0}{epoch}, 1, '... at epoch 1');
is_deeply($md->{brokers}, { map { $id{$_} => $kafka{$_} } qw(n2 n3) }, '... and the dead broker is not listed');

# every acknowledged record, at the offset it was acknowledged at
my %all = (%{ $acked{0} }, %f, %g);
is(scalar(keys %all), 20 + 150 + 10, 'no two acknowledged records share an offset');
my $hw = q1($by_name{$new_leader}, q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 0});
$out = run_script($kafka{$other}, 'consume', 'kc', 0, $hw);
my %read = $out =~ /^(\d+) (\S+)$/mg;
is(scalar(keys %read), $hw, "a consumer bootstrapped at $other reads kc/0 up to its high watermark ($hw)");
my @lost = grep { ($read{$_} // '') ne $all{$_} } sort { $a <=> $b } keys %all;
is(scalar(@lost), 0, 'every acknowledged record is there, at the offset it was acknowledged at: nothing acknowledged is lost')
  or diag('lost: ' . join(' ', map { "$_=$all{$_}" } @lost));
ok(MqCluster::wait_until(sub { values_of($by_name{$other}, 'kc', 0) eq values_of($by_name{$new_leader}, 'kc', 0) }, 30),
	'... and the other follower holds the same records');
{
	my %seen;
	my @f = grep { /^f-/ } split /,/, values_of($by_name{$new_leader}, 'kc', 0);
	my @twice = grep { $seen{$_}++ } @f;
	is(scalar(@twice), 0, 'the idempotent producer\'s records are each stored once across the failover')
	  or diag("twice: @twice");
	is(join(',', @f), join(',', map { "f-$_" } 0 .. 149), '... all of them, in order');
	cmp_ok(q1($by_name{$new_leader}, q{SELECT count(*) FROM mq_fetch_kafka_batches('kc', 0, 0, 100000000)
		WHERE substr(batch, 44, 8) <> '\\xffffffffffffffff'::bytea}), '>', 0, '... in batches that carry its producer id');
}

# acks=all below min.insync.replicas
my $kc3_leader;
ok(MqCluster::wait_until(sub {
		($kc3_leader) = q1($n2, q{SELECT leader FROM mqlog.partitions WHERE topic = 'kc3' AND leader_epoch = 1 AND NOT 'n1' = ANY (isr)}) =~ /^(n[23])$/;
		return $kc3_leader && q1($by_name{$kc3_leader}, q{SELECT array_length(isr, 1) FROM mqlog.partitions WHERE topic = 'kc3'}) eq '2';
	}, 30), 'kc3 (min.insync.replicas 3) failed over too, with two in-sync replicas');
is(run_script($kafka{$kc3_leader}, 'raw-errors', 'kc3', 0), "produce 19\nfetch 0\nlist_offsets 0\n",
	"Produce with acks=-1 to kc3 on its leader $kc3_leader: NOT_ENOUGH_REPLICAS; Fetch and ListOffsets work");

# --- the dead node comes back ---------------------------------------------------

$n1->start;
ok(MqCluster::wait_alive($n1, 3) && MqCluster::wait_alive($n2, 3), 'n1 is back');
ok(MqCluster::wait_until(sub { nodes_view($n1) eq $want_view && nodes_view($n2) eq $want_view }, 30),
	'n1 kept its broker id across the restart');
is_deeply(etcd_broker_ids(), \%id, '... and etcd holds the same three ids, no new one');
ok(MqCluster::wait_until(sub {
		$md = metadata('n1');
		return keys %{ $md->{brokers} // {} } == 3 && ($md->{topics}{kc}{partitions}{0}{leader} // -1) == $id{$new_leader};
	}, 30), "Metadata from n1 lists the three brokers again, and kc/0 led by $new_leader")
  or diag(explain($md));
is(run_script($kafka{n1}, 'raw-errors', 'kc', 0), "produce 6\nfetch 6\nlist_offsets 6\n",
	'n1, a follower of kc/0 now, refuses Produce, Fetch and ListOffsets of it');

# mq_elect_leader under a running producer: the old leader answers
# NOT_LEADER_OR_FOLLOWER, the client refreshes its metadata and goes on at
# the new.  The producer sends one record every 30 ms, however loaded the
# machine, while the waits and the move below take longer the more it is:
# 300 records (9 s) leave it running through the move (it had sent 35 of
# 100 by then at a load of 10).
my $e_count = 300;
$log = PostgreSQL::Test::Utils::tempdir('kafka') . '/producer.out';
$producer = MqCluster::fork_child(sub {
	open(STDOUT, '>', $log) or die $!;
	exec($python, $script, $kafka{n1}, 'produce', 'kc', 1, 'e', $e_count, 30) or die "exec: $!";
});
ok(MqCluster::wait_until(sub { producer_acks() >= 20 }, 30), 'a producer bootstrapped at n1 has records of kc/1 acknowledged by n2');
ok(MqCluster::wait_until(sub {
		q1($n2, q{SELECT 'n3' = ANY (isr) FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 1}) eq 't' }, 30),
	'n3 is in the ISR of kc/1');
is(q1($n2, q{SELECT mq_elect_leader('kc', 1, 'n3')}), '1', 'mq_elect_leader moves kc/1 from n2 to n3 at epoch 1');
my $acks_at_elect = producer_acks() / 2;
cmp_ok($acks_at_elect, '<', $e_count, "... while the producer runs ($acks_at_elect acknowledged by then)");
is(MqCluster::wait_child($producer, 120), 0, 'the producer ends');
$plog = slurp_file($log);
unlike($plog, qr/^fail/m, '... with no record failed') or diag($plog);
my %e = reverse(producer_acks());
is(scalar(keys %e), $e_count, '... every record acknowledged, by n2 and then by n3');
$hw = q1($n3, q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'kc' AND "partition" = 1});
$out = run_script($kafka{n1}, 'consume', 'kc', 1, $hw);
%read = $out =~ /^(\d+) (\S+)$/mg;
@lost = grep { ($read{$_} // '') ne $e{$_} } sort { $a <=> $b } keys %e;
is(scalar(@lost), 0, 'a consumer reads every one at the offset it was acknowledged at')
  or diag('lost: ' . join(' ', map { "$_=$e{$_}" } @lost));
is((metadata('n2')->{topics}{kc}{partitions}{1}{leader} // -1), $id{n3}, 'Metadata from n2, the old leader, names n3');

# a reload of mqlog.kafka_advertised_listener reaches the other nodes' Metadata
my ($kport3) = $kafka{n3} =~ /:(\d+)$/;
$n3->append_conf('postgresql.conf', "mqlog.kafka_advertised_listener = 'localhost:$kport3'\n");
$n3->reload;
ok(MqCluster::wait_until(sub {
		q1($n1, q{SELECT kafka_listener FROM mqlog.nodes WHERE node = 'n3'}) eq "localhost:$kport3"
		  && (metadata('n1')->{brokers}{ $id{n3} } // '') eq "localhost:$kport3";
	}, 30), 'a reload of n3\'s mqlog.kafka_advertised_listener reaches etcd, mqlog.nodes and Metadata on n1');
is(metadata('n3')->{brokers}{ $id{n3} }, "localhost:$kport3", '... and n3\'s own Metadata');

# a Kafka commit's metadata string travels with its offset to the other nodes
my $group_admin = "$FindBin::RealBin/../kafka/group_admin.py";
my ($ga_out, $ga_err);
IPC::Run::run([ $python, $group_admin, $kafka{n3}, 'kp-commit', 'kmeta', 'kc', 1, 1, 'meta-rep' ],
	'>', \$ga_out, '2>', \$ga_err, IPC::Run::timeout(120));
like($ga_out // '', qr/"committed": true/, 'kafka-python commits kc/1 with a metadata string at n3')
  or diag($ga_err);
my $kmeta = q{SELECT c.committed_offset || ' ' || coalesce(c.metadata, '(none)') FROM mqlog.committed_offset c
               JOIN mqlog.topic t USING (topic_id) WHERE c.group_id = 'kmeta' AND t.name = 'kc' AND c.partition = 1};
foreach my $n ($n1, $n2)
{
	ok(MqCluster::wait_until(sub { q1($n, $kmeta) eq '1 meta-rep' }, 30),
		$n->name . ': the offset arrives with its metadata') or diag(q1($n, $kmeta));
}
q1($n3, q{SELECT mq_reset_offsets('kmeta', 'kc', 'earliest')});
ok(MqCluster::wait_until(sub { q1($n1, $kmeta) =~ /^\d+ \(none\)$/ }, 30),
	'n1: a reset at n3 clears the metadata there too') or diag(q1($n1, $kmeta));

$_->stop for @nodes;
MqCluster::stop_etcd($etcd);
done_testing();
