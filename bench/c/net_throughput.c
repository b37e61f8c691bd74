/* The bare references for seed 004's Figures 6 and 7 across hosts (issue 23): what
 * the kernel's TCP and UDP carry between two network namespaces, by payload size,
 * with no middleware, beside the port hub homed on one host and sent to from the
 * other (crates/ictus-net/examples/zhub.rs, both run by bench/hubs-hosts.sh).
 *
 *   net_throughput server ADDR PORT [SECONDS]
 *       serves TCP and UDP on ADDR:PORT, one client at a time, until SECONDS
 *       (default 60) pass without one, or a client asks it to stop.
 *   net_throughput client ADDR PORT MODE SIZE COUNT
 *       sends COUNT messages of SIZE bytes (1 to 65000) after 10 unrecorded
 *       warm-up ones, and prints one line of JSON. MODE is one of
 *         tcp-stream  one TCP connection, the messages written back to back; the
 *                     clock stops when the server acknowledges the last byte
 *                     (the asynchronous bound: what the link carries)
 *         tcp-sync    one TCP connection, each message acknowledged by one byte
 *                     before the next is sent (a port's hand-over over TCP)
 *         udp-sync    one datagram per message, each acknowledged by a one-byte
 *                     datagram before the next (a port's hand-over over UDP;
 *                     1 s without the reply: the message is counted lost)
 *         udp-blast   the datagrams back to back, no reply; the server counts
 *                     what arrived (loss is reported, not retried)
 *       For the sync modes, every message's time (send to acknowledgement) is
 *       kept: its percentiles and max are in the line; nothing is dropped.
 *   net_throughput client ADDR PORT stop
 *       ends the server.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; throughput is payload bytes per second
 * (no framing). Build: cc -O2 -o net_throughput net_throughput.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PROG "net_throughput"
#include "net_common.h"

#define WARMUP 10
#define MAX_SIZE 65000
#define MAGIC 0x4e545054u /* "NTPT" */

enum mode { TCP_STREAM = 1, TCP_SYNC, UDP_SYNC, UDP_BLAST, STOP };

/* A request, sent first on a TCP connection or as a UDP control datagram, in
   network byte order. For UDP the reply to `op` END carries what arrived. */
struct header {
    uint32_t magic, mode, size, count;
};
enum { OP_START = 1, OP_END = 2 };
struct control {
    uint32_t magic, op, mode, size, count;
    uint32_t got_hi, got_lo, bytes_hi, bytes_lo, span_hi, span_lo;
};

static void usage(void) {
    fprintf(stderr,
            "usage: net_throughput server ADDR PORT [SECONDS] | client ADDR PORT "
            "tcp-stream|tcp-sync|udp-sync|udp-blast SIZE COUNT | client ADDR PORT stop\n");
    exit(2);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void rcv_timeout(int fd, long seconds) {
    struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) die("net_throughput: SO_RCVTIMEO");
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("net_throughput: TCP_NODELAY");
}

/* Reads exactly n bytes; 0 on success, -1 on end or error. */
static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static char buf[MAX_SIZE + 64];

/* One TCP client: its header, then its messages. Returns 1 when asked to stop. */
static int serve_tcp(int c) {
    struct header h;
    nodelay(c);
    rcv_timeout(c, 10);
    if (read_all(c, &h, sizeof h) != 0 || ntohl(h.magic) != MAGIC) return 0;
    uint32_t mode = ntohl(h.mode), size = ntohl(h.size), count = ntohl(h.count);
    if (mode == STOP) return 1;
    if (size < 1 || size > MAX_SIZE) return 0;
    char ack = 1;
    if (mode == TCP_SYNC) {
        for (uint32_t i = 0; i < WARMUP + count; i++)
            if (read_all(c, buf, size) != 0 || write_all(c, &ack, 1) != 0) return 0;
    } else if (mode == TCP_STREAM) {
        if (read_all(c, buf, size) != 0 || write_all(c, &ack, 1) != 0) return 0; /* warm-up sync */
        for (uint32_t i = 0; i < count; i++)
            if (read_all(c, buf, size) != 0) return 0;
        if (write_all(c, &ack, 1) != 0) return 0;
    }
    return 0;
}

