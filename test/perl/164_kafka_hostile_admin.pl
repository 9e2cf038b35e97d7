# A hostile client and a hostile role against the Kafka group and admin
# APIs of issue 32 (test/kafka/hostile_admin.py, raw requests, SASL PLAIN).
#
# Checks:
#  - strings that are not valid UTF-8 (a commit's metadata, a group id, a
#    grant's group name) make their request malformed (the connection
#    closes) and nothing is stored: mqlog's text columns hold only valid
#    text, which pg_dump's restore needs (an invalid byte there made the
#    restore of the whole table fail); UTF-8 metadata and group ids round
#    trip;
#  - a role without rights on a group and a topic: ListGroups leaves the
#    group out, DescribeGroups, OffsetFetch (all topics and named),
#    OffsetDelete and DeleteGroups answer GROUP_AUTHORIZATION_FAILED;
#    AlterConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords
#    TOPIC_AUTHORIZATION_FAILED; CreateAcls on the topic (to itself, to
#    User:*) and on the group CLUSTER_AUTHORIZATION_FAILED; DescribeAcls
#    and DeleteAcls find nothing; auto-creation TOPIC_AUTHORIZATION_FAILED;
#    and the group's offsets and metadata, the topic's configuration,
#    partitions and log, and the grants are as they were;
#  - DescribeGroups of a group of SQL sessions shows a session's client
#    address as pg_stat_activity does: to its role (and whoever has its
#    privileges or pg_read_all_stats), not to a grantee of the group;
#  - a client reconnecting and sending Metadata before authenticating, for
#    4 s: its address is held (backoff.c), so it gets at most a few dozen
#    connections served and log lines (thousands a second before), while
#    ApiVersions from the same address is answered at once;
#  - a TLS listener: plaintext clients reconnecting at once for 3 s (failed
#    handshakes, thousands a second) get at most 10 log lines a second and
#    a count of the others; a TLS client is served meanwhile.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib dirname(__FILE__);
use MqKafka qw(kafka_node connect_listener wait_for);

my $script = dirname(__FILE__) . '/../kafka/hostile_admin.py';
my $kport = PostgreSQL::Test::Cluster::get_free_port();
# TCP too, for a SQL session with a client address
my $node = kafka_node('hostile_admin', $kport,
	"mqlog.kafka_sasl_mechanisms = 'PLAIN'\nlisten_addresses = '127.0.0.1'\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE ops LOGIN PASSWORD 'ops-secret' IN ROLE mqlog_admin;
CREATE ROLE lead LOGIN PASSWORD 'lead-secret';
CREATE ROLE hostile LOGIN PASSWORD 'hostile-secret';
GRANT EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) TO lead;
SET ROLE ops;
SELECT mq_create_topic('orders', 2, 1, '{"retention.ms": 86400000}');
SELECT mq_produce_text('orders', 'v' || i, partition => 0) FROM generate_series(1, 5) i;
SELECT count(*) FROM mq_reset_offsets('billing', 'orders', 'latest');
SET ROLE lead;
SELECT mq_create_topic('team', 1);
RESET ROLE;
});
connect_listener($kport);

sub hostile
{
	my (@args) = @_;
	my ($out, $err);
	IPC::Run::run([ '/usr/bin/python3', $script, $kport, @args ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(120))
	  or die "hostile_admin.py @args failed: $err$out";
	return decode_json($out);
}

# --- strings that are not UTF-8 ---------------------------------------------

my $r = hostile('lead', 'lead-secret', 'bad-utf8', 'team');
is($r->{$_}, 'closed', "a request with a $_ that is not UTF-8 closes the connection")
  foreach qw(metadata group acl_group);
is_deeply($r->{utf8_commit}, [ [ 'team', [ [ 0, 0 ] ] ] ], 'a UTF-8 group id and metadata are committed');
is_deeply($r->{utf8_fetch}, [ 0, [ [ 'team', 0, 0, "m\x{e9}ta", 0 ] ] ],
	'and fetched back as they were');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id IN ('hostile-g', 'g' || chr(195) || '(')}),
	'0', 'no offset of the refused commits is stored');
