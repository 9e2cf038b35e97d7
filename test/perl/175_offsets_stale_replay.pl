# A restarted coordinator's late commits do not move a group back (the
# etcd-revision stamp of replicated committed offsets: groups/offsets.c,
# workers/apply.c write_offsets), on one real etcd and three real nodes on
# loopback.  Committed offsets of replicated topics reach the other nodes
# after the commit, as 'mqlog.offset' messages of the committing node's
# replica stream; a node killed with commits it acknowledged but had not
# yet sent sends them when it comes back.  By then the group's new
# coordinator may have written newer ones: applied as they come, the old
# ones would replace them (167_kafka_faults saw a consumer resume 210
# records below its acknowledged commit).  The scenario:
#  - a SQL member of group g on n3 (which claims g in etcd) commits offset
#    A = 10 of the replicated topic s; every node shows 10;
#  - a round: n3's walsenders stopped (SIGSTOP: n1 and n2 get nothing more
#    from it), the member commits X = 70 on n3, stamped with a revision
#    above 0; n3 is killed with kill -9 and the stopped walsenders with it,
#    so X is in n3's WAL alone; n1 and n2 still show 10.  Once n3's lease
#    (and with it its claim) is gone, a member of g on n1 takes the group
#    and commits Y = 40 (between A and X: a "highest offset wins" rule would
#    keep X), stamped above X; n1 and n2 show 40.  n3 starts again: n1 and
#    n2 stream its WAL from where they stopped, X included (a commit of
#    another group made on n3 after the restart reaches both, and n3's
#    slots for them pass X's LSN), and still show 40 with n1's stamp; n3
#    itself takes 40 from n1;
#  - n1, the new coordinator, commits Z = 90 as the same member: every
#    node shows 90;
#  - the round again the other way: n1 killed with 95 unsent, n3 (itself
#    restarted in the round before) takes g and commits 98, above it; n1
#    comes back and sends 95; n2 and n3 keep 98, n1 takes it, and 99
#    committed on n3 reaches every node;
#  - mq_reset_offsets on n2, which does not coordinate the group, with its
#    sync worker stopped (its view of etcd's revision lags the stamps it
#    applied): the reset reaches n1 and n3.
# Before the stamp (commit 8516863^), n1 and n2 showed 70 after n3's
# restart, and the commit of Z on n1 then failed (the row no longer held
# what the member had loaded).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my ($A, $X, $Y, $Z) = (10, 70, 40, 90);

my $etcd = MqCluster::start_etcd();
my @nodes = map { MqCluster::new_node("n$_", $etcd) } 1 .. 3;
my ($n1, $n2, $n3) = @nodes;
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

# group's committed offset of s/0 on node n ('' if none)
sub committed
{
	my ($n, $group) = @_;
	return q1($n, qq{
SELECT c.committed_offset FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 's' AND c.group_id = '$group' AND c."partition" = 0});
}

# ... and its stamp ('' if the row or the column is not there)
sub stamp
{
	my ($n, $group) = @_;
	my ($rc, $out) = $n->psql('postgres', qq{
SELECT c.etcd_revision FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 's' AND c.group_id = '$group' AND c."partition" = 0});
	return $rc == 0 ? $out : '';
}

# wait until each node given shows offset $want for group g
sub all_show
{
	my ($want, @on) = @_;
	return MqCluster::wait_until(sub { !grep { committed($_, 'g') ne $want } @on }, 60);
}

# the claim on group g in etcd: the node holding it, '' if none
sub claim_holder
{
	my ($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--print-value-only',
										"/mqlog/$MqCluster::CLUSTER_NAME/groups/g");
	return $out =~ /"node"\s*:\s*"([^"]+)"/ ? $1 : '';
}

# a statement in a background session; its error output ('' if none)
sub in_session
{
	my ($s, $sql) = @_;
	$s->{stderr} = '';
	my $out = $s->query($sql);
	return ($out, $s->{stderr});
}

# --- a replicated topic, and a group on it coordinated by n3 ------------------

q1($n1, q{SELECT mq_create_topic('s', 1, replication_factor => 3, config => '{"min.insync.replicas": 2}')});
ok(MqCluster::wait_topic($_, 's', 1), $_->name . ' holds s') for @nodes;
ok(MqCluster::wait_until(sub {
		my ($leader) = split /\|/, q1($n1, q{SELECT leader FROM mqlog.partitions WHERE topic = 's'});
		my ($node) = grep { $_->name eq $leader } @nodes;
		return 0 unless $node;
		my ($rc) = $node->psql('postgres', q{SET mqlog.acks = 'all';
SELECT count(mq_produce('s', convert_to('r' || i, 'UTF8'), partition => 0)) FROM generate_series(1, 100) i});
		return $rc == 0;
	}, 60), '100 records produced on s/0 with acks=all');