/* One UDP datagram: a control one (start, end of a blast) or a message. */
static int serve_udp(int u, uint64_t *got, uint64_t *bytes, uint64_t *first, uint64_t *last, uint32_t *mode) {
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(u, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
    if (n < 0) return 0;
    uint64_t t = now_ns();
    struct control c;
    if ((size_t)n == sizeof c && (memcpy(&c, buf, sizeof c), ntohl(c.magic) == MAGIC)) {
        if (ntohl(c.op) == OP_START) {
            *mode = ntohl(c.mode);
            *got = *bytes = *first = *last = 0;
        } else if (ntohl(c.op) == OP_END) {
            uint64_t span = *got > 1 ? *last - *first : 0;
            c.got_hi = htonl((uint32_t)(*got >> 32));
            c.got_lo = htonl((uint32_t)*got);
            c.bytes_hi = htonl((uint32_t)(*bytes >> 32));
            c.bytes_lo = htonl((uint32_t)*bytes);
            c.span_hi = htonl((uint32_t)(span >> 32));
            c.span_lo = htonl((uint32_t)span);
        }
        (void)sendto(u, &c, sizeof c, 0, (struct sockaddr *)&from, len);
        return 0;
    }
    if (*got == 0) *first = t;
    *last = t;
    (*got)++;
    *bytes += (uint64_t)n;
    if (*mode == UDP_SYNC) {
        char ack = 1;
        (void)sendto(u, &ack, 1, 0, (struct sockaddr *)&from, len);
    }
    return 0;
}

static int server(struct sockaddr_in a, long seconds) {
    int t = socket(AF_INET, SOCK_STREAM, 0), u = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    if (t < 0 || u < 0) die("net_throughput: server socket");
    setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rcvbuf = 4 << 20; /* room for a blast; the kernel caps it at rmem_max */
    setsockopt(u, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (bind(t, (struct sockaddr *)&a, sizeof a) != 0 || listen(t, 4) != 0 ||
        bind(u, (struct sockaddr *)&a, sizeof a) != 0)
        die("net_throughput: server bind");
    uint64_t got = 0, bytes = 0, first = 0, last = 0;
    uint32_t mode = UDP_SYNC;
    for (;;) {
        struct pollfd p[2] = {{.fd = t, .events = POLLIN}, {.fd = u, .events = POLLIN}};
        int r = poll(p, 2, (int)(seconds * 1000));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("net_throughput: poll");
        if (r == 0) {
            fprintf(stderr, "net_throughput: server idle for %ld s, ending\n", seconds);
            return 0;
        }
        if (p[1].revents & POLLIN) serve_udp(u, &got, &bytes, &first, &last, &mode);
        if (p[0].revents & POLLIN) {
            int c = accept(t, NULL, NULL);
            if (c < 0) continue;
            int stop = serve_tcp(c);
            close(c);
            if (stop) return 0;
        }
    }
}

static uint64_t pct(const uint64_t *v, long n, double p) {
    long i = (long)(p * (double)n);
    if (i >= n) i = n - 1;
    return v[i];
}

static const char *mode_name(int m) {
    switch (m) {
    case TCP_STREAM: return "tcp-stream";
    case TCP_SYNC: return "tcp-sync";
    case UDP_SYNC: return "udp-sync";
    case UDP_BLAST: return "udp-blast";
    default: return "stop";
    }
}

static void report(int mode, long size, long count, long lost, uint64_t elapsed, uint64_t *lat, long kept) {
    long delivered = count - lost;
    double secs = (double)elapsed / 1e9;
    printf("{\"mode\": \"%s\", \"size\": %ld, \"count\": %ld, \"lost\": %ld, \"elapsed_ns\": %llu, "
           "\"bytes_per_s\": %.1f, \"messages_per_s\": %.1f",
           mode_name(mode), size, count, lost, (unsigned long long)elapsed,
           secs > 0 ? (double)delivered * (double)size / secs : 0.0, secs > 0 ? (double)delivered / secs : 0.0);
    if (lat && kept > 0) {
        qsort(lat, (size_t)kept, sizeof lat[0], cmp_u64);
        printf(", \"latency\": {\"count\": %ld, \"min_ns\": %llu, \"p50_ns\": %llu, \"p99_ns\": %llu, "
               "\"p999_ns\": %llu, \"max_ns\": %llu}",
               kept, (unsigned long long)lat[0], (unsigned long long)pct(lat, kept, 0.5),
               (unsigned long long)pct(lat, kept, 0.99), (unsigned long long)pct(lat, kept, 0.999),
               (unsigned long long)lat[kept - 1]);
    }
    printf("}\n");
}

static int tcp_client(struct sockaddr_in a, int mode, long size, long count) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("net_throughput: tcp connect");
    nodelay(fd);
    rcv_timeout(fd, 10);
    struct header h = {htonl(MAGIC), htonl((uint32_t)mode), htonl((uint32_t)size), htonl((uint32_t)count)};
    if (write_all(fd, &h, sizeof h) != 0) die("net_throughput: tcp header");
    if (mode == STOP) return 0;
    static char out[MAX_SIZE];
    memset(out, 0x5a, sizeof out);
    char ack;
    uint64_t *lat = NULL;
    uint64_t start = 0;
    if (mode == TCP_SYNC) {
        lat = malloc(sizeof(uint64_t) * (size_t)count);
        if (!lat) die("net_throughput: samples");
        for (long i = 0; i < WARMUP + count; i++) {
            if (i == WARMUP) start = now_ns();
            uint64_t t0 = now_ns();
            if (write_all(fd, out, (size_t)size) != 0 || read_all(fd, &ack, 1) != 0) die("net_throughput: tcp-sync");
            if (i >= WARMUP) lat[i - WARMUP] = now_ns() - t0;
        }
    } else {
        if (write_all(fd, out, (size_t)size) != 0 || read_all(fd, &ack, 1) != 0) die("net_throughput: tcp-stream warm-up");
        start = now_ns();
        for (long i = 0; i < count; i++)
            if (write_all(fd, out, (size_t)size) != 0) die("net_throughput: tcp-stream write");
        if (read_all(fd, &ack, 1) != 0) die("net_throughput: tcp-stream ack");
    }
    uint64_t elapsed = now_ns() - start;
    close(fd);
    report(mode, size, count, 0, elapsed, lat, lat ? count : 0);
    free(lat);
    return 0;
}

/* A control datagram and its reply, retried (a control datagram may be lost). */
static int udp_control(int fd, struct control *c) {
    struct control r;
    for (int i = 0; i < 20; i++) {
        if (send(fd, c, sizeof *c, 0) != (ssize_t)sizeof *c) die("net_throughput: udp control");
        for (;;) {
            ssize_t n = recv(fd, &r, sizeof r, 0);
            if (n < 0) break; /* timed out: send it again */
            if ((size_t)n == sizeof r && ntohl(r.magic) == MAGIC && r.op == c->op) {
                *c = r;
                return 0;
            }
            /* a late acknowledgement of a message: skip it */
        }
    }
    return -1;
}

static int udp_client(struct sockaddr_in a, int mode, long size, long count) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("net_throughput: udp socket");
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    rcv_timeout(fd, 1);
    struct control c = {.magic = htonl(MAGIC), .op = htonl(OP_START), .mode = htonl((uint32_t)mode),
                        .size = htonl((uint32_t)size), .count = htonl((uint32_t)count)};
    if (udp_control(fd, &c) != 0) {
        fprintf(stderr, "net_throughput: no answer from the server in 20 s\n");
        return 1;
    }
    static char out[MAX_SIZE], in[MAX_SIZE];
    memset(out, 0x5a, sizeof out);
    long lost = 0, kept = 0;
    uint64_t *lat = NULL, start = 0, elapsed;
    if (mode == UDP_SYNC) {
        lat = malloc(sizeof(uint64_t) * (size_t)count);
        if (!lat) die("net_throughput: samples");
        for (long i = 0; i < WARMUP + count; i++) {
            if (i == WARMUP) start = now_ns();
            uint64_t t0 = now_ns();
            if (send(fd, out, (size_t)size, 0) != size) die("net_throughput: udp send");
            ssize_t n;
            do {
                n = recv(fd, in, sizeof in, 0);
            } while (n < 0 && errno == EINTR);
            if (n != 1) {
                if (i >= WARMUP) lost++;
                continue;
            }
            if (i >= WARMUP) lat[kept++] = now_ns() - t0;
        }
        elapsed = now_ns() - start;
    } else {
        for (long i = 0; i < count; i++)
            if (send(fd, out, (size_t)size, 0) != size && errno != ENOBUFS) die("net_throughput: udp send");
        c.op = htonl(OP_END);
        if (udp_control(fd, &c) != 0) {
            fprintf(stderr, "net_throughput: no count from the server in 20 s\n");
            return 1;
        }
        uint64_t got = ((uint64_t)ntohl(c.got_hi) << 32) | ntohl(c.got_lo);
        /* The receiver's span, first arrival to last: the rate it received at. */
        elapsed = ((uint64_t)ntohl(c.span_hi) << 32) | ntohl(c.span_lo);
        lost = count - (long)got;
    }
    close(fd);
    report(mode, size, count, lost, elapsed, lat, kept);
    free(lat);
    return 0;
}

int main(int argc, char **argv) {
    struct sockaddr_in a = address_or_serve(argc, argv, server, usage);
    if (strcmp(argv[1], "client") == 0 && argc == 5 && strcmp(argv[4], "stop") == 0)
        return tcp_client(a, STOP, 1, 0);
    if (strcmp(argv[1], "client") == 0 && argc == 7) {
        long size = number(argv[5], 1, MAX_SIZE, "size"), count = number(argv[6], 1, 10000000, "count");
        if (strcmp(argv[4], "tcp-stream") == 0) return tcp_client(a, TCP_STREAM, size, count);
        if (strcmp(argv[4], "tcp-sync") == 0) return tcp_client(a, TCP_SYNC, size, count);
        if (strcmp(argv[4], "udp-sync") == 0) return udp_client(a, UDP_SYNC, size, count);
        if (strcmp(argv[4], "udp-blast") == 0) return udp_client(a, UDP_BLAST, size, count);
    }
    usage();
    return 2;
}
