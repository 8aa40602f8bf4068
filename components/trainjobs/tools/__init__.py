"""What runs around the library: the `trainjobs` command (render, explain, run-local), the offline
engine, the per-rank views, the component provider and the generated argument reference."""
