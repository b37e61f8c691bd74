/* The bare reference for ictus's many-host path (issue 11): UDP round trips over
 * the same links (veth pairs and a bridge between network namespaces), with no
 * middleware, so Zenoh's figures can be given as a ratio to what the wire and the
 * kernel allow.
 *
 *   udp_pingpong server ADDR PORT [SECONDS]
 *       echoes every datagram back to its sender; ends on an empty datagram or
 *       after SECONDS (default 60) without one.
 *   udp_pingpong client ADDR PORT COUNT SIZE [INTERVAL_US]
 *       sends COUNT datagrams of SIZE bytes one at a time (after 100 unrecorded
 *       warm-up ones), each waiting for its echo (1 s at most: then it is counted
 *       lost), and prints one line of JSON: every round trip's percentiles and its
 *       max, in nanoseconds of CLOCK_MONOTONIC. Never drops an outlier. With
 *       INTERVAL_US, one round trip starts every INTERVAL_US (absolute times), so
 *       both ends sleep between them as the executive's hosts do; without it they
 *       follow each other (both ends stay awake).
 *
 * Build: cc -O2 -o udp_pingpong udp_pingpong.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PROG "udp_pingpong"
#include "net_common.h"

#define WARMUP 100
#define MAX_SIZE 65000

static void usage(void) {
    fprintf(stderr, "usage: udp_pingpong server ADDR PORT [SECONDS] | client ADDR PORT COUNT SIZE [INTERVAL_US]\n");
    exit(2);
}

static void timeout(int fd, long seconds) {
    struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
        perror("udp_pingpong: SO_RCVTIMEO");
        exit(1);
    }
}

static int server(struct sockaddr_in a, long seconds) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("udp_pingpong: server socket");
        return 1;
    }
    timeout(fd, seconds);
    static char buf[MAX_SIZE];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                fprintf(stderr, "udp_pingpong: server idle for %ld s, ending\n", seconds);
                return 0;
            }
            perror("udp_pingpong: recvfrom");
            return 1;
        }
        if (n == 0) return 0;
        if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len) != n) {
            perror("udp_pingpong: sendto");
            return 1;
        }
    }
}

static uint64_t pct(const uint64_t *v, long n, double p) {
    long i = (long)(p * (double)n);
    if (i >= n) i = n - 1;
    return v[i];
}

static int client(struct sockaddr_in a, long count, long size, long interval_us) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("udp_pingpong: client socket");
        return 1;
    }
    timeout(fd, 1);
    static char out[MAX_SIZE], in[MAX_SIZE];
    memset(out, 0x5a, sizeof out);
    uint64_t *rtt = malloc(sizeof(uint64_t) * (size_t)count);
    if (!rtt) {
        fprintf(stderr, "udp_pingpong: no memory for %ld samples\n", count);
        return 1;
    }
    long kept = 0, lost = 0;
    uint64_t start = now_ns();
    uint64_t next = now_ns();
    for (long i = 0; i < WARMUP + count; i++) {
        if (interval_us > 0) {
            /* Paced: one round trip per interval, at absolute times, so both ends
               sleep between them as a cell's writer and reader do. */
            next += (uint64_t)interval_us * 1000u;
            struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
        }
        uint64_t t0 = now_ns();
        if (send(fd, out, (size_t)size, 0) != size) {
            perror("udp_pingpong: send");
            return 1;
        }
        ssize_t n;
        do {
            n = recv(fd, in, sizeof in, 0);
        } while (n < 0 && errno == EINTR);
        uint64_t t1 = now_ns();
        if (n != size) {
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                perror("udp_pingpong: recv");
                return 1;
            }
            if (i >= WARMUP) lost++;
            continue;
        }
        if (i >= WARMUP) rtt[kept++] = t1 - t0;
    }
    uint64_t elapsed = now_ns() - start;
    (void)send(fd, out, 0, 0); /* ends the server */
    if (kept == 0) {
        printf("{\"count\": 0, \"lost\": %ld, \"size\": %ld}\n", lost, size);
        return 1;
    }
    qsort(rtt, (size_t)kept, sizeof rtt[0], cmp_u64);
    double mean = 0;
    for (long i = 0; i < kept; i++) mean += (double)rtt[i];
    mean /= (double)kept;
    printf("{\"count\": %ld, \"lost\": %ld, \"size\": %ld, \"elapsed_ns\": %llu, \"mean_ns\": %.1f, "
           "\"min_ns\": %llu, \"p50_ns\": %llu, \"p90_ns\": %llu, \"p99_ns\": %llu, \"p999_ns\": %llu, "
           "\"max_ns\": %llu}\n",
           kept, lost, size, (unsigned long long)elapsed, mean, (unsigned long long)rtt[0],
           (unsigned long long)pct(rtt, kept, 0.5), (unsigned long long)pct(rtt, kept, 0.9),
           (unsigned long long)pct(rtt, kept, 0.99), (unsigned long long)pct(rtt, kept, 0.999),
           (unsigned long long)rtt[kept - 1]);
    free(rtt);
    return 0;
}

int main(int argc, char **argv) {
    struct sockaddr_in a = address_or_serve(argc, argv, server, usage);
    if (strcmp(argv[1], "client") == 0 && (argc == 6 || argc == 7))
        return client(a, number(argv[4], 1, 100000000, "count"),
                      number(argv[5], 1, MAX_SIZE, "size"),
                      argc == 7 ? number(argv[6], 0, 1000000, "interval_us") : 0);
    usage();
    return 2;
}
