"""An MpiTrainJob whose launcher runs `mpirun -N 1 hostname` on `num_nodes` worker hosts (stack config,
default 3), with this machine's OpenMPI (Debian's openmpi-bin): what bench/run.py times run-local with.

The pods are mpi-operator's OpenMPI image as run-local lays it out, run as Kubeflow's runtimes run:
its user mpiuser (uid 1000), the job's key in /home/mpiuser/.ssh, sshd on port 2222 from the image's
~/.sshd_config.
"""

import pulumi

from trainjobs import MpiRuntime, MpiTrainJob, PodTemplate

config = pulumi.Config()
USER = {"security_context": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}}
MpiTrainJob("hosts", {
    "image": "mpioperator/openmpi:v0.8.0",   # not pulled: run-local lays out what the image has
    "num_nodes": config.get_int("num_nodes") or 3,
    "command": ["mpirun", "-N", "1", "hostname"],
    "runtime": MpiRuntime(name="bench-mpiuser", launcher=PodTemplate(**USER),
                          node=PodTemplate(**USER, command=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]),
                          ssh_auth_mount_path="/home/mpiuser/.ssh", ssh_port=2222),
})
