"""A small JSON client of a Kubernetes API server: requests and answers are plain JSON, as manifests are.

The kubeconfig is read by the official Kubernetes client (certificates, tokens, exec plugins), imported on first
use: the `cluster` extra, which nothing that only renders needs.
"""

import json
import ssl
from typing import Any

import requests
import requests.adapters


class ApiError(RuntimeError):
    """The kubeconfig cannot be read, or the API server refused a request."""


class KubeClient:
    """The API server of the kubeconfig's current context (`kubeconfig` None: $KUBECONFIG or ~/.kube/config).
    `server` is its URL; `session` sends as that context's user."""

    def __init__(self, kubeconfig: str | None):
        try:
            from kubernetes import client, config
        except ModuleNotFoundError:
            raise ApiError("reading a kubeconfig needs the Kubernetes Python client, which is not installed: "
                           "pip install 'trainjobs[cluster]'") from None
        configuration = client.Configuration()
        try:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except Exception as exc:  # the package raises several kinds for a missing or broken file
            raise ApiError(f"--kubeconfig {kubeconfig or '(default)'}: {exc}") from None
        self.server = configuration.host.rstrip("/")
        self.session = requests.Session()
        if not configuration.verify_ssl:
            self.session.verify = False
        elif configuration.ssl_ca_cert:
            self.session.mount(self.server, _Trusting(configuration.ssl_ca_cert))
        if configuration.cert_file:
            self.session.cert = (configuration.cert_file, configuration.key_file)
        token = (configuration.api_key or {}).get("authorization") or (configuration.api_key or {}).get("BearerToken")
        if token:
            self.session.headers["Authorization"] = token if " " in token else f"Bearer {token}"

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             ok: tuple[int, ...] = (200, 201), **params: Any) -> dict[str, Any] | None:
        """The answer's JSON; None when it is 404 and 404 is `ok`."""
        response = self.session.request(method, self.server + path, params=params or None,
                                        data=None if body is None else json.dumps(body),
                                        headers={"Content-Type": content_type}, timeout=30)
        if response.status_code == 404 and 404 in ok:
            return None
        if response.status_code not in ok:
            raise ApiError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    def patch(self, path: str, body: dict[str, Any], ok: tuple[int, ...] = (200,)) -> dict[str, Any] | None:
        return self.call("PATCH", path, body, "application/strategic-merge-patch+json", ok=ok)


class _Trusting(requests.adapters.HTTPAdapter):
    """Trusts the cluster's own certificate authority as kubectl does: an API server's self-signed certificates
    (kube-apiserver --cert-dir) lack extensions that strict X.509 verification asks of a CA."""

    def __init__(self, authority: str):
        self.context = ssl.create_default_context(cafile=authority)
        self.context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs, ssl_context=self.context)
