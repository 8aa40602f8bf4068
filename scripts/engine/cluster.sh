#!/usr/bin/env bash
# A Kubernetes control plane on this machine, on 127.0.0.1 only, and the real Pulumi CLI to drive it.
#
#   scripts/engine/cluster.sh up     build what is missing (build.sh), start etcd, kube-apiserver,
#                                    kube-controller-manager, kube-scheduler and kwok, install the CRDs,
#                                    add the fake Nodes; print the `export` lines, also written to <state>/env.
#                                    With TRAINJOBS_CLUSTER_CONTROLLERS (a comma list: jobset, kueue), also those
#                                    controllers with their webhooks, served on 127.0.0.1.
#   scripts/engine/cluster.sh down   stop everything `up` started
#   scripts/engine/cluster.sh env    print the `export` lines of the running cluster
#   scripts/engine/cluster.sh kueue-fixtures   print Kueue's fixtures (queues, flavor, Topology, priorities)
#   scripts/engine/cluster.sh worker up|down   a second control plane beside a running one that has Kueue: MultiKueue's
#                                    worker cluster (state in <state>/worker, with the JobSet and Kueue controllers
#                                    and Kueue's fixtures), and on this (manager) cluster the MultiKueue objects that
#                                    dispatch to it from the ClusterQueue team-llm-multikueue; `down` removes both
#                                    (as the manager's own `down` does)
#
# State (certificates, etcd's data, logs, pids, the Pulumi backend) is in $TRAINJOBS_CLUSTER_DIR, by default
# .cluster/ in the work tree. Ports are chosen free. kwok plays the kubelet of the fake Nodes: their pods turn
# Running, then Succeeded when a Job owns them; a pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true
# fails instead, with the exit code of its annotation pod-container-running-failed.stage.kwok.x-k8s.io/exit-code
# (default 1). A claim is bound to a volume of the default StorageClass at once; pods of schedulerName volcano are
# placed by kube-scheduler. JobSet's and Kueue's CRDs are installed; their controllers only when asked for:
#
#   TRAINJOBS_CLUSTER_CONTROLLERS=jobset,kueue   (a comma list; default empty: the CRDs alone; `make cluster-controllers`)
#     jobset: the JobSet controller with its webhooks on loopback and its RBAC;
#     kueue: the Kueue controller with its webhooks on loopback, its RBAC, and the queues the example stacks name
#     (kueue_fixtures); the fake Nodes then carry the levels of its Topology as labels.
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
CONTROLLERS=${TRAINJOBS_CLUSTER_CONTROLLERS:-}

K8S=$CACHE/kubernetes-$K8S_VERSION/bin
ETCD=$CACHE/etcd-$ETCD_VERSION/bin
KWOK=$CACHE/kwok-$KWOK_VERSION/bin
CRDS=$CACHE/crds-jobset-$JOBSET_VERSION-kueue-$KUEUE_VERSION/bin
PROVIDER=$CACHE/pulumi-kubernetes-$PULUMI_KUBERNETES_VERSION/bin
PULUMI=$CACHE/pulumi-$PULUMI_VERSION/bin
LANGHOST=$CACHE/langhost-$PULUMI_VERSION-$(sha256sum < "$here/langhost/main.go" | cut -c1-12)/bin
YAMLHOST=$CACHE/pulumi-yaml-$PULUMI_YAML_VERSION/bin
JOBSET=$CACHE/jobset-$JOBSET_VERSION/bin
KUEUE=$CACHE/kueue-$KUEUE_VERSION/bin
WORKER=$STATE/worker   # MultiKueue's worker cluster (`cluster.sh worker up`)
COMPONENTS=(kueue jobset kwok kube-scheduler kube-controller-manager kube-apiserver etcd)  # the order `down` stops them in

log() { printf '[cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

controller_on() { [[ ,$CONTROLLERS, == *,$1,* ]]; }

# What `up` starts: the control plane, and the controllers asked for.
wanted() {
  echo kwok kube-scheduler kube-controller-manager kube-apiserver etcd
  if controller_on jobset; then echo jobset; fi
  if controller_on kueue; then echo kueue; fi
}

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
export TRAINJOBS_CLUSTER_CONTROLLERS="$CONTROLLERS"
EOF
}

kubectl_() { kubectl --kubeconfig "$STATE/kubeconfig" "$@"; }