ok(MqCluster::wait_until(sub {
		# at least: a produce retried after its acks=all wait failed may have
		# written its records too
		!grep { q1($_, q{SELECT log_end_offset FROM mqlog.partitions WHERE topic = 's'}) < 100 } @nodes
	}, 60), 'every node holds them');

my $s3 = $n3->background_psql('postgres', on_error_stop => 0);
my $err;
ok(MqCluster::wait_until(sub {
		(undef, $err) = in_session($s3, q{SELECT count(*) FROM mq_poll('g', 's', 5)});
		return $err eq '';
	}, 30), 'a member of g on n3 polls s') or diag($err);
is(claim_holder(), 'n3', 'n3 holds the claim on g in etcd');
(undef, $err) = in_session($s3, qq{SELECT mq_commit('g', 's', 0, $A)});
is($err, '', "the member commits offset $A on n3");
ok(all_show($A, @nodes), "every node shows $A");

# --- a round: the coordinator killed with a commit unsent ----------------------

# One round: $old, the group's coordinator (its member's session $s_old),
# commits $X with its walsenders stopped and is killed; $new takes the
# group and commits $Y; $old comes back and streams $X.  $before: what
# every node shows when the round starts.  Returns the session of the
# member on $new.
sub round
{
	my ($old, $s_old, $new, $before, $X, $Y, $mark) = @_;
	my ($o, $w) = ($old->name, $new->name);
	my @others = grep { $_ != $old } @nodes;
	my @other_names = map { $_->name } @others;

	# $old's walsenders serving the others' apply workers (slots mqlog_<node>)
	my @senders;
	ok(MqCluster::wait_until(sub {
			@senders = split /\n/, q1($old, qq{SELECT active_pid FROM pg_replication_slots
WHERE slot_name IN ('mqlog_$other_names[0]', 'mqlog_$other_names[1]') AND active_pid IS NOT NULL});
			return @senders == 2;
		}, 30), "$o streams to @other_names (walsenders @senders)");
	kill 'STOP', @senders;
	my (undef, $err) = in_session($s_old, qq{SELECT mq_commit('g', 's', 0, $X)});
	is($err, '', "with them stopped, the member commits offset $X on $o");
	is(committed($old, 'g'), $X, "$o shows $X");
	my $stamp_x = stamp($old, 'g');
	cmp_ok($stamp_x || 0, '>', 0, "$o stamped it with the etcd revision it had seen ($stamp_x)");
	my $lsn_x = q1($old, q{SELECT pg_current_wal_lsn()});
	$old->kill9;
	kill 'KILL', @senders;
	eval { $s_old->quit };
	note("$o killed with commit $X unsent (its WAL up to $lsn_x)");
	is(committed($_, 'g'), $before, $_->name . " still shows $before: $X went nowhere") for @others;

	# $new takes the group
	my $t_kill = time();
	my $s_new = $new->background_psql('postgres', on_error_stop => 0);
	my ($refused, $last) = (0, '');
	ok(MqCluster::wait_until(sub {
			(undef, $last) = in_session($s_new, q{SELECT count(*) FROM mq_poll('g', 's', 5)});
			$refused++ if $last =~ /coordinated on node "$o"/;
			return $last eq '';
		}, 60), "once ${o}'s lease is gone, a member of g on $w polls s") or diag($last);
	note(sprintf('%s took g %.1f s after the kill, refused %d times before (coordinated on %s)',
		$w, time() - $t_kill, $refused, $o));
	is(claim_holder(), $w, "$w holds the claim on g now");
	(undef, $err) = in_session($s_new, qq{SELECT mq_commit('g', 's', 0, $Y)});
	is($err, '', "the member on $w commits offset $Y (loaded $before: $X never arrived)");
	ok(all_show($Y, @others), "@other_names show $Y");
	my $stamp_y = stamp($new, 'g');
	cmp_ok($stamp_y || 0, '>', $stamp_x || 0,
		"$w stamped $Y above $X ($stamp_y > $stamp_x): it claimed g after ${o}'s claim ended");
	ok(MqCluster::wait_until(sub { $stamp_y ne '' && !grep { stamp($_, 'g') ne $stamp_y } @others }, 30),
		"@other_names keep ${w}'s stamp with $Y");

	# $old comes back and sends X
	$old->start;
	# a commit made on $old after the restart: the others apply its stream
	# in WAL order, so once it is there, so was X before it
	ok(MqCluster::wait_until(sub {
			my ($rc) = $old->psql('postgres', qq{SELECT count(*) FROM mq_poll('$mark', 's', 1);
SELECT mq_commit('$mark', 's', 0, 1)});
			return $rc == 0;
		}, 60), "$o is back: a member of group $mark commits there");
	ok(MqCluster::wait_until(sub { !grep { committed($_, $mark) ne '1' } @others }, 60),
		"that commit reached @other_names");
	ok(MqCluster::wait_until(sub {
			!grep {
				q1($old, qq{SELECT confirmed_flush_lsn >= '$lsn_x' FROM pg_replication_slots WHERE slot_name = 'mqlog_$_'}) ne 't'
			} @other_names
		}, 30), "@other_names have streamed ${o}'s WAL past $X (its slots passed $lsn_x)");
	foreach my $n (@others)
	{
		is(committed($n, 'g'), $Y, $n->name . " still shows $Y, not ${o}'s late $X");
		my $st = stamp($n, 'g');
		ok($st ne '' && $st eq $stamp_y, "... with ${w}'s stamp ($st)");
	}
	ok(all_show($Y, $old), "$o takes $Y from $w");
	return $s_new;
}

