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
#   my $px = MqCluster::start_proxy($etcd);           # a TCP proxy to etcd
#   MqCluster::new_node('n1', $etcd, endpoints => $px->{url});
#   MqCluster::stop_proxy($px); MqCluster::restart_proxy($px);   # cut, heal
#   my $px = MqCluster::start_proxy($etcd, 1);        # ... with a trip wire
#   MqCluster::arm_proxy($px, @strings); MqCluster::proxy_tripped($px);
#
#   my $ec = MqCluster::start_etcd_cluster(3);        # three members
#   MqCluster::kill_etcd_member($ec->{members}[0]);   # SIGKILL
#   MqCluster::start_etcd_member($ec->{members}[0], 1);
#   my $pid = MqCluster::fork_child(sub { ... });     # a helper process
#   my @pids = MqCluster::freeze_node($n1); MqCluster::thaw(@pids);
#
# Settings: mqlog.cluster_name is 'test' unless given; the cluster
# database is 'postgres'.
package MqCluster;

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM);
use IPC::Run;
use POSIX ":sys_wait_h";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our $CLUSTER_NAME = 'test';

# etcd, proxy and helper processes started here and not stopped yet: a
# test that dies midway still stops them (END below), so none outlives its
# test
my %spawned;

# Poll $cond (a sub returning true when done) every 100 ms for at most
# $timeout seconds; returns whether it became true.  A condition that dies
# (a query on a node that is still starting, or that a move or a failover
# refuses for a moment) counts as not yet true: its last error is shown if
# the wait times out.  A server crash is not hidden by this: scripts/test.sh
# fails the suite on any "terminated by signal" in a server log.
sub wait_until
{
	my ($cond, $timeout) = @_;
	$timeout //= 60;
	my $end = time() + $timeout;
	my $error;
	my $try = sub {
		my $ok = eval { $cond->() };
		$error = $@ if $@;
		return $ok;
	};
	while (time() < $end)
	{
		return 1 if $try->();
		usleep(100_000);
	}
	return 1 if $try->();
	diag("the last error while waiting: $error") if defined $error;
	return 0;
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

# Start an etcd process for $etcd (one member: of a cluster of its own, or
# of the cluster $etcd->{initial_cluster} names), and unless $nowait, wait
# until it answers as healthy.
sub _spawn_etcd
{
	my ($etcd, $nowait) = @_;
	my $name = $etcd->{name} // 't';
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDOUT, '>>', "$etcd->{dir}/etcd.log") or die $!;
		open(STDERR, '>&', \*STDOUT) or die $!;
		exec('etcd', '--name', $name, '--data-dir', "$etcd->{dir}/data",
			 '--listen-client-urls', $etcd->{url},
			 '--advertise-client-urls', $etcd->{url},
			 '--listen-peer-urls', $etcd->{peer_url},
			 '--initial-advertise-peer-urls', $etcd->{peer_url},
			 '--initial-cluster', $etcd->{initial_cluster} // "$name=$etcd->{peer_url}",
			 $etcd->{token} ? ('--initial-cluster-token', $etcd->{token}) : ())
		  or die "exec etcd: $!";
	}
	$etcd->{pid} = $pid;
	$spawned{$pid} = 1;
	return $etcd if $nowait;
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

# The first $n bytes of $buf written to a proxy's socket; false when it
# failed (the peer is gone)
sub _write_all
{
	my ($sock, $buf, $n) = @_;
	for (my $off = 0; $off < $n;)
	{
		my $w = syswrite($sock, $buf, $n - $off, $off);
		return 0 unless defined $w;
		$off += $w;
	}
	return 1;
}

# A process started here (an etcd, a proxy, a namespace holder) ended by
# its pid only, with a signal, and waited for; false if it was not running
sub _end_spawned
{
	my ($proc, $signal) = @_;
	return 0 unless $proc->{pid};
	kill $signal, $proc->{pid};
	waitpid($proc->{pid}, 0);
	delete $spawned{ $proc->{pid} };
	delete $proc->{pid};
	return 1;
}

# Stop the etcd process started here (its pid only), and wait for it.
sub stop_etcd
{
	my ($etcd) = @_;
	_end_spawned($etcd, 'TERM');
}

