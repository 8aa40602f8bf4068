# The versions of the real engine and control plane (scripts/engine/build.sh builds them from the Go module proxy).
K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
# The CLI and its Python language host: the proxy serves pkg/v3 v3.274.1 (not v3.272.0, the Python SDK's version).
PULUMI_VERSION=v3.274.1
# The YAML language host (github.com/pulumi/pulumi-yaml; the proxy serves v1.11.1 and v1.25.0).
PULUMI_YAML_VERSION=v1.25.0
# The Kubernetes provider: the proxy serves one version of its module, the commit tagged v4.25.0.
PULUMI_KUBERNETES_VERSION=v4.25.0
PULUMI_KUBERNETES_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
# CRDs installed in the API server, from these modules' zips (Volcano's and scheduler-plugins' from ../shared/crds).
JOBSET_VERSION=v0.12.0
KUEUE_VERSION=v0.17.0