# convert_from fails on an invalid sequence, as a restore's COPY would
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM mqlog.committed_offset
         WHERE convert_from(textsend(group_id), 'UTF8') IS NOT NULL
           AND convert_from(textsend(coalesce(metadata, '')), 'UTF8') IS NOT NULL)
     + (SELECT count(*) FROM mqlog.consumer_group WHERE convert_from(textsend(group_id), 'UTF8') IS NOT NULL)
     + (SELECT count(*) FROM mqlog.group_acl WHERE convert_from(textsend(group_id), 'UTF8') IS NOT NULL)}),
	'5', 'every group id and metadata in the catalog is valid UTF-8 (the offsets of billing and of the UTF-8 group, their owners)');

# --- a role without rights on the group and the topic ---------------------

# the state a refused request must leave as it was
my $state = q{
SELECT string_agg(concat_ws(':', group_id, "partition", committed_offset, metadata), ',') FROM mqlog.committed_offset;
SELECT config_overrides, partitions FROM mqlog.topics WHERE topic = 'orders';
SELECT string_agg(concat_ws(':', "partition", log_start_offset, high_watermark), ',' ORDER BY "partition") FROM mqlog.partitions WHERE topic = 'orders';
SELECT count(*) FROM mqlog.topic_acl;
SELECT count(*) FROM mqlog.group_acl;
SELECT count(*) FROM mqlog.topic;
};
my $before = $node->safe_psql('postgres', $state);
$r = hostile('hostile', 'hostile-secret', 'probe', 'billing', 'orders');
is_deeply($r->{list_groups}, [ 0, [] ], 'ListGroups leaves out a group the role may not use');
is($r->{$_}, 30, "$_ of a group the role may not use: GROUP_AUTHORIZATION_FAILED")
  foreach qw(describe_group offset_delete delete_group);
is_deeply($r->{$_}, [ 30, [] ], "$_ of a group the role may not use: GROUP_AUTHORIZATION_FAILED, no offset")
  foreach qw(offset_fetch_all offset_fetch_topic);
is($r->{$_}, 29, "$_ on a topic the role may not alter: TOPIC_AUTHORIZATION_FAILED")
  foreach qw(alter_configs incremental_alter_configs create_partitions delete_records);
is($r->{$_}, 31, "CreateAcls $_ by a role that may not grant: CLUSTER_AUTHORIZATION_FAILED")
  foreach qw(grant_self_topic grant_public_topic grant_self_group);
is_deeply($r->{describe_acls}, [ 0, [] ], 'DescribeAcls shows the role no grant');
is_deeply($r->{delete_acls}, [], 'DeleteAcls of every binding deletes none');
is($r->{auto_create}, 29, 'auto-creation by a role that may not create topics: TOPIC_AUTHORIZATION_FAILED');
is($node->safe_psql('postgres', $state), $before, 'offsets, the topic, its log, the grants and the topics are as they were');

# --- a SQL member's address ----------------------------------------------------

$node->safe_psql('postgres', q{SET ROLE ops; SELECT mq_grant_group('live', 'hostile');});
my $member = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', 'host=127.0.0.1 port=' . $node->port . ' dbname=postgres user=ops application_name=ops-app',
	  '-c', q{SELECT count(*) FROM mq_poll('live', 'orders')}, '-c', 'SELECT pg_sleep(60)' ],
	'>', \my $member_out, '2>', \my $member_err);
ok(wait_for(30, sub { $node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.group_members WHERE group_id = 'live'}) eq '1' }),
	'a SQL session over TCP is a member of group live');
$r = hostile('hostile', 'hostile-secret', 'describe', 'live');
is_deeply($r->{members}, [ [ $r->{members}[0][0], 'ops-app', '' ] ],
	'DescribeGroups by a grantee of the group: the member\'s application_name, not its address')
  or diag(explain $r);