# Start it again on the same ports and data.
sub restart_etcd
{
	my ($etcd) = @_;
	stop_etcd($etcd);
	return _spawn_etcd($etcd);
}

# --- an etcd cluster of several members ----------------------------------------
#
# start_etcd_cluster(3) starts three members on loopback, each on ports and
# in a directory of its own, and returns a handle whose url names all three
# (comma-separated: etcdctl, etcd_keys and a node's mqlog.etcd_endpoints
# take it as it is) and whose members are each a handle as start_etcd's.
# kill_etcd_member SIGKILLs one (its data stays on disk), start_etcd_member
# starts it again on the same ports and data.

sub start_etcd_cluster
{
	my ($n) = @_;
	my $token = 'c' . PostgreSQL::Test::Cluster::get_free_port();
	my @members;
	foreach my $i (1 .. $n)
	{
		my $port = PostgreSQL::Test::Cluster::get_free_port();
		my $peer = PostgreSQL::Test::Cluster::get_free_port();
		push @members, {
			name => "$token-m$i",
			token => $token,
			port => $port,
			url => "http://127.0.0.1:$port",
			peer_url => "http://127.0.0.1:$peer",
			dir => PostgreSQL::Test::Utils::tempdir("etcd$i"),
		};
	}
	my $initial = join(',', map { "$_->{name}=$_->{peer_url}" } @members);
	foreach my $m (@members)
	{
		$m->{initial_cluster} = $initial;
		_spawn_etcd($m, 1);
	}
	my $cluster = { members => \@members, url => join(',', map { $_->{url} } @members) };
	foreach my $m (@members)
	{
		wait_until(sub { (etcdctl($m, 'endpoint', 'health'))[0] == 0 }, 60)
		  or die "etcd member $m->{name} did not become healthy, see $m->{dir}/etcd.log";
		note "etcd member $m->{name} pid $m->{pid} at $m->{url}";
	}
	return $cluster;
}

# SIGKILL one member (by its pid), and wait for it.
sub kill_etcd_member
{
	my ($m) = @_;
	note "etcd member $m->{name} killed" if _end_spawned($m, 'KILL');
}

# Start a member again, on its ports and data; waits for it to be healthy
# only if $wait (a member alone, without a quorum, never is).
sub start_etcd_member
{
	my ($m, $wait) = @_;
	_spawn_etcd($m, 1);
	note "etcd member $m->{name} started again, pid $m->{pid}";
	return 1 unless $wait;
	return wait_until(sub { (etcdctl($m, 'endpoint', 'health'))[0] == 0 }, 60);
}

# Stop every member still running (SIGTERM, by pid).
sub stop_etcd_cluster
{
	my ($cluster) = @_;
	stop_etcd($_) for @{ $cluster->{members} };
}

# --- a TCP proxy between nodes and etcd ---------------------------------------
#
# One process, listening on a loopback port of its own and forwarding each
# connection to etcd's client port, byte for byte.  A node whose
# mqlog.etcd_endpoints names the proxy reaches etcd through it alone, so
# stopping the proxy (SIGKILL: every connection of it is reset, new ones
# are refused) cuts that node off from etcd while the others still reach
# it; restart_proxy listens on the same port again.