# Serves a controller's webhooks on loopback: the API server reaches a webhook Service only through kube-proxy,
# which this cluster lacks, so each webhook is called by URL on 127.0.0.1 with a certificate made for it.
#   loopback_webhooks cert DIR                     a CA and a serving certificate for IP 127.0.0.1 in DIR
#                                                  (ca.crt, tls.crt, tls.key: controller-runtime's certDir)
#   loopback_webhooks install PREFIX DIR PORT FILE...
#       the webhook configurations in the FILEs (a module's config/components/webhook/manifests.yaml), named
#       PREFIX-<name> as its kustomize overlay names them, each clientConfig rewritten to
#       url: https://127.0.0.1:PORT<its service path> with DIR's CA as caBundle; a CustomResourceDefinition in
#       the FILEs (a conversion patch of config/components/crd/patches) patches that CRD's conversion webhook so.
loopback_webhooks() {
  local dir
  case $1 in
    cert)
      dir=$2
      mkdir -p "$dir"
      openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=loopback-webhook-ca \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2> /dev/null
      openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$dir/tls.key" -out "$dir/tls.csr" 2> /dev/null
      openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 365 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n') \
        -out "$dir/tls.crt" 2> /dev/null
      chmod 600 "$dir"/*.key
      ;;
    install)
      local prefix=$2 port=$4 kind name body
      dir=$3
      shift 4
      while IFS=$'\t' read -r kind name body; do
        if [[ $kind == CustomResourceDefinition ]]; then
          kubectl_ patch crd "$name" --type merge -p "$body" > /dev/null
        else
          kubectl_ apply -f - <<< "$body" > /dev/null
        fi
      done < <(python3 - "$prefix" "https://127.0.0.1:$port" "$dir/ca.crt" "$@" <<'PY'
import base64, json, sys
import yaml
prefix, base, ca = sys.argv[1:4]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
for path in sys.argv[4:]:
    for doc in yaml.safe_load_all(open(path)):
        if not doc:
            continue
        if doc["kind"] == "CustomResourceDefinition":
            webhook = doc["spec"]["conversion"]["webhook"]
            webhook["clientConfig"] = {"url": base + webhook["clientConfig"]["service"]["path"], "caBundle": bundle}
            patch = {"spec": {"conversion": {**doc["spec"]["conversion"], "webhook": webhook}}}
            print("CustomResourceDefinition", doc["metadata"]["name"], json.dumps(patch), sep="\t")
            continue
        if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue  # a module's webhook Service: the API server calls the webhooks by URL
        doc["metadata"]["name"] = f"{prefix}-{doc['metadata']['name']}"
        for webhook in doc.get("webhooks") or []:
            webhook["clientConfig"] = {"url": base + webhook["clientConfig"]["service"]["path"], "caBundle": bundle}
        print(doc["kind"], doc["metadata"]["name"], json.dumps(doc), sep="\t")
PY
      )
      ;;
  esac
}

# The fake Node i's place in the Topology of Kueue's fixtures: 2 Nodes a rack, 4 a block (hostname is the host).
topology_labels() {  # i
  printf '    example.com/block: block-%d\n    example.com/rack: rack-%d\n' $(($1 / 4)) $(($1 / 2))
}

# Kwok Nodes for the real-engine suite's Kueue tests alone, a pool per test file (tests/cluster/test_kueue_controller.py,
# test_status_on_cluster.py): labelled and tainted trainjobs.dev/pool=<pool>; their ResourceFlavors select and
# tolerate them (Kueue adds both to the pods it admits), and the tests' jobs tolerate the taint themselves (Kueue's
# node-failure handling reads only theirs: docs/scheduling.md). No other pod lands there, so Kueue's placement (TAS), which
# counts the pods it does not manage and does not try again when they finish, sees only its tests' own pods, and
# those tests run beside the example stacks.
TEST_POOLS=(kueue-tests:4 status-tests:1)   # pool:Nodes, each pool placed in the Topology of the fixtures

test_pool_size() {
  local pool n=0
  for pool in "${TEST_POOLS[@]}"; do n=$((n + ${pool#*:})); done
  echo "$n"
}

test_pool_nodes() {
  local pool i
  for pool in "${TEST_POOLS[@]}"; do
    for ((i = 0; i < ${pool#*:}; i++)); do kwok_node "kwok-${pool%:*}-$i" "$i" "${pool%:*}"; done
  done
}

# One fake Node, which kwok runs: its name, its place in the Topology of Kueue's fixtures (an index, or "" for none),
# and its test pool (labelled and tainted trainjobs.dev/pool=<pool>), or "" for a Node of the example stacks' GPUs.
kwok_node() {  # name topology-index pool
  local name=$1 index=$2 pool=$3
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    type: kwok
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
$(if [[ -n $pool ]]; then echo "    trainjobs.dev/pool: $pool"; else echo "    nvidia.com/gpu.product: H100-SXM"; fi)
$(if [[ -n $index ]]; then topology_labels "$index"; fi)
$(if [[ -n $pool ]]; then printf 'spec:\n  taints: [{key: trainjobs.dev/pool, value: %s, effect: NoSchedule}]' "$pool"; fi)
status:
  allocatable: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
  capacity: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
---
EOF
}

# The PriorityClasses the example stacks name (docs/real-engine.md), there from the start and never deleted: the
# tests that need them (the example stacks', the API verdict's dry runs) then create and delete none of them.
priority_classes() {
  local class
  for class in training-high:1000 research:1000 training:1000 batch:100; do
    printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: %s}\nvalue: %s\n---\n' \
      "${class%:*}" "${class#*:}"
  done
}

# Kueue, from its module: its roles bound to its own user, its webhooks on loopback (the Job and JobSet
# integrations' and its own kinds'; the others would only intercept pods, Deployments, ... of integrations that are
# off), the conversion webhooks of its CRDs, then the fixtures. It runs in a mount namespace in which /etc is an
# overlay adding /etc/kueue/metrics/certs: without its internal certificate management it reads its metrics
# server's certificate from that fixed path (cmd/kueue/main.go); the machine's /etc is left alone.
start_kueue() {
  local dir=$STATE/kueue webhook_port metrics_port health_port token i
  read -r webhook_port metrics_port health_port < <(free_ports 3)
  mkdir -p "$dir/etc/kueue/metrics/certs" "$dir/etc-work"
  loopback_webhooks cert "$dir/certs"
  cp "$dir/certs/tls.crt" "$dir/certs/tls.key" "$dir/etc/kueue/metrics/certs/"
  token=$(awk -F, '$2 == "kueue" {print $1}' "$STATE/pki/tokens.csv")
  kubectl_ config view --raw --flatten > "$dir/kubeconfig"
  # The copy's user (named admin, as in the cluster's kubeconfig) gets the token of the user kueue.
  kubectl config --kubeconfig "$dir/kubeconfig" set-credentials admin --token "$token" > /dev/null
  chmod 600 "$dir/kubeconfig"
  kubectl_ create namespace kueue-system > /dev/null
  # Its manager's roles, named and placed as its kustomize overlay does (prefix kueue-, namespace kueue-system),
  # each bound to the user kueue.
  python3 - "$KUEUE"/manifests/rbac/*.yaml <<'PY' | kubectl_ apply -f - > /dev/null
import json, sys
import yaml
items = []
for path in sys.argv[1:]:
    for role in filter(None, yaml.safe_load_all(open(path))):
        meta = role["metadata"]
        meta["name"] = "kueue-" + meta["name"]
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role["kind"] + "Binding",
                   "metadata": {"name": meta["name"]},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kueue"}]}
        if "namespace" in meta:
            meta["namespace"] = binding["metadata"]["namespace"] = "kueue-system"
        items += [role, binding]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
  cat > "$dir/config.yaml" <<CONFIG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$health_port"}
metrics: {bindAddress: "127.0.0.1:$metrics_port"}
webhook: {host: 127.0.0.1, port: $webhook_port, certDir: "$dir/certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset]
CONFIG
  # VisibilityOnDemand off: its aggregated API server is not installed (an unavailable APIService breaks discovery).
  launch kueue env KUBECONFIG="$dir/kubeconfig" unshare --user --map-root-user --mount sh -c \
    'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"' \
    sh "$dir/etc" "$dir/etc-work" "$KUEUE/kueue" --config "$dir/config.yaml" --feature-gates=VisibilityOnDemand=false
  wait_for kueue 180 curl -fsS "http://127.0.0.1:$health_port/readyz"
  python3 - "$KUEUE/manifests/webhooks.yaml" > "$dir/webhooks.yaml" <<'PY'
import sys
import yaml
served = {"kueue.x-k8s.io", "batch", "jobset.x-k8s.io"}
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for doc in docs:
    doc["webhooks"] = [w for w in doc["webhooks"] if all(set(r["apiGroups"]) <= served for r in w["rules"])]
yaml.safe_dump_all(docs, sys.stdout)
PY
  loopback_webhooks install kueue "$dir/certs" "$webhook_port" "$dir/webhooks.yaml" "$KUEUE"/manifests/crd-patches/*.yaml
  log "kueue: webhooks on 127.0.0.1:$webhook_port; adding its fixtures"
  # The API server takes a moment to call new webhooks; the fixtures go through them.
  for ((i = 0; ; i++)); do
    kueue_fixtures | kubectl_ apply -f - > "$dir/fixtures.log" 2>&1 && break
    alive kueue || { tail -n 30 "$STATE/logs/kueue.log" >&2; die "kueue exited (log: $STATE/logs/kueue.log)"; }
    ((i < 60)) || { cat "$dir/fixtures.log" >&2; die "Kueue's fixtures were not accepted"; }
    sleep 1
  done
}

# What the example stacks' Kueue config (Pulumi.kueue.yaml) names: the H100 flavor of the fake Nodes, with the
# Topology block/rack/host of their labels; the ClusterQueue team-llm with the whole cluster as quota; the LocalQueue
# team-llm in namespace ml; the WorkloadPriorityClasses research and production. Besides, the flavor kueue-tests of
# the Kueue tests' own Nodes (test_pool_nodes), of which a test makes a ClusterQueue of its own size.
kueue_fixtures() {
  cat <<FIXTURES
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: gpu-topology}
spec:
  levels:
    - nodeLabel: example.com/block
    - nodeLabel: example.com/rack
    - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100-SXM}
  topologyName: gpu-topology
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-llm}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/gpu]
      flavors:
        - name: h100
          resources:
            - {name: cpu, nominalQuota: "$((96 * NODES))"}
            - {name: memory, nominalQuota: "${NODES}Ti"}
            - {name: nvidia.com/gpu, nominalQuota: "$((8 * NODES))"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: kueue-tests}
spec:
  nodeLabels: {trainjobs.dev/pool: kueue-tests}
  nodeTaints: [{key: trainjobs.dev/pool, value: kueue-tests, effect: NoSchedule}]
  tolerations: [{key: trainjobs.dev/pool, operator: Equal, value: kueue-tests, effect: NoSchedule}]
  topologyName: gpu-topology
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-llm, namespace: ml}
spec: {clusterQueue: team-llm}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: research}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: production}
value: 1000
FIXTURES
}

down() {
  local name pid i
  if [[ -d $WORKER/pids ]]; then TRAINJOBS_CLUSTER_DIR=$WORKER "$here/cluster.sh" down; fi
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

# MultiKueue (Kueue v0.17, kueue.x-k8s.io/v1beta2) on this cluster, the manager, dispatching to the worker cluster:
# the worker's kubeconfig in a Secret of Kueue's namespace (its CA inline and its admin token: Kueue refuses a
# kubeconfig that names files), the MultiKueueCluster and MultiKueueConfig `worker`, the AdmissionCheck `worker` of
# MultiKueue's controller, and the ClusterQueue team-llm-multikueue that requires it, with the worker's capacity as
# quota of a flavor of no Node's (the manager runs none of these pods). The worker's fixtures give the ClusterQueue
# team-llm that a LocalQueue team-llm of the same namespace there draws from. MultiKueue is on by default (beta).
multikueue_fixtures() {
  cat <<FIXTURES
apiVersion: v1
kind: Secret
metadata: {name: worker, namespace: kueue-system}
stringData:
  kubeconfig: |
$(kubectl --kubeconfig "$WORKER/kubeconfig" config view --raw --flatten --minify | sed 's/^/    /')
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: worker}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: worker}
spec: {clusters: [worker]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: worker}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: worker}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: multikueue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-llm-multikueue}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks: [{name: worker}]
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/gpu]
      flavors:
        - name: multikueue
          resources:
            - {name: cpu, nominalQuota: "$((96 * NODES))"}
            - {name: memory, nominalQuota: "${NODES}Ti"}
            - {name: nvidia.com/gpu, nominalQuota: "$((8 * NODES))"}
FIXTURES
}

# The worker cluster, as `up` starts a cluster (its own state, ports and fake Nodes), with the JobSet and Kueue
# controllers; then MultiKueue on this one, up once its AdmissionCheck is Active (Kueue connected to the worker).
worker_up() {
  CONTROLLERS=$(cat "$STATE/controllers" 2> /dev/null) || die "no cluster in $STATE: run scripts/engine/cluster.sh up"
  running || die "the cluster of $STATE does not run: run scripts/engine/cluster.sh up"
  controller_on kueue || die "MultiKueue needs Kueue on the manager: start it with TRAINJOBS_CLUSTER_CONTROLLERS=jobset,kueue"
  TRAINJOBS_CLUSTER_DIR=$WORKER TRAINJOBS_CLUSTER_CONTROLLERS=jobset,kueue "$here/cluster.sh" up > /dev/null
  multikueue_fixtures | kubectl_ apply -f - > /dev/null
  wait_for kueue 120 kubectl_ wait --for condition=Active --timeout 5s multikueuecluster/worker admissioncheck/worker
  log "MultiKueue: ClusterQueue team-llm-multikueue dispatches to the worker cluster (KUBECONFIG=$WORKER/kubeconfig)"
}

# MultiKueue's objects off this cluster (what they hold is left to Kueue: no wait), then the worker stopped.
worker_down() {
  if [[ -s $STATE/kubeconfig ]] && kubectl_ get --raw /readyz > /dev/null 2>&1; then
    kubectl_ delete --ignore-not-found --wait=false clusterqueue/team-llm-multikueue admissioncheck/worker \
      multikueueconfig/worker multikueuecluster/worker resourceflavor/multikueue > /dev/null 2>&1 || true
    kubectl_ delete --ignore-not-found -n kueue-system secret/worker > /dev/null 2>&1 || true
  fi
  if [[ -d $WORKER ]]; then TRAINJOBS_CLUSTER_DIR=$WORKER "$here/cluster.sh" down; fi
  rm -rf "$WORKER"
}

# The cluster runs as asked: every component, and the controllers asked for.
running() {
  local name
  [[ $(cat "$STATE/controllers" 2> /dev/null) == "$CONTROLLERS" ]] || return 1
  for name in $(wanted); do alive "$name" || return 1; done
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

# The JobSet controller out of the cluster: upstream's RBAC, kustomized as upstream deploys it (namespace
# jobset-system, names prefixed jobset-), with its service account's token; no leader election; its own
# certificate management off. A server-side dry run of a JobSet shows its webhooks served.
start_jobset() {
  local webhook_port health_port dir=$STATE/jobset part token
  read -r webhook_port health_port < <(free_ports 2)
  mkdir -p "$dir"/{rbac,webhook}
  # RBAC as upstream's overlay names it (prefix jobset-); the webhooks' names get the prefix from loopback_webhooks.
  for part in rbac webhook; do
    printf 'namespace: jobset-system\n%bresources:\n- %s\n' "$([[ $part == rbac ]] && echo 'namePrefix: jobset-\n')" \
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
  loopback_webhooks cert "$STATE/pki/jobset"
  kubectl kustomize "$dir/webhook" > "$dir/webhooks.yaml"
  loopback_webhooks install jobset "$STATE/pki/jobset" "$webhook_port" "$dir/webhooks.yaml"
  launch jobset "$JOBSET/jobset" --kubeconfig "$dir/kubeconfig" --config "$dir/config.yaml"
  wait_for jobset 120 curl -fsS "http://127.0.0.1:$health_port/readyz"
  printf '%s\n' 'apiVersion: jobset.x-k8s.io/v1alpha2' 'kind: JobSet' 'metadata: {name: webhook-check, namespace: default}' \
    'spec: {replicatedJobs: [{name: w, template: {spec: {template: {spec: {restartPolicy: Never,' \
    '  containers: [{name: c, image: busybox}]}}}}}]}' > "$dir/webhook-check.yaml"
  wait_for jobset 60 kubectl_ create --dry-run=server -f "$dir/webhook-check.yaml"
  log "jobset $JOBSET_VERSION: webhooks on https://127.0.0.1:$webhook_port"
}

# kwok's stock stages, with shorter waits: a pod's steps come 1 to 2 s apart, not 1 to 6 s, and a deleted pod is
# gone 1 s after it stopped, not at a random time within its 30 s grace period. The real-engine suite mostly waits
# for these (docs/performance.md). A pod's annotations (pod-<stage>.stage.kwok.x-k8s.io/delay, .../jitter-delay)
# still set its own.
kwok_stages() {
  local stage
  mkdir -p "$STATE/kwok"
  for stage in "$KWOK"/*.yaml; do
    sed -e 's/jitterDurationMilliseconds: 5000$/jitterDurationMilliseconds: 1000/' \
      -e "s|expressionFrom: '.metadata.deletionTimestamp'|expressionFrom: '.metadata.annotations[\"pod-delete.stage.kwok.x-k8s.io/jitter-delay\"]'|" \
      "$stage" > "$STATE/kwok/${stage##*/}"
  done
}

