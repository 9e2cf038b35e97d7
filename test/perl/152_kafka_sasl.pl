# SASL authentication of Kafka clients (doc/kafka.md, "Authentication"): a
# listener with mqlog.kafka_sasl_mechanisms = 'PLAIN, SCRAM-SHA-256' and two
# login roles,
# one with a SCRAM-SHA-256 secret and one with an md5 secret, driven by
# test/kafka/clients.py with MQK_SASL_USER and MQK_SASL_PASSWORD.
#
# Checks:
#  - confluent-kafka (SaslHandshake v1 + SaslAuthenticate) and kafka-python
#    (SaslHandshake v0 + a bare token) produce and consume as their role,
#    and mq_fetch shows the records;
#  - each role's Metadata lists only the topics it was granted;
#  - a produce to the other role's topic fails with an authorization error
#    (confluent-kafka) and writes nothing; Metadata for it answers
#    TOPIC_AUTHORIZATION_FAILED (kafka-python's client: its producer waits
#    out max_block_ms instead of reporting the error);
#  - a wrong password, an unknown user, a NOLOGIN role and a role whose
#    VALID UNTIL has passed are refused as an authentication failure, and
#    write nothing; the server log says why;
#  - ApiVersions is answered before authentication (and lists SaslHandshake
#    and SaslAuthenticate); a Metadata request before it closes the
#    connection, and so do CreateTopics, DeleteTopics and DescribeConfigs;
#  - SCRAM-SHA-256: confluent-kafka produces and kafka-python consumes as
#    alice; a wrong password, an unknown user and bob (whose md5 secret
#    cannot do SCRAM) are refused and write nothing;
#  - an unconfigured mechanism is UNSUPPORTED_SASL_MECHANISM with the
#    configured ones listed, SaslAuthenticate before SaslHandshake is
#    ILLEGAL_SASL_STATE, and both close the connection; SaslAuthenticate v2
#    (flexible) authenticates;
#  - the listener (the same process) is still serving afterwards.
use strict;
use warnings;

use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $clients = dirname(__FILE__) . '/../kafka/clients.py';
my $python = '/usr/bin/python3';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";

my $node = PostgreSQL::Test::Cluster->new('kafka_sasl');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.kafka_listen = '$bootstrap'
mqlog.kafka_sasl_mechanisms = 'PLAIN, SCRAM-SHA-256'
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SET password_encryption = 'scram-sha-256';
CREATE ROLE alice LOGIN PASSWORD 'alice-secret';
SET password_encryption = 'md5';
CREATE ROLE bob LOGIN PASSWORD 'bob-secret';
RESET password_encryption;
CREATE ROLE carol NOLOGIN PASSWORD 'carol-secret';
CREATE ROLE dave LOGIN PASSWORD 'dave-secret' VALID UNTIL '2001-01-01';
SELECT mq_create_topic('alice_t', 2);
SELECT mq_create_topic('bob_t', 2);
SELECT mq_create_topic('carol_t', 1);
SELECT mq_grant('alice_t', 'alice', 'produce');
SELECT mq_grant('alice_t', 'alice', 'consume');
SELECT mq_grant('bob_t', 'bob', 'produce');
SELECT mq_grant('bob_t', 'bob', 'consume');
SELECT mq_grant('carol_t', 'carol', 'produce');
SELECT mq_grant('carol_t', 'dave', 'produce');
});
like($node->safe_psql('postgres', q{SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'}),
	qr/^SCRAM-SHA-256\$/, 'alice has a SCRAM-SHA-256 secret');
like($node->safe_psql('postgres', q{SELECT rolpassword FROM pg_authid WHERE rolname = 'bob'}),
	qr/^md5/, 'bob has an md5 secret');

sub run_cmd
{
	my ($env, @cmd) = @_;
	my ($out, $err);
	local %ENV = (%ENV, %$env);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(90));
	return ($ok, $out // '', $err // '');
}

# clients.py as user with password: (ok, stdout lines, all output)
sub client
{
	my ($user, $password, @args) = @_;
	my $mechanism = 'PLAIN';
	$mechanism = shift @args if $args[0] eq 'SCRAM-SHA-256';
	my ($ok, $out, $err) = run_cmd(
		{ MQK_SASL_USER => $user, MQK_SASL_PASSWORD => $password, MQK_SASL_MECHANISM => $mechanism },
		$python, $clients, $bootstrap, @args);
	return ($ok, [ grep { length } split /\n/, $out ], "$out$err");
}

sub count_of
{
	my ($topic, $partitions) = @_;
	$partitions //= 2;
	return $node->safe_psql('postgres',
		qq{SELECT count(*) FROM generate_series(0, $partitions - 1) p,
		   LATERAL mq_fetch('$topic', p, 0, 1000, 1000000)});
}

# the listener is up once alice can list her topics
my ($ok, $lines, $all);
foreach (1 .. 60)
{
	($ok, $lines, $all) = client('alice', 'alice-secret', 'confluent-metadata');
	last if $ok && grep { $_ eq 'alice_t' } @$lines;
	sleep 1;
}
is_deeply($lines, ['alice_t'], 'confluent-kafka as alice: Metadata lists only her topic') or diag($all);
my $listener_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});