# A proxy with a trip wire (start_proxy's $trip): once the file
# $trip->{arm} exists, the first request whose bytes hold every line of
# that file is forwarded, and from then on the proxy forwards nothing in
# either direction (what arrives is read and dropped, new connections are
# taken and left unanswered) and writes the file $trip->{tripped}: the
# node behind it has sent that one request and is cut off from etcd right
# after it, not knowing whether it was done.
sub _proxy_loop
{
	my ($listen, $target_port, $trip) = @_;
	my $sel = IO::Select->new($listen);
	my %peer;					# socket -> the socket it forwards to
	my %request;				# a client's socket -> what it sent so far
	my $tripped = 0;

	$SIG{PIPE} = 'IGNORE';
	for (;;)
	{
		foreach my $s ($sel->can_read(1))
		{
			if ($s == $listen)
			{
				my $c = $listen->accept or next;
				if ($tripped)
				{
					$sel->add($c);
					next;
				}
				my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target_port,
											  Proto => 'tcp');
				if (!$u)
				{
					close($c);
					next;
				}
				$peer{$c} = $u;
				$peer{$u} = $c;
				$request{$c} = '';
				$sel->add($c, $u);
				next;
			}
			my $buf;
			my $n = sysread($s, $buf, 65536);
			if ($tripped)
			{
				if (!defined $n || $n == 0)
				{
					$sel->remove($s);
					close($s);
				}
				next;
			}
			my $o = $peer{$s} or next;
			my $trip_now = 0;
			if ($trip && defined $n && $n > 0 && exists $request{$s} && -e $trip->{arm})
			{
				$request{$s} .= $buf if length($request{$s}) < 1_000_000;
				my @want = grep { $_ ne '' } split /\n/, PostgreSQL::Test::Utils::slurp_file($trip->{arm});
				$trip_now = @want && !grep { index($request{$s}, $_) < 0 } @want;
			}
			my $ok = defined $n && $n > 0 && _write_all($o, $buf, $n);
			if ($trip_now)
			{
				$tripped = 1;
				PostgreSQL::Test::Utils::append_to_file($trip->{tripped}, "tripped\n");
				next;
			}
			next if $ok;
			$sel->remove($s, $o);
			delete @peer{ $s, $o };
			delete @request{ $s, $o };
			close($s);
			close($o);
		}
	}
}

sub _spawn_proxy
{
	my ($proxy) = @_;
	my $listen;
	# the port may still hold connections of the last run in TIME_WAIT
	wait_until(sub {
		$listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $proxy->{port},
										Proto => 'tcp', Listen => 64, ReuseAddr => 1);
		return defined $listen;
	}, 10) or die "proxy: cannot listen on port $proxy->{port}: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		eval { _proxy_loop($listen, $proxy->{target_port}, $proxy->{trip}); };
		POSIX::_exit(0);
	}
	close($listen);				# the child listens; the port is bound already
	$proxy->{pid} = $pid;
	$spawned{$pid} = 1;
	note "etcd proxy pid $pid at $proxy->{url}";
	return $proxy;
}

# A proxy to $etcd on a free loopback port; returns {pid, port, url,
# target_port, trip}.  With $with_trip, it has a trip wire (see
# _proxy_loop): arm_proxy sets it, proxy_tripped says whether it went off.
sub start_proxy
{
	my ($etcd, $with_trip) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $trip;
	if ($with_trip)
	{
		my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
		$trip = { arm => "$dir/arm", tripped => "$dir/tripped" };
	}
	return _spawn_proxy({
		port => $port,
		url => "http://127.0.0.1:$port",
		target_port => $etcd->{port},
		trip => $trip,
	});
}

# Arm the trip wire of a proxy: the next request holding every string given
# (an etcd request's keys are base64 in its JSON) is its node's last.
sub arm_proxy
{
	my ($proxy, @strings) = @_;
	unlink($proxy->{trip}{tripped});
	PostgreSQL::Test::Utils::append_to_file("$proxy->{trip}{arm}.new", join("\n", @strings) . "\n");
	rename("$proxy->{trip}{arm}.new", $proxy->{trip}{arm}) or die "rename: $!";
}

sub proxy_tripped { my ($proxy) = @_; return -e $proxy->{trip}{tripped}; }

# Kill the proxy (by its pid) and wait for it: its node is cut off.
sub stop_proxy
{
	my ($proxy) = @_;
	_end_spawned($proxy, 'KILL');
}

# Start it again on the same port (its trip wire, if any, disarmed).
sub restart_proxy
{
	my ($proxy) = @_;
	stop_proxy($proxy);
	unlink($proxy->{trip}{arm}, $proxy->{trip}{tripped}) if $proxy->{trip};
	return _spawn_proxy($proxy);
}

# --- links between nodes, cut one way -------------------------------------------
#
# A node started with new_node(..., link => 1) names, in mqlog.node_conninfo,
# a TCP port of a proxy in front of its Unix socket (start_links starts
# it): every connection another node makes to it (apply workers, their
# replication streams and progress reports) goes through that proxy.  The
# proxy tells which node a connection comes from by the process at its
# other end (the cluster name in its process title, "postgres: n3: ..."),
# and holds a direction of a link when the rules file says so:
#   cut_link($links, 'n3', 'n1')   # bytes from n3 to n1 are held
#   heal_links($links)             # every held byte goes on
# Held bytes are not read from their socket, so the sender's writes block
# once the socket buffers are full, as they would when its packets are
# lost; the other direction of the same connections flows.  The proxy's
# own end acknowledges what it received, so the sender's TCP keepalives
# and tcp_user_timeout see no outage.

