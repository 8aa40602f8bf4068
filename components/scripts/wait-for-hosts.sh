# The MPI launcher's init container: wait, until a deadline, until every host in the hostfile resolves and
# accepts an SSH login with the job's key. On the deadline it names each host it could not reach and why, and
# tells the workers that came up to end their pods too.
# Arguments: the workers' control directory, the timeout in seconds, the ssh options, the launcher's own
# hostfile name, then the hosts.
control=$1; shift; timeout=$1; deadline=$(( $(date +%s) + $1 )); shift; ssh_opts=$1; shift; self=$1; shift
pending="$*"; reachable=""
while :; do
  left=""; why=""
  for h in $pending; do
    if ! getent hosts "$h" >/dev/null; then
      left="$left $h"; why="$why
  $h: the name does not resolve"; continue
    fi
    [ "$h" = "$self" ] && continue
    # One connection attempt per round (the first -o given wins), so the deadline holds.
    if out=$(ssh -o ConnectionAttempts=1 -o ConnectTimeout=5 -o BatchMode=yes $ssh_opts "$h" true </dev/null 2>&1 >/dev/null); then
      reachable="$reachable $h"
    else
      left="$left $h"; why="$why
  $h: $(printf '%s\n' "${out:-no SSH login}" | tail -n 1)"
    fi
  done
  pending=$left
  [ -z "$pending" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "MPI hosts not reachable within ${timeout}s:$pending$why" >&2
    for h in $reachable; do  # the job is over: the workers that came up end their pods too
      ssh -o ConnectTimeout=5 -o BatchMode=yes $ssh_opts "$h" "echo 1 > $control/exit-code" </dev/null >/dev/null 2>&1 &
    done
    wait; exit 1
  fi
  sleep 1
done
echo "all MPI hosts reachable"