($ok, $lines, $all) = client('bob', 'bob-secret', 'kafka-python-metadata');
is_deeply($lines, ['bob_t'], 'kafka-python as bob (md5 secret): Metadata lists only his topic')
  or diag($all);

# --- produce and consume as the role -------------------------------------
($ok, $lines, $all) = client('alice', 'alice-secret', 'confluent-produce', 'alice_t', 'none', 5);
ok($ok && @$lines == 5, 'confluent-kafka as alice (SCRAM secret) produces') or diag($all);
($ok, $lines, $all) = client('alice', 'alice-secret', 'confluent-consume', 'alice_t', 2, 5);
ok($ok && @$lines == 5 && !grep({ !/ value-none-\d / } @$lines), 'confluent-kafka as alice consumes them back')
  or diag($all);

($ok, $lines, $all) = client('bob', 'bob-secret', 'kafka-python-produce', 'bob_t', 'gzip', 4);
ok($ok && @$lines == 4, 'kafka-python as bob (md5 secret) produces') or diag($all);
($ok, $lines, $all) = client('bob', 'bob-secret', 'kafka-python-consume', 'bob_t', 2, 4);
ok($ok && @$lines == 4 && !grep({ !/ value-gzip-\d / } @$lines), 'kafka-python as bob consumes them back')
  or diag($all);
($ok, $lines, $all) = client('alice', 'alice-secret', 'kafka-python-produce', 'alice_t', 'none', 2);
ok($ok && @$lines == 2, 'kafka-python as alice produces') or diag($all);
is(count_of('alice_t'), 7, 'mq_fetch: alice_t holds her 7 records');
is(count_of('bob_t'), 4, 'mq_fetch: bob_t holds his 4 records');

# --- privileges are the authenticated role's ----------------------------
($ok, $lines, $all) = client('bob', 'bob-secret', 'confluent-produce', 'alice_t', 'none', 1);
ok(!$ok && $all =~ /authorization/i, 'confluent-kafka as bob: produce to alice_t is not authorized')
  or diag($all);
($ok, $lines, $all) = client('alice', 'alice-secret', 'kafka-python-topic-error', 'bob_t');
is_deeply($lines, ['bob_t 29'], 'kafka-python as alice: Metadata for bob_t is TOPIC_AUTHORIZATION_FAILED')
  or diag($all);
($ok, $lines, $all) = client('bob', 'bob-secret', 'kafka-python-topic-error', 'bob_t');
is_deeply($lines, ['bob_t 0'], 'and for bob it is no error') or diag($all);
is(count_of('alice_t') . ' ' . count_of('bob_t'), '7 4', 'and neither wrote anything');

# --- refused authentications ---------------------------------------------
my $log_offset = -s $node->logfile;
foreach my $case (
	[ 'alice', 'wrong', 'alice_t', 'a wrong password' ],
	[ 'nobody', 'x', 'alice_t', 'an unknown user' ],
	[ 'carol', 'carol-secret', 'carol_t', 'a NOLOGIN role' ],
	[ 'dave', 'dave-secret', 'carol_t', 'a role past its VALID UNTIL' ])
{
	my ($user, $password, $topic, $what) = @$case;
	foreach my $lib ('confluent', 'kafka-python')
	{
		($ok, $lines, $all) = client($user, $password, "$lib-produce", $topic, 'none', 1);
		ok(!$ok && $all =~ /authentication failed/i, "$lib: $what is refused as an authentication failure")
		  or diag($all);
	}
}
is(count_of('alice_t') . ' ' . count_of('carol_t', 1), '7 0', 'the refused clients wrote nothing');
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/SASL PLAIN authentication failed for user "alice".*\n.*DETAIL:\s+Password does not match/,
	'the server log: a wrong password');
