# /etc/mpi/discover_hosts.sh on the MPI launcher, as the MPI Operator mounts it for Horovod's elastic mode
# (horovodrun --host-discovery-script): one `host:slots` line for each host of the hostfile whose name
# resolves, that is whose pod is up (the headless Service publishes a pod's name once it has an address), in
# hostfile order. The operator's lists its Running worker pods instead. Reads either hostfile format
# (OpenMPI's `host slots=N`, Hydra's `host:N`).
sed 's/ slots=/:/' /etc/mpi/hostfile | while IFS=: read -r host slots; do
  if getent hosts "$host" >/dev/null; then echo "$host:$slots"; fi
done
