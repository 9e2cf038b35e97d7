# TLS on the Kafka listener (doc/kafka.md, "TLS"): security protocols SSL
# and SASL_SSL through the OpenSSL PostgreSQL links against.  A throwaway
# CA, a second CA nobody trusts, server and client certificates are made
# here with the openssl command.
#
# Checks:
#  - SSL (mqlog.kafka_ssl, client certificates requested), the server's own
#    ssl_cert_file / ssl_key_file / ssl_ca_file by default: kcat,
#    confluent-kafka and kafka-python produce and consume as
#    mqlog.kafka_role, and mq_fetch shows the records;
#  - a request larger than the listener's 64 kB buffer and a second one
#    sent in the same write are both answered: the second one's bytes,
#    decrypted with the end of the first, wait in the TLS state where no
#    socket event announces them (checked to fail without
#    listener.c's has_pending);
#  - a client that trusts another CA is refused (its handshake fails, the
#    log says why), and so is a plaintext client; the same listener process
#    serves the next client;
#  - a client certificate authenticates its connection as the role its
#    Common Name names (Metadata lists that role's topics, its produce is
#    that role's, mqlog.kafka_role's privileges do not apply); a
#    certificate of the other CA is refused at the handshake; one naming
#    no role, or a NOLOGIN role, is closed at its first request (logged);
#  - connections that never finish their handshake (one silent, one that
#    sends half a ClientHello) are closed after mqlog.kafka_auth_timeout,
#    while a third connection's Metadata requests, every 100 ms, are
#    answered all along: the handshake does not block the listener
#    (checked to fail with the handshake's socket made blocking);
#  - what connections cost: 200 half-sent ClientHellos announcing 128 kB,
#    and 100 idle connections past their handshake (numbers noted);
#  - a reload reads the certificate files again for new connections, and a
#    reload with a key that does not match, a key with a passphrase or a
#    key file others may read keeps the previous ones (logged);
#  - SASL_SSL: kcat with PLAIN, confluent-kafka with SCRAM-SHA-256 and
#    kafka-python with PLAIN produce and consume; a wrong password and a
#    wrong CA are refused;
#  - the rule for addresses that are not loopback, on 0.0.0.0 (reached
#    through 127.0.0.1): SASL PLAIN without TLS logs a WARNING at start;
#    with TLS it does not, and PLAIN over TLS works; TLS without SASL
#    starts there only when client certificates are required, and then a
#    client without one is refused.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqKafka qw(wait_for peak_kb);

my $clients = dirname(__FILE__) . '/../kafka/clients.py';
my $tlspy = dirname(__FILE__) . '/../kafka/tls.py';
my $python = '/usr/bin/python3';
my $dir = PostgreSQL::Test::Utils::tempdir;

# --- certificates ------------------------------------------------------------
sub openssl
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'openssl', @args ], '>', \$out, '2>', \$err)
	  or die "openssl @args: $err";
	return $out;
}

sub new_key
{
	my ($name) = @_;
	openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-out', "$dir/$name.key");
	chmod 0600, "$dir/$name.key";
}

sub new_ca
{
	my ($name) = @_;
	new_key($name);
	openssl('req', '-x509', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.crt",
		'-days', '2', '-subj', "/CN=mqlog test $name");
}

