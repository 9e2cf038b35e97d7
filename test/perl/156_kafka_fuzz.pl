# Issue 30's fuzzer of the Kafka listener, bounded in time: test/kafka/
# listener_fuzz.py (its docstring says what it sends) against a node without
# SASL, then against a node with mqlog.kafka_sasl_mechanisms =
# 'PLAIN,SCRAM-SHA-256' (before and after authentication), each for
# MQLOG_FUZZ_SECONDS (default 30) with seed MQLOG_FUZZ_SEED (default random,
# printed first, so a failure reproduces).
#
# Checks, on each node:
#  - every API at every version the listener serves (asked with ApiVersions)
#    has a schema in the fuzzer, and every valid request of them is
#    answered with its correlation id (before authentication: only
#    ApiVersions, SaslHandshake and SaslAuthenticate, the others close);
#  - while mutated requests, record batches of every codec, decompression
#    bombs (batches of a few kB that decompress to ~1 GB, 16 of them for one
#    partition in one Produce), frames of 100 MB, trickling and idle
#    connections come in, a well-behaved client's Metadata, every 0.5 s, is
#    answered within 1 s, and the listener's peak resident size (VmHWM)
#    stays under 256 MB (shared_buffers is 16 MB here);
#  - no answer carries another request's correlation id, nothing is
#    answered before authentication or after a failed one;
#  - with mqlog.kafka_auth_timeout and mqlog.kafka_idle_timeout among the
#    settings, set here to 3 s and 5 s, connections that send nothing are
#    closed within the first, connections idle after authenticating (after
#    a request, without SASL) within the second (2 s of slack, more when
#    the load average passes the cores: listener_fuzz.py's idle_slack), and the
#    fuzzer opens others in their place all along;
#  - afterwards the same listener process serves, holding no transaction,
#    and no server process died.
# MQLOG_FUZZ_ARGS passes more arguments to the fuzzer (its bounds, e.g.
# "--max-rss-mb 512 --max-latency 2"; listener_fuzz.py --help lists them).
use strict;
use warnings;

use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use MqKafka qw(kafka_node frame response connect_listener wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'needs /proc/PID/status (Linux)' unless -r '/proc/self/status';

my $fuzz = dirname(__FILE__) . '/../kafka/listener_fuzz.py';
my $python = '/usr/bin/python3';
my $seconds = $ENV{MQLOG_FUZZ_SECONDS} // 30;
my $seed = $ENV{MQLOG_FUZZ_SEED} // int(rand(2**31 - 1));
my @extra = split ' ', ($ENV{MQLOG_FUZZ_ARGS} // '');
diag("listener fuzz: seed $seed, $seconds s per node "
	  . "(MQLOG_FUZZ_SEED=$seed MQLOG_FUZZ_SECONDS=$seconds reproduces the sequence)");

sub listener_pid
{
	my ($node) = @_;
	my ($rc, $pid) = $node->psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
	return $pid // '';
}

# A setting of this build, by name: its context, or undef if there is none
sub setting_context
{
	my ($node, $name) = @_;
	my $ctx = $node->safe_psql('postgres', qq{SELECT context FROM pg_settings WHERE name = '$name'});
	return $ctx eq '' ? undef : $ctx;
}

sub fuzz_node
{
	my ($name, $sasl) = @_;
	my $what = $sasl ? 'SASL' : 'no SASL';
	my $kport = PostgreSQL::Test::Cluster::get_free_port();
	my $node = kafka_node($name, $kport,
		"shared_buffers = 16MB\n"
		  . ($sasl ? "mqlog.kafka_sasl_mechanisms = 'PLAIN,SCRAM-SHA-256'\n" : ''));
	$node->safe_psql(
		'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
CREATE ROLE fuzzer LOGIN PASSWORD 'fuzz-secret';
SELECT mq_create_topic('fuzz', 4);
SELECT mq_create_topic('bombs', 4);
SELECT mq_grant(t, r, p) FROM unnest(ARRAY['fuzz', 'bombs']) t,
	unnest(ARRAY['kafka_app', 'fuzzer']) r, unnest(ARRAY['produce', 'consume', 'describe']) p;
});

	# the listener's timeouts, where this build has them (issue 30): a
	# connection that sent no whole request is closed after the first, one
	# idle after authenticating (or after a request, without SASL) after the
	# second
	my (@close, $restart);
	my %timeouts = (
		'mqlog.kafka_auth_timeout' => [ '3s', '--expect-auth-close', 3 ],
		'mqlog.kafka_idle_timeout' => [ '5s', '--expect-idle-close', 5 ]);
	foreach my $setting (sort keys %timeouts)
	{
		my ($value, $arg, $secs) = @{ $timeouts{$setting} };
		my $ctx = setting_context($node, $setting);
		if (!defined $ctx)
		{
			note("$what: $setting is not a setting of this build: its connections are not checked");
			next;
		}
		$node->safe_psql('postgres', "ALTER SYSTEM SET $setting = '$value'");
		$restart ||= $ctx eq 'postmaster';
		push @close, $arg, $secs;
	}
	$restart ? $node->restart : $node->reload;

	close connect_listener($kport);
	my $pid;
	wait_for(30, sub { ($pid = listener_pid($node)) =~ /^\d+$/ });
	like($pid, qr/^\d+$/, "$what: the listener is up");
	my $max_frame = $node->safe_psql('postgres',
		q{SELECT setting::bigint * CASE unit WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576 ELSE 1 END
		  FROM pg_settings WHERE name = 'mqlog.kafka_max_frame_size'});

	my @cmd = ($python, $fuzz, '--port', $kport, '--pid', $pid, '--seed', $seed,
		'--seconds', $seconds, '--topic', 'fuzz', '--bomb-topic', 'bombs', '--partitions', 4,
		'--max-frame', $max_frame, @close,
		($sasl ? ('--sasl-user', 'fuzzer', '--sasl-password', 'fuzz-secret') : ()), @extra);
	my ($out, $err) = ('', '');
	my $started = time;
	my $ok = eval {
		IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout($seconds + 600));
	};
	chomp $out;
	ok($ok, "$what: " . ($out || 'the fuzzer printed nothing'))
	  or diag("listener_fuzz.py (seed $seed, " . (time - $started) . " s): $err");
	note($err) if $ok;

	is(listener_pid($node), $pid, "$what: the same listener process serves afterwards");
	my ($rc, $xacts) = $node->psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity
		  WHERE backend_type = 'mqlog kafka listener' AND backend_xid IS NOT NULL});
	is($xacts, '0', "$what: and holds no transaction open");
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kport, Proto => 'tcp');
	my $answer;
	if ($sock)
	{
		print $sock frame(18, 0, '');
		$answer = response($sock);
		close $sock;
	}
	ok(defined $answer, "$what: ApiVersions is answered");
	my @died = grep { /terminated by signal|was terminated by exception|PANIC:/ }
	  split /\n/, slurp_file($node->logfile);
	is(scalar(@died), 0, "$what: no server process died") or diag(join("\n", @died));
	$node->stop('immediate', fail_ok => 1);
}

fuzz_node('kafka_fuzz', 0);
fuzz_node('kafka_fuzz_sasl', 1);

done_testing();
