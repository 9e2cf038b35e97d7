# A full disk on a follower and on a leader (doc/failover.md; issue 30),
# on one real etcd and three real nodes on loopback.  Node n3 keeps its
# log on a small file system of its own: a 64 MB tmpfs in a user and
# mount namespace (MqCluster::small_fs; its postmaster runs there), made
# its default_tablespace before the topic exists, so that every segment
# of the topic on n3 is there while its WAL and catalog are not.  While
# concurrent acks=all producers (and one that rolls back some of its
# transactions) write unique values to a replicated topic (2 partitions,
# replication factor 3, min.insync.replicas 2), the file system is filled
# to the last byte (a filler file), and later freed (the filler removed):
#   1. n3 a follower of both partitions: it cannot write what it is sent,
#      the leaders drop it from their ISRs and acks=all goes on with two
#      in sync; freed, it catches up and rejoins;
#   2. n3 the leader of partition 1 (mq_elect_leader): a produce there
#      that needs a new page fails with an error ("could not extend file
#      ...: No space left on device") and is not acknowledged, small
#      records that fit in the pages the segment has may still be; n3
#      keeps its lease and nobody is failed over, partition 0 goes on;
#      freed, n3 takes produce again and every ISR is whole.
# Then the checker of MqFaults.pm reads every partition on every replica:
# nothing acknowledged lost, nothing rolled back or refused visible, the
# replicas byte-identical.  Skipped where user namespaces are not allowed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use MqFaults;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

plan skip_all => 'unshare(1) cannot make a user and mount namespace here' unless MqCluster::can_small_fs();

my $FULL = 10;					# seconds the file system stays full, at least
my $T_START = time();

my $etcd = MqCluster::start_etcd();
my @nodes = map { MqCluster::new_node("n$_", $etcd) } 1 .. 3;
my %by_name = map { $_->name => $_ } @nodes;
my $fs = MqCluster::small_fs(64);
$nodes[0]->start;
$nodes[1]->start;
MqCluster::start_node_in($nodes[2], $fs);
my $n3 = $nodes[2];
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

$n3->safe_psql('postgres', "CREATE TABLESPACE small LOCATION '$fs->{dir}'");
$n3->safe_psql('postgres', "ALTER SYSTEM SET default_tablespace = 'small'");
$n3->reload;

$nodes[0]->safe_psql('postgres', q{SELECT mq_create_topic('fd', 2, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": 2500}')});
ok(MqCluster::wait_topic($_, 'fd', 2), $_->name . ': topic fd is there with its leaders') for @nodes;
is($n3->safe_psql('postgres', q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                   JOIN pg_tablespace t ON t.oid = c.reltablespace
                                  WHERE n.nspname = 'mqlog_data' AND t.spcname = 'small'}),
	$n3->safe_psql('postgres', q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                  WHERE n.nspname = 'mqlog_data' AND c.relkind = 'r'}),
	"every segment on n3 is in the tablespace on its small file system");
my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'fd', partitions => 2);
ok(MqCluster::wait_until(sub { $f->healthy }, 30), 'both partitions have three in-sync replicas');

sub leaders_etcd
{
	return join(',', map { my $m = $f->part_meta($_); $m ? "$m->{leader}/$m->{leader_epoch}" : '?' } 0, 1);
}

sub isr_of { my ($p) = @_; my $m = $f->part_meta($p); return $m ? join(',', sort @{ $m->{isr} }) : ''; }

# fill the file system to its last byte; free it
sub fill
{
	MqCluster::in_fs($fs, 'sh', '-c', "dd if=/dev/zero of=$fs->{dir}/filler bs=64k 2>/dev/null; dd if=/dev/zero of=$fs->{dir}/filler2 bs=512 2>/dev/null; true");
	my $df = `nsenter --preserve-credentials --user --mount --target $fs->{pid} df -k $fs->{dir} | tail -1`;
	note("filled: $df");
	return (split ' ', $df)[3];
}
sub free { MqCluster::in_fs($fs, 'rm', '-f', "$fs->{dir}/filler", "$fs->{dir}/filler2"); }

$f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);
ok(MqCluster::wait_until(sub { $f->acked_count >= 20 }, 30), 'the producers are acknowledged');

my $log3 = -s $n3->logfile;

# --- 1. a follower's disk full ------------------------------------------------------

ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'every node in sync before n3 fills up');
my $before = leaders_etcd();
my $t1 = time();
is(fill(), 0, 'n3\'s file system is full');
# it first fills the pages its segments have
my $shrunk = MqCluster::wait_until(sub { isr_of(0) eq 'n1,n2' && isr_of(1) eq 'n1,n2' }, 60);
my $t1_shrunk = time();
ok($shrunk, sprintf('with its disk full, follower n3 leaves both ISRs (%.1f s)', $t1_shrunk - $t1))
  or diag('ISRs: {' . isr_of(0) . '} {' . isr_of(1) . '}');
