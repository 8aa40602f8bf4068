"""Names and addresses the emulated pods get."""

import ipaddress

from trainjobs.localrun.network import hosts_file, pick_subnet, resolv_conf
from trainjobs.localrun.plan import PodSlot


def slot(host, ip, namespace="default", subdomain="job", published=True):
    return PodSlot(job=host.rsplit("-", 1)[0], index=0, hostname=host, namespace=namespace, subdomain=subdomain,
                   labels={}, indexed=True, published=published, ip=ip)


def test_hosts_file_has_the_kubelet_entry_and_every_published_pod():
    a, b = slot("job-node-0-0", "10.9.0.2"), slot("job-node-0-1", "10.9.0.3")
    other = slot("x-node-0-0", "10.9.0.4", namespace="ml", subdomain="x")
    hidden = slot("y-node-0-0", "10.9.0.5", subdomain="y", published=False)
    text = hosts_file(a, [a, b, other, hidden])
    assert "10.9.0.2\tjob-node-0-0.job.default.svc.cluster.local\tjob-node-0-0\n" in text
    assert ("10.9.0.3\tjob-node-0-1.job.default.svc.cluster.local job-node-0-1.job.default.svc "
            "job-node-0-1.job.default job-node-0-1.job\n") in text
    # Another namespace's pods are reachable by qualified names only, as through a search list.
    assert "10.9.0.4\tx-node-0-0.x.ml.svc.cluster.local x-node-0-0.x.ml.svc x-node-0-0.x.ml\n" in text
    assert "10.9.0.5" not in text
    assert "10.9.0.3\tjob.default.svc.cluster.local job.default.svc job.default job\n" in text


def test_resolver_points_at_nothing():
    text = resolv_conf(slot("job-node-0-0", "10.9.0.2"))
    assert "nameserver 127.0.0.1\n" in text
    assert text.startswith("search default.svc.cluster.local svc.cluster.local cluster.local\n")


def test_subnets_avoid_the_hosts_networks_and_fit_the_pods():
    taken = [ipaddress.IPv4Network("10.0.0.0/9")]  # 10.0.0.0 - 10.127.255.255
    for _ in range(50):
        net = pick_subnet(300, avoid=taken)
        assert not net.overlaps(taken[0])
        assert net.num_addresses - 3 >= 300 and net.prefixlen == 23


def test_dns_config_searches_extend_the_search_list_and_the_names_it_completes():
    """A pod's dnsConfig.searches make bare hostnames resolvable there, as a cluster's DNS would."""
    me = slot("job-launcher-0-0", "10.9.0.2", namespace="hpc")
    me.searches = ("job.hpc.svc.cluster.local",)
    worker = slot("job-node-0-0", "10.9.0.3", namespace="hpc")
    assert resolv_conf(me).startswith("search hpc.svc.cluster.local svc.cluster.local cluster.local "
                                      "job.hpc.svc.cluster.local\n")
    assert ("10.9.0.3\tjob-node-0-0.job.hpc.svc.cluster.local job-node-0-0.job.hpc.svc job-node-0-0.job.hpc "
            "job-node-0-0.job job-node-0-0\n") in hosts_file(me, [me, worker])
    # Without that search domain, another pod's bare name does not resolve.
    assert " job-launcher-0-0\n" not in hosts_file(worker, [me, worker])
