# Functions the MPI launcher's scripts share (prepended to them, see scripts/__init__.py): the MPI hosts
# from the mounted hostfile, and a bounded fan-out over them, so a job of thousands of hosts neither
# carries its host list in the launcher's arguments nor starts thousands of ssh processes at once.
lanes=32   # at most this many checks or notices (ssh processes) at a time
# A time limit on one command where the image has `timeout` (coreutils, busybox); ssh's own
# ConnectTimeout bounds only the connection, not a peer that stops answering after it.
if command -v timeout >/dev/null 2>&1; then limit() { timeout "$@"; }; else limit() { shift; "$@"; }; fi

# OpenSSH 9.0 to 9.8 put sntrup761 first among key exchanges, and it costs the client more CPU than all
# the rest of a login (OpenSSH 9.9 and later put ML-KEM, which is cheap, first). These sessions carry an
# exit code or nothing, so where ssh has sntrup761, it is left out.
kex=""
if ssh -Q kex 2>/dev/null | grep -q '^sntrup761'; then
  kex="-o KexAlgorithms=-sntrup761x25519-sha512@openssh.com,sntrup761x25519-sha512"
fi

# hosts_in HOSTFILE: the first word of each line (OpenMPI's `host slots=S`, Hydra's `host:S`).
hosts_in() {
  sed -e 's/#.*//' -e 's/[[:space:]:].*//' -e '/^$/d' "$1"
}

# in_lanes FUNCTION HOST...: `FUNCTION HOST` for every host, at most $lanes at a time (lane i takes every
# $lanes-th host, one after another); returns when all are done. Each call's output is one line.
in_lanes() {
  fn=$1; shift; lane=0
  while [ "$lane" -lt "$lanes" ] && [ "$lane" -lt $# ]; do
    (i=0; for host; do [ $((i % lanes)) -ne "$lane" ] || "$fn" "$host"; i=$((i + 1)); done) &
    lane=$((lane + 1))
  done
  wait
}

# tell HOST: write $code into HOST's control directory ($control), which ends its pod with that code.
tell() {
  limit 60 ssh -o ConnectTimeout=10 -o BatchMode=yes $kex $ssh_opts "$1" "echo $code > $control/exit-code" \
    </dev/null >/dev/null 2>&1 || echo "could not tell $1 that the launcher finished" >&2
}
