# The MPI launcher's main container: run the job's command, then tell every worker its exit code over SSH
# so the workers' pods end with it, $lanes workers at a time (fan-out.sh); the launcher exits with the same
# code, and names each worker it could not tell.
# Arguments: the workers' control directory, the ssh options, the hostfile, the launcher's own hostfile
# name (not a worker), the names of the env variables that carry mpirun's ssh options, then the command.
control=$1; ssh_opts=$2; hostfile=$3; self=$4; ssh_env=$5; shift 5
# mpirun logs in to every host over ssh: where ssh has sntrup761 (fan-out.sh), those logins leave it out
# too, or its key exchange is most of the launcher's CPU for each host it starts.
if [ -n "$kex" ]; then
  for name in $ssh_env; do
    eval "given=\${$name+yes} value=\${$name-}"
    [ -z "$given" ] || export "$name=$value $kex"
  done
fi
"$@" & child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
# The first wait reaps a command that already ended; a trapped signal interrupts a wait, so wait again.
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
in_lanes tell $(hosts_in "$hostfile" | grep -vxF "$self")
exit $code