up() {
  local controller
  for controller in ${CONTROLLERS//,/ }; do
    case $controller in
      jobset|kueue) ;;
      *) die "TRAINJOBS_CLUSTER_CONTROLLERS: unknown controller '$controller' (known: jobset, kueue)" ;;
    esac
  done
  "$here/build.sh" base
  if controller_on jobset; then "$here/build.sh" jobset; fi
  if controller_on kueue; then "$here/build.sh" kueue; fi
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
  # Kueue is a user of its own, with the RBAC its module ships (JobSet runs as its service account: start_jobset).
  if controller_on kueue; then echo "$(openssl rand -hex 24),kueue,kueue" >> "$STATE/pki/tokens.csv"; fi
  openssl genrsa -out "$STATE/pki/sa.key" 2048 2> /dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2> /dev/null
  chmod 600 "$STATE/pki"/*

  launch etcd "$ETCD/etcd" --name local --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "local=http://127.0.0.1:$peer_port"
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$etcd_port/health"

  # A namespace's annotations place the pods made in it (docs/real-engine.md): PodNodeSelector adds the nodeSelector
  # of scheduler.alpha.kubernetes.io/node-selector, PodTolerationRestriction the tolerations of
  # scheduler.alpha.kubernetes.io/defaultTolerations. The node agent's tests run their pods on their own Nodes so.
  local placement=PodNodeSelector,PodTolerationRestriction
  launch kube-apiserver "$K8S/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$STATE/pki" --token-auth-file "$STATE/pki/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$STATE/pki/sa.pub" --service-account-signing-key-file "$STATE/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
    --enable-admission-plugins "$placement" \
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
  kwok_stages
  for stage in "$STATE"/kwok/*.yaml "$here"/kwok-*.yaml; do stages+=(--config "$stage"); done
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
    kwok_node "kwok-node-$i" "$(if controller_on kueue; then echo "$i"; fi)" ""
  done | kubectl_ apply -f - > /dev/null
  if controller_on kueue; then test_pool_nodes | kubectl_ apply -f - > /dev/null; fi
  wait_for kwok 120 bash -c "[[ \$(kubectl --kubeconfig '$STATE/kubeconfig' get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' \
    | grep -c True) == $((NODES + $(if controller_on kueue; then test_pool_size; else echo 0; fi))) ]]"
  priority_classes | kubectl_ apply -f - > /dev/null
  wait_for kube-controller-manager 120 kubectl_ get serviceaccount default
  if controller_on jobset; then start_jobset; fi
  if controller_on kueue; then start_kueue; fi

  trap - EXIT
  echo "$CONTROLLERS" > "$STATE/controllers"
  env_lines > "$STATE/env"
  log "up in $(($(date +%s) - t0)) s; state in $STATE; to use it:"
  cat "$STATE/env"
}

case ${1:-} in
  up) up ;;
  down) down; log "stopped" ;;
  env) [[ -e $STATE/env ]] || die "no cluster: run scripts/engine/cluster.sh up"; cat "$STATE/env" ;;
  kueue-fixtures) kueue_fixtures ;;
  worker)
    case ${2:-} in
      up) worker_up ;;
      down) worker_down; log "worker stopped" ;;
      *) echo "usage: $0 worker up|down" >&2; exit 2 ;;
    esac ;;
  *) echo "usage: $0 up|down|env|kueue-fixtures|worker up|down" >&2; exit 2 ;;
esac
