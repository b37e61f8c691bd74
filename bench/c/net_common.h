/* What the bare network references of bench/ share (udp_pingpong.c, net_throughput.c):
 * the clock, a sort order, their checked command-line numbers and addresses, and the
 * server half of their command line. Each program defines PROG, its name for messages,
 * before including it. */
#ifndef ICTUS_BENCH_NET_COMMON_H
#define ICTUS_BENCH_NET_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* `s` as a whole number from `lo` to `hi`, or exit 2 saying what was expected. */
static long number(const char *s, long lo, long hi, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, PROG ": %s '%s': expected %ld to %ld\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

/* The IPv4 address `addr` and port `port`, or exit 2 saying what was expected. */
static struct sockaddr_in address(const char *addr, const char *port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)number(port, 1, 65535, "port"));
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
        fprintf(stderr, PROG ": address '%s': expected an IPv4 address\n", addr);
        exit(2);
    }
    return a;
}

/* The command line's ADDR PORT (argv[2] and argv[3]) as an address, for a client. For
 * `server ADDR PORT [SECONDS]` it serves there with `serve` for SECONDS (60 by default)
 * and exits with its status; with fewer words it calls `usage`. */
static struct sockaddr_in address_or_serve(int argc, char **argv,
                                           int (*serve)(struct sockaddr_in, long),
                                           void (*usage)(void)) {
    if (argc < 4) usage();
    struct sockaddr_in a = address(argv[2], argv[3]);
    if (strcmp(argv[1], "server") == 0 && (argc == 4 || argc == 5))
        exit(serve(a, argc == 5 ? number(argv[4], 1, 86400, "seconds") : 60));
    return a;
}

#endif
