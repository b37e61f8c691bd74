#!/usr/bin/env bash
# The per-event costs the miss accounting uses where the kernel gives no time
# (crates/ictus-explain/src/account.rs, EVENT_COST and FAULT_COST):
#
#   gaps    a thread spinning on one CPU (SCHED_FIFO 10) reads CLOCK_MONOTONIC and
#           keeps every gap over 1 us between two reads, while the CPU's interrupts
#           and softirqs are counted: the gaps' percentiles bound what one interrupt
#           (with its softirq) costs the thread. Gaps the counters do not explain are
#           the host's (a VM exit, the vCPU not run).
#   faults  touches 4,096 fresh anonymous pages, 5 times: the cost of a minor fault.
#
#   bench/event-cost.sh                 # CPU 1, 2 s
#   CPU=0 SECONDS_SPIN=5 bench/event-cost.sh
#
# Needs gcc, and root for SCHED_FIFO (without, the spin runs in SCHED_OTHER and its
# gaps include other threads). RT throttling bounds the spin (a 50 ms gap a second
# is the throttle). Figures are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need gcc "gcc is needed to build the spinning probe."
CPU=${CPU:-1}
SECONDS_SPIN=${SECONDS_SPIN:-2}
bin="$root/target/event-cost"
mkdir -p "$root/target"
cat >"$bin.c" <<'C'
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The sum of one CPU's column of /proc/interrupts or /proc/softirqs. */
static long long column(int cpu, const char *path) {
  FILE *f = fopen(path, "r");
  char line[16384], name[16];
  long long n = 0;
  int col = -1, i = 0;
  if (!f || !fgets(line, sizeof line, f)) return 0;
  snprintf(name, sizeof name, "CPU%d", cpu);
  for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n"), i++)
    if (!strcmp(tok, name)) col = i;
  while (fgets(line, sizeof line, f)) {
    char *p = strchr(line, ':'), *end;
    if (!p) continue;
    p++;
    for (int k = 0; k <= col; k++) {
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      p = end;
      if (k == col) n += v;
    }
  }
  fclose(f);
  return n;
}

static int cmp(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int cpu = atoi(argv[1]);
  double secs = atof(argv[2]);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  static long long gaps[4000000];
  int n = 0;
  long long i0 = column(cpu, "/proc/interrupts"), s0 = column(cpu, "/proc/softirqs");
  long long t = now(), end = t + (long long)(secs * 1e9), last = t, total = 0;
  while (last < end) {
    long long x = now();
    if (x - last > 1000 && n < 4000000) gaps[n++] = x - last;
    last = x;
  }
  long long i1 = column(cpu, "/proc/interrupts"), s1 = column(cpu, "/proc/softirqs");
  qsort(gaps, n, sizeof gaps[0], cmp);
  for (int k = 0; k < n; k++) total += gaps[k];
  printf("gaps: CPU %d, %.1f s: %lld interrupts, %lld softirqs; %d gaps over 1 us: p10 %lld, "
         "median %lld, p90 %lld, p99 %lld, max %lld ns, %.2f ms in all\n",
         cpu, secs, i1 - i0, s1 - s0, n, n ? gaps[n / 10] : 0, n ? gaps[n / 2] : 0,
         n ? gaps[9 * n / 10] : 0, n ? gaps[99 * n / 100] : 0, n ? gaps[n - 1] : 0, total / 1e6);
  for (int r = 0; r < 5; r++) {
    size_t pages = 4096;
    char *p = mmap(0, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    long long t0 = now();
    for (size_t k = 0; k < pages; k++) p[k * 4096] = 1;
    printf("faults: %zu pages touched on CPU %d: %.2f us each\n", pages, cpu,
           (now() - t0) / 1000.0 / pages);
    munmap(p, pages * 4096);
  }
  return 0;
}
C
gcc -O2 -o "$bin" "$bin.c"
if [ "$(id -u)" = 0 ] && command -v chrt >/dev/null; then
  chrt -f 10 "$bin" "$CPU" "$SECONDS_SPIN"
else
  echo "not root (or no chrt): the spin runs in SCHED_OTHER" >&2
  "$bin" "$CPU" "$SECONDS_SPIN"
fi