# the cluster name of the process that holds the TCP socket from port
# $port to port $to on 127.0.0.1, or '' if none is found (both ports: a
# local port may be in use by several sockets to other places)
sub _socket_owner
{
	my ($port, $to) = @_;
	my $hex = sprintf('0100007F:%04X', $port);
	my $rem = sprintf('0100007F:%04X', $to);
	my $inode;
	open(my $t, '<', '/proc/net/tcp') or return '';
	while (my $line = <$t>)
	{
		my @f = split ' ', $line;
		if (@f > 9 && $f[1] eq $hex && $f[2] eq $rem)
		{
			$inode = $f[9];
			last;
		}
	}
	close($t);
	return '' unless $inode;
	opendir(my $d, '/proc') or return '';
	foreach my $pid (grep { /^\d+$/ } readdir($d))
	{
		opendir(my $fd, "/proc/$pid/fd") or next;
		my $found = grep { (readlink("/proc/$pid/fd/$_") // '') eq "socket:[$inode]" } readdir($fd);
		closedir($fd);
		next unless $found;
		open(my $c, '<', "/proc/$pid/cmdline") or next;
		my $cmd = <$c> // '';
		close($c);
		closedir($d);
		return $cmd =~ /^postgres: ([^:\s]+):/ ? $1 : '';
	}
	closedir($d);
	return '';
}

sub _link_loop
{
	my ($listen, $socket_path, $dst, $rules_file) = @_;
	my %peer;					# socket -> the socket it forwards to
	my %from;					# socket -> the node whose bytes it reads
	my @socks;
	my %held;					# "a>b" -> 1
	my $rules_seen = -1;

	$SIG{PIPE} = 'IGNORE';
	for (;;)
	{
		my $m = (stat($rules_file))[9] // 0;
		my $size = -s $rules_file // 0;
		if ("$m.$size" ne $rules_seen)
		{
			$rules_seen = "$m.$size";
			%held = ();
			if (open(my $r, '<', $rules_file))
			{
				while (my $line = <$r>)
				{
					$held{$1} = 1 if $line =~ /^(\S+>\S+)/;
				}
				close($r);
			}
		}
		my $sel = IO::Select->new($listen);
		foreach my $s (@socks)
		{
			$sel->add($s) unless $held{ "$from{$s}>" . ($from{ $peer{$s} }) };
		}
		foreach my $s ($sel->can_read(0.1))
		{
			if ($s == $listen)
			{
				my $c = $listen->accept or next;
				my $u = IO::Socket::UNIX->new(Peer => $socket_path, Type => SOCK_STREAM);
				if (!$u)
				{
					close($c);
					next;
				}
				my $src = _socket_owner($c->peerport, $c->sockport) || '?';
				PostgreSQL::Test::Utils::append_to_file("$rules_file.log",
					sprintf("%.3f %s>%s port %d\n", Time::HiRes::time(), $src, $dst, $c->peerport));
				$peer{$c} = $u;
				$peer{$u} = $c;
				$from{$c} = $src;
				$from{$u} = $dst;
				push @socks, $c, $u;
				next;
			}
			my $o = $peer{$s} or next;
			my $buf;
			my $n = sysread($s, $buf, 65536);
			my $ok = defined $n && $n > 0 && _write_all($o, $buf, $n);
			next if $ok;
			@socks = grep { $_ != $s && $_ != $o } @socks;
			delete @peer{ $s, $o };
			delete @from{ $s, $o };
			close($s);
			close($o);
		}
	}
}

# Start the link proxy of every node made with link => 1 (after the node
# started: it connects to its Unix socket).  Returns a handle for cut_link.
sub start_links
{
	my (@nodes) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('links');
	my $links = { rules => "$dir/rules", proxies => [] };
	PostgreSQL::Test::Utils::append_to_file($links->{rules}, '');
	foreach my $node (@nodes)
	{
		my $port = $node->{mq_link_port} or die $node->name . ' was not made with link => 1';
		my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
										   Proto => 'tcp', Listen => 64, ReuseAddr => 1)
		  or die "link proxy: cannot listen on port $port: $!";
		my $path = $node->host . '/.s.PGSQL.' . $node->port;
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			eval { _link_loop($listen, $path, $node->name, $links->{rules}); };
			print STDERR "link proxy: $@" if $@;
			POSIX::_exit(0);
		}
		close($listen);
		$spawned{$pid} = 1;
		push @{ $links->{proxies} }, $pid;
		note 'link proxy pid ' . $pid . ' in front of ' . $node->name . " at port $port";
	}
	return $links;
}

