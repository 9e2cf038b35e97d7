// kafkajs (npm's kafkajs 2, installed by scripts/install-deps.sh into
// test/kafka/node_modules) against mqlog's Kafka listener, for
// test/perl/150_kafka.pl.  One JSON object per line on stdout.
//
//   node kafkajs_client.js BOOTSTRAP metadata TOPIC
//       {"topic": ..., "partitions": N}
//   node kafkajs_client.js BOOTSTRAP produce TOPIC CODEC N
//       one line per record: key, value, partition, offset (CODEC: none, gzip)
//   node kafkajs_client.js BOOTSTRAP produce-idempotent TOPIC N
//       an idempotent producer (idempotent: true, acks all) sends N records
//       js-idem-0 ... to partition 0, one send each; one line per record
//       as for produce (test/perl/163_kafka_idempotence.pl)
//   node kafkajs_client.js BOOTSTRAP produce-transaction TOPIC N commit|abort
//       a transactional producer (transactionalId js-txn-TOPIC) sends N
//       records js-txn-0 ... to partition 0 in one transaction and commits
//       or aborts it; prints {"ended": "commit"|"abort"}
//       (test/perl/164_kafka_transactions.pl)
//   node kafkajs_client.js BOOTSTRAP consume TOPIC GROUP N
//       a consumer of group GROUP subscribed to TOPIC from the beginning,
//       committing as it goes; one line per record, until it has N (or 30 s)
//   node kafkajs_client.js BOOTSTRAP create TOPIC PARTITIONS CONFIG_JSON [validate]
//       admin.createTopics: {"created": true|false} (false: it existed), or
//       {"errors": [Kafka's error type, ...]}
//   node kafkajs_client.js BOOTSTRAP delete TOPIC
//       admin.deleteTopics: {"deleted": true}, or {"errors": [type, ...]}
//   node kafkajs_client.js BOOTSTRAP describe TOPIC
//       admin.describeConfigs with synonyms: one line per config, its name,
//       value, source and synonyms
//   node kafkajs_client.js BOOTSTRAP partitions TOPIC COUNT [validate]
//       admin.createPartitions: {"ok": true}, or {"errors": [type, ...]}
//   node kafkajs_client.js BOOTSTRAP alter TOPIC CONFIG_JSON [validate]
//       admin.alterConfigs of the topic: {"ok": true}, or {"errors": [...]}
//   node kafkajs_client.js BOOTSTRAP delete-records TOPIC PARTITION OFFSET
//       admin.deleteTopicRecords: {"ok": true}, or {"errors": [type, ...]}
//       (one per partition that failed)
//   node kafkajs_client.js BOOTSTRAP cluster -
//       admin.describeCluster: {"clusterId", "controller", "brokers"}
'use strict';

const path = require('path');
const { Kafka, logLevel, CompressionTypes, Partitioners, ConfigResourceTypes } =
	require(path.join(__dirname, 'node_modules', 'kafkajs'));

const [bootstrap, mode, topic, arg1, arg2] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'mqlog-test', brokers: [bootstrap], logLevel: logLevel.ERROR });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function metadata() {
	const admin = kafka.admin();
	await admin.connect();
	const md = await admin.fetchTopicMetadata({ topics: [topic] });
	for (const t of md.topics)
		out({ topic: t.name, partitions: t.partitions.length });
	await admin.disconnect();
}

async function produce(codec, n) {
	// kafkajs 2's default partitioner is Java's (murmur2), as mqlog's
	const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
	await producer.connect();
	const messages = [];
	for (let i = 0; i < n; i++)
		messages.push({ key: `js-key-${i}`, value: `js-${codec}-${i}`, headers: { via: 'kafkajs' } });
	// one send per record, so that each is told its own offset
	for (const m of messages) {
		const [r] = await producer.send({
			topic, messages: [m],
			compression: codec === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
		});
		out({ key: m.key, value: m.value, partition: r.partition, offset: Number(r.baseOffset) });
	}
	await producer.disconnect();
}

async function produceIdempotent(n) {
	const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
	await producer.connect();
	for (let i = 0; i < n; i++) {
		const m = { key: `js-idem-${i}`, value: `js-idem-${i}` };
		const [r] = await producer.send({ topic, acks: -1, messages: [{ ...m, partition: 0 }] });
		out({ key: m.key, value: m.value, partition: r.partition, offset: Number(r.baseOffset) });
	}
	await producer.disconnect();
}

async function produceTransaction(n, end) {
	const producer = kafka.producer({ transactionalId: `js-txn-${topic}`, idempotent: true,
		maxInFlightRequests: 1 });
	await producer.connect();
	const txn = await producer.transaction();
	for (let i = 0; i < n; i++)
		await txn.send({ topic, acks: -1, messages: [{ key: `js-txn-${i}`, value: `js-txn-${i}`, partition: 0 }] });
	if (end === 'commit')
		await txn.commit();
	else
		await txn.abort();
	out({ ended: end });
	await producer.disconnect();
}

