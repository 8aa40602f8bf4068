# The MPI launcher's init container: wait, until a deadline, until every host in the hostfile resolves and its
# sshd answers, and the job's key logs in to one of them (every worker mounts the same key and runs the same
# sshd). Hosts are checked $lanes at a time (fan-out.sh), each round only those still pending, and no check
# outlasts the deadline, so it holds to within a second or two however many hosts are down. On the deadline
# it names each host it could not reach and why, and tells the workers that came up to end their pods too.
# Arguments: the workers' control directory, the timeout in seconds, the ssh options, the launcher's own
# hostfile name, then the hostfile.
control=$1; timeout=$2; ssh_opts=$3; self=$4; hosts=$(hosts_in "$5") && [ -n "$hosts" ] || {
  echo "no MPI hosts in $5" >&2; exit 1; }
deadline=$(( $(date +%s) + timeout ))
keyhost=$(printf '%s\n' $hosts | grep -vxF "$self" | head -n 1)

# check HOST: "ok HOST", "no HOST <why>", or "late HOST" when the deadline passed before its turn.
# The first -o given wins: one connection attempt, bounded by what is left of the deadline (at most 5 s).
# Every host but $keyhost gets a key exchange with no login (authentication turned off, so sshd's
# "Permission denied" is the answer expected): a fraction of a login's cost, on both ends.
check() {
  now=$(date +%s)
  if [ "$now" -ge "$deadline" ]; then echo "late $1"; return; fi
  if ! getent hosts "$1" >/dev/null; then echo "no $1 the name does not resolve"; return; fi
  if [ "$1" = "$self" ]; then echo "ok $1"; return; fi
  left=$((deadline - now)); [ "$left" -le 5 ] || left=5
  if [ "$1" = "$keyhost" ]; then auth=""; else
    auth="-o PubkeyAuthentication=no -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no
          -o HostbasedAuthentication=no -o GSSAPIAuthentication=no"; fi
  out=$(limit "$left" ssh -o ConnectionAttempts=1 -o ConnectTimeout="$left" -o BatchMode=yes \
        $kex $auth $ssh_opts "$1" true </dev/null 2>&1 >/dev/null)
  case $?:$out in
    0:*) echo "ok $1" ;;
    124:*) echo "no $1 no SSH answer within ${left}s" ;;
    *"Permission denied"*) if [ -n "$auth" ]; then echo "ok $1"; else echo "no $1 $(last "$out")"; fi ;;
    *) echo "no $1 $(last "${out:-no SSH login}")" ;;
  esac
}
last() { printf '%s\n' "$1" | tail -n 1; }

pending=$hosts; why=""
while :; do
  results=$(in_lanes check $pending)
  # Each pending host's reason, in hostfile order; a host whose turn came after the deadline keeps its last.
  why=$({ printf 'host %s\n' $pending; printf '%s\n' "$why" "$results"; } | awk '
    $1 == "host" { order[n++] = $2; next }
    /^  / { host = $1; sub(/:$/, "", host); line = $0; sub(/^  [^ ]* /, "", line); reason[host] = line; next }
    $1 == "no" { line = $0; sub(/^no [^ ]* /, "", line); reason[$2] = line; next }
    $1 == "ok" { reason[$2] = ""; next }
    $1 == "late" && !($2 in reason) { reason[$2] = "not checked before the deadline" }
    END { for (i = 0; i < n; i++) if (reason[order[i]] != "") print "  " order[i] ": " reason[order[i]] }')
  pending=$(printf '%s\n' "$why" | sed -n 's/^  \([^ ]*\): .*/\1/p')
  [ -z "$pending" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "MPI hosts not reachable within ${timeout}s:" $pending >&2
    printf '%s\n' "$why" >&2
    # The job is over: the workers that came up end their pods too.
    code=1; in_lanes tell $(printf '%s\n' $hosts | grep -vxF -e "$self" $(printf ' -e %s' $pending)) 2>/dev/null
    exit 1
  fi
  sleep 1
done
echo "all MPI hosts reachable"