like($log, qr/failed for user "nobody".*\n.*DETAIL:\s+Role does not exist/, 'the server log: an unknown user');
like($log, qr/failed for user "carol".*\n.*DETAIL:\s+Role is not permitted to log in/,
	'the server log: a NOLOGIN role');
like($log, qr/failed for user "dave".*\n.*DETAIL:\s+User "dave" has an expired password/,
	'the server log: an expired role');

# --- SCRAM-SHA-256 ---------------------------------------------------------
($ok, $lines, $all) = client('alice', 'alice-secret', 'SCRAM-SHA-256', 'confluent-produce', 'alice_t', 'zstd', 3);
ok($ok && @$lines == 3, 'confluent-kafka as alice with SCRAM-SHA-256 produces') or diag($all);
($ok, $lines, $all) = client('alice', 'alice-secret', 'SCRAM-SHA-256', 'kafka-python-consume', 'alice_t', 2, 10);
ok($ok && @$lines == 10, 'kafka-python as alice with SCRAM-SHA-256 consumes all 10 of her records') or diag($all);
($ok, $lines, $all) = client('alice', 'alice-secret', 'SCRAM-SHA-256', 'kafka-python-topic-error', 'bob_t');
is_deeply($lines, ['bob_t 29'], 'kafka-python with SCRAM: Metadata for bob_t is TOPIC_AUTHORIZATION_FAILED')
  or diag($all);
$log_offset = -s $node->logfile;
foreach my $case (
	[ 'alice', 'wrong', 'a wrong password' ],
	[ 'nobody', 'x', 'an unknown user' ],
	[ 'bob', 'bob-secret', 'a role with an md5 secret' ])
{
	my ($user, $password, $what) = @$case;
	foreach my $lib ('confluent', 'kafka-python')
	{
		($ok, $lines, $all) = client($user, $password, 'SCRAM-SHA-256', "$lib-produce", 'alice_t', 'none', 1);
		ok(!$ok && $all =~ /authentication failed/i, "$lib with SCRAM-SHA-256: $what is refused")
		  or diag($all);
	}
}
is(count_of('alice_t'), 10, 'the refused SCRAM clients wrote nothing');
$log = slurp_file($node->logfile, $log_offset);
like($log, qr/SCRAM-SHA-256 authentication failed for user "alice".*\n.*DETAIL:\s+The SCRAM proof does not match/,
	'the server log: a wrong SCRAM proof');
like($log, qr/SCRAM-SHA-256 authentication failed for user "bob".*\n.*DETAIL:\s+The role's password is not a SCRAM-SHA-256 secret/,
	'the server log: an md5 secret cannot do SCRAM');

# --- a request before authentication -------------------------------------
my ($rok, $rout, $rerr) = run_cmd({}, $python, $clients, $bootstrap, 'raw-before-auth');
$all = "$rout$rerr";
like($rout, qr/^api_versions error 0 keys .*\b17\b.*\b18\b.*\b36\b/m,
	'ApiVersions is answered before authentication and lists SaslHandshake and SaslAuthenticate')
  or diag($all);
like($rout, qr/^closed$/m, 'a Metadata request before authentication closes the connection')
  or diag($all);
like($rout, qr/^create_topics closed\ndelete_topics closed\ndescribe_configs closed$/m,
	'so do CreateTopics, DeleteTopics and DescribeConfigs before authentication')
  or diag($all);

# --- SASL's errors, and SaslAuthenticate's flexible v2 -----------------------
($ok, $lines, $all) = client('alice', 'alice-secret', 'raw-sasl-errors');
is_deeply(
	$lines,
	[
		'handshake GSSAPI error 33 mechanisms PLAIN SCRAM-SHA-256 then closed',
		'authenticate before handshake error 34 then closed',
		'authenticate v2 error 0',
		'metadata answered'
	],
	'UNSUPPORTED_SASL_MECHANISM lists the mechanisms, ILLEGAL_SASL_STATE, both then close; SaslAuthenticate v2 authenticates'
) or diag($all);

# --- still serving ---------------------------------------------------------
($ok, $lines, $all) = client('alice', 'alice-secret', 'confluent-metadata');
is_deeply($lines, ['alice_t'], 'afterwards alice still lists her topic') or diag($all);
is($node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	$listener_pid, 'served by the same listener process throughout');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener' AND backend_xid IS NOT NULL}),
	0, 'the listener holds no transaction open');

$node->stop;
done_testing();
