"""What runs around the library, in three parts: the `trainjobs` command and its views (cli/), the
component provider and its protocol (provider/), and the importer of Kubeflow, MPI Operator and Volcano
jobs (importer/). Both the command and the test kit (trainjobs.testing) run programs through the offline
engine (engine, with stack config read by stackconfig); the command and run-local (trainjobs.localrun)
both read what each pod will see through the per-pod view (podview)."""