is($node->safe_psql('postgres', q{SET ROLE hostile; SELECT coalesce(client_addr::text, 'null') FROM mqlog.group_members}),
	'null', 'as mqlog.group_members (pg_stat_activity) shows it to that role');
$r = hostile('ops', 'ops-secret', 'describe', 'live');
is_deeply($r->{members}, [ [ $r->{members}[0][0], 'ops-app', '/127.0.0.1' ] ],
	'DescribeGroups by the session\'s own role: its address');
$member->kill_kill;

# --- requests before authentication, reconnecting ---------------------------

my $log_at = -s $node->logfile;
$r = hostile('-', '-', 'preauth-storm', 4);
ok($r->{api_versions_ms} < 1000, "ApiVersions from the storm's address is answered at once ($r->{api_versions_ms} ms)");
ok(wait_for(10, sub { slurp_file($node->logfile, $log_at) =~ /before authenticating/ }),
	'the requests before authentication are logged');
my $lines = () = slurp_file($node->logfile, $log_at) =~ /sent a Metadata request before authenticating/g;
note("$r->{connections} connections in 4 s, $lines log lines");
ok($lines >= 1 && $lines <= 60, "the storm's address is held: $lines log lines in 4 s");

is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
 WHERE backend_type = 'mqlog kafka listener' AND state LIKE 'idle in transaction%'}),
	'0', 'the listener holds no transaction open');

$node->stop;

# --- failed TLS handshakes, reconnecting -------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir();
my ($o, $e);
IPC::Run::run([ 'openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-nodes', '-keyout', "$dir/server.key", '-out', "$dir/server.crt", '-days', '2',
		'-subj', '/CN=localhost' ], '>', \$o, '2>', \$e)
  or die "openssl: $e";
chmod 0600, "$dir/server.key";
my $tport = PostgreSQL::Test::Cluster::get_free_port();
my $tls = kafka_node('hostile_tls', $tport,
	"mqlog.kafka_ssl = on\nmqlog.kafka_ssl_cert_file = '$dir/server.crt'\nmqlog.kafka_ssl_key_file = '$dir/server.key'\n");
$tls->safe_psql('postgres', 'CREATE EXTENSION mqlog; CREATE ROLE kafka_app LOGIN;');
connect_listener($tport);
$log_at = -s $tls->logfile;
my $storm = IPC::Run::start([ '/usr/bin/python3', $script, $tport, '-', '-', 'plaintext-storm', 3 ],
	'>', \my $storm_out, '2>', \my $storm_err);
# a TLS client meanwhile (python's ssl module)
my $tls_ok = 0;
foreach (1 .. 3)
{
	my ($out, $err);
	IPC::Run::run([ '/usr/bin/python3', '-c', qq{
import socket, ssl, struct
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
s = c.wrap_socket(socket.create_connection(('127.0.0.1', $tport), timeout=10))
p = struct.pack('>hhih', 18, 0, 7, 2) + b'tc'
s.sendall(struct.pack('>i', len(p)) + p)
print('answered' if len(s.recv(4)) == 4 else 'closed')
} ], '>', \$out, '2>', \$err, IPC::Run::timeout(30));
	$tls_ok++ if ($out // '') eq "answered\n";
	sleep 1;
}
$storm->finish;
$r = decode_json($storm_out);
is($tls_ok, 3, 'a TLS client is served while plaintext clients storm the TLS listener');
ok(wait_for(10, sub { slurp_file($tls->logfile, $log_at) =~ /more TLS handshakes with Kafka clients failed and were not logged/ }),
	'the failed handshakes past 10 a second are counted in the log');
$lines = () = slurp_file($tls->logfile, $log_at) =~ /LOG:  TLS handshake with Kafka client \S+ failed/g;
note("$r->{connections} plaintext connections in 3 s, $lines handshake lines");
ok($r->{connections} > 100 && $lines <= 50,
	"$r->{connections} failed handshakes in 3 s: $lines lines (10 a second at most)");
$tls->stop;
done_testing();
