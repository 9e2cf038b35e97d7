# The layers of src/ depend one way (doc/architecture.md, "Files"):
#
#   base < store < cluster < log < acl < groups < sql, workers, kafka   (mqlog.c on top)
#
# Checks, from the sources alone (no server): every mqlog header a file
# includes is of its own layer or one below; every C file outside the top
# lives in a layer folder and has its banner; MqPartition's fields are
# touched in partition.c only; no file but mqlog.c installs the shared
# memory hooks; SQL-callable C functions (PG_FUNCTION_INFO_V1) are
# declared in src/sql/ only.
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

# SQL entry points: only src/sql/ declares C functions callable from SQL;
# the modules below it export plain C functions that those entry points call
my %entry_point_exceptions = (
	'acl/acl.c' => 1,    # moves in the group-ownership step of issue 31
);

sub misplaced_entry_point
{
	my ($path, $text) = @_;    # path relative to src/
	return 0 if $path =~ m{^sql/} || $entry_point_exceptions{$path};
	return $text =~ /^PG_FUNCTION_INFO_V1\(/m ? 1 : 0;
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
	if ($f ne 'log/partition.c' && $text =~ /\bstruct MqPartition\s*\{/)
	{
		push @bad, "$f defines MqPartition's fields";
	}
	if ($f ne 'mqlog.c' && $text =~ /\bshmem_(request|startup)_hook\s*=/)
	{
		push @bad, "$f installs a shared memory hook";
	}
	push @bad, "$f declares a SQL entry point (PG_FUNCTION_INFO_V1) outside src/sql/"
	  if misplaced_entry_point($f, $text);
}
is_deeply(\@bad, [],
	'includes point down the layers; banners; MqPartition private; hooks in mqlog.c; SQL entry points in sql/')
  or diag join("\n", @bad);

# a planted violation is seen (the check can fail)
{
	my $mine = layer_of('store/segment.c');
	my $theirs = layer_of('groups/groups.h');
	ok($theirs > $mine, 'store/segment.c including groups/groups.h would count as a violation');
}

# a planted misplaced entry point is seen (the rule can fail), and what it allows stays allowed
{
	my $text = "Datum\nmqlog_x(PG_FUNCTION_ARGS);\n\nPG_FUNCTION_INFO_V1(mqlog_x);\n";
	ok(misplaced_entry_point('log/lifecycle.c', $text),
		'PG_FUNCTION_INFO_V1 in log/lifecycle.c would count as a violation');
	ok(misplaced_entry_point('mqlog.c', $text), 'so would PG_FUNCTION_INFO_V1 in mqlog.c');
	ok(!misplaced_entry_point('sql/segments.c', $text), 'PG_FUNCTION_INFO_V1 in sql/segments.c is allowed');
	ok(!misplaced_entry_point('log/lifecycle.c', " * PG_FUNCTION_INFO_V1(mqlog_x) in a comment\n"),
		'a mention in a comment is not a declaration');
}

done_testing();
