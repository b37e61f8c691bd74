#!/usr/bin/env bash
# Issue 21's attacks on a run across hosts, replayed from one command: seed 003's
# stress ring on three hosts on loopback (4 ms tick, `ictus run` on h1, `ictus node`
# on h2 and h3) while an outsider (crates/ictus-net/examples/zattack.rs) reads every
# key, forges cells (element 0 of A, B, C set to 10^12 under every host's name) and
# ticks (stop frame 1), and floods the setup store with 64 KiB values. Once per
# attacker:
#
#   insecure   the run on plain TCP (--insecure), the attacker with nothing: the
#              baseline the issue measured
#   no-cert    the run on its keys (QUIC, mutual TLS, access rules); the attacker
#              knows the run's CA but has no certificate
#   other-ca   a certificate named h2 from another run's CA
#   reader     the run's read-only reader certificate (reader:python)
#   stolen-h3  host h3's own certificate and key (an insider): the access rules let
#              it publish as h3 only, the claims check refuses elements h3 does not
#              write, the setup store's bounds hold
#
#   bench/attack-hosts.sh
#
# Environment: ATTACKERS (default all five), RUN_SECONDS (the run, default 12; the attack
# runs from its second second to two before its end), OUT_DIR (default
# target/attack-hosts-DATE), ICTUS (a built ictus binary; default cargo build
# --release). Every process it starts is ended by its PID. No root needed; loopback
# only. It judges nothing: the table says what each run's record says.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need python3 "attack-hosts.sh: python3 is needed to read the records"
ATTACKERS=${ATTACKERS:-"insecure no-cert other-ca reader stolen-h3"}
SECONDS_RUN=${RUN_SECONDS:-12}
OUT_DIR=${OUT_DIR:-$root/target/attack-hosts-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
ictus_binary
(cd "$root" && cargo build --release --quiet -p ictus-net --example zattack)
zattack="$root/target/release/examples/zattack"
keys="$OUT_DIR/keys"
"$ICTUS" keys new "$keys" --hosts h1,h2,h3 --readers python >/dev/null
"$ICTUS" keys new "$OUT_DIR/other-keys" --hosts h1,h2,h3 >/dev/null
cp "$root/examples/stress/cells.toml" "$OUT_DIR/cells.toml"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

schedule() {
  local file=$1 name=$2
  {
    echo "name = \"$name\""
    echo 'tick = "4ms"'
    echo 'major_frame = 3'
    echo 'cells = "cells.toml"'
    echo 'initial_state = "run"'
    echo '[stress]'
    echo 'counters = ["A.int", "B.int", "C.int"]'
    for h in 1 2 3; do
      printf '[[host]]\nname = "h%s"\naddress = "127.0.0.1:%s"\n' "$h" "$(port)"
    done
    for spec in "A 0 A B h2" "B 1 B C h3" "C 2 C A h2"; do
      read -r n start from to host <<<"$spec"
      printf '[[subsystem]]\nname = "%s"\nhost = "%s"\nstart = %s\nperiod = 3\nbuiltin = "increment"\nconfig = { from = "%s", to = "%s" }\n' \
        "$n" "$host" "$start" "$from" "$to"
    done
  } >"$file"
}

echo "Issue 21's attacks on seed 003's stress ring across three hosts on loopback"
echo "(4 ms tick, ${SECONDS_RUN} s, kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| attacker | links | attacker connected | read ticks/cells/statuses | forged cell puts / tick puts | setup flood: puts, MB offered, acknowledged, refused, unanswered | run exit | missed frames | final value | lost frames | refused (link-refused) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for who in $ATTACKERS; do
  name="attack-$who-$$"
  sched="$OUT_DIR/$who.toml"
  schedule "$sched" "$name"
  trust=(--keys "$keys/bundles/hosts/{host}")  # each host its own bundle
  [ "$who" = insecure ] && trust=(--insecure)
  proto=quic
  [ "$who" = insecure ] && proto=tcp
  mapfile -t addrs < <(sed -n 's/^address = "\(.*\)"$/\1/p' "$sched")
  endpoints=()
  for a in "${addrs[@]}"; do endpoints+=("$proto/$a"); done
  case $who in
    insecure) id=() ;;
    no-cert) id=(--ca "$keys/ca.pem") ;;
    other-ca) id=(--ca "$OUT_DIR/other-keys/ca.pem" --cert "$OUT_DIR/other-keys/hosts/h2.pem" --key "$OUT_DIR/other-keys/hosts/h2.key") ;;
    reader) id=(--ca "$keys/ca.pem" --cert "$keys/readers/python.pem" --key "$keys/readers/python.key") ;;
    stolen-h3) id=(--ca "$keys/ca.pem" --cert "$keys/hosts/h3.pem" --key "$keys/hosts/h3.key") ;;
    *) echo "attack-hosts.sh: unknown attacker '$who'" >&2; exit 2 ;;
  esac
  pids=()
  for h in 2 3; do
    ICTUS_RUN_DIR="$OUT_DIR" "$ICTUS" node "$sched" --host "h$h" "${trust[@]}" --quiet --json \
      -o "$OUT_DIR/$who-h$h.json" >"$OUT_DIR/$who-h$h.log" 2>&1 &
    pids+=($!)
  done
  ICTUS_RUN_DIR="$OUT_DIR" "$ICTUS" run "$sched" "${trust[@]}" --duration "${SECONDS_RUN}s" --quiet --json \
    -o "$OUT_DIR/$who-h1.json" >"$OUT_DIR/$who-h1.log" 2>&1 &
  main=$!
  pids+=("$main")
  sleep 2
  "$zattack" "$name" "$((SECONDS_RUN - 4))" "${endpoints[@]}" "${id[@]}" >"$OUT_DIR/$who-attack.json" 2>"$OUT_DIR/$who-attack.log" || true
  rc=0
  wait "$main" || rc=$?
  end_all "${pids[@]}"
  python3 - "$OUT_DIR" "$who" "$rc" "${trust[0]}" <<'EOF'
