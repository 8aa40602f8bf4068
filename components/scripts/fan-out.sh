# Functions the MPI launcher's scripts share (prepended to them, see scripts/__init__.py): the MPI hosts
# from the mounted hostfile, and a bounded fan-out over them, so a job of thousands of hosts neither
# carries its host list in the launcher's arguments nor starts thousands of ssh processes at once.
lanes=32   # at most this many checks or notices (ssh processes) at a time
# A time limit on one command where the image has `timeout` (coreutils, busybox); ssh's own
# ConnectTimeout bounds only the connection, not a peer that stops answering after it.
if command -v timeout >/dev/null 2>&1; then limit() { timeout "$@"; }; else limit() { shift; "$@"; }; fi

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
  limit 60 ssh -o ConnectTimeout=10 -o BatchMode=yes $ssh_opts "$1" "echo $code > $control/exit-code" \
    </dev/null >/dev/null 2>&1 || echo "could not tell $1 that the launcher finished" >&2
}
