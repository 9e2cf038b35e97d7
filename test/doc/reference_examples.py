#!/usr/bin/python3
"""Run doc/reference.md's examples and compare their output with the doc.

An example is a fenced block without a language tag whose lines start with
a psql prompt: `=> ` for the one session, `A=> `, `B=> ` for separate
sessions. A statement runs from its prompt to the first line that ends
with `;` (a psql meta-command such as `\\set` is one line); what follows up
to the next prompt is its expected output. Blocks with `S=>` (a hot
standby) are skipped, and so are the sections named in SKIP_SECTIONS and a
block right after a line `<!-- doc-test: skip, REASON -->`.

Every example runs, in the order of the doc, on a server given by
--host/--port, in the database of its `##` section (DATABASES; the rest in
mqdoc_main; DB_MARK names another section's for one block), each created afresh with CREATE EXTENSION mqlog. Each session
(`=>`, `A=>`, `B=>`, per database) is one psql process. Output is compared
after masking what varies from run to run (MASKS: timestamps, process ids,
LSNs, transaction ids), collapsing whitespace (column widths follow the
values) and dropping blank lines. Prints a unified diff per example that
differs and exits 1 if any did; with --show-server, also what the server
printed for it, unmasked, to paste into the doc once checked by eye.

  reference_examples.py --psql /path/to/psql --host DIR --port N [--show-server] [doc/reference.md]
"""
import argparse
import difflib
import re
import subprocess
import threading
import sys

DATABASES = {
    "Privileges": "mqdoc_privileges",
    "Consumer groups": "mqdoc_groups",
}
SKIP_SECTIONS = {
    # a cluster of its own, made by mqlog 0.1.0
    "Databases made with mqlog 0.1.0",
}
MARK = "__mqdoc_end_of_statement__"
# Put on the line before an example that cannot run here (it needs a
# cluster of nodes, a standby, or a server of another version), with the
# reason: <!-- doc-test: skip, needs a cluster of three nodes -->
SKIP_MARK = "<!-- doc-test: skip"
# Put on the line before an example that continues the examples of another
# `##` section, to run it in that section's database:
# <!-- doc-test: database of Privileges -->
DB_MARK = "<!-- doc-test: database of "

# What differs between runs, masked on both sides.  A doc example that
# shows such a value shows what it looked like once; the mask keeps it
# readable and the comparison honest about everything else.
MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d(:\d\d)?)?"), "<timestamp>"),
    (re.compile(r"\bsql-\d+\b"), "sql-<pid>"),
    (re.compile(r"\b[0-9A-F]{1,8}/[0-9A-F]{1,8}\b"), "<lsn>"),
    (re.compile(r"\b(pid|xid|transaction|process) \d+\b"), r"\1 <n>"),
    (re.compile(r"(sql-<pid>\s*\|\s*)\d+"), r"\1<pid>"),
    (re.compile(r"^Time: .*"), "Time: <ms>"),
    (re.compile(r"-next-\d+-\d+\b"), "-next-<n>-<n>"),
]
PROMPT = re.compile(r"^([A-Z]?)=> ?(.*)$")


def examples(path):
    """Yield (lineno, section, [(session, sql, expected_lines)]) per block."""
    section = None
    skip_next = False
    db_of = None
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.startswith(SKIP_MARK):
            skip_next = True
        if line.startswith(DB_MARK):
            db_of = line[len(DB_MARK):].split("-->")[0].strip()
        if not line.startswith("```"):
            i += 1
            continue
        tagged = line.strip() != "```"
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        block = lines[start:j]
        i = j + 1
        if tagged or not block or not PROMPT.match(block[0]):
            continue
        if skip_next:
            skip_next = False
            yield start, section, None
            continue
        yield start, db_of or section, parse_block(block)
        db_of = None


def ends_statement(line):
    """A line whose SQL, before a trailing -- comment, ends with ';'."""
    return re.sub(r"\s+--.*$", "", line).rstrip().endswith(";")