# n3 killed with X = 70 unsent; n1 commits Y = 40, between A and X (a
# "highest offset wins" rule would keep X)
my $s1 = round($n3, $s3, $n1, $A, $X, $Y, 'mark1');
(undef, $err) = in_session($s1, qq{SELECT mq_commit('g', 's', 0, $Z)});
is($err, '', "the member on n1, the new coordinator, commits offset $Z after $Y");
ok(all_show($Z, @nodes), "every node shows $Z");

# again the other way: n1 killed with 95 unsent; n3, restarted in the
# round before, takes the group and commits 98, above it
my $s3b = round($n1, $s1, $n3, $Z, 95, 98, 'mark2');
(undef, $err) = in_session($s3b, q{SELECT mq_commit('g', 's', 0, 99)});
is($err, '', 'the member on n3 commits offset 99 after 98');
ok(all_show(99, @nodes), 'every node shows 99');
$s3b->quit;

# a reset on a node that does not coordinate the group and whose sync has
# not read etcd since it applied the coordinator's offsets (its sync
# worker stopped): its own view of etcd's revision is below the stamp of
# 99 it applied, and the reset takes the row's stamp, so that the others
# apply it (stamped with its own view, the reset stayed on that node)
my @sync = split /\n/, q1($n2, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog cluster sync'});
is(scalar(@sync), 1, "n2's sync worker (@sync)");
kill 'STOP', @sync;
# etcd's revision moves on, and n3 sees it: a commit of another group there
# (its claim)
MqCluster::etcdctl($etcd, 'put', '/unrelated/key', 'v');
ok(MqCluster::wait_until(sub {
		my ($rc) = $n3->psql('postgres', q{SELECT count(*) FROM mq_poll('other', 's', 1);
SELECT mq_commit('other', 's', 0, 1)});
		return $rc == 0;
	}, 60), 'a member of another group commits on n3 (its claim moves n3 past the revision n2 saw)');
my $s3c = $n3->background_psql('postgres', on_error_stop => 0);
(undef, $err) = in_session($s3c, q{SELECT count(*) FROM mq_poll('g', 's', 1)});
is($err, '', 'a member of g polls on n3 again');
(undef, $err) = in_session($s3c, q{SELECT mq_commit('g', 's', 0, 100)});
is($err, '', 'the member on n3 commits 100');
$s3c->quit;
ok(all_show(100, @nodes), 'every node shows 100');
ok(MqCluster::wait_until(sub {
		my ($rc) = $n2->psql('postgres', q{SELECT * FROM mq_reset_offsets('g', 's', 'earliest')});
		return $rc == 0;
	}, 60), 'with no member left, mq_reset_offsets on n2 resets the group');
is(committed($n2, 'g'), '0', 'n2 shows the reset (0)');
ok(all_show(0, @nodes), 'the reset reaches n1 and n3');
kill 'CONT', @sync;

$_->stop for @nodes;
MqCluster::stop_etcd($etcd);
done_testing();
