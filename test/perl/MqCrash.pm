# MqCrash: kill -9 of a PostgreSQL::Test::Cluster node's postmaster and of
# every process it started, as a machine crash would leave them: gone at
# once, with no shutdown of their own (010_crash.pl, 014_extend_ahead.pl).
#
#   MqCrash::kill9_postmaster($node);   # one ok() that all are gone
#   $node->start;                       # crash recovery
package MqCrash;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use Test::More;
use Time::HiRes qw(usleep);

# All processes whose parent (or process group) is the given pid.
sub processes_of
{
	my ($pid) = @_;
	my @found;
	opendir(my $dh, '/proc') or die "cannot read /proc: $!";
	for my $p (grep { /^\d+$/ } readdir $dh)
	{
		open(my $fh, '<', "/proc/$p/stat") or next;
		my $stat = <$fh>;
		close $fh;
		next unless defined $stat;
		next unless $stat =~ /^\d+ \(.*\) (\S) (\d+) (\d+)/s;
		my ($state, $ppid, $pgrp) = ($1, $2, $3);
		next if $state eq 'Z';
		push @found, $p if $ppid == $pid || ($pgrp == $pid && $p != $pid);
	}
	closedir $dh;
	return @found;
}

sub alive
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return 0;
	my $stat = <$fh>;
	close $fh;
	return 0 unless defined $stat;
	return $stat !~ /^\d+ \(.*\) Z /s;
}

# kill -9 of the postmaster, then of every process it had started (they
# would otherwise keep running, and keep the old shared memory attached).
sub kill9_postmaster
{
	my ($node) = @_;
	my $pmpid = $node->{_pid};
	my @children = processes_of($pmpid);
	$node->kill9;                 # SIGKILL to the postmaster pid
	kill 'KILL', @children;
	my @all = ($pmpid, @children);
	my %known = map { $_ => 1 } @all;
	for (my $i = 0; $i < 300; $i++)
	{
		# anything forked in between is still in the postmaster's group
		my @late = grep { !$known{$_} } processes_of($pmpid);
		kill 'KILL', @late if @late;
		$known{$_} = 1 for @late;
		push @all, @late;
		last unless grep { alive($_) } @all;
		usleep(100_000);
	}
	ok(!(grep { alive($_) } @all),
		'the postmaster and all its children are gone after kill -9');

	# The dead postmaster is no longer our child (pg_ctl started it), so its
	# reaping is up to whatever adopted it.  Until then it is a zombie, and a
	# new postmaster takes the pid in postmaster.pid for a live one.  Give it
	# time, then remove the stale lock file ourselves (the zombie holds no
	# shared memory).
	for (my $i = 0; $i < 100 && -e "/proc/$pmpid"; $i++)
	{
		usleep(100_000);
	}
	if (-e "/proc/$pmpid")
	{
		note "postmaster $pmpid is still an unreaped zombie; removing the stale postmaster.pid";
		unlink($node->data_dir . '/postmaster.pid')
		  or die "cannot remove postmaster.pid: $!";
	}
}

1;
