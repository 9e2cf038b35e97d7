#!/usr/bin/perl
# The first port from PORT up (200 tried) on which nothing listens on
# 127.0.0.1, printed; exit status 1 when there is none.  For the scripts
# that start servers of their own (scripts/test.sh, test/librdkafka/run.sh).
#
#   scripts/free-port.pl PORT
use strict;
use warnings;
use IO::Socket::INET;

my $from = shift // die "usage: $0 PORT\n";
for my $p ($from .. $from + 200)
{
	my $s = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => $p,
		Proto => 'tcp',
		ReuseAddr => 1,
		Listen => 1);
	if ($s)
	{
		close $s;
		print "$p\n";
		exit 0;
	}
}
exit 1;