MqCluster::wait_until(sub { time() > $t1 + $FULL && time() > $t1_shrunk + 4 }, 60);
my %acked;
$acked{ $_->{p} }++ for $f->between('ok', $t1_shrunk);
cmp_ok($acked{$_} // 0, '>', 0, "... partition $_ acknowledges acks=all commits with two in sync") for 0, 1;
is(leaders_etcd(), $before, '... nobody is failed over');
my $why1 = substr(slurp_file($n3->logfile), $log3);
like($why1, qr/No space left on device/, '... n3 logs why it cannot write');
my $t1_free = time();
free();
ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'freed, n3 catches up and rejoins both ISRs');
note(sprintf('follower full: left the ISRs after %.1f s; full for %.1f s; back in sync %.1f s after it was freed',
			 $t1_shrunk - $t1, $t1_free - $t1, time() - $t1_free));

# --- 2. a leader's disk full -----------------------------------------------------------

my $l1 = $f->part_meta(1)->{leader};
$by_name{$l1}->safe_psql('postgres', q{SELECT mq_elect_leader('fd', 1, 'n3')}) unless $l1 eq 'n3';
ok(MqCluster::wait_until(sub {
	foreach my $n (@nodes) { return 0 unless $f->leader_here($n, 1) =~ m{^n3/}; }
	return $f->healthy;
}, 30), 'n3 leads partition 1 (mq_elect_leader), every ISR whole');
$before = leaders_etcd();
$log3 = -s $n3->logfile;
my $t2 = time();
is(fill(), 0, 'n3\'s file system is full again');
# a produce on n3 fails at once, or when it next needs a page
my ($rc, $out, $err);
ok(MqCluster::wait_until(sub {
	($rc, $out, $err) = MqFaults::psql_run($n3->connstr('postgres'), 30,
		sql => [ q{SELECT mq_produce('fd', convert_to(repeat('x', 8000), 'UTF8'), partition => 1) FROM generate_series(1, 50)} ],
		options => '-c mqlog.acks=all -c mqlog.acks_timeout=3000');
	return $rc != 0;
}, 30), 'with its disk full, a produce on n3, the leader of partition 1, fails');
like($err, qr/ERROR:.*(No space left on device|could not extend)/, '... with an error that says why') or diag($err);
my $t2_failed = time();
MqCluster::wait_until(sub { time() > $t2 + $FULL && time() > $t2_failed + 4 }, 60);
my $t2_free = time();
# small records may still fit in the pages the segment already has (the
# checker finds every one that was acknowledged); the producers' are
# refused once they do not
my @acked1 = grep { $_->{p} == 1 } $f->between('ok', $t2_failed, $t2_free);
my @nospace = grep { $_->{p} == 1 && $_->{why} =~ /No space left on device/ } $f->between('refused', $t2, $t2_free);
cmp_ok(scalar(@nospace), '>', 0, sprintf('... and the producers of partition 1 are refused (%d times, "No space left on device"), %d acknowledged in pages it had',
										 scalar(@nospace), scalar(@acked1)));
my @acked0 = grep { $_->{p} == 0 } $f->between('ok', $t2_failed, $t2_free);
cmp_ok(scalar(@acked0), '>', 0, '... while partition 0 acknowledges acks=all commits');
is(leaders_etcd() =~ s{,.*}{}r, $before =~ s{,.*}{}r, '... partition 0 keeps its leader');
is((split /,/, leaders_etcd())[1], (split /,/, $before)[1], '... and n3 keeps partition 1: nobody is failed over');
my $crashed = () = substr(slurp_file($n3->logfile), $log3) =~ /terminated by signal|PANIC/g;
is($crashed, 0, '... n3 did not crash');
free();
ok(MqCluster::wait_until(sub {
	my ($r, $o, $e) = MqFaults::psql_run($n3->connstr('postgres'), 30,
		sql => [ q{SELECT mq_produce('fd', 'after-free', partition => 1)} ], options => '-c mqlog.acks=all -c mqlog.acks_timeout=3000');
	return $r == 0 && $e !~ /WARNING/;
}, 60), 'freed, n3 takes acks=all produce on partition 1 again');
ok(MqCluster::wait_until(sub { $f->healthy }, 90), '... and every ISR is whole');
note(sprintf('leader full: produce failed %.1f s after the fill; full for %.1f s; healthy %.1f s after it was freed',
			 $t2_failed - $t2, $t2_free - $t2, time() - $t2_free));

$f->stop_producers;
my $count = $f->check;
cmp_ok($count->{ok} // 0, '>', 100, 'the producers were acknowledged more than 100 times');
note(sprintf('test took %.0f s', time() - $T_START));

$_->stop for @nodes;
MqCluster::stop_fs($fs);
MqCluster::stop_etcd($etcd);
done_testing();
