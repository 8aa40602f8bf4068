#!/usr/bin/env bash
# A Kubernetes control plane on this machine, on 127.0.0.1 only, and the real Pulumi CLI to drive it.
#
#   scripts/engine/cluster.sh up     build what is missing (build.sh), start etcd, kube-apiserver,
#                                    kube-controller-manager, kube-scheduler and kwok, install the CRDs,
#                                    add the fake Nodes; print the `export` lines, also written to <state>/env.
#                                    With TRAINJOBS_CLUSTER_CONTROLLERS (a comma list: jobset), also those
#                                    controllers with their webhooks, served on 127.0.0.1.
#   scripts/engine/cluster.sh down   stop everything `up` started
#   scripts/engine/cluster.sh env    print the `export` lines of the running cluster
#
# State (certificates, etcd's data, logs, pids, the Pulumi backend) is in $TRAINJOBS_CLUSTER_DIR, by default
# .cluster/ in the work tree. Ports are chosen free. kwok plays the kubelet of the fake Nodes: their pods turn
# Running, then Succeeded when a Job owns them; a pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true
# fails instead, with the exit code of its annotation pod-container-running-failed.stage.kwok.x-k8s.io/exit-code
# (default 1). JobSet's and Kueue's CRDs are installed; their controllers and webhooks only when named in
# TRAINJOBS_CLUSTER_CONTROLLERS (`make cluster-controllers`); without, the cluster is the small one. A claim is bound
# to a volume of the default StorageClass at once; pods of schedulerName volcano are placed by kube-scheduler.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"

CACHE=${TRAINJOBS_ENGINE_CACHE:-$HOME/.cache/trainjobs-engine}
STATE=${TRAINJOBS_CLUSTER_DIR:-$repo/.cluster}
SHARED_CRDS=${TRAINJOBS_SHARED_CRDS:-$repo/../shared/crds}
# Fake Nodes: enough for the example stacks' jobs (the dev stack's fine-tune asks for 4 pods of 8 GPUs).
NODES=${TRAINJOBS_CLUSTER_NODES:-4}
# Pulumi's passphrase secrets provider encrypts the stack's secrets with this passphrase.
PASSPHRASE=${PULUMI_CONFIG_PASSPHRASE:-trainjobs-local}
# The controllers to run beside the control plane, with their webhooks.
CONTROLLERS=,${TRAINJOBS_CLUSTER_CONTROLLERS:-},

K8S=$CACHE/kubernetes-$K8S_VERSION/bin
ETCD=$CACHE/etcd-$ETCD_VERSION/bin
KWOK=$CACHE/kwok-$KWOK_VERSION/bin
CRDS=$CACHE/crds-jobset-$JOBSET_VERSION-kueue-$KUEUE_VERSION/bin
PROVIDER=$CACHE/pulumi-kubernetes-$PULUMI_KUBERNETES_VERSION/bin
PULUMI=$CACHE/pulumi-$PULUMI_VERSION/bin
LANGHOST=$CACHE/langhost-$PULUMI_VERSION-$(sha256sum < "$here/langhost/main.go" | cut -c1-12)/bin
YAMLHOST=$CACHE/pulumi-yaml-$PULUMI_YAML_VERSION/bin
JOBSET=$CACHE/jobset-$JOBSET_VERSION/bin
BASE=(kwok kube-scheduler kube-controller-manager kube-apiserver etcd)
COMPONENTS=(jobset "${BASE[@]}")  # the order `down` stops them in