# The connections the link proxies took so far, as "from>to" names ('?'
# for one whose node they could not tell).
sub link_connections
{
	my ($links) = @_;
	return () unless -e "$links->{rules}.log";
	return map { (split ' ')[1] } split /\n/, PostgreSQL::Test::Utils::slurp_file("$links->{rules}.log");
}

# Hold the bytes node $from sends to node $to (each a name); the rules
# file is replaced whole, so every proxy reads one set of rules.
sub cut_link
{
	my ($links, $from, $to) = @_;
	my @rules = grep { $_ ne '' } split /\n/, PostgreSQL::Test::Utils::slurp_file($links->{rules});
	push @rules, "$from>$to";
	PostgreSQL::Test::Utils::append_to_file("$links->{rules}.new", join("\n", @rules) . "\n");
	rename("$links->{rules}.new", $links->{rules}) or die "rename: $!";
}

sub heal_links
{
	my ($links) = @_;
	PostgreSQL::Test::Utils::append_to_file("$links->{rules}.new", "# healed\n");
	rename("$links->{rules}.new", $links->{rules}) or die "rename: $!";
}

sub stop_links
{
	my ($links) = @_;
	foreach my $pid (@{ $links->{proxies} })
	{
		kill 'KILL', $pid;
		waitpid($pid, 0);
		delete $spawned{$pid};
	}
	$links->{proxies} = [];
}

# --- a small file system of a node's own ---------------------------------------
#
# A full disk without root: small_fs mounts a tmpfs of the size given on a
# directory, in a user and mount namespace of its own (unshare(1), which
# needs unprivileged user namespaces), held by a process that sleeps there;
# start_node_in starts a node's postmaster in that namespace (nsenter(1)),
# where it sees the tmpfs (as a tablespace, say); in_fs runs a command
# there (to fill it, or free it).  Nobody outside the namespace sees the
# mount, and it goes when the last process in the namespace ends (the
# holder, killed by stop_fs or the END block, and the node's processes):
# there is nothing to unmount.

# Can this user make such a namespace?
sub can_small_fs
{
	return system('unshare --user --map-current-user --mount --keep-caps true >/dev/null 2>&1') == 0;
}

sub small_fs
{
	my ($size_mb) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('smallfs');
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		exec('unshare', '--user', '--map-current-user', '--mount', '--keep-caps', 'sh', '-c',
			 "mount -t tmpfs -o size=${size_mb}m,mode=0700 mqlog-test $dir && exec sleep 100000")
		  or POSIX::_exit(1);
	}
	$spawned{$pid} = 1;
	my $fs = { pid => $pid, dir => $dir };
	wait_until(sub { slurp_file("/proc/$pid/mountinfo") =~ /\Q$dir\E tmpfs|\Q$dir\E .* - tmpfs/ }, 20)
	  or die "no tmpfs on $dir in the namespace of $pid";
	note "small file system of $size_mb MB on $dir, in the namespace of pid $pid";
	return $fs;
}

# the command in the namespace of $fs; returns its exit status
sub in_fs
{
	my ($fs, @cmd) = @_;
	return system('nsenter', '--preserve-credentials', '--user', '--mount', '--target', $fs->{pid}, @cmd) >> 8;
}

# $node->start, in the namespace of $fs
sub start_node_in
{
	my ($node, $fs) = @_;
	my $rc = in_fs($fs, 'pg_ctl', '-w', '-D', $node->data_dir, '-l', $node->logfile,
				   '-o', '--cluster-name=' . $node->name, 'start');
	die 'pg_ctl start of ' . $node->name . " failed, see its log" if $rc != 0;
	$node->_update_pid(1);
}