import json, sys, os
out, who, rc, trust = sys.argv[1:5]
links = "tcp (--insecure)" if trust == "--insecure" else "quic + keys"
try:
    a = json.load(open(f"{out}/{who}-attack.json"))
except (OSError, ValueError):
    a = None
try:
    r = json.load(open(f"{out}/{who}-h1.json"))
except (OSError, ValueError):
    print(f"| {who} | {links} | | | | | {rc} (no record: see {who}-h1.log) | | | | |")
    sys.exit(0)
m = r["measurements"]
stress = next(x for x in m if x["name"] == "stress")["metrics"]
lost = sum(int(x["metrics"]["lost_frames"]) for x in m if x["name"] == "release-jitter")
refused = [w for w in r["warnings"] if w["id"] == "link-refused"]
counted = sum(int(x["metrics"].get("refused", 0)) for x in m if x["name"] == "cell-latency")
if a:
    rd = a["read"]
    f = a["setup_flood"]
    cols = [
        "yes" if a["peers_seen"] else "no",
        f"{rd['ticks']}/{rd['cells']}/{rd['statuses']}",
        f"{a['forged_cell_puts']} / {a['forged_tick_puts']}",
        f"{f['puts']}, {f['bytes_offered'] / 1e6:.0f}, {f['acknowledged']}, {f['refused']}, {f['unanswered']}"
        + (f" (\"{f['first_refusal'][:70]}\")" if f["first_refusal"] else ""),
    ]
else:
    cols = ["attacker failed (see log)", "", "", ""]
print("| " + " | ".join([who, links] + cols + [
    rc,
    f"{int(stress['missed_frames'])} of {int(stress['run_frames'])}",
    f"{stress['final_value']:.0f}",
    str(lost),
    f"{counted} ({len(refused)} kinds)" if counted or refused else "0",
]) + " |")
EOF
done
echo
echo "attacker connected: Zenoh saw a peer; read: samples of the run the attacker received;"
echo "setup flood: queries with a 64 KiB value to setup/kv/*, and what the main host answered"
echo "(unanswered: nobody routed or replied); missed frames: seed 003's count (frames minus the"
echo "largest final counter); final value: the largest counter (10^12 means a forged cell got"
echo "in); refused: messages the hosts refused and counted (all hosts), as the run's"
echo "link-refused warnings. records: $OUT_DIR"
