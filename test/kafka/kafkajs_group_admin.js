// kafkajs 2's admin client and the group APIs of mqlog's listener, for
// test/perl/159_kafka_group_admin.pl.  One JSON object per line on stdout.
//
//   node kafkajs_group_admin.js BOOTSTRAP list
//       admin.listGroups (ListGroups v2): {"groupId", "protocolType"} a group
//   node kafkajs_group_admin.js BOOTSTRAP describe GROUP
//       admin.describeGroups (DescribeGroups v2): {"groupId", "state",
//       "protocolType", "protocol", "errorCode", "members": [{"memberId",
//       "clientId", "clientHost", "topics", "assignment": {topic: [p...]}}]}
//   node kafkajs_group_admin.js BOOTSTRAP offsets GROUP
//       admin.fetchOffsets without topics (OffsetFetch v4, a null list):
//       {"topic", "partition", "offset", "metadata"} a partition, or
//       {"error": type}
//   node kafkajs_group_admin.js BOOTSTRAP delete GROUP...
//       admin.deleteGroups (DeleteGroups v1): {"deleted": [groups]} or
//       {"errors": [{"groupId", "type"}]}
'use strict';

const path = require('path');
const { Kafka, logLevel, AssignerProtocol } =
	require(path.join(__dirname, 'node_modules', 'kafkajs'));

const [bootstrap, mode, ...args] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'mqlog-js-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING,
	retry: { retries: 2 } });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function main() {
	const admin = kafka.admin();
	await admin.connect();
	try {
		if (mode === 'list') {
			const { groups } = await admin.listGroups();
			groups.sort((a, b) => a.groupId.localeCompare(b.groupId));
			for (const g of groups)
				out({ groupId: g.groupId, protocolType: g.protocolType });
		} else if (mode === 'describe') {
			const { groups } = await admin.describeGroups([args[0]]);
			for (const g of groups)
				out({
					groupId: g.groupId, state: g.state, protocolType: g.protocolType,
					protocol: g.protocol, errorCode: g.errorCode,
					members: g.members.map((m) => {
						const meta = m.memberMetadata.length ?
							AssignerProtocol.MemberMetadata.decode(m.memberMetadata) : null;
						const asg = m.memberAssignment.length ?
							AssignerProtocol.MemberAssignment.decode(m.memberAssignment) : null;
						return {
							memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost,
							topics: meta ? meta.topics.sort() : null,
							assignment: asg ? asg.assignment : null,
						};
					}),
				});
		} else if (mode === 'offsets') {
			const topics = await admin.fetchOffsets({ groupId: args[0] });
			for (const t of topics)
				for (const p of t.partitions)
					out({ topic: t.topic, partition: p.partition, offset: p.offset, metadata: p.metadata });
		} else if (mode === 'delete') {
			const res = await admin.deleteGroups(args);
			out({ deleted: res.map((r) => r.groupId).sort() });
		}
	} catch (e) {
		if (e.groups)
			out({ errors: e.groups.map((g) => ({ groupId: g.groupId, type: g.error ? g.error.type : null })) });
		else
			out({ error: e.type || e.name, message: e.message });
	}
	await admin.disconnect();
}

main().catch((e) => { out({ fatal: e.message }); process.exit(1); });
