"""Kafka clients of the fault test with Kafka clients
(test/perl/167_kafka_faults.pl): producers and consumer-group members that
run until a stop file exists, logging what became of every record.

  faults.py BOOTSTRAPS producer TOPIC PARTITIONS ID LOG INTERVAL_MS TIMEOUT_MS
      An idempotent confluent-kafka producer (enable.idempotence, acks=all,
      librdkafka's retries) bootstrapped at BOOTSTRAPS (comma-separated),
      whose records fail when unanswered for TIMEOUT_MS (message.timeout.ms:
      shorter than a failover, some fail, and librdkafka then bumps its
      epoch or takes a new producer id before it goes on).
      Record i has key and value "ID-i" and goes to partition i % PARTITIONS,
      one every INTERVAL_MS, with at most 200 unanswered.  Appends one line
      per record to LOG, flushed as it comes, in MqFaults.pm's format:
        KEY <tab> P <tab> STATUS <tab> ? <tab> OFFSET <tab> T0 <tab> T1 <tab> WHY
      STATUS "ok" (acknowledged, at OFFSET) or "unknown" (its delivery
      failed: with idempotence it may still be stored, once); T0 when it
      was handed to the client, T1 when its answer came.  A fatal error
      (librdkafka's idempotent producer ends on some) is printed, "fatal
      ERROR", what was not answered is logged "unknown", and a new producer
      goes on.  Once LOG.stop exists it stops producing, flushes for up to
      60 s, purges what is left (each purged record logged "unknown") and
      writes LOG.done.
  faults.py BOOTSTRAP member GROUP TOPIC LOG
      A read_committed subscribe() member of GROUP bootstrapped at BOOTSTRAP,
      committing synchronously after every record.  Appends to LOG, each
      line starting with time.time():
        T assigned P,P,...    (every assignment)
        T revoked
        T got P O KEY         (a record delivered, before its commit)
        T committed P O       (its commit succeeded)
        T commit-failed ERROR (it did not: the record may come again)
        T error ERROR
        T closed
      until LOG.stop exists, then close()s.
"""
import os
import sys
import time

from cluster_groups import commit_each
from groups import run_member

SESSION = {'session.timeout.ms': 6000, 'heartbeat.interval.ms': 1000,
           'max.poll.interval.ms': 30000, 'isolation.level': 'read_committed',
           'topic.metadata.refresh.interval.ms': 1000}


def producer(bootstraps, topic, partitions, ident, logpath, interval_ms, timeout_ms):
    from confluent_kafka import KafkaException, Producer
    conf = {'bootstrap.servers': bootstraps, 'acks': 'all',
            'enable.idempotence': True, 'linger.ms': 5,
            'message.timeout.ms': timeout_ms, 'retry.backoff.ms': 200,
            'socket.timeout.ms': 10000,
            'topic.metadata.refresh.interval.ms': 1000}
    p = Producer(conf)
    log = open(logpath, 'a', buffering=1)
    sent = {}                   # key -> (partition, T0), until its answer

    def line(key, part, status, offset, t0, why):
        fields = (key, part, status, '?', offset, '%.3f' % t0, '%.3f' % time.time(),
                  why.replace('\t', ' ')[:200])
        log.write('\t'.join(str(f) for f in fields) + '\n')

    def report(err, msg):
        key = msg.key().decode()
        part, t0 = sent.pop(key, (msg.partition(), 0.0))
        if err is None:
            line(key, part, 'ok', msg.offset(), t0, '')
        else:
            line(key, part, 'unknown', '', t0, str(err))

    def unanswered(why):
        for key, (part, t0) in sorted(sent.items()):
            line(key, part, 'unknown', '', t0, why)
        sent.clear()

    def restart(p, e):
        # A fatal error ends a librdkafka producer: its own, as when it
        # sends the next sequence before the epoch bump that a record it
        # timed out calls for, and the broker rightly answers
        # OUT_OF_ORDER_SEQUENCE_NUMBER (test/perl/167_kafka_faults.pl).
        # What it had not answered is unknown; a new producer (a new
        # producer id) goes on, as an application would.
        print('fatal %s' % e, flush=True)
        try:
            p.purge()
            p.flush(0)
        except KafkaException:
            pass
        unanswered('fatal: %s' % e)
        return Producer(conf)

    stop = logpath + '.stop'
    i = 0
    while not os.path.exists(stop):
        key = '%s-%d' % (ident, i)
        try:
            p.produce(topic, key=key, value=key, partition=i % partitions, on_delivery=report)
            # answers come only from poll() and flush(), in this thread
            sent[key] = (i % partitions, time.time())
            i += 1
            p.poll(interval_ms / 1000.0)
            while len(p) > 200 and not os.path.exists(stop):
                p.poll(0.1)
        except KafkaException as e:
            p = restart(p, e)
    try:
        p.flush(60)
        p.purge()
        p.flush(0)
    except KafkaException as e:
        print('fatal %s' % e, flush=True)
    unanswered('not answered at the end')
    log.close()
    open(logpath + '.done', 'w').close()


class StampedLog:
    """a log file whose every line starts with time.time()"""

    def __init__(self, path):
        self.f = open(path, 'a', buffering=1)

    def write(self, text):
        self.f.write('%.3f %s' % (time.time(), text))


def member(bootstrap, group, topic, logpath):
    run_member(bootstrap, group, topic, logpath, SESSION, commit_each(0),
               log=StampedLog(logpath))


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'producer':
        producer(bootstrap, args[0], int(args[1]), args[2], args[3], int(args[4]), int(args[5]))
    elif what == 'member':
        member(bootstrap, args[0], args[1], args[2])
    else:
        sys.exit('unknown command ' + what)


if __name__ == '__main__':
    main()
