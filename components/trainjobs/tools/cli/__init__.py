"""The `trainjobs` command (main) and the views it prints and writes: the render (YAML, tree, change
list), the per-pod views behind `explain`, the review summary and the runs a change starts."""