# a certificate of $cn signed by $ca; a server's names localhost and 127.0.0.1
sub new_cert
{
	my ($name, $cn, $ca, $server) = @_;
	new_key($name);
	openssl('req', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.csr", '-subj', "/CN=$cn");
	my @ext;
	if ($server)
	{
		PostgreSQL::Test::Utils::append_to_file("$dir/san.ext",
			"subjectAltName=DNS:localhost,IP:127.0.0.1\n") unless -e "$dir/san.ext";
		@ext = ('-extfile', "$dir/san.ext");
	}
	openssl('x509', '-req', '-in', "$dir/$name.csr", '-CA', "$dir/$ca.crt", '-CAkey', "$dir/$ca.key",
		'-CAcreateserial', '-out', "$dir/$name.crt", '-days', '2', @ext);
}

new_ca('ca');
new_ca('evil');
new_cert('server', 'localhost', 'ca', 1);
new_cert('server2', 'mqlog-reloaded', 'ca', 1);
new_cert('alice', 'alice', 'ca');
new_cert('evil_alice', 'alice', 'evil');
new_cert('nobody', 'nobody', 'ca');
new_cert('carol', 'carol', 'ca');
ok(-s "$dir/server.crt" && -s "$dir/alice.crt", 'openssl made the CAs and certificates');

# --- the node ----------------------------------------------------------------
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $node = PostgreSQL::Test::Cluster->new('kafka_tls');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
ssl_cert_file = '$dir/server.crt'
ssl_key_file = '$dir/server.key'
ssl_ca_file = '$dir/ca.crt'
mqlog.kafka_listen = '$bootstrap'
mqlog.kafka_role = 'kafka_app'
mqlog.kafka_ssl = on
mqlog.kafka_ssl_client_auth = requested
mqlog.kafka_auth_timeout = 3000
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app;
SET password_encryption = 'scram-sha-256';
CREATE ROLE alice LOGIN PASSWORD 'alice-secret';
CREATE ROLE carol NOLOGIN;
-- clients.py's records carry 2023 timestamps: no retention drops them
SELECT mq_create_topic('shared', 2, config => '{"retention.ms": -1}');
SELECT mq_grant('shared', 'kafka_app', 'produce');
SELECT mq_grant('shared', 'kafka_app', 'consume');
SELECT mq_create_topic('alice_t', 2, config => '{"retention.ms": -1}');
SELECT mq_grant('alice_t', 'alice', 'produce');
SELECT mq_grant('alice_t', 'alice', 'consume');
});

sub run_cmd
{
	my ($env, @cmd) = @_;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, %$env);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(90));
	return ($ok, $out, "$out$err");
}

# clients.py with TLS settings (MQK_SSL_CA etc.): (ok, stdout lines, all output)
sub client
{
	my ($env, @args) = @_;
	my ($ok, $out, $all) = run_cmd({ MQK_SSL_CA => "$dir/ca.crt", %$env }, $python, $clients, $bootstrap, @args);
	return ($ok, [ grep { length } split /\n/, $out ], $all);
}

sub tlspy
{
	my (@args) = @_;
	my ($ok, $out, $all) = run_cmd({}, $python, $tlspy, $bootstrap, @args);
	diag($all) if $all =~ /Traceback/;
	return $out;
}

# kcat over TLS: kcat's own -X settings, then its arguments
sub kcat
{
	my ($settings, @args) = @_;
	my @x = map { ('-X', "$_=$settings->{$_}") } sort keys %$settings;
	return run_cmd({}, 'kcat', '-b', $bootstrap, '-X', 'security.protocol=SSL',
		'-X', "ssl.ca.location=$dir/ca.crt", @x, @args);
}

sub count_of
{
	my ($topic) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT count(*) FROM generate_series(0, 1) p, LATERAL mq_fetch('$topic', p, 0, 1000, 1000000)});
}

sub listener_pid
{
	return $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
}

# the resident size of a process now, in kB
sub rss_kb
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or die "no process $pid: $!";
	my ($kb) = map { /^VmRSS:\s+(\d+)/ ? $1 : () } <$fh>;
	return $kb;
}

my $cert_alice = { MQK_SSL_CERT => "$dir/alice.crt", MQK_SSL_KEY => "$dir/alice.key" };

# --- SSL: produce and consume as mqlog.kafka_role -----------------------------
my ($ok, $lines, $all);
ok(wait_for(60, sub { ($ok, $lines, $all) = client({}, 'confluent-metadata'); $ok && "@$lines" eq 'shared' }),
	'confluent-kafka over SSL lists the topics of mqlog.kafka_role') or diag($all);