async function consume(group, n) {
	const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 1000 });
	await consumer.connect();
	await consumer.subscribe({ topic, fromBeginning: true });
	let got = 0;
	await new Promise((resolve) => {
		const timer = setTimeout(resolve, 30000);
		consumer.run({
			autoCommit: true,
			eachMessage: async ({ partition, message }) => {
				out({ partition, offset: Number(message.offset), key: message.key && message.key.toString(),
					value: message.value && message.value.toString() });
				if (++got >= n) {
					clearTimeout(timer);
					resolve();
				}
			},
		});
	});
	await consumer.disconnect();	// commits what it consumed, and leaves the group
}

// the types of a KafkaJS error, one per topic for an aggregate
const errorTypes = (e) => (e.errors ? e.errors.map((x) => x.type) : [e.type || String(e)]);

async function withAdmin(fn) {
	const admin = kafka.admin({ retry: { retries: 0 } });
	await admin.connect();
	try {
		await fn(admin);
	} finally {
		await admin.disconnect();
	}
}

async function create(partitions, config, validate) {
	const configEntries = Object.entries(JSON.parse(config)).map(([name, value]) => ({ name, value }));
	await withAdmin(async (admin) => {
		try {
			const created = await admin.createTopics({
				validateOnly: validate, waitForLeaders: !validate, timeout: 10000,
				topics: [{ topic, numPartitions: partitions, configEntries }],
			});
			out({ created });
		} catch (e) {
			out({ errors: errorTypes(e) });
		}
	});
}

async function remove() {
	await withAdmin(async (admin) => {
		try {
			await admin.deleteTopics({ topics: [topic], timeout: 10000 });
			out({ deleted: true });
		} catch (e) {
			out({ errors: errorTypes(e) });
		}
	});
}

async function describe() {
	await withAdmin(async (admin) => {
		const res = await admin.describeConfigs({
			includeSynonyms: true,
			resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
		});
		for (const r of res.resources)
			for (const c of r.configEntries)
				out({ name: c.configName, value: c.configValue, source: c.configSource,
					synonyms: c.configSynonyms.map((s) => [s.configName, s.configValue, s.configSource]) });
	});
}

// runs fn with an admin client: {"ok": true}, or the errors it raised
async function attempt(fn) {
	await withAdmin(async (admin) => {
		try {
			await fn(admin);
			out({ ok: true });
		} catch (e) {
			// the retrier wraps a partition's errors (deleteTopicRecords) in its own
			const partitions = e.partitions || (e.cause && e.cause.partitions);
			out({ errors: partitions ? partitions.map((p) => p.error.type || p.error.name) : errorTypes(e) });
		}
	});
}

async function partitions(count, validate) {
	await attempt((admin) => admin.createPartitions({
		validateOnly: validate, timeout: 10000, topicPartitions: [{ topic, count }],
	}));
}

async function alter(config, validate) {
	const configEntries = Object.entries(JSON.parse(config)).map(([name, value]) => ({ name, value }));
	await attempt((admin) => admin.alterConfigs({
		validateOnly: validate, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries }],
	}));
}

async function deleteRecords(partition, offset) {
	// it finds the partitions' leaders in metadata it must have been told to load
	await attempt(async (admin) => {
		await admin.fetchTopicMetadata({ topics: [topic] });
		await admin.deleteTopicRecords({ topic, partitions: [{ partition, offset }] });
	});
}

async function cluster() {
	await withAdmin(async (admin) => {
		const c = await admin.describeCluster();
		out({ clusterId: c.clusterId, controller: c.controller, brokers: c.brokers });
	});
}

(async () => {
	if (mode === 'partitions')
		await partitions(Number(arg1), arg2 === 'validate');
	else if (mode === 'alter')
		await alter(arg1, arg2 === 'validate');
	else if (mode === 'delete-records')
		await deleteRecords(Number(arg1), arg2);
	else if (mode === 'cluster')
		await cluster();
	else if (mode === 'create')
		await create(Number(arg1), arg2, process.argv[7] === 'validate');
	else if (mode === 'delete')
		await remove();
	else if (mode === 'describe')
		await describe();
	else if (mode === 'metadata')
		await metadata();
	else if (mode === 'produce')
		await produce(arg1, Number(arg2));
	else if (mode === 'produce-idempotent')
		await produceIdempotent(Number(arg1));
	else if (mode === 'produce-transaction')
		await produceTransaction(Number(arg1), arg2);
	else if (mode === 'consume')
		await consume(arg1, Number(arg2));
	else
		throw new Error(`unknown mode ${mode}`);
})().catch((e) => {
	process.stderr.write(`kafkajs_client ${mode}: ${e.stack || e}\n`);
	process.exit(1);
});
