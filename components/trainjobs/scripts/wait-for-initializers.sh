# Training pods' init container: wait, until a deadline, for every initializer's completion marker.
# Arguments: the timeout in seconds, then the marker files.
deadline=$(( $(date +%s) + $1 )); shift
for marker in "$@"; do
  until [ -f "$marker" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "initializer did not finish before the deadline: $marker is missing" >&2; exit 1
    fi
    sleep 2
  done
done
echo "initializers finished"