my $pid = listener_pid();
like(slurp_file($node->logfile), qr/mqlog Kafka listener on \Q$bootstrap\E serving database "postgres" over TLS to clients authenticated by their certificate, and as role "kafka_app" to those without one/,
	'the log says the listener serves over TLS');

my $out;
($ok, $out, $all) = run_cmd({}, 'bash', '-c',
	"printf 'k1:v1\\nk2:v2\\nk3:v3\\n' | kcat -b $bootstrap -X security.protocol=SSL -X ssl.ca.location=$dir/ca.crt -P -t shared -K: -p 0");
ok($ok, 'kcat over SSL produces 3 keyed records') or diag($all);
($ok, $out, $all) = kcat({}, '-C', '-t', 'shared', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o %k %s\n');
is($out, "0 k1 v1\n1 k2 v2\n2 k3 v3\n", 'kcat over SSL consumes them back') or diag($all);

($ok, $lines, $all) = client({}, 'confluent-produce', 'shared', 'zstd', 6);
ok($ok && @$lines == 6, 'confluent-kafka over SSL produces 6 records') or diag($all);
($ok, $lines, $all) = client({}, 'confluent-consume', 'shared', 2, 9);
ok($ok && @$lines == 9 && (grep { / value-zstd-\d / } @$lines) == 6,
	'confluent-kafka over SSL consumes all 9') or diag($all);
($ok, $lines, $all) = client({}, 'kafka-python-produce', 'shared', 'gzip', 4);
ok($ok && @$lines == 4, 'kafka-python over SSL produces 4 records') or diag($all);
($ok, $lines, $all) = client({}, 'kafka-python-consume', 'shared', 2, 13);
ok($ok && @$lines == 13, 'kafka-python over SSL consumes all 13') or diag($all);
is(count_of('shared'), 13, 'mq_fetch: the 13 records are in the log');
is(tlspy('pipelined', "$dir/ca.crt"), "both answered\n",
	'an 80 kB request and a second one in one write are both answered (the second waited decrypted in the TLS state)');

# --- refused: another CA, plaintext -----------------------------------------
my $log_offset = -s $node->logfile;
($ok, $out, $all) = run_cmd({}, 'kcat', '-b', $bootstrap, '-X', 'security.protocol=SSL',
	'-X', "ssl.ca.location=$dir/evil.crt", '-m', '5', '-L');
ok(!$ok && $all =~ /certificate verify failed/, 'kcat trusting another CA: its handshake fails (certificate verify failed)')
  or diag($all);
($ok, $lines, $all) = client({ MQK_SSL_CA => "$dir/evil.crt" }, 'confluent-produce', 'shared', 'none', 1);
ok(!$ok && $all =~ /tls failed|certificate verify failed/, 'confluent-kafka trusting another CA is refused')
  or diag($all);
is(tlspy('plaintext'), "closed\n", 'a plaintext ApiVersions to the TLS listener: the connection is closed');
ok(wait_for(10, sub { slurp_file($node->logfile, $log_offset) =~ /TLS handshake with Kafka client 127\.0\.0\.1:\d+ failed: .*unknown ca/ }),
	'the server log: the handshake failed, the client did not know the CA');
like(slurp_file($node->logfile, $log_offset), qr/TLS handshake with Kafka client 127\.0\.0\.1:\d+ failed: .*(wrong version number|http request|packet length)/,
	'the server log: the plaintext client\'s handshake failed');
is(count_of('shared'), 13, 'the refused clients wrote nothing');
($ok, $lines, $all) = client({}, 'confluent-metadata');
is("@$lines", 'shared', 'the next client is served');
is(listener_pid(), $pid, 'by the same listener process');

# --- client certificates ----------------------------------------------------------
($ok, $lines, $all) = client($cert_alice, 'confluent-metadata');
is("@$lines", 'alice_t', 'with alice\'s certificate, Metadata lists alice\'s topics, not kafka_app\'s') or diag($all);
($ok, $lines, $all) = client($cert_alice, 'confluent-produce', 'alice_t', 'none', 3);
ok($ok && @$lines == 3, 'with alice\'s certificate, confluent-kafka produces to alice_t') or diag($all);
($ok, $lines, $all) = client($cert_alice, 'kafka-python-consume', 'alice_t', 2, 3);
ok($ok && @$lines == 3, 'with alice\'s certificate, kafka-python consumes them') or diag($all);
($ok, $out, $all) = run_cmd({}, 'bash', '-c',
	"printf 'a:b\\n' | kcat -b $bootstrap -X security.protocol=SSL -X ssl.ca.location=$dir/ca.crt "
	  . "-X ssl.certificate.location=$dir/alice.crt -X ssl.key.location=$dir/alice.key -P -t alice_t -p 0");
ok($ok && $all !~ /failed/i, 'with alice\'s certificate, kcat produces to alice_t') or diag($all);
($ok, $lines, $all) = client($cert_alice, 'confluent-produce', 'shared', 'none', 1);
ok(!$ok && $all =~ /authorization/i, 'with alice\'s certificate, kafka_app\'s topic is not authorized') or diag($all);
($ok, $lines, $all) = client({}, 'confluent-produce', 'alice_t', 'none', 1);
ok(!$ok && $all =~ /authorization/i, 'without a certificate (kafka_app), alice_t is not authorized') or diag($all);
is(count_of('alice_t') . ' ' . count_of('shared'), '4 13', 'mq_fetch: alice_t holds alice\'s 4 records, shared nothing more');

is(tlspy('metadata', "$dir/ca.crt", "$dir/alice.crt", "$dir/alice.key"), "metadata answered\n",
	'raw: with alice\'s certificate Metadata is answered');
$log_offset = -s $node->logfile;
like(tlspy('metadata', "$dir/ca.crt", "$dir/evil_alice.crt", "$dir/evil_alice.key"), qr/^refused: /,
	'a certificate for alice signed by another CA is refused');
ok(wait_for(10, sub { slurp_file($node->logfile, $log_offset) =~ /TLS handshake with Kafka client \S+ failed: .*certificate verify failed/ }),
	'the server log: its certificate did not verify');
foreach my $case ([ 'nobody', 'Role does not exist' ], [ 'carol', 'Role is not permitted to log in' ])
{
	my ($who, $why) = @$case;
	$log_offset = -s $node->logfile;
	is(tlspy('metadata', "$dir/ca.crt", "$dir/$who.crt", "$dir/$who.key"), "metadata closed\n",
		"a certificate of $who: ApiVersions is answered, Metadata closes the connection");
	like(slurp_file($node->logfile, $log_offset),
		qr/certificate authentication failed for user "$who"; closing its connection\n.*DETAIL:\s+$why/,
		"the server log: certificate authentication failed for $who: $why");
}
is(count_of('alice_t'), 4, 'the refused certificates wrote nothing');

# --- handshakes that never finish ----------------------------------------------
$log_offset = -s $node->logfile;
my $stall = tlspy('stall', "$dir/ca.crt", 30);
my ($silent) = $stall =~ /^silent closed after ([\d.]+)$/m;
my ($partial) = $stall =~ /^partial closed after ([\d.]+)$/m;
ok(defined $silent && $silent >= 2.5 && $silent < 15,
	'a connection that sends no ClientHello is closed after mqlog.kafka_auth_timeout (3 s)') or diag($stall);
ok(defined $partial && $partial >= 2.5 && $partial < 15,
	'one that sends half a ClientHello is closed after it too') or diag($stall);
my ($answered, $slowest) = $stall =~ /^watchdog (\d+) answered while stalled, slowest (\d+) ms$/m;
ok(defined $answered && $answered >= 10 && $slowest < 1000,
	'meanwhile another TLS connection has its Metadata answered every 100 ms, none slower than a second')
  or diag($stall);
note("stalled handshakes: $stall");
like(slurp_file($node->logfile, $log_offset),
	qr/closing the connection of Kafka client \S+: it did not complete its TLS handshake within mqlog.kafka_auth_timeout/,
	'the server log says why they were closed');

# --- what connections cost ------------------------------------------------------
# idle connections first: the hellos' memory, freed, would be reused
{
	my $before = rss_kb($pid);
	my ($in, $hout) = ('', '');
	my $h = IPC::Run::start([ $python, $tlspy, $bootstrap, 'hold', "$dir/ca.crt", 100 ], '<', \$in,
		'>', \$hout, '2>', \$hout, IPC::Run::timeout(120));
	$h->pump until $hout =~ /ready|Traceback|closed/;
	sleep 1;
	my $during = rss_kb($pid);
	like($hout, qr/ready/, '100 TLS connections past their handshake and an ApiVersions each');
	ok($during - $before < 100 * 200, 'idle, they cost the listener under 200 kB each');
	note(sprintf('100 idle TLS connections: the listener grew %d kB (%.0f kB each)',
		$during - $before, ($during - $before) / 100));
	$h->finish;

	$before = rss_kb($pid);
	my $peak_before = peak_kb($pid);
	($in, $hout) = ('', '');
	$h = IPC::Run::start([ $python, $tlspy, $bootstrap, 'hellos', 200 ], '<', \$in, '>', \$hout,
		'2>', \$hout, IPC::Run::timeout(120));
	$h->pump until $hout =~ /sent|Traceback/;
	sleep 1;
	$during = rss_kb($pid);
	my $grown = peak_kb($pid) - $peak_before;
	$h->finish;    # stdin closed: its connections go
	ok($during - $before < 200 * 300, '200 half-sent ClientHellos announcing 128 kB each: under 300 kB each')
	  or diag($hout);
	note(sprintf('200 half-sent 128 kB ClientHellos: the listener grew %d kB (%.0f kB each), its peak %d kB',
		$during - $before, ($during - $before) / 200, $grown));
}
($ok, $lines, $all) = client({}, 'confluent-metadata');
is("@$lines", 'shared', 'the listener still serves');
is(listener_pid(), $pid, 'the same process');

# --- reload ----------------------------------------------------------------------
is(tlspy('subject', "$dir/ca.crt"), "localhost\n", 'the listener shows the server\'s ssl_cert_file');
my ($across_in, $across_out) = ('', '');
my $across = IPC::Run::start([ $python, $tlspy, $bootstrap, 'across', "$dir/ca.crt" ],
	'<', \$across_in, '>', \$across_out, '2>', \$across_out, IPC::Run::timeout(300));
$across->pump until $across_out =~ /ready|Traceback|closed/;
$node->append_conf('postgresql.conf', qq{
mqlog.kafka_ssl_cert_file = '$dir/server2.crt'
mqlog.kafka_ssl_key_file = '$dir/server2.key'
});
$node->reload;
ok(wait_for(20, sub { tlspy('subject', "$dir/ca.crt") eq "mqlog-reloaded\n" }),
	'after a reload, new connections get mqlog.kafka_ssl_cert_file\'s certificate');
$across_in .= "go\n";
$across->pump until $across_out =~ /ready\n(answered|closed)\n|Traceback/;
like($across_out, qr/ready\nanswered\n/, 'a connection opened before the reload is still served (it keeps the TLS context it began with)');
openssl('pkey', '-in', "$dir/server2.key", '-aes256', '-passout', 'pass:secret', '-out', "$dir/locked.key");
chmod 0600, "$dir/locked.key";
PostgreSQL::Test::Utils::append_to_file("$dir/open.key", slurp_file("$dir/server2.key"));
chmod 0644, "$dir/open.key";
foreach my $case (
	[ 'server.key', qr/could not load the Kafka listener's TLS private key "[^"]*server.key": .*key values mismatch/,
		'a key that does not match the certificate' ],
	[ 'locked.key', qr/the Kafka listener's private key file "[^"]*locked.key" is protected by a passphrase/,
		'a key with a passphrase' ],
	[ 'open.key', qr/private key file "[^"]*open.key" has group or world access/, 'a key file others may read' ])
{
	my ($file, $why, $what) = @$case;
	$log_offset = -s $node->logfile;
	$node->append_conf('postgresql.conf', qq{
mqlog.kafka_ssl_key_file = '$dir/$file'
});
	$node->reload;
	ok(wait_for(20, sub { slurp_file($node->logfile, $log_offset) =~ /the Kafka listener's TLS configuration was not reloaded/ }),
		"a reload with $what is refused");
	like(slurp_file($node->logfile, $log_offset), $why, 'the log says why');
}
is(tlspy('subject', "$dir/ca.crt"), "mqlog-reloaded\n", 'the certificate of the last good reload stays');
$across_in .= "go\n";
$across->pump until $across_out =~ /ready\n\w+\n(answered|closed)\n|Traceback/;
like($across_out, qr/ready\nanswered\nanswered\n/, 'and after the refused reloads too');
$across_in = undef;
$across->finish;
($ok, $lines, $all) = client({}, 'confluent-metadata');
is("@$lines", 'shared', 'clients are served') or diag($all);
is(listener_pid(), $pid, 'by the same listener process');

# --- SASL_SSL ---------------------------------------------------------------------
sub restart_with
{
	my ($conf) = @_;
	$node->stop;
	$node->append_conf('postgresql.conf', $conf);
	$log_offset = -s $node->logfile;
	$node->start;
}

restart_with(q{
mqlog.kafka_ssl_cert_file = ''
mqlog.kafka_ssl_key_file = ''
mqlog.kafka_ssl_client_auth = none
mqlog.kafka_sasl_mechanisms = 'PLAIN, SCRAM-SHA-256'
});
my $sasl_alice = { MQK_SASL_USER => 'alice', MQK_SASL_PASSWORD => 'alice-secret' };
ok(wait_for(60, sub { ($ok, $lines, $all) = client($sasl_alice, 'confluent-metadata'); "@$lines" eq 'alice_t' }),
	'SASL_SSL: confluent-kafka with PLAIN lists alice\'s topics') or diag($all);
like(slurp_file($node->logfile, $log_offset), qr/to clients authenticated with SASL \(PLAIN, SCRAM-SHA-256\) over TLS/,
	'the log says SASL over TLS');
($ok, $out, $all) = run_cmd({}, 'bash', '-c',
	"printf 'p1:q1\\np2:q2\\n' | kcat -b $bootstrap -X security.protocol=SASL_SSL -X ssl.ca.location=$dir/ca.crt "
	  . "-X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=alice-secret -P -t alice_t -p 1 -K:");
ok($ok && $all !~ /fail/i, 'SASL_SSL: kcat with PLAIN produces') or diag($all);
($ok, $out, $all) = kcat({ 'security.protocol' => 'SASL_SSL', 'sasl.mechanisms' => 'PLAIN',
		'sasl.username' => 'alice', 'sasl.password' => 'alice-secret' },
	'-C', '-t', 'alice_t', '-p', '1', '-o', 'beginning', '-e', '-q', '-f', '%k %s\n');
like($out, qr/^p1 q1\np2 q2\n/m, 'SASL_SSL: kcat with PLAIN consumes them') or diag($all);
($ok, $lines, $all) = client({ %$sasl_alice, MQK_SASL_MECHANISM => 'SCRAM-SHA-256' }, 'confluent-produce', 'alice_t', 'lz4', 5);
ok($ok && @$lines == 5, 'SASL_SSL: confluent-kafka with SCRAM-SHA-256 produces') or diag($all);
($ok, $lines, $all) = client({ %$sasl_alice, MQK_SASL_MECHANISM => 'SCRAM-SHA-256' }, 'confluent-consume', 'alice_t', 2, 11);
ok($ok && @$lines == 11, 'SASL_SSL: confluent-kafka with SCRAM-SHA-256 consumes all 11') or diag($all);
($ok, $lines, $all) = client($sasl_alice, 'kafka-python-consume', 'alice_t', 2, 11);
ok($ok && @$lines == 11, 'SASL_SSL: kafka-python with PLAIN consumes all 11') or diag($all);
($ok, $lines, $all) = client({ MQK_SASL_USER => 'alice', MQK_SASL_PASSWORD => 'wrong' }, 'confluent-produce', 'alice_t', 'none', 1);
ok(!$ok && $all =~ /authentication failed/i, 'SASL_SSL: a wrong password is refused') or diag($all);
($ok, $lines, $all) = client({ %$sasl_alice, MQK_SSL_CA => "$dir/evil.crt" }, 'confluent-produce', 'alice_t', 'none', 1);
ok(!$ok && $all =~ /tls failed|certificate verify failed/, 'SASL_SSL: a client trusting another CA is refused') or diag($all);
is(count_of('alice_t'), 11, 'the refused clients wrote nothing');

# --- beyond loopback --------------------------------------------------------------
# 0.0.0.0 is not a loopback address; the test reaches it through 127.0.0.1.
my $remote_warning = qr/takes SASL PLAIN without TLS: passwords cross the network in clear/;
restart_with(qq{
mqlog.kafka_listen = '0.0.0.0:$kport'
mqlog.kafka_advertised_listener = '$bootstrap'
mqlog.kafka_ssl = off
});
ok(wait_for(60, sub { ($ok, $lines, $all) = run_cmd({ MQK_SASL_USER => 'alice', MQK_SASL_PASSWORD => 'alice-secret' },
			$python, $clients, $bootstrap, 'confluent-metadata'); $all =~ /^alice_t$/m }),
	'on 0.0.0.0 without TLS, SASL_PLAINTEXT clients are served') or diag($all);
like(slurp_file($node->logfile, $log_offset), qr/WARNING:.*$remote_warning/,
	'and the log warns that PLAIN sends passwords in clear beyond loopback');

restart_with(q{
mqlog.kafka_ssl = on
});
ok(wait_for(60, sub { ($ok, $lines, $all) = client($sasl_alice, 'confluent-metadata'); "@$lines" eq 'alice_t' }),
	'on 0.0.0.0 with TLS, PLAIN over SASL_SSL is served') or diag($all);
unlike(slurp_file($node->logfile, $log_offset), $remote_warning, 'without a warning');

restart_with(q{
mqlog.kafka_sasl_mechanisms = ''
mqlog.kafka_ssl_client_auth = requested
});
ok(wait_for(30, sub { slurp_file($node->logfile, $log_offset) =~ /mqlog.kafka_listen "0.0.0.0:\d+" is not a loopback address; the Kafka listener does not start/ }),
	'on 0.0.0.0, TLS without SASL and without required client certificates does not start');
is(listener_pid(), '', 'no listener runs');

restart_with(q{
mqlog.kafka_ssl_client_auth = required
});
ok(wait_for(60, sub { ($ok, $lines, $all) = client($cert_alice, 'confluent-metadata'); "@$lines" eq 'alice_t' }),
	'on 0.0.0.0, TLS requiring client certificates starts, and alice\'s certificate is alice') or diag($all);
$log_offset = -s $node->logfile;
like(tlspy('metadata', "$dir/ca.crt"), qr/^refused: /, 'a client without a certificate is refused');
ok(wait_for(10, sub { slurp_file($node->logfile, $log_offset) =~ /TLS handshake with Kafka client \S+ failed: .*peer did not return a certificate/ }),
	'the server log: the peer did not return a certificate');
is(count_of('shared'), 13, 'and wrote nothing');

$node->stop;
done_testing();
