# An MPI worker's main container: run sshd until the launcher writes its exit code into the control
# directory, then stop sshd and exit with that code.
# Arguments: the control directory, then the sshd command.
control=$1; shift
"$@" & sshd=$!
while kill -0 "$sshd" 2>/dev/null; do
  if [ -s $control/exit-code ]; then
    code=$(cat $control/exit-code)
    echo "the MPI launcher finished with exit code $code: stopping sshd" >&2
    [ "$code" = 0 ] || sleep 3  # a failure: end after the launcher, whose own failure says what happened
    kill "$sshd"; exit "$code"
  fi
  sleep 1
done
echo "sshd exited before the launcher finished" >&2; exit 1
