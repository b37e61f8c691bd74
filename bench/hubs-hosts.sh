#!/usr/bin/env bash
# Seed 004's Table 2 (the semaphore loop) and Figures 6 and 7 (port throughput by
# payload) with ictus hubs, from one core to two hosts (issue 23, item 2), each
# beside the bare network reference measured in the same run:
#
#   sudo bench/hubs-hosts.sh
#
# Table 2: thread A gives semaphore X and takes Y, thread B takes X and gives Y; one
# iteration is one round trip, timed by A (crates/ictus-net/examples/zhub). Rows: one
# core (both threads on CPU_A), across cores (CPU_A, CPU_B), across processes
# (shared-memory hubs, B in a child process), across hosts (two network namespaces of
# bench/netns.sh whose hubs are joined by a HubLink over Zenoh, on plain TCP and on
# QUIC with the run's keys; X's home is host 1 where A runs, Y's host 2 where B runs,
# as the seed's C0_S1 and C1_S2; A and B on CPU_A and CPU_B, the link's threads
# unpinned), and the bare UDP round trip host 1 -> host 2 of a SEM_UDP_SIZE-byte
# datagram (bench/c/udp_pingpong.c), with the ratio (the issue's goal: the loop across
# hosts within 2x of it), and Zenoh's own round trip of the same size on the same link
# (crates/ictus-net/examples/zping.rs: what Zenoh costs, and so what the hubs add). The
# across-host rows alternate with these references, ROUNDS times.
#
# Figures 6-7: a sender hands messages of each size to a port hub, each send
# returning once the receiver has copied it; the receiver times them after a first
# one. In one host (threads on CPU_A and CPU_B; processes), and across hosts (the
# port's home and the receiver on host 2, the sender on host 1), beside the kernel's
# own between the same hosts (bench/c/net_throughput.c): TCP as a stream (the link's
# asynchronous bound), TCP and UDP with a one-byte reply per message (the synchronous
# analogue of a port), and a UDP blast (no reply; loss counted).
#
# Environment: COUNT (semaphore round trips per row, default 20000), MESSAGES (port
# messages per size in one host and for the kernel's references, default 5000),
# HOST_MESSAGES (the port's across hosts, default 1000 as in the seed), SIZES (port
# payloads in bytes, default "1 64 1024 4096 32768"; each one of 1 16 64 256 1024 4096
# 8192 16384 32768), SEM_UDP_SIZE (default 64), ROUNDS (default 2), LINKS (the
# across-host rows' Zenoh links: "plain" for TCP and/or "secure" for QUIC with the
# run's keys, mutual TLS 1.3; default "plain secure", alternated), PREFIX (the
# namespaces' prefix, default zhub), CPU_A and CPU_B (default 0 and 1), OUT_DIR
# (default target/hubs-hosts-DATE), ZHUB (a built zhub to use; default: cargo build
# --release; ZPING, default zping beside it). Threads run in the normal class (no real-time priority): the figures
# are those of a program as a user starts it.
#
# Root only (namespaces): without it, says why and exits 3, having changed nothing.
# The namespaces are removed after, also on failure or Ctrl-C; every process it starts
# is ended by its PID. Installs nothing; needs cargo, a C compiler and python3.
# Timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ns() { "$here/netns.sh" exec "$@"; }

# The processes started in the background, ended by PID on the way out.
started=()
end_started() {
  local p
  for p in "${started[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  started=()
}

# Waits for a background process at most 20 s; ends it (by PID) and says so after.
# Only called in the shell that started it (`wait` needs its own child).
reap() {
  local p=$1 what=$2
  for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    echo "hubs-hosts.sh: $what ($p) still running 20 s after its peer: ended" >&2
    kill "$p" 2>/dev/null || true
  fi
  wait "$p" 2>/dev/null || true
  # Reaped: off the list, so a later process given the same PID is never ended.
  local rest=() q
  for q in "${started[@]}"; do [ "$q" = "$p" ] || rest+=("$q"); done
  started=("${rest[@]}")
}

# Runs `zhub ... hosts` on both hosts: the reporting end in the foreground writes
# OUT, the other in the background. $1: plain or secure (Zenoh TCP, or QUIC with
# the run's keys: mutual TLS 1.3); $2: sem or port; $3: the reporting host (1 or 2);
# $4: OUT; the rest: what follows the host options. Each run listens on ports of
# its own (zport), so none waits for the last one's sockets.
zport=7447
zhub_hosts() {
  local links=$1 bench=$2 reporter=$3 out=$4
  shift 4
  local other=$((3 - reporter)) rc=0 peer proto=tcp
  local opts=(--hosts h1,h2)
  if [ "$links" = secure ]; then
    proto=quic
    opts+=(--keys "$OUT_DIR/keys")
  fi
  zport=$((zport + 1))
  ns "$other" "$ZHUB" "$bench" hosts "${opts[@]}" --here "h$other" \
    --listen "$proto/10.77.0.$other:$zport" --connect "$proto/10.77.0.$reporter:$zport" "$@" \
    >"$out.peer" 2>"$out.peer.err" &
  peer=$!
  started+=("$peer")
  ns "$reporter" "$ZHUB" "$bench" hosts "${opts[@]}" --here "h$reporter" \
    --listen "$proto/10.77.0.$reporter:$zport" --connect "$proto/10.77.0.$other:$zport" "$@" \
    >"$out" 2>"$out.err" || rc=$?
  reap "$peer" "zhub on host $other"
  echo "$rc" >"$out.rc"
}

# The wire bytes of both hosts' eth0 (framing and all), summed.
tx_bytes() {
  local h sum=0
  for h in 1 2; do
    sum=$((sum + $(ns "$h" cat /sys/class/net/eth0/statistics/tx_bytes)))
  done
  echo "$sum"
}

