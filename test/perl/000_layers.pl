# The layers of src/ depend one way (doc/architecture.md, "Files"):
#
#   base < store < cluster < log < acl < groups < sql, workers, kafka   (mqlog.c on top)
#
# Checks, from the sources alone (no server): every mqlog header a file
# includes is of its own layer or one below; every C file outside the top
# lives in a layer folder and has its banner; MqPartition's fields are
# defined in log/partition_internal.h, which only log/partition*.c
# include; no file but mqlog.c installs the shared memory hooks.
use strict;
use warnings;

use File::Basename qw(dirname);
use Test::More;

my $src = dirname(__FILE__) . '/../../src';
my %rank = (base => 0, store => 1, cluster => 2, log => 3, acl => 4, groups => 5, sql => 6, workers => 6, kafka => 6);

sub layer_of
{
	my ($path) = @_;    # relative to src/
	return 0 if $path eq 'mqlog.h';     # settings: everybody may read them
	return 7 if $path eq 'mqlog.c';
	my ($dir) = $path =~ m{^([a-z]+)/} or return undef;
	return $rank{$dir};
}

# A partition's shared state is private to the partition's files: its
# fields are defined in log/partition_internal.h alone, and only
# log/partition*.c include that header.
sub partition_private
{
	my ($f, $text) = @_;
	my @bad;

	push @bad, "$f defines MqPartition's fields"
	  if $f ne 'log/partition_internal.h' && $text =~ /\bstruct MqPartition\s*\{/;
	push @bad, "$f includes log/partition_internal.h"
	  if $f !~ m{^log/partition[a-z_]*\.c$} && $text =~ m{^#include "log/partition_internal\.h"}m;
	return @bad;
}

my @files = map { s{^\Q$src\E/}{}r } (glob("$src/*.[ch]"), glob("$src/*/*.[ch]"));
cmp_ok(scalar(@files), '>', 30, 'found the sources');

my @bad;
foreach my $f (@files)
{
	my $mine = layer_of($f);
	push @bad, "$f is in no layer folder" and next unless defined $mine;
	open(my $fh, '<', "$src/$f") or die "$src/$f: $!";
	my $text = do { local $/; <$fh> };
	close($fh);
	push @bad, "$f has no banner" unless $text =~ m{\A/\*-+\n \*\n \* \Q@{[ $f =~ s{.*/}{}r ]}\E\n};
	while ($text =~ /^#include "([^"]+)"/mg)
	{
		my $inc = $1;
		next unless -e "$src/$inc";    # a PostgreSQL header
		my $theirs = layer_of($inc);
		push @bad, "$f includes $inc, a layer above it"
		  if defined $theirs && $theirs > $mine;
	}
	push @bad, partition_private($f, $text);
	if ($f ne 'mqlog.c' && $text =~ /\bshmem_(request|startup)_hook\s*=/)
	{
		push @bad, "$f installs a shared memory hook";
	}
}
is_deeply(\@bad, [], 'includes point down the layers; banners; MqPartition private; hooks in mqlog.c')
  or diag join("\n", @bad);

# a planted violation is seen (the check can fail)
{
	my $mine = layer_of('store/segment.c');
	my $theirs = layer_of('groups/groups.h');
	ok($theirs > $mine, 'store/segment.c including groups/groups.h would count as a violation');
}
is_deeply([ partition_private('log/records.c', qq{#include "log/partition_internal.h"\n}) ],
		  ['log/records.c includes log/partition_internal.h'],
		  'log/records.c including log/partition_internal.h would count as a violation');
is_deeply([ partition_private('log/partition.h', qq{#include "log/partition_internal.h"\n}) ],
		  ['log/partition.h includes log/partition_internal.h'],
		  'a header of the partition including log/partition_internal.h would count as a violation');
is_deeply([ partition_private('log/topic.c', qq{struct MqPartition\n{\n\tint x;\n};\n}) ],
		  ["log/topic.c defines MqPartition's fields"],
		  'MqPartition defined outside log/partition_internal.h would count as a violation');
is_deeply([ partition_private('log/partition_signal.c', qq{#include "log/partition_internal.h"\n}) ],
		  [], 'log/partition_*.c may include log/partition_internal.h');

done_testing();
