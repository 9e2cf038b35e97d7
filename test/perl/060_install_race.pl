# Concurrent CREATE EXTENSION mqlog in two databases (issue 16).
#
# The role mqlog_admin is cluster-wide and each database's install script
# creates it if it is missing.  Session A installs in db1 and keeps its
# transaction open, so its new role is not yet visible; session B installs
# in db2, finds no role, creates it and waits on A's uncommitted row in
# pg_authid's unique index.  When A commits, B's insert fails with a
# unique violation -- which the install script must absorb, so that B's
# CREATE EXTENSION succeeds too.  Then the same with A rolling back: B
# creates the role itself.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('install_race');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'mqlog'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE db1; CREATE DATABASE db2;');
my $psql = $node->installed_command('psql');

# a psql session fed through a pipe; returns (harness, \stdin, \stdout, \stderr)
sub session
{
	my ($db) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-v', 'VERBOSITY=verbose', '-d', $node->connstr($db) ],
		'<', \$in, '>', \$out, '2>', \$err);
	return ($h, \$in, \$out, \$err);
}

sub wait_for_output
{
	my ($h, $buf, $re) = @_;
	my $until = time + 60;
	while ($$buf !~ $re && time < $until)
	{
		$h->pump_nb;
		select(undef, undef, undef, 0.05);
	}
	return $$buf =~ $re;
}

sub waiting_sessions
{
	return $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'});
}

foreach my $end ('COMMIT', 'ROLLBACK')
{
	my ($ha, $ina, $outa, $erra) = session('db1');
	$$ina .= "BEGIN;\nCREATE EXTENSION mqlog;\nSELECT 'a-installed';\n";
	ok(wait_for_output($ha, $outa, qr/a-installed/), "$end: session A installed in db1, transaction open");

	my ($hb, $inb, $outb, $errb) = session('db2');
	$$inb .= "CREATE EXTENSION mqlog;\nSELECT 'b-installed';\n";
	my $until = time + 60;
	my $waits = 0;
	while (!$waits && time < $until)
	{
		$hb->pump_nb;
		$waits = waiting_sessions() > 0;
		select(undef, undef, undef, 0.05) unless $waits;
	}
	ok($waits, "$end: session B waits on A's uncommitted mqlog_admin");

	$$ina .= "$end;\n\\q\n";
	$ha->finish;
	ok(wait_for_output($hb, $outb, qr/b-installed/), "$end: session B's CREATE EXTENSION completes")
	  or diag $$errb;
	$$inb .= "\\q\n";
	$hb->finish;
	unlike($$errb, qr/ERROR/, "$end: session B had no error") or diag $$errb;
	is($node->safe_psql('db2', q{SELECT extversion FROM pg_extension WHERE extname = 'mqlog'}),
		$node->safe_psql('db2', q{SELECT default_version FROM pg_available_extensions WHERE name = 'mqlog'}),
		"$end: mqlog is installed in db2");
	is($node->safe_psql('db1', q{SELECT count(*) FROM pg_extension WHERE extname = 'mqlog'}),
		$end eq 'COMMIT' ? '1' : '0', "$end: mqlog is installed in db1 as A's transaction decided");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_roles WHERE rolname = 'mqlog_admin'}),
		'1', "$end: mqlog_admin exists once");

	# start the next round from nothing installed
	$node->safe_psql($_, 'DROP EXTENSION IF EXISTS mqlog CASCADE') foreach ('db1', 'db2');
	$node->safe_psql('postgres', 'DROP ROLE mqlog_admin');
}

$node->stop;
done_testing();
