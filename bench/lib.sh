# Sourced by the bench scripts (`. "$(dirname "$0")/lib.sh"`): where they are, the
# ictus binary they run, and the tools they need.
#
#   here, root          this folder and the repository
#   need TOOL MESSAGE   stops with MESSAGE on stderr (exit 3) when TOOL is missing
#   ictus_binary        sets ICTUS: the binary given in ICTUS, else a release build
#                       of this tree
# shellcheck shell=bash

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

need() {
  command -v "$1" >/dev/null || { echo "$2" >&2; exit 3; }
}

ictus_binary() {
  if [ -z "${ICTUS:-}" ]; then
    (cd "$root" && cargo build --release --quiet -p ictus-cli)
    ICTUS="$root/target/release/ictus"
  fi
}
