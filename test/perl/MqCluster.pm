# MqCluster: a throwaway mqlog cluster for Perl TAP tests.  One etcd
# member on loopback ports in a temporary directory, started and stopped
# by pid, and PostgreSQL::Test::Cluster nodes configured as cluster nodes.
#
#   my $etcd = MqCluster::start_etcd();
#   my $n1 = MqCluster::new_node('n1', $etcd);        # initialized, not started
#   $n1->start; MqCluster::create_extension($n1);
#   MqCluster::wait_until(sub { ... }, 30) or fail(...);
#   MqCluster::etcdctl($etcd, 'get', '--prefix', '/mqlog/');
#   MqCluster::stop_etcd($etcd);
#
# Settings: mqlog.cluster_name is 'test' unless given; the cluster
# database is 'postgres'.
package MqCluster;

use strict;
use warnings;

use IPC::Run;
use POSIX ":sys_wait_h";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our $CLUSTER_NAME = 'test';

# etcd processes started here and not stopped yet: a test that dies midway
# still stops them (END below), so no etcd outlives its test
my %spawned;

# Poll $cond (a sub returning true when done) every 100 ms for at most
# $timeout seconds; returns whether it became true.
sub wait_until
{
	my ($cond, $timeout) = @_;
	$timeout //= 60;
	my $end = time() + $timeout;
	while (time() < $end)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return $cond->() ? 1 : 0;
}

# Run etcdctl against $etcd; returns (exit status, stdout).
sub etcdctl
{
	my ($etcd, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'etcdctl', '--endpoints', $etcd->{url}, '--dial-timeout=2s',
					'--command-timeout=5s', @args ],
				  '>', \$out, '2>', \$err);
	return ($? >> 8, $out);
}

# The etcd keys under /mqlog/<cluster>/<sub>, sorted, one string.
sub etcd_keys
{
	my ($etcd, $sub) = @_;
	my ($rc, $out) = etcdctl($etcd, 'get', '--prefix', '--keys-only',
							 "/mqlog/$CLUSTER_NAME/" . ($sub // ''));
	return join("\n", sort grep { $_ ne '' } split /\n/, $out);
}

sub _spawn_etcd
{
	my ($etcd) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDOUT, '>>', "$etcd->{dir}/etcd.log") or die $!;
		open(STDERR, '>&', \*STDOUT) or die $!;
		exec('etcd', '--name', 't', '--data-dir', "$etcd->{dir}/data",
			 '--listen-client-urls', $etcd->{url},
			 '--advertise-client-urls', $etcd->{url},
			 '--listen-peer-urls', $etcd->{peer_url},
			 '--initial-advertise-peer-urls', $etcd->{peer_url},
			 '--initial-cluster', "t=$etcd->{peer_url}")
		  or die "exec etcd: $!";
	}
	$etcd->{pid} = $pid;
	$spawned{$pid} = 1;
	my $healthy = wait_until(sub { (etcdctl($etcd, 'endpoint', 'health'))[0] == 0 }, 60);
	die "etcd did not become healthy, see $etcd->{dir}/etcd.log" unless $healthy;
	note "etcd pid $pid at $etcd->{url}";
	return $etcd;
}

# Start one etcd member on two free loopback ports, in a directory of the
# test's own; returns a handle: {pid, url, port, peer_url, dir}.
sub start_etcd
{
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $peer = PostgreSQL::Test::Cluster::get_free_port();
	my $dir = PostgreSQL::Test::Utils::tempdir('etcd');
	my $etcd = {
		port => $port,
		url => "http://127.0.0.1:$port",
		peer_url => "http://127.0.0.1:$peer",
		dir => $dir,
	};
	return _spawn_etcd($etcd);
}

# Stop the etcd process started here (its pid only), and wait for it.
sub stop_etcd
{
	my ($etcd) = @_;
	return unless $etcd->{pid};
	kill 'TERM', $etcd->{pid};
	waitpid($etcd->{pid}, 0);
	delete $spawned{ $etcd->{pid} };
	delete $etcd->{pid};
}

# Start it again on the same ports and data.
sub restart_etcd
{
	my ($etcd) = @_;
	stop_etcd($etcd);
	return _spawn_etcd($etcd);
}

# A new node, initialized and configured (not started).  Options:
#   node_name, conninfo, endpoints, lease_ttl, timeout: override the
#   settings (undef conninfo/node_name: leave it out);  conf: more lines.
sub new_node
{
	my ($name, $etcd, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $node_name = exists $opt{node_name} ? $opt{node_name} : $name;
	my $conninfo = exists $opt{conninfo} ? $opt{conninfo}
	  : 'host=' . $node->host . ' port=' . $node->port;
	my $endpoints = $opt{endpoints} // $etcd->{url};
	my $conf = qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
max_worker_processes = 16
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
mqlog.maintenance_naptime = 3600
mqlog.etcd_endpoints = '$endpoints'
mqlog.cluster_name = '$CLUSTER_NAME'
mqlog.cluster_database = 'postgres'
mqlog.etcd_lease_ttl = @{[ $opt{lease_ttl} // 3 ]}
mqlog.etcd_timeout = @{[ $opt{timeout} // 2000 ]}
};
	$conf .= "mqlog.node_name = '$node_name'\n" if defined $node_name;
	$conf .= "mqlog.node_conninfo = '$conninfo'\n" if defined $conninfo;
	$conf .= $opt{conf} if $opt{conf};
	$node->append_conf('postgresql.conf', $conf);
	return $node;
}

sub create_extension
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'CREATE EXTENSION mqlog');
}

# Wait until $node's mqlog.nodes shows $n alive nodes; returns whether it did.
sub wait_alive
{
	my ($node, $n, $timeout) = @_;
	return wait_until(
		sub {
			$node->safe_psql('postgres', 'SELECT count(*) FILTER (WHERE alive) FROM mqlog.nodes') eq $n;
		},
		$timeout // 60);
}

# Wait until $node's server log (from byte $offset) matches $re.
sub wait_log
{
	my ($node, $re, $offset, $timeout) = @_;
	return wait_until(
		sub {
			my $log = slurp_file($node->logfile);
			return substr($log, $offset // 0) =~ $re;
		},
		$timeout // 60);
}

END
{
	local $?;					# keep the test's exit status

	foreach my $pid (keys %spawned)
	{
		kill 'TERM', $pid;
		waitpid($pid, 0);
	}
}

1;
