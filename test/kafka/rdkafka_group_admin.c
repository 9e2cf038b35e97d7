/*
 * librdkafka 2.0's group admin API (Debian's librdkafka-dev: the calls
 * confluent-kafka 2's list_consumer_groups, describe_consumer_groups,
 * delete_consumer_groups and list_consumer_group_offsets make; Debian's
 * confluent-kafka 1.7 binds none of them) against mqlog's listener, for
 * test/perl/159_kafka_group_admin.pl, which compiles it:
 *
 *   cc -o rdkafka_group_admin rdkafka_group_admin.c -lrdkafka
 *
 * One JSON object per line on stdout.
 *
 *   rdkafka_group_admin BOOTSTRAP list [STATE...]
 *       ListConsumerGroups (ListGroups v4, flexible, with the states):
 *       {"group", "state", "simple"} a group; {"error"} a failure
 *   rdkafka_group_admin BOOTSTRAP describe GROUP...
 *       DescribeConsumerGroups (DescribeGroups v4): {"group", "error",
 *       "state", "assignor", "members": [{"member_id", "client_id", "host",
 *       "assignment": ["topic-p", ...]}]}
 *   rdkafka_group_admin BOOTSTRAP offsets GROUP
 *       ListConsumerGroupOffsets of every partition (OffsetFetch v7,
 *       flexible, a null topic list): {"error"} then {"topic", "partition",
 *       "offset", "metadata", "error"} a partition
 *   rdkafka_group_admin BOOTSTRAP delete GROUP...
 *       DeleteGroups (v1): {"group", "error"} a group
 *   rdkafka_group_admin BOOTSTRAP offset-delete GROUP TOPIC PARTITION...
 *       DeleteConsumerGroupOffsets (OffsetDelete v0): {"error"} then
 *       {"topic", "partition", "error"} a partition
 *
 * Errors are librdkafka's names (rd_kafka_err2name), "" for none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#define TIMEOUT_MS 30000

/* s as a JSON string (the names here need no escape but quotes) */
static void
jstr(const char *s)
{
	putchar('"');
	for (; s && *s; s++)
	{
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static const char *
errname(rd_kafka_resp_err_t err)
{
	return err ? rd_kafka_err2name(err) : "";
}

static rd_kafka_event_t *
wait_result(rd_kafka_queue_t *q)
{
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, TIMEOUT_MS + 5000);

	if (ev == NULL)
	{
		printf("{\"error\": \"timeout\"}\n");
		exit(1);
	}
	return ev;
}

static void
print_partitions(const rd_kafka_topic_partition_list_t *parts, int with_offsets)
{
	for (int i = 0; parts && i < parts->cnt; i++)
	{
		const rd_kafka_topic_partition_t *p = &parts->elems[i];

		printf("{\"topic\": ");
		jstr(p->topic);
		printf(", \"partition\": %d", p->partition);
		if (with_offsets)
		{
			printf(", \"offset\": %lld, \"metadata\": ", (long long) p->offset);
			if (p->metadata)
			{
				char	   *m = strndup(p->metadata, p->metadata_size);

				jstr(m);
				free(m);
			}
			else
				printf("null");
		}
		printf(", \"error\": ");
		jstr(errname(p->err));
		printf("}\n");
	}
}

/* the request's error, or each group's error and partitions */
static void
print_group_results(rd_kafka_event_t *ev, const rd_kafka_group_result_t **groups, size_t n,
					int with_offsets)
{
	if (rd_kafka_event_error(ev))
	{
		printf("{\"error\": ");
		jstr(rd_kafka_err2name(rd_kafka_event_error(ev)));
		printf("}\n");
		return;
	}
	for (size_t i = 0; i < n; i++)
	{
		const rd_kafka_error_t *e = rd_kafka_group_result_error(groups[i]);

		printf("{\"error\": ");
		jstr(e ? rd_kafka_err2name(rd_kafka_error_code(e)) : "");
		printf("}\n");
		print_partitions(rd_kafka_group_result_partitions(groups[i]), with_offsets);
	}
}

int
main(int argc, char **argv)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char		errstr[512];
	rd_kafka_t *rk;
	rd_kafka_queue_t *q;
	rd_kafka_AdminOptions_t *opts;
	rd_kafka_event_t *ev;
	const char *mode;

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s BOOTSTRAP MODE ARGS...\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
	{
		fprintf(stderr, "%s\n", errstr);
		return 2;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
	{
		fprintf(stderr, "%s\n", errstr);
		return 2;
	}
	q = rd_kafka_queue_new(rk);
	opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_ANY);
	rd_kafka_AdminOptions_set_request_timeout(opts, TIMEOUT_MS, errstr, sizeof(errstr));

	if (strcmp(mode, "list") == 0)
	{
		int			nstates = argc - 3;
		rd_kafka_consumer_group_state_t states[8];
		const rd_kafka_ListConsumerGroups_result_t *res;
		const rd_kafka_ConsumerGroupListing_t **valid;
		const rd_kafka_error_t **errors;
		size_t		nvalid,
					nerrors;

		for (int i = 0; i < nstates && i < 8; i++)
			for (int s = 0; s < RD_KAFKA_CONSUMER_GROUP_STATE__CNT; s++)
				if (strcasecmp(argv[3 + i], rd_kafka_consumer_group_state_name(s)) == 0)
					states[i] = s;
		if (nstates > 0)
		{
			rd_kafka_error_t *e = rd_kafka_AdminOptions_set_match_consumer_group_states(opts, states,
																						nstates);

			if (e)
			{
				fprintf(stderr, "%s\n", rd_kafka_error_string(e));
				return 2;
			}
		}
		rd_kafka_ListConsumerGroups(rk, opts, q);
		ev = wait_result(q);
		res = rd_kafka_event_ListConsumerGroups_result(ev);
		valid = rd_kafka_ListConsumerGroups_result_valid(res, &nvalid);
		errors = rd_kafka_ListConsumerGroups_result_errors(res, &nerrors);
		for (size_t i = 0; i < nerrors; i++)
		{
			printf("{\"error\": ");
			jstr(rd_kafka_err2name(rd_kafka_error_code(errors[i])));
			printf("}\n");
		}
		for (size_t i = 0; i < nvalid; i++)
		{
			printf("{\"group\": ");
			jstr(rd_kafka_ConsumerGroupListing_group_id(valid[i]));
			printf(", \"state\": ");
			jstr(rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupListing_state(valid[i])));
			printf(", \"simple\": %s}\n",
				   rd_kafka_ConsumerGroupListing_is_simple_consumer_group(valid[i]) ? "true" : "false");
		}
	}
	else if (strcmp(mode, "describe") == 0)
	{
		const rd_kafka_DescribeConsumerGroups_result_t *res;
		const rd_kafka_ConsumerGroupDescription_t **groups;
		size_t		n;

		rd_kafka_DescribeConsumerGroups(rk, (const char **) argv + 3, argc - 3, opts, q);
		ev = wait_result(q);
		res = rd_kafka_event_DescribeConsumerGroups_result(ev);
		groups = rd_kafka_DescribeConsumerGroups_result_groups(res, &n);
		for (size_t i = 0; i < n; i++)
		{
			const rd_kafka_error_t *e = rd_kafka_ConsumerGroupDescription_error(groups[i]);
			size_t		nm = rd_kafka_ConsumerGroupDescription_member_count(groups[i]);

			printf("{\"group\": ");
			jstr(rd_kafka_ConsumerGroupDescription_group_id(groups[i]));
			printf(", \"error\": ");
			jstr(e ? rd_kafka_err2name(rd_kafka_error_code(e)) : "");
			printf(", \"state\": ");
			jstr(rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(groups[i])));
			printf(", \"assignor\": ");
			jstr(rd_kafka_ConsumerGroupDescription_partition_assignor(groups[i]));
			printf(", \"members\": [");
			for (size_t m = 0; m < nm; m++)
			{
				const rd_kafka_MemberDescription_t *md =
				rd_kafka_ConsumerGroupDescription_member(groups[i], m);
				const rd_kafka_topic_partition_list_t *parts =
				rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(md));

				printf("%s{\"member_id\": ", m ? ", " : "");
				jstr(rd_kafka_MemberDescription_consumer_id(md));
				printf(", \"client_id\": ");
				jstr(rd_kafka_MemberDescription_client_id(md));
				printf(", \"host\": ");
				jstr(rd_kafka_MemberDescription_host(md));
				printf(", \"assignment\": [");
				for (int p = 0; parts && p < parts->cnt; p++)
					printf("%s\"%s-%d\"", p ? ", " : "", parts->elems[p].topic, parts->elems[p].partition);
				printf("]}");
			}
			printf("]}\n");
		}
	}
	else if (strcmp(mode, "offsets") == 0 && argc == 4)
	{
		rd_kafka_ListConsumerGroupOffsets_t *req = rd_kafka_ListConsumerGroupOffsets_new(argv[3], NULL);
		const rd_kafka_group_result_t **groups = NULL;
		size_t		n = 0;

		rd_kafka_ListConsumerGroupOffsets(rk, &req, 1, opts, q);
		ev = wait_result(q);
		if (!rd_kafka_event_error(ev))
			groups = rd_kafka_ListConsumerGroupOffsets_result_groups(
				rd_kafka_event_ListConsumerGroupOffsets_result(ev), &n);
		print_group_results(ev, groups, n, 1);
	}
	else if (strcmp(mode, "delete") == 0)
	{
		int			ng = argc - 3;
		rd_kafka_DeleteGroup_t **del = calloc(ng, sizeof(*del));
		const rd_kafka_group_result_t **groups;
		size_t		n;

		for (int i = 0; i < ng; i++)
			del[i] = rd_kafka_DeleteGroup_new(argv[3 + i]);
		rd_kafka_DeleteGroups(rk, del, ng, opts, q);
		ev = wait_result(q);
		groups = rd_kafka_DeleteGroups_result_groups(rd_kafka_event_DeleteGroups_result(ev), &n);
		for (size_t i = 0; i < n; i++)
		{
			const rd_kafka_error_t *e = rd_kafka_group_result_error(groups[i]);

			printf("{\"group\": ");
			jstr(rd_kafka_group_result_name(groups[i]));
			printf(", \"error\": ");
			jstr(e ? rd_kafka_err2name(rd_kafka_error_code(e)) : "");
			printf("}\n");
		}
	}
	else if (strcmp(mode, "offset-delete") == 0 && argc >= 6)
	{
		rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(argc - 5);
		rd_kafka_DeleteConsumerGroupOffsets_t *req;
		const rd_kafka_group_result_t **groups = NULL;
		size_t		n = 0;

		for (int i = 5; i < argc; i++)
			rd_kafka_topic_partition_list_add(parts, argv[4], atoi(argv[i]));
		req = rd_kafka_DeleteConsumerGroupOffsets_new(argv[3], parts);
		rd_kafka_DeleteConsumerGroupOffsets(rk, &req, 1, opts, q);
		ev = wait_result(q);
		if (!rd_kafka_event_error(ev))
			groups = rd_kafka_DeleteConsumerGroupOffsets_result_groups(
				rd_kafka_event_DeleteConsumerGroupOffsets_result(ev), &n);
		print_group_results(ev, groups, n, 0);
	}
	else
	{
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	fflush(stdout);
	rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(opts);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return 0;
}
