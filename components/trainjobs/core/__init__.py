"""The model every family, backend and gang scheduler reads, below all of them: typed arguments, the
family interface, the pod sets, the objects built from the arguments, the job's names, placeholders,
outputs and errors. The pipeline (trainjobs.pipeline) drives the plugins over it."""
