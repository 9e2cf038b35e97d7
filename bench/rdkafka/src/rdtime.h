/*
 * bench/rdkafka/src/rdtime.h: the example rdkafka_performance.c includes
 * librdkafka's internal rdtime.h for rd_clock(); our rd.h has it.
 */
#include "rd.h"