if [ "${1:-}" = "--inside" ]; then
  # Run by netns.sh `with` (2 hosts): the namespaces exist.
  trap end_started EXIT
  trap 'exit 130' INT TERM
  port=7800
  for round in $(seq "$ROUNDS"); do
    ns 2 "$UDP" server 10.77.0.2 "$port" 30 &
    srv=$!
    started+=("$srv")
    sleep 0.2
    ns 1 "$UDP" client 10.77.0.2 "$port" "$COUNT" "$SEM_UDP_SIZE" >"$OUT_DIR/udp-$round.json" || true
    reap "$srv" "udp_pingpong server"
    port=$((port + 1))
    # Zenoh's own round trip on the same link (TCP, no hubs): what the hubs add.
    ns 2 "$ZPING" pong "tcp/10.77.0.2:$port" 30 &
    srv=$!
    started+=("$srv")
    ns 1 "$ZPING" ping "tcp/10.77.0.2:$port" "$COUNT" "$SEM_UDP_SIZE" >"$OUT_DIR/zping-$round.json" || true
    reap "$srv" "zping pong"
    port=$((port + 1))
    for links in $LINKS; do
      before=$(tx_bytes)
      zhub_hosts "$links" sem 1 "$OUT_DIR/sem-hosts-$links-$round.json" "$COUNT"
      echo $(($(tx_bytes) - before)) >"$OUT_DIR/sem-hosts-$links-$round.wire"
    done
  done
  nport=7900
  for size in $SIZES; do
    # The kernel's references at this size, then the port across hosts.
    ns 2 "$NET" server 10.77.0.2 "$nport" 30 &
    srv=$!
    started+=("$srv")
    sleep 0.2
    for mode in tcp-stream tcp-sync udp-sync udp-blast; do
      ns 1 "$NET" client 10.77.0.2 "$nport" "$mode" "$size" "$MESSAGES" >"$OUT_DIR/$mode-$size.json" \
        2>"$OUT_DIR/$mode-$size.err" || true
    done
    ns 1 "$NET" client 10.77.0.2 "$nport" stop || true
    reap "$srv" "net_throughput server"
    nport=$((nport + 1))
    for links in $LINKS; do
      zhub_hosts "$links" port 2 "$OUT_DIR/port-hosts-$links-$size.json" "$size" "$HOST_MESSAGES"
    done
  done
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "hubs-hosts.sh: the hosts are network namespaces, which need root (CAP_NET_ADMIN): run it with sudo; nothing was changed" >&2
  exit 3
fi
need cc "hubs-hosts.sh: a C compiler (cc) is needed for the UDP and TCP references: apt-get install gcc"
need python3 "hubs-hosts.sh: python3 is needed to read the figures"
export COUNT=${COUNT:-20000} MESSAGES=${MESSAGES:-5000} HOST_MESSAGES=${HOST_MESSAGES:-1000} SIZES=${SIZES:-"1 64 1024 4096 32768"}
export SEM_UDP_SIZE=${SEM_UDP_SIZE:-64} ROUNDS=${ROUNDS:-2} CPU_A=${CPU_A:-0} CPU_B=${CPU_B:-1}
export LINKS=${LINKS:-"plain secure"}
# Namespaces of their own name (zhub-h1, zhub-h2, zhub-sw), so a run of another
# bench script beside this one (default prefix ictus) is left alone.
export PREFIX=${PREFIX:-zhub}
export OUT_DIR=${OUT_DIR:-$root/target/hubs-hosts-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
export UDP="$OUT_DIR/udp_pingpong" NET="$OUT_DIR/net_throughput"
cc -O2 -Wall -Wextra -o "$UDP" "$here/c/udp_pingpong.c"
cc -O2 -Wall -Wextra -o "$NET" "$here/c/net_throughput.c"
if [ -z "${ZHUB:-}" ]; then
  (cd "$root" && cargo build --release --quiet -p ictus-net --example zhub --example zping)
  ZHUB="$root/target/release/examples/zhub"
fi
ZPING=${ZPING:-$(dirname "$ZHUB")/zping}
export ZHUB ZPING
# The run's keys, for the secure links (one directory for both hosts: one machine).
"$ZHUB" keys "$OUT_DIR/keys" h1,h2

echo "Seed 004's Table 2 and Figures 6-7 with ictus hubs, one core to two hosts (network"
echo "namespaces of one machine, Zenoh peers, links: $LINKS (plain: TCP; secure: QUIC with the run's keys)); kernel $(uname -r), $(nproc) CPUs,"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); records: $OUT_DIR"
echo

# In one host: no namespaces needed.
"$ZHUB" sem threads "$CPU_A" "$CPU_A" "$COUNT" >"$OUT_DIR/sem-core.json"
"$ZHUB" sem threads "$CPU_A" "$CPU_B" "$COUNT" >"$OUT_DIR/sem-cores.json"
"$ZHUB" sem processes "$CPU_A" "$CPU_B" "$COUNT" >"$OUT_DIR/sem-processes.json"
for size in $SIZES; do
  "$ZHUB" port threads "$size" "$MESSAGES" "$CPU_A" "$CPU_A" >"$OUT_DIR/port-core-$size.json"
  "$ZHUB" port threads "$size" "$MESSAGES" "$CPU_A" "$CPU_B" >"$OUT_DIR/port-cores-$size.json"
  "$ZHUB" port processes "$size" "$MESSAGES" "$CPU_A" "$CPU_B" >"$OUT_DIR/port-processes-$size.json"
done

HOSTS=2 "$here/netns.sh" with "$0" --inside

python3 "$here/hubs_hosts.py" "$OUT_DIR"
