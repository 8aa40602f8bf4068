# The MPI launcher's main container: run the job's command, then tell every worker its exit code over SSH
# so the workers' pods end with it; the launcher exits with the same code.
# Arguments: the workers' control directory, the ssh options, the workers (one string), then the command.
control=$1; shift; ssh_opts=$1; shift; workers=$1; shift
"$@" & child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
# The first wait reaps a command that already ended; a trapped signal interrupts a wait, so wait again.
wait "$child"; rc=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
for h in $workers; do
  { ssh $ssh_opts -o BatchMode=yes -o ConnectTimeout=10 "$h" "echo $rc > $control/exit-code" </dev/null \
      || echo "could not tell $h that the launcher finished" >&2; } &
done
wait
exit $rc
