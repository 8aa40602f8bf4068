#!/usr/bin/env bash
# Builds one component of the real engine and control plane from Go modules the module proxy serves, into
# $TRAINJOBS_ENGINE_CACHE/<component>-<version>/bin (default ~/.cache/trainjobs-engine), outside any work tree.
# A build is keyed by version: once its bin/.built exists, later calls (a fresh clone's CI run too) reuse it.
#
#   scripts/engine/build.sh kubernetes|etcd|kwok|pulumi|langhost|pulumi-yaml|pulumi-kubernetes|crds|jobset|kueue|base|all
#   (base: what `make cluster` runs; all: base and the controllers, JobSet and Kueue)
#
# Each component is built in a module of its own (<component>-<version>/src) whose go.mod requires the upstream
# module; nothing of another project is kept in this repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"

CACHE=${TRAINJOBS_ENGINE_CACHE:-$HOME/.cache/trainjobs-engine}
PROXY=${GOPROXY_URL:-https://proxy.golang.org}
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { printf '[build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The go.mod the proxy serves for a module version (module paths with capitals are escaped as the proxy wants).
proxy_mod() {
  local path
  path=$(printf '%s' "$1" | sed -E 's/([A-Z])/!\L\1/g')
  curl -fsSL "$PROXY/$path/@v/$2.mod"
}

# Seconds since the epoch, to the microsecond.
now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

# Runs a command that downloads modules, its wall time counted apart from the compiling (in $dest/downloads).
downloading() {
  local t; t=$(now)
  "$@"
  echo "$t $(now)" >> "$dest/downloads"
}

# The directory of a module version in the module cache, downloaded if missing.
module_dir() { (cd "$1" && downloading go mod download -json "$2@$3") | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }

# The CPU seconds (user + system) of this script's finished children: the go commands and the compilers they run.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($16 + $17) / hz}' "/proc/$$/stat"; }

# Downloads the modules the packages need (go list loads them), so downloads and compiling are measured apart.
download() { downloading go list -deps "$@" > /dev/null; }

# Builds packages of the module in $dest/src into $1 with the flags every build shares: -trimpath, so the build
# cache serves a package compiled once to every build and `go run` of the component, and a stripped binary.
gobuild() {  # out extra-ldflags [build flags] packages
  local out=$1 ld=$2; shift 2
  (cd "$dest/src" && download "$@" && go build -trimpath -ldflags "-s -w$ld" -o "$out" "$@")
}

# Starts a build directory; prints nothing when the component's build is already there.
start() {  # component version
  dest=$CACHE/$1-$2
  mkdir -p "$CACHE"
  # One build of a component at a time: a second caller waits for the first, then finds its build.
  exec {lock}> "$dest.lock"
  flock "$lock"
  if [[ -e $dest/bin/.built ]]; then log "$1 $2: cached in $dest/bin"; exec {lock}>&-; return 1; fi
  rm -rf "$dest/src" "$dest/bin"
  mkdir -p "$dest/src" "$dest/bin"
  : > "$dest/downloads"
  t0=$(date +%s) cpu0=$(cpu)
  log "$1 $2: building in $dest"
}

# Records next to the binaries the build's wall seconds, those of its downloads, and its CPU seconds (user + system).
finish() {  # component version
  echo "$(( $(date +%s) - t0 ))" > "$dest/bin/.seconds"
  awk '{s += $2 - $1} END {printf "%.1f\n", s}' "$dest/downloads" > "$dest/bin/.download-seconds"
  awk -v a="$cpu0" -v b="$(cpu)" 'BEGIN {printf "%.1f\n", b - a}' > "$dest/bin/.cpu-seconds"
  touch "$dest/bin/.built"
  # Released once built, so that another caller does not wait for the rest of this one's `all`.
  exec {lock}>&-
  log "$1 $2: built in $(cat "$dest/bin/.seconds") s (downloads $(cat "$dest/bin/.download-seconds") s)," \
    "CPU $(cat "$dest/bin/.cpu-seconds") s:" \
    "$(cd "$dest/bin" && ls | tr '\n' ' ')"
}

# kube-apiserver, kube-controller-manager, kube-scheduler. k8s.io/kubernetes requires its staging modules at
# v0.0.0 and replaces them by local folders, which a dependent module ignores: its replaces point each one at
# the published v0.<minor>.<patch>, generated from the go.mod the proxy serves.
build_kubernetes() {
  local v=$K8S_VERSION minor patch
  start kubernetes "$v" || return 0
  minor=${v#v1.}; patch=${minor#*.}; minor=${minor%%.*}
  local upstream
  upstream=$(proxy_mod k8s.io/kubernetes "$v")
  {
    echo "module trainjobs.invalid/engine/kubernetes"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//')"
    echo
    grep -E '^godebug ' <<<"$upstream" || true
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    echo "replace ("
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' <<<"$upstream" |
      awk -v ver="v0.$minor.$patch" '{print "\t" $1 " => " $1 " " ver}'
    echo ")"
  } > "$dest/src/go.mod"
  local vpkg ld=""
  for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $vpkg.gitVersion=$v -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
    ld+=" -X $vpkg.buildDate=1970-01-01T00:00:00Z"
  done
  gobuild "$dest/bin/" "$ld" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  finish kubernetes "$v"
}

# etcd's server module has local replaces, so `go install` refuses it; a module requiring it builds it.
build_etcd() {
  local v=$ETCD_VERSION
  start etcd "$v" || return 0
  printf 'module trainjobs.invalid/engine/etcd\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$v" > "$dest/src/go.mod"
  gobuild "$dest/bin/etcd" "" go.etcd.io/etcd/server/v3
  finish etcd "$v"
}

build_kwok() {
  local v=$KWOK_VERSION
  start kwok "$v" || return 0
  printf 'module trainjobs.invalid/engine/kwok\n\ngo %s\n\nrequire sigs.k8s.io/kwok %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$v" > "$dest/src/go.mod"
  gobuild "$dest/bin/kwok" " -X sigs.k8s.io/kwok/pkg/consts.Version=$v" sigs.k8s.io/kwok/cmd/kwok
  local dir; dir=$(module_dir "$dest/src" sigs.k8s.io/kwok "$v")
  # The stages kwok plays: nodes come up and stay Ready; pods are created, run and complete (those of a Job), or
  # fail when labelled so (the chaos stage); deleted pods go away.
  local stage
  for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
      pod/general/pod-create pod/general/pod-init-container-running pod/general/pod-init-container-completed \
      pod/general/pod-ready pod/general/pod-complete pod/general/pod-delete pod/chaos/pod-container-running-failed; do
    install -m 0644 "$dir/kustomize/stage/$stage.yaml" "$dest/bin/"
  done
  finish kwok "$v"
}

# The CLI: pkg/v3 replaces sdk/v3 by a local folder and github.com/atotto/clipboard by a fork; a module requiring
# both at one version, with pkg's other replaces, builds it.
build_pulumi() {
  local v=$PULUMI_VERSION upstream
  start pulumi "$v" || return 0
  upstream=$(proxy_mod github.com/pulumi/pulumi/pkg/v3 "$v")
  {
    printf 'module trainjobs.invalid/engine/pulumi\n\ngo %s\n\n' "$(go env GOVERSION | sed 's/^go//')"
    printf 'require (\n\tgithub.com/pulumi/pulumi/pkg/v3 %s\n\tgithub.com/pulumi/pulumi/sdk/v3 %s\n)\n\n' "$v" "$v"
    grep -E '^replace .* => [^.]' <<<"$upstream" || true
  } > "$dest/src/go.mod"
  gobuild "$dest/bin/" " -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v" \
    -tags osusergo,grpcnotrace github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  finish pulumi "$v"
}

# The Python language host. The proxy does not serve upstream's module, so this is the project's own
# (scripts/engine/langhost), keyed by its source's hash too; next to it the scripts it runs, from the sdk/v3 zip:
# pulumi-language-python-exec and the dynamic providers' pulumi-resource-pulumi-python.
build_langhost() {
  local v key
  key=$(cat "$here/langhost/main.go" | sha256sum | cut -c1-12)
  v=$PULUMI_VERSION-$key
  start langhost "$v" || return 0
  printf 'module trainjobs.invalid/engine/langhost\n\ngo %s\n\nrequire github.com/pulumi/pulumi/sdk/v3 %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$PULUMI_VERSION" > "$dest/src/go.mod"
  cp "$here/langhost/main.go" "$dest/src/"
  gobuild "$dest/bin/pulumi-language-python" " -X main.version=${PULUMI_VERSION#v}" .
  local sdk; sdk=$(module_dir "$dest/src" github.com/pulumi/pulumi/sdk/v3 "$PULUMI_VERSION")
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-resource-pulumi-python" \
    "$dest/bin/"
  finish langhost "$v"
}

# The YAML language host, with the pkg/v3 and sdk/v3 it requires (the CLI's v3.274.1 changed the plugin APIs it
# calls): pkg replaces sdk/v3 by a local folder, so the module requires both at pkg's version, with pkg's other
# replaces. The host speaks the engine's versioned protocol, as upstream's release of it does with a newer CLI.
build_pulumi_yaml() {
  local v=$PULUMI_YAML_VERSION pkg upstream
  start pulumi-yaml "$v" || return 0
  pkg=$(proxy_mod github.com/pulumi/pulumi-yaml "$v" | awk '$1 == "github.com/pulumi/pulumi/pkg/v3" {print $2}')
  upstream=$(proxy_mod github.com/pulumi/pulumi/pkg/v3 "$pkg")
  {
    printf 'module trainjobs.invalid/engine/pulumi-yaml\n\ngo %s\n\n' "$(go env GOVERSION | sed 's/^go//')"
    printf 'require (\n\tgithub.com/pulumi/pulumi-yaml %s\n' "$v"
    printf '\tgithub.com/pulumi/pulumi/pkg/v3 %s\n\tgithub.com/pulumi/pulumi/sdk/v3 %s\n)\n\n' "$pkg" "$pkg"
    grep -E '^replace .* => [^.]' <<<"$upstream" || true
  } > "$dest/src/go.mod"
  gobuild "$dest/bin/" " -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$v" \
    github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml
  finish pulumi-yaml "$v"
}

# The Kubernetes provider's main embeds a schema and a mapping that upstream generates (and does not publish):
# its main package, its generator and their sources are copied from the module zip and generated here.
build_pulumi_kubernetes() {
  local v=$PULUMI_KUBERNETES_VERSION pseudo=$PULUMI_KUBERNETES_MODULE_VERSION
  start pulumi-kubernetes "$v" || return 0
  printf 'module trainjobs.invalid/engine/pulumi-kubernetes\n\ngo %s\n\nrequire github.com/pulumi/pulumi-kubernetes/provider/v4 %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$pseudo" > "$dest/src/go.mod"
  local dir; dir=$(module_dir "$dest/src" github.com/pulumi/pulumi-kubernetes/provider/v4 "$pseudo")
  mkdir -p "$dest/src/cmd"
  cp "$dir"/cmd/pulumi-resource-kubernetes/{main.go,generate.go,schema.json,terraform-mapping.json} "$dest/src/cmd/"
  chmod u+w "$dest"/src/cmd/*
  # The generator's packages are a subset of the provider's: with -trimpath both share their compiled packages.
  (cd "$dest/src/cmd" && download ./generate.go && VERSION=${v#v} go run -trimpath ./generate.go)
  gobuild "$dest/bin/pulumi-resource-kubernetes" \
    " -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${v#v}" ./cmd
  finish pulumi-kubernetes "$v"
}

# The CRDs of JobSet and Kueue, as their module zips carry them (without kustomize's webhook patches).
build_crds() {
  local v=jobset-$JOBSET_VERSION-kueue-$KUEUE_VERSION
  start crds "$v" || return 0
  printf 'module trainjobs.invalid/engine/crds\n\ngo %s\n' "$(go env GOVERSION | sed 's/^go//')" > "$dest/src/go.mod"
  local jobset kueue
  jobset=$(module_dir "$dest/src" sigs.k8s.io/jobset "$JOBSET_VERSION")
  kueue=$(module_dir "$dest/src" sigs.k8s.io/kueue "$KUEUE_VERSION")
  cp "$jobset"/config/components/crd/bases/*.yaml "$kueue"/config/components/crd/bases/*.yaml "$dest/bin/"
  chmod u+w "$dest"/bin/*.yaml
  finish crds "$v"
}

# The JobSet controller (its main package is the module root) and the kustomize components of its module zip that
# configure it: its webhook configurations (with the patches that limit the Pod webhooks to JobSets' pods) and RBAC.
build_jobset() {
  local v=$JOBSET_VERSION
  start jobset "$v" || return 0
  printf 'module trainjobs.invalid/engine/jobset\n\ngo %s\n\nrequire sigs.k8s.io/jobset %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$v" > "$dest/src/go.mod"
  gobuild "$dest/bin/jobset" " -X sigs.k8s.io/jobset/pkg/version.GitVersion=$v" sigs.k8s.io/jobset
  local dir; dir=$(module_dir "$dest/src" sigs.k8s.io/jobset "$v")
  cp -r "$dir/config/components/webhook" "$dir/config/components/rbac" "$dest/bin/"
  chmod -R u+w "$dest/bin"
  finish jobset "$v"
}

# The Kueue controller and, from its module zip, what it is installed with: its webhook configurations, the
# conversion patches of its CRDs (which CRDs it converts) and the roles of its manager.
build_kueue() {
  local v=$KUEUE_VERSION
  start kueue "$v" || return 0
  printf 'module trainjobs.invalid/engine/kueue\n\ngo %s\n\nrequire sigs.k8s.io/kueue %s\n' \
    "$(go env GOVERSION | sed 's/^go//')" "$v" > "$dest/src/go.mod"
  gobuild "$dest/bin/kueue" " -X sigs.k8s.io/kueue/pkg/version.GitVersion=$v" sigs.k8s.io/kueue/cmd/kueue
  local dir; dir=$(module_dir "$dest/src" sigs.k8s.io/kueue "$v")
  mkdir -p "$dest/bin/manifests/crd-patches" "$dest/bin/manifests/rbac"
  install -m 0644 "$dir/config/components/webhook/manifests.yaml" "$dest/bin/manifests/webhooks.yaml"
  # The manager's own (its API's objects; the Secrets of its namespace; the metrics endpoint's reviews).
  local role
  for role in role manager_secrets_role metrics_auth_role; do
    install -m 0644 "$dir/config/components/rbac/$role.yaml" "$dest/bin/manifests/rbac/"
  done
  # The conversion webhooks its kustomization enables (not every patch in the folder).
  local patch
  for patch in $(sed -n 's|^- path: patches/\(webhook_in_.*\.yaml\)$|\1|p' "$dir/config/components/crd/kustomization.yaml"); do
    install -m 0644 "$dir/config/components/crd/patches/$patch" "$dest/bin/manifests/crd-patches/"
  done
  finish kueue "$v"
}

main() {
  case ${1:-all} in
    kubernetes) build_kubernetes ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    pulumi) build_pulumi ;;
    langhost) build_langhost ;;
    pulumi-kubernetes) build_pulumi_kubernetes ;;
    pulumi-yaml) build_pulumi_yaml ;;
    crds) build_crds ;;
    jobset) build_jobset ;;
    kueue) build_kueue ;;
    base) build_crds; build_etcd; build_kwok; build_pulumi; build_langhost; build_pulumi_yaml; build_pulumi_kubernetes
      build_kubernetes ;;
    all) main base; build_jobset; build_kueue ;;
    *) echo "usage: $0 kubernetes|etcd|kwok|pulumi|langhost|pulumi-yaml|pulumi-kubernetes|crds|jobset|kueue|base|all" >&2
      exit 2 ;;
  esac
}

# On one line with its exit: a running build is not disturbed when this file is edited.
main "$@"; exit $?