def parse_block(block):
    steps = []
    k = 0
    while k < len(block):
        m = PROMPT.match(block[k])
        if not m:
            k += 1
            continue
        session, first = m.group(1) or "-", m.group(2)
        sql = [first]
        k += 1
        if not first.lstrip().startswith("\\"):
            while not ends_statement(sql[-1]) and k < len(block) and not PROMPT.match(block[k]):
                sql.append(block[k])
                k += 1
        out = []
        while k < len(block) and not PROMPT.match(block[k]):
            out.append(block[k])
            k += 1
        steps.append((session, "\n".join(sql), out))
    return steps


def normalize(lines):
    result = []
    for line in lines:
        for rx, repl in MASKS:
            line = rx.sub(repl, line)
        line = " ".join(line.split())
        if re.fullmatch(r"[-+ ]*-[-+ ]*", line):
            line = "---"
        if line:
            result.append(line)
    return result


EXAMPLE_TIMEOUT = 120


class Session:
    def __init__(self, psql, host, port, db):
        self.proc = subprocess.Popen(
            ["stdbuf", "-o0", "-e0", psql, "-X", "-h", host, "-p", str(port), "-d", db,
             "-v", "SHOW_CONTEXT=never", "-v", "VERBOSITY=default", "-P", "pager=off"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1)
        self.run("SET TimeZone = 'UTC';")

    def run(self, sql):
        # An example that never answers (one waiting for input, or for a
        # lock another session holds) must fail the test, not hang it: the
        # session is killed after EXAMPLE_TIMEOUT seconds.
        killed = []
        timer = threading.Timer(EXAMPLE_TIMEOUT, lambda: (killed.append(1), self.proc.kill()))
        timer.start()
        try:
            self.proc.stdin.write(sql + "\n\\r\n\\echo " + MARK + "\n")
            self.proc.stdin.flush()
            out = []
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                if line == MARK:
                    return out
                if line != "Query buffer reset (cleared).":
                    out.append(re.sub(r"^psql:<stdin>:\d+: ", "", line))
        finally:
            timer.cancel()
        if killed:
            raise RuntimeError("no answer within %d s to:\n%s" % (EXAMPLE_TIMEOUT, sql))
        raise RuntimeError("psql ended: " + "\n".join(out))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--psql", default="psql")
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", required=True)
    ap.add_argument("--show-server", action="store_true",
                    help="print the server's own output of each example that differs")
    ap.add_argument("doc", nargs="?", default="doc/reference.md")
    args = ap.parse_args()

    sessions = {}
    made = set()
    admin = Session(args.psql, args.host, args.port, "postgres")
    failed = ran = skipped = 0
    for lineno, section, steps in examples(args.doc):
        if steps is None or section in SKIP_SECTIONS or any(s == "S" for s, _, _ in steps):
            skipped += 1
            continue
        db = DATABASES.get(section, "mqdoc_main")
        if db not in made:
            admin.run("DROP DATABASE IF EXISTS %s WITH (FORCE);" % db)
            admin.run("CREATE DATABASE %s;" % db)
            maker = Session(args.psql, args.host, args.port, db)
            maker.run("CREATE EXTENSION mqlog;")
            maker.close()
            made.add(db)
        ran += 1
        expected, actual, raw = [], [], []
        for session, sql, out in steps:
            key = (db, session)
            if key not in sessions:
                sessions[key] = Session(args.psql, args.host, args.port, db)
            prompt = ("" if session == "-" else session) + "=> "
            got = sessions[key].run(sql)
            expected += [prompt + sql] + out
            actual += [prompt + sql] + got
            raw += [prompt + sql] + got + [""]
        if normalize(expected) != normalize(actual):
            failed += 1
            print("doc/reference.md:%d (section %s, database %s) differs:" % (lineno, section, db))
            sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
                normalize(expected), normalize(actual), "doc", "server", lineterm="", n=2))
            print()
            if args.show_server:
                print("what the server printed:")
                sys.stdout.writelines(line + "\n" for line in raw)
    for s in list(sessions.values()) + [admin]:
        s.close()
    print("%d examples run, %d differ, %d skipped" % (ran, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
