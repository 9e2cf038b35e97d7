# What a role without describe learns of a topic, on both faces
# (doc/reference.md, "What a role without describe learns"): its name and
# that it exists, nothing else; SQL and the Kafka listener agree.
#
# Checks, for role eve, who holds no grant on topic "secret":
#  - SQL: a call naming "secret" is 42501, one naming "missing" 42704;
#    mqlog.topics lists neither; pg_class lists secret's segment relations
#    by name (which is why names are not hidden);
#  - Kafka, as eve: Metadata naming "secret" is TOPIC_AUTHORIZATION_FAILED,
#    naming "missing" UNKNOWN_TOPIC_OR_PARTITION, and an all-topics
#    Metadata lists neither secret nor a partition of it;
#  - a role granted describe sees the topic in both.
use strict;
use warnings;

use MqKafka qw(kafka_node kstr frame response connect_listener);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $kport = PostgreSQL::Test::Cluster::get_free_port();
# auto-creation off: an unknown name is UNKNOWN_TOPIC_OR_PARTITION, not a
# creation eve may not make (159_kafka_autocreate.pl tests that)
my $node = kafka_node('topic_names', $kport,
	"mqlog.kafka_role = 'eve'\nmqlog.kafka_auto_create_topics = off\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE eve LOGIN;
CREATE ROLE dora LOGIN;
SELECT mq_create_topic('secret', 2);
SELECT mq_create_topic('shared', 1);
SELECT mq_grant('shared', 'dora', 'describe');
});

# SQL, as eve
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT mq_latest_offset('secret', 0)},
	extra_params => [ '-U', 'eve', '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42501: permission denied for topic "secret"/, 'SQL: eve naming "secret" is 42501');
($rc, $out, $err) = $node->psql('postgres', q{SELECT mq_latest_offset('missing', 0)},
	extra_params => [ '-U', 'eve', '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42704: topic "missing" does not exist/, 'SQL: eve naming "missing" is 42704');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics}, extra_params => [ '-U', 'eve' ]),
	'0', 'mqlog.topics lists no topic to eve');
is($node->safe_psql('postgres', q{SELECT string_agg(topic, ',') FROM mqlog.topics}, extra_params => [ '-U', 'dora' ]),
	'shared', 'and "shared" to dora, who may describe it');
cmp_ok($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		   WHERE n.nspname = 'mqlog_data' AND c.relname LIKE 'secret-%'},
		extra_params => [ '-U', 'eve' ]),
	'>=', 2, "pg_class names secret's segments to eve: names are not secret");

# Kafka, as eve (mqlog.kafka_role)
sub metadata_topics
{
	my ($body) = @_;
	my $s = connect_listener($kport);
	print $s frame(3, 1, $body);
	my $answer = response($s);
	close $s;
	# correlation id, brokers (id, host, port, rack), controller, topics
	my $pos = 4;
	my $nbrokers = unpack('N', substr($answer, $pos, 4));
	$pos += 4;
	for (1 .. $nbrokers)
	{
		$pos += 4;
		$pos += 2 + unpack('n', substr($answer, $pos, 2));
		$pos += 4;
		my $rack = unpack('n!', substr($answer, $pos, 2));
		$pos += 2 + ($rack > 0 ? $rack : 0);
	}
	$pos += 4;
	my $ntopics = unpack('N', substr($answer, $pos, 4));
	$pos += 4;
	my %topics;
	for (1 .. $ntopics)
	{
		my $error = unpack('n', substr($answer, $pos, 2));
		$pos += 2;
		my $len = unpack('n', substr($answer, $pos, 2));
		my $name = substr($answer, $pos + 2, $len);
		$pos += 2 + $len + 1;    # is_internal
		my $nparts = unpack('N', substr($answer, $pos, 4));
		$pos += 4;
		for (1 .. $nparts)
		{
			$pos += 2 + 4 + 4;
			$pos += 4 + 4 * unpack('N', substr($answer, $pos, 4));
			$pos += 4 + 4 * unpack('N', substr($answer, $pos, 4));
		}
		$topics{$name} = [ $error, $nparts ];
	}
	return \%topics;
}
is_deeply(metadata_topics(pack('N', 2) . kstr('secret') . kstr('missing')),
	{ secret => [ 29, 0 ], missing => [ 3, 0 ] },
	'Kafka: Metadata naming "secret" is TOPIC_AUTHORIZATION_FAILED without partitions, "missing" UNKNOWN_TOPIC_OR_PARTITION');
is_deeply(metadata_topics(pack('N', 0xffffffff)), {}, 'an all-topics Metadata lists no topic to eve');

$node->safe_psql('postgres', q{SELECT mq_grant('secret', 'eve', 'describe')});
is_deeply(metadata_topics(pack('N', 1) . kstr('secret')), { secret => [ 0, 2 ] },
	'granted describe, eve sees its two partitions');
$node->stop;
done_testing();
