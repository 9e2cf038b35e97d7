# The layers of src/ depend one way (doc/architecture.md, "Files"):
#
#   base < store < cluster < log < acl < groups < sql, workers, kafka   (mqlog.c on top)
#
# Checks, from the sources alone (no server): every mqlog header a file
# includes is of its own layer or one below; every C file outside the top
# lives in a layer folder and has its banner; MqPartition's fields are
# defined in log/partition_internal.h, which only log/partition*.c
# include; no file but mqlog.c installs the shared memory hooks; no
# include circle between the modules of one folder but the ones written
# down below with their reason; SQL-callable C functions
# (PG_FUNCTION_INFO_V1) are declared in src/sql/ only.
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

# ------------------------------------------------------------------------
# Include circles within a folder.  A module is a file name without its
# extension (foo.c and foo.h are one module); a .c file depends on the
# module of every header of its own folder that it includes, directly or
# through other headers.  A header with no .c of its name (a private
# header such as log/partition_internal.h) depends on nothing itself: the
# files that include it do.  A circle is a set of two or more modules each
# of which depends, step by step, on every other.
# ------------------------------------------------------------------------

# The circles that may stay, named "folder: modules" (sorted), each with
# its reason.  Anything else, and a written-down circle that grows, fails.
my %allowed_circles = (
	'store: segment wal' =>
	  'the page/WAL pair: an append logs the pages it writes, and redo writes pages in the format segment.c owns',
);

sub includes_in
{
	my ($text) = @_;
	return $text =~ /^#include "([^"]+)"/mg;
}

# folder => { module => { module it depends on => 1 } }
sub module_edges
{
	my ($texts) = @_;    # path relative to src/ => text
	my %edges;

	foreach my $f (sort grep { /\.c$/ } keys %$texts)
	{
		my ($dir, $mod) = $f =~ m{^([a-z]+)/([^/]+)\.c$} or next;
		my %seen;
		my @todo = includes_in($texts->{$f});

		$edges{$dir}{$mod} //= {};
		while (defined(my $inc = shift @todo))
		{
			next if $seen{$inc}++ || !exists $texts->{$inc};
			push @todo, includes_in($texts->{$inc});
			my ($idir, $imod) = $inc =~ m{^([a-z]+)/([^/]+)\.h$} or next;
			$edges{$dir}{$mod}{$imod} = 1 if $idir eq $dir && $imod ne $mod;
		}
	}
	return \%edges;
}

# each circle as { name => "folder: modules", edges => [ "a->b", ... ] }
sub circles
{
	my ($edges) = @_;
	my @found;

	foreach my $dir (sort keys %$edges)
	{
		my $g = $edges->{$dir};
		my %reach;
		my %done;

		foreach my $m (keys %$g)
		{
			my @todo = keys %{ $g->{$m} };
			my %r;

			while (defined(my $n = shift @todo))
			{
				next if $r{$n}++;
				push @todo, keys %{ $g->{$n} || {} };
			}
			$reach{$m} = \%r;
		}
		foreach my $m (sort keys %$g)
		{
			next if $done{$m} || !$reach{$m}{$m};
			my @members = sort grep { $reach{$m}{$_} && $reach{$_}{$m} } keys %reach;
			my %in = map { $_ => 1 } @members;

			$done{$_} = 1 foreach @members;
			push @found,
			  {
				name => "$dir: @members",
				edges => [ map { my $from = $_; map { "$from->$_" } sort grep { $in{$_} } keys %{ $g->{$from} } } @members ]
			  };
		}
	}
	return @found;
}

# SQL entry points: only src/sql/ declares C functions callable from SQL;
# the modules below it export plain C functions that those entry points call
sub misplaced_entry_point
{
	my ($path, $text) = @_;    # path relative to src/
	return 0 if $path =~ m{^sql/};
	return $text =~ /^PG_FUNCTION_INFO_V1\(/m ? 1 : 0;
}

my @files = map { s{^\Q$src\E/}{}r } (glob("$src/*.[ch]"), glob("$src/*/*.[ch]"));
cmp_ok(scalar(@files), '>', 30, 'found the sources');

my %texts;
foreach my $f (@files)
{
	open(my $fh, '<', "$src/$f") or die "$src/$f: $!";
	$texts{$f} = do { local $/; <$fh> };
	close($fh);
}

my @bad;
foreach my $f (@files)
{
	my $mine = layer_of($f);
	push @bad, "$f is in no layer folder" and next unless defined $mine;
	my $text = $texts{$f};
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

# include circles within a folder
my @circles = circles(module_edges(\%texts));
note 'include circles within a folder: ',
  join('; ', map { "$_->{name} (@{ $_->{edges} })" } @circles) || 'none';
foreach my $name (sort keys %allowed_circles)
{
	note "written down but not found: $name" unless grep { $_->{name} eq $name } @circles;
}
is_deeply([ map { "$_->{name} (@{ $_->{edges} })" } grep { !exists $allowed_circles{ $_->{name} } } @circles ],
		  [], 'no include circle within a folder but the ones written down')
  or diag 'a circle must be broken, or written down in %allowed_circles with its reason';

# planted circles are seen (the check can fail)
{
	my %planted = %texts;
	$planted{'log/topic.c'} = qq{#include "log/partition.h"\n} . $planted{'log/topic.c'};
	my @found = grep { $_->{name} =~ /^log: (.* )?partition( .*)? topic( .*)?$/ } circles(module_edges(\%planted));
	ok(@found == 1, 'log/topic.c including log/partition.h would close a circle')
	  or diag join("\n", map { "$_->{name}" } circles(module_edges(\%planted)));

	%planted = %texts;
	$planted{'store/batch.c'} = qq{#include "store/segment.h"\n} . $planted{'store/batch.c'};
	$planted{'store/segment.c'} = qq{#include "store/batch.h"\n} . $planted{'store/segment.c'};
	@found = grep { $_->{name} =~ /^store: / } circles(module_edges(\%planted));
	ok(@found == 1 && !exists $allowed_circles{ $found[0]{name} },
		'a written-down circle that grows (store/batch.c and store/segment.c including each other) would count as a violation')
	  or diag join("\n", map { "$_->{name}" } @found);
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
