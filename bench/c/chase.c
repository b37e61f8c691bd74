/*
 * chase.c: a dependent random pointer chase over the 64-byte lines of a working set,
 * independent of ictus, to validate `ictus probe memlat --mode chase`.
 *
 * One random cycle (Sattolo's algorithm, xorshift64* generator) over the lines of a
 * fresh anonymous mapping (MADV_NOHUGEPAGE, or MADV_HUGEPAGE with "thp"), each line's
 * first word holding the address of the next line. The buffer is written once (faulted
 * in) and warmed by one pass (at most 64 MiB of it); then REPS repetitions of N loads,
 * N chosen from a calibration so that one repetition takes about MS milliseconds.
 * Prints the median, min and max ns per load over the repetitions.
 *
 *   gcc -O2 -o chase chase.c
 *   ./chase SIZE_BYTES [REPS=5] [MS=20] [CPU=-1] [4k|thp] [fifo|other]
 *   ./chase 16384 5 20 1 4k fifo
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64
#define WARM_CAP (64UL << 20)

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t xorshift64s(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void **chase(void **p, uint64_t n) {
    while (n >= 8) {
        p = (void **)*p; p = (void **)*p; p = (void **)*p; p = (void **)*p;
        p = (void **)*p; p = (void **)*p; p = (void **)*p; p = (void **)*p;
        n -= 8;
    }
    while (n--) p = (void **)*p;
    return p;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SIZE_BYTES [REPS] [MS] [CPU] [4k|thp] [fifo|other]\n", argv[0]);
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0);
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    double ms = argc > 3 ? atof(argv[3]) : 20.0;
    int cpu = argc > 4 ? atoi(argv[4]) : -1;
    int thp = argc > 5 && strcmp(argv[5], "thp") == 0;
    int fifo = argc > 6 && strcmp(argv[6], "fifo") == 0;
    if (size < 4096 || size % LINE || reps < 1 || reps > 1000 || ms <= 0) {
        fprintf(stderr, "chase: bad arguments\n");
        return 2;
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set)) perror("chase: sched_setaffinity");
    }
    if (fifo) {
        struct sched_param sp = {.sched_priority = 95};
        if (sched_setscheduler(0, SCHED_FIFO, &sp)) perror("chase: SCHED_FIFO");
    }
    size_t align = thp ? (2UL << 20) : 4096;
    size_t map_len = ((size + align - 1) / align) * align + align;
    char *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) { perror("chase: mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)map + align - 1) & ~(uintptr_t)(align - 1));
    if (madvise(buf, ((size + align - 1) / align) * align, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
        perror("chase: madvise");

    size_t lines = size / LINE;
    /* Sattolo over an index array, then link the lines: line i -> line perm[i]. */
    uint32_t *perm = malloc(lines * sizeof *perm);
    if (!perm) { perror("chase: malloc"); return 1; }
    for (size_t i = 0; i < lines; i++) perm[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = xorshift64s() % i;
        uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (size_t i = 0; i < lines; i++) *(void **)(buf + i * LINE) = buf + (size_t)perm[i] * LINE;
    free(perm);

    void **p = (void **)buf;
    size_t warm = (size < WARM_CAP ? size : WARM_CAP) / LINE;
    p = chase(p, warm);

    /* Calibrate: double the loads until a run takes at least 2 ms. */
    uint64_t n = 1024;
    double per = 0;
    for (;;) {
        double t0 = now_ns();
        p = chase(p, n);
        double dt = now_ns() - t0;
        if (dt >= 2e6) { per = dt / (double)n; break; }
        n *= 2;
    }
    uint64_t loads = (uint64_t)(ms * 1e6 / per);
    if (loads < 1) loads = 1;

    double *ns = malloc(reps * sizeof *ns);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        p = chase(p, loads);
        ns[r] = (now_ns() - t0) / (double)loads;
    }
    qsort(ns, reps, sizeof *ns, cmp);
    double med = reps % 2 ? ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2;
    printf("size_bytes %zu ns_per_load %.3f min %.3f max %.3f loads_per_rep %llu end %p\n",
           size, med, ns[0], ns[reps - 1], (unsigned long long)loads, (void *)p);
    munmap(map, map_len);
    return 0;
}