log() { printf '[cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

alive() { [[ -s $STATE/pids/$1 ]] && kill -0 "$(cat "$STATE/pids/$1")" 2>/dev/null; }

# Starts one component in its own session (it outlives `make`), logging to <state>/logs/<name>.log.
launch() {  # name command...
  local name=$1; shift
  setsid "$@" > "$STATE/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$STATE/pids/$name"
}

# Waits for a command to succeed while the component it checks runs; shows its log's tail if it dies.
wait_for() {  # name seconds command...
  local name=$1 seconds=$2 i; shift 2
  for ((i = 0; i < seconds * 2; i++)); do
    "$@" > /dev/null 2>&1 && return 0
    alive "$name" || { tail -n 30 "$STATE/logs/$name.log" >&2; die "$name exited (log: $STATE/logs/$name.log)"; }
    sleep 0.5
  done
  tail -n 30 "$STATE/logs/$name.log" >&2
  die "$name not ready after $seconds s (log: $STATE/logs/$name.log)"
}

free_ports() {  # n
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

env_lines() {
  cat <<EOF
export KUBECONFIG=$STATE/kubeconfig
export PATH=$STATE/bin:$PROVIDER:$K8S:$ETCD:$KWOK:\$PATH
export PULUMI_HOME=$STATE/pulumi-home
export PULUMI_BACKEND_URL=file://$STATE/backend
export PULUMI_CONFIG_PASSPHRASE=$PASSPHRASE
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_SKIP_UPDATE_CHECK=true
export TRAINJOBS_CLUSTER_DIR=$STATE
EOF
}

kubectl_() { kubectl --kubeconfig "$STATE/kubeconfig" "$@"; }

down() {
  local name pid i
  for name in "${COMPONENTS[@]}"; do
    alive "$name" || continue
    pid=$(cat "$STATE/pids/$name")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    log "stopped $name ($pid)"
  done
  rm -rf "$STATE/pids"
}

wanted() { [[ $CONTROLLERS == *,$1,* ]]; }

# The cluster runs as asked: every component, and of the controllers the wanted ones alone.
running() {
  local name
  for name in "${BASE[@]}"; do alive "$name" || return 1; done
  for name in jobset; do
    if wanted "$name"; then alive "$name" || return 1; elif alive "$name"; then return 1; fi
  done
  kubectl_ get --raw /readyz > /dev/null 2>&1
}

# kube-scheduler places the pods of schedulerName `volcano` too, by a second profile of that name, one by one, not
# as a gang: Volcano's scheduler is not built here (docs/real-engine.md says why).
scheduler_config() {
  cat <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $STATE/kubeconfig}
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: default-scheduler
  - schedulerName: volcano
EOF
}

# The cluster's storage, as a cloud's default StorageClass gives it: a claim without a class gets this one, and
# kube-controller-manager's hostPath provisioner makes it a volume at once (a directory /tmp/hostpath_pv/<uuid> on
# this machine, any access mode, any size), deleted with its directory when the claim is.
storage_class() {
  kubectl_ apply -f - > /dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
}

# Serves a controller's webhooks on loopback, where the API server reaches them without a Service or kube-proxy.
# Makes a CA and a serving certificate for 127.0.0.1 in <state>/pki/<name> (tls.crt and tls.key, the names
# controller-runtime's webhook server reads from its certDir), and installs the webhook configurations of the
# YAML read on stdin (anything else in it is left out) with each clientConfig rewritten to
# url: https://127.0.0.1:<port><its service's path> and that CA. The certificate is made once per cluster.
loopback_webhooks() {  # name port < webhook configurations
  local name=$1 port=$2 dir=$STATE/pki/$1
  if [[ ! -e $dir/tls.crt ]]; then
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$name-webhook-ca" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2> /dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2> /dev/null
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') -out "$dir/tls.crt" 2> /dev/null
    chmod 600 "$dir"/*.key
  fi
  local configs
  configs=$(kubectl_ create --dry-run=client -o json -f - | python3 -c '
import base64, json, re, sys
port, ca = sys.argv[1], base64.b64encode(open(sys.argv[2], "rb").read()).decode()
objects = [json.loads(doc) for doc in re.split(r"(?m)^(?=\{)", sys.stdin.read()) if doc.strip()]   # one per object
kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
configs = [o for o in objects if o["kind"] in kinds]
for config in configs:
    for hook in config["webhooks"]:
        path = hook["clientConfig"]["service"].get("path", "/")
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
json.dump({"apiVersion": "v1", "kind": "List", "items": configs}, sys.stdout)' "$port" "$dir/ca.crt")
  kubectl_ apply --server-side -f - <<< "$configs" > /dev/null
}

# The JobSet controller out of the cluster: upstream's RBAC, kustomized as upstream deploys it (namespace
# jobset-system, names prefixed jobset-), with its service account's token; no leader election; its own
# certificate management off. A server-side dry run of a JobSet shows its webhooks served.
start_jobset() {
  local webhook_port health_port dir=$STATE/jobset part token
  read -r webhook_port health_port < <(free_ports 2)
  mkdir -p "$dir"/{rbac,webhook}
  for part in rbac webhook; do
    printf 'namespace: jobset-system\nnamePrefix: jobset-\nresources:\n- %s\n' \
      "$(realpath --relative-to "$dir/$part" "$JOBSET/$part")" > "$dir/$part/kustomization.yaml"
  done
  kubectl_ create namespace jobset-system > /dev/null
  kubectl kustomize "$dir/rbac" | kubectl_ apply --server-side -f - > /dev/null
  token=$(kubectl_ create token jobset-controller-manager -n jobset-system --duration 8760h)
  local kc=(kubectl config --kubeconfig "$dir/kubeconfig")
  "${kc[@]}" set-cluster local --server "$(kubectl_ config view -o jsonpath='{.clusters[0].cluster.server}')" \
    --certificate-authority "$STATE/pki/apiserver.crt" --embed-certs > /dev/null
  "${kc[@]}" set-credentials jobset --token "$token" > /dev/null
  "${kc[@]}" set-context local --cluster local --user jobset > /dev/null
  "${kc[@]}" use-context local > /dev/null
  chmod 600 "$dir/kubeconfig"
  cat > "$dir/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $webhook_port, certDir: $STATE/pki/jobset}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "127.0.0.1:$health_port"}
EOF
  # The webhooks first, with the certificate the webhook server reads as it starts: nothing makes JobSets or their
  # pods before `up` returns.
  kubectl kustomize "$dir/webhook" | loopback_webhooks jobset "$webhook_port"
  launch jobset "$JOBSET/jobset" --kubeconfig "$dir/kubeconfig" --config "$dir/config.yaml"
  wait_for jobset 120 curl -fsS "http://127.0.0.1:$health_port/readyz"
  printf '%s\n' 'apiVersion: jobset.x-k8s.io/v1alpha2' 'kind: JobSet' 'metadata: {name: webhook-check, namespace: default}' \
    'spec: {replicatedJobs: [{name: w, template: {spec: {template: {spec: {restartPolicy: Never,' \
    '  containers: [{name: c, image: busybox}]}}}}}]}' > "$dir/webhook-check.yaml"
  wait_for jobset 60 kubectl_ create --dry-run=server -f "$dir/webhook-check.yaml"
  log "jobset $JOBSET_VERSION: webhooks on https://127.0.0.1:$webhook_port"
}

up() {
  "$here/build.sh" all
  if wanted jobset; then "$here/build.sh" jobset; fi
  if [[ -d $STATE/pids ]] && running; then
    log "already running"
    env_lines | tee "$STATE/env"
    return 0
  fi
  down
  rm -rf "$STATE"
  mkdir -p "$STATE"/{pids,logs,pki,etcd,pulumi-home,backend}
  chmod 700 "$STATE/etcd" "$STATE/pki"
  trap down EXIT  # a start that fails stops what it started
  # The CLI uses the language hosts found next to its own binary without a warning: all are linked into one folder.
  mkdir "$STATE/bin"
  local f
  for f in "$PULUMI"/* "$LANGHOST"/* "$YAMLHOST"/*; do ln -f "$f" "$STATE/bin/" 2> /dev/null || cp -p "$f" "$STATE/bin/"; done
  local t0 etcd_port peer_port api_port token
  t0=$(date +%s)
  read -r etcd_port peer_port api_port < <(free_ports 3)
  token=$(openssl rand -hex 24)

  # The admin is a token in system:masters; service account tokens are signed with their own key.
  echo "$token,admin,admin,system:masters" > "$STATE/pki/tokens.csv"
  openssl genrsa -out "$STATE/pki/sa.key" 2048 2> /dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2> /dev/null
  chmod 600 "$STATE/pki"/*

  launch etcd "$ETCD/etcd" --name local --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "local=http://127.0.0.1:$peer_port"
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$etcd_port/health"

  launch kube-apiserver "$K8S/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$STATE/pki" --token-auth-file "$STATE/pki/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$STATE/pki/sa.pub" --service-account-signing-key-file "$STATE/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
    --disable-admission-plugins TaintNodesByCondition
  local server=https://127.0.0.1:$api_port
  kubectl config --kubeconfig "$STATE/kubeconfig" set-cluster local --server "$server" \
    --certificate-authority "$STATE/pki/apiserver.crt" > /dev/null
  kubectl config --kubeconfig "$STATE/kubeconfig" set-credentials admin --token "$token" > /dev/null
  kubectl config --kubeconfig "$STATE/kubeconfig" set-context local --cluster local --user admin > /dev/null
  kubectl config --kubeconfig "$STATE/kubeconfig" use-context local > /dev/null
  chmod 600 "$STATE/kubeconfig"
  wait_for kube-apiserver 180 kubectl_ get --raw /readyz

  launch kube-controller-manager "$K8S/kube-controller-manager" --kubeconfig "$STATE/kubeconfig" \
    --leader-elect=false --secure-port 0 \
    --controllers job-controller,garbage-collector-controller,namespace-controller,endpointslice-controller,serviceaccount-controller,serviceaccount-token-controller,resourceclaim-controller,ttl-after-finished-controller,pod-garbage-collector-controller,persistentvolumeclaim-protection-controller,persistentvolume-binder-controller,persistentvolume-protection-controller,root-ca-certificate-publisher-controller \
    --enable-hostpath-provisioner \
    --service-account-private-key-file "$STATE/pki/sa.key" --root-ca-file "$STATE/pki/apiserver.crt"
  scheduler_config > "$STATE/scheduler.yaml"
  launch kube-scheduler "$K8S/kube-scheduler" --config "$STATE/scheduler.yaml" --secure-port 0
  local stage stages=()
  for stage in "$KWOK"/*.yaml "$here"/kwok-*.yaml; do stages+=(--config "$stage"); done
  launch kwok "$KWOK/kwok" --kubeconfig "$STATE/kubeconfig" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --server-address "" \
    --cidr 10.244.0.1/16 --node-ip 127.0.0.1 --node-lease-duration-seconds 40 \
    "${stages[@]}"

  log "installing the CRDs"
  local crd files=("$CRDS"/*.yaml)
  for crd in volcano-scheduling.volcano.sh_podgroups.yaml volcano-scheduling.volcano.sh_queues.yaml \
      schedplugins-podgroups.yaml; do
    [[ -e $SHARED_CRDS/$crd ]] || die "missing $SHARED_CRDS/$crd (set TRAINJOBS_SHARED_CRDS to its folder)"
    files+=("$SHARED_CRDS/$crd")
  done
  local args=()
  for f in "${files[@]}"; do args+=(-f "$f"); done
  kubectl_ apply --server-side "${args[@]}" > /dev/null
  # A CRD just created has no conditions yet, which `kubectl wait` takes for an error: asked again until Established.
  wait_for kube-apiserver 120 kubectl_ wait --for condition=Established --timeout 60s crd --all

  storage_class

  log "adding $NODES fake Nodes"
  local i
  for ((i = 0; i < NODES; i++)); do
    cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    nvidia.com/gpu.product: H100-SXM
status:
  allocatable: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
  capacity: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
---
EOF
  done | kubectl_ apply -f - > /dev/null
  wait_for kwok 120 bash -c "[[ \$(kubectl --kubeconfig '$STATE/kubeconfig' get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' \
    | grep -c True) == $NODES ]]"
  wait_for kube-controller-manager 120 kubectl_ get serviceaccount default
  if wanted jobset; then start_jobset; fi

  trap - EXIT
  env_lines > "$STATE/env"
  log "up in $(($(date +%s) - t0)) s; state in $STATE; to use it:"
  cat "$STATE/env"
}

case ${1:-} in
  up) up ;;
  down) down; log "stopped" ;;
  env) [[ -e $STATE/env ]] || die "no cluster: run scripts/engine/cluster.sh up"; cat "$STATE/env" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