sub stop_fs
{
	my ($fs) = @_;
	_end_spawned($fs, 'KILL');
}

# --- helper processes --------------------------------------------------------

# Run $code in a child process (which ends with POSIX::_exit, running none
# of the test's END blocks: it must not stop the nodes); returns its pid.
# Stopped by the END block below if the test does not stop it first.
sub fork_child
{
	my ($code) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		my $rc = eval { $code->(); 1 } ? 0 : 1;
		print STDERR "child $$: $@" if $rc;
		POSIX::_exit($rc);
	}
	$spawned{$pid} = 1;
	return $pid;
}

# Wait up to $timeout seconds for a child of fork_child to end, then kill
# it; returns its exit status (or -1 if it had to be killed).
sub wait_child
{
	my ($pid, $timeout) = @_;
	my $end = time() + ($timeout // 60);
	my $status = -1;
	while (time() < $end)
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			$status = $? >> 8;
			delete $spawned{$pid};
			return $status;
		}
		usleep(50_000);
	}
	kill 'KILL', $pid;
	waitpid($pid, 0);
	delete $spawned{$pid};
	return -1;
}

# --- freezing a node -----------------------------------------------------------

# the pids whose parent is $ppid
sub _children_of
{
	my ($ppid) = @_;
	my @kids;
	opendir(my $d, '/proc') or die "/proc: $!";
	foreach my $pid (grep { /^\d+$/ } readdir($d))
	{
		open(my $f, '<', "/proc/$pid/stat") or next;
		my $stat = <$f>;
		close($f);
		# pid (comm) state ppid ...; comm may hold spaces and parentheses
		push @kids, $pid if defined $stat && $stat =~ /\)\s+\S+\s+(\d+)/ && $1 == $ppid;
	}
	closedir($d);
	return @kids;
}

# SIGSTOP a running node: its postmaster first (so that it starts nothing
# new), then every process it started.  Returns the pids, for thaw.
sub freeze_node
{
	my ($node) = @_;
	my $pm = $node->{_pid} or die "node " . $node->name . " is not running";
	kill 'STOP', $pm;
	my @kids = _children_of($pm);
	kill 'STOP', @kids;
	return ($pm, @kids);
}

# SIGCONT what freeze_node stopped: the children, then the postmaster.
sub thaw
{
	my ($pm, @kids) = @_;
	kill 'CONT', @kids;
	kill 'CONT', $pm;
}

# A new node, initialized and configured (not started).  Options:
#   node_name, conninfo, endpoints, lease_ttl, timeout: override the
#   settings (undef conninfo/node_name: leave it out);  conf: more lines;
#   link: other nodes reach it through a link proxy (start_links).
sub new_node
{
	my ($name, $etcd, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $node_name = exists $opt{node_name} ? $opt{node_name} : $name;
	my $conninfo = exists $opt{conninfo} ? $opt{conninfo}
	  : 'host=' . $node->host . ' port=' . $node->port;
	if ($opt{link})
	{
		# other nodes reach it through its link proxy (start_links)
		$node->{mq_link_port} = PostgreSQL::Test::Cluster::get_free_port();
		$conninfo = "host=127.0.0.1 port=$node->{mq_link_port}";
	}
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

# Wait until node holds a copy of topic with a leader for each of its
# partitions (the count given), as the sync worker takes it from etcd;
# true if it does in time.
sub wait_topic
{
	my ($node, $topic, $partitions, $timeout) = @_;
	return wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM mqlog.partitions WHERE topic = '$topic' AND leader IS NOT NULL")
			  eq $partitions;
		},
		$timeout // 30);
}

# Every decided batch of a partition from an offset (0 unless given), as
# offset:committed:md5 of its Kafka bytes (CRC included), comma-separated:
# what byte-identical replicas compare.
sub batches
{
	my ($node, $topic, $p, $from) = @_;
	$from //= 0;
	return $node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(b.base_offset || ':' || b.committed || ':' || md5(b.batch), ',' ORDER BY b.base_offset), '')
  FROM mqlog.topic t, mqlog._replica_batches(t.topic_id, $p, $from, 1000000000) b
 WHERE t.name = '$topic'});
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
