// kafkajs 2's admin ACL calls against mqlog's Kafka listener, for
// test/perl/159_kafka_acls.pl.  One JSON object per line on stdout.  A
// binding or filter is a JSON list [resourceType, resourceName,
// resourcePatternType, principal, host, operation, permissionType] of
// Kafka's codes (acl_clients.py lists them).
//
//   node kafkajs_acls.js BOOTSTRAP create BINDINGS
//       admin.createAcls: {"ok": true}, or {"error": type, "code": code}
//       (kafkajs throws the first binding's error)
//   node kafkajs_acls.js BOOTSTRAP describe FILTER
//       admin.describeAcls: {"binding": [...]} a binding, or {"error", "code"}
//   node kafkajs_acls.js BOOTSTRAP delete FILTERS
//       admin.deleteAcls: {"filter": i, "matched": [binding, ...]} a filter,
//       or {"error", "code"}
//
// With MQK_SASL_USER and MQK_SASL_PASSWORD in the environment it
// authenticates with SASL PLAIN as that role.
'use strict';

const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, 'node_modules', 'kafkajs'));

const [bootstrap, mode, arg] = process.argv.slice(2);
const sasl = process.env.MQK_SASL_USER === undefined ? undefined :
	{ mechanism: 'plain', username: process.env.MQK_SASL_USER, password: process.env.MQK_SASL_PASSWORD };
const kafka = new Kafka({ clientId: 'mqlog-acls', brokers: [bootstrap], logLevel: logLevel.NOTHING, sasl });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const acl = ([resourceType, resourceName, resourcePatternType, principal, host, operation, permissionType]) =>
	({ resourceType, resourceName, resourcePatternType, principal, host, operation, permissionType });
const spec = (r, a) => [r.resourceType, r.resourceName, r.resourcePatternType, a.principal, a.host,
	a.operation, a.permissionType];

async function main() {
	const admin = kafka.admin({ retry: { retries: 0 } });
	await admin.connect();
	try {
		const given = JSON.parse(arg);
		if (mode === 'create') {
			await admin.createAcls({ acl: given.map(acl) });
			out({ ok: true });
		} else if (mode === 'describe') {
			const res = await admin.describeAcls(acl(given));
			for (const r of res.resources)
				for (const a of r.acls)
					out({ binding: spec(r, a) });
		} else if (mode === 'delete') {
			const res = await admin.deleteAcls({ filters: given.map(acl) });
			res.filterResponses.forEach((f, i) =>
				out({ filter: i, matched: f.matchingAcls.map((m) => spec(m, m)) }));
		} else
			throw new Error(`unknown mode ${mode}`);
	} catch (e) {
		if (e.type === undefined)
			throw e;
		out({ error: e.type, code: e.code });
	} finally {
		await admin.disconnect();
	}
}

main().catch((e) => {
	process.stderr.write(`kafkajs_acls ${mode}: ${e.stack || e}\n`);
	process.exit(1);
});
