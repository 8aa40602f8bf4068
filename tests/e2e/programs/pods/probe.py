"""Runs in every pod of the `sandbox` stack and checks what the pod was given, from inside.

Prints `PROBE ok <check>` or `PROBE FAIL <check>: <detail>` per check and exits 1 if any failed.
Expectations come from literal config (EXPECT_* env), not from the code under test.
"""

import errno
import os
import socket
import stat
import threading
import time

env = os.environ
failures = 0


def check(name: str, ok: bool, detail: str = "") -> None:
    global failures
    if ok:
        os.write(1, f"PROBE ok {name}\n".encode())
    else:
        failures += 1
        os.write(1, f"PROBE FAIL {name}: {detail}\n".encode())


index = int(env["JOB_COMPLETION_INDEX"])
job, sub, pods = env["EXPECT_JOB"], env["EXPECT_SUBDOMAIN"], int(env["EXPECT_PODS"])
me = f"{job}-{index}"
fqdn = f"{me}.{sub}.default.svc.cluster.local"

# -- identity ------------------------------------------------------------------------------
check("hostname", socket.gethostname() == me, socket.gethostname())
check("/etc/hostname", open("/etc/hostname").read().strip() == me, open("/etc/hostname").read())
check("HOSTNAME env", env.get("HOSTNAME") == me, str(env.get("HOSTNAME")))
check("fqdn", socket.getfqdn() == fqdn, socket.getfqdn())

# -- env as the kubelet resolves it -------------------------------------------------------
check("PET_NODE_RANK is the completion index", env.get("PET_NODE_RANK") == str(index), str(env.get("PET_NODE_RANK")))
check("fieldRef label", env.get("INDEX_FROM_LABEL") == str(index), str(env.get("INDEX_FROM_LABEL")))
name = env.get("POD_NAME", "")
check("fieldRef metadata.name", name.startswith(me + "-") and len(name) == len(me) + 6, name)
check("fieldRef metadata.namespace", env.get("POD_NAMESPACE") == "default", str(env.get("POD_NAMESPACE")))
check("$(VAR) expansion", env.get("EXPANDED") == "x-y", str(env.get("EXPANDED")))
check("$$ escape", env.get("ESCAPED") == "$(A)", str(env.get("ESCAPED")))
check("later vars are not expanded", env.get("DEFINED_LATER") == "$(PET_NODE_RANK)", str(env.get("DEFINED_LATER")))
check("secretKeyRef", env.get("TOKEN") == "s3cr3t", "wrong or missing TOKEN")
check("configMapKeyRef", env.get("COLOR") == "blue", str(env.get("COLOR")))
check("envFrom with prefix", env.get("CM_color") == "blue" and env.get("CM_shade") == "navy",
      f"{env.get('CM_color')} {env.get('CM_shade')}")
check("HOME and PATH", bool(env.get("HOME")) and "/bin" in env.get("PATH", ""), f"{env.get('HOME')} {env.get('PATH')}")

# -- names ---------------------------------------------------------------------------------
my_ip = env.get("POD_IP", "")
for i in range(pods):
    peer = f"{job}-{i}.{sub}"
    addresses = set()
    for form in (peer, f"{peer}.default", f"{peer}.default.svc", f"{peer}.default.svc.cluster.local"):
        try:
            addresses.add(socket.gethostbyname(form))
        except OSError as exc:
            addresses.add(f"{form}: {exc}")
    check(f"resolves {peer} (all forms)", len(addresses) == 1 and not any(":" in a for a in addresses), str(addresses))
    if i == index:
        check("own name resolves to status.podIP", addresses == {my_ip}, f"{addresses} vs {my_ip}")
started = time.monotonic()
try:
    socket.gethostbyname("no-such-pod.nowhere")
    check("unknown names fail", False, "resolved")
except OSError:
    check("unknown names fail fast", time.monotonic() - started < 2, f"{time.monotonic() - started:.1f}s")

# -- volumes -------------------------------------------------------------------------------
token = "/var/run/secrets/e2e/token"
check("secret file", open(token).read() == "s3cr3t", "content")
check("secret defaultMode 0400", stat.S_IMODE(os.stat(token).st_mode) == 0o400, oct(os.stat(token).st_mode))
try:
    open("/var/run/secrets/e2e/new", "w")
    check("secret volume is read-only", False, "write succeeded")
except OSError as exc:
    check("secret volume is read-only", exc.errno == errno.EROFS, str(exc))
shade = "/opt/e2e-colors/conf/shade.txt"
check("configMap items path", open(shade).read() == "navy", "content")
check("configMap item mode 0600", stat.S_IMODE(os.stat(shade).st_mode) == 0o600, oct(os.stat(shade).st_mode))
check("configMap keys not in items are absent", not os.path.exists("/opt/e2e-colors/color"), "present")
with open(f"/e2e-scratch/{me}", "w") as f:
    f.write("scratch")
check("emptyDir at a new top-level path is writable", os.listdir("/e2e-scratch") == [me], str(os.listdir("/e2e-scratch")))
with open(f"/mnt/shared/{me}", "w") as f:  # the claim is one directory shared by every pod
    f.write(me)
deadline = time.monotonic() + 15
while len(os.listdir("/mnt/shared")) < pods and time.monotonic() < deadline:
    time.sleep(0.05)
check("persistentVolumeClaim shared by the pods", sorted(os.listdir("/mnt/shared")) == [f"{job}-{i}" for i in range(pods)],
      str(os.listdir("/mnt/shared")))
shm = os.statvfs("/dev/shm")
check("/dev/shm is the 64Mi memory emptyDir", shm.f_blocks * shm.f_frsize == 64 * 2**20, str(shm.f_blocks * shm.f_frsize))
with open(f"/etc/e2e-written-by-{me}", "w") as f:  # must not reach the host's /etc
    f.write("pod")

# -- isolation -----------------------------------------------------------------------------
with open("/proc/net/route") as f:
    routes = [line.split() for line in f.readlines()[1:]]
check("no default route", not any(r[1] == "00000000" for r in routes), str(routes))
check("interfaces are lo and eth0", sorted(os.listdir("/sys/class/net")) == ["eth0", "lo"], str(os.listdir("/sys/class/net")))
processes = [p for p in os.listdir("/proc") if p.isdigit()]
check("own PID namespace", len(processes) < 10, f"{len(processes)} processes visible")

# -- pod to pod over TCP: each pod serves its name on 7777 and asks every peer for theirs ---------
served = []
server = socket.create_server(("", 7777))
server.settimeout(20)


def serve() -> None:
    while len(served) < pods - 1:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            served.append(conn.recv(100).decode())
            conn.sendall(me.encode())


thread = threading.Thread(target=serve, daemon=True)
thread.start()
for i in range(pods):
    if i == index:
        continue
    peer, answer, deadline = f"{job}-{i}.{sub}", None, time.monotonic() + 20
    while answer is None and time.monotonic() < deadline:
        try:
            with socket.create_connection((peer, 7777), timeout=2) as conn:
                conn.sendall(me.encode())
                answer = conn.recv(100).decode()
        except OSError:
            time.sleep(0.1)
    check(f"tcp to {peer}", answer == f"{job}-{i}", str(answer))
thread.join(25)
check("served every peer", sorted(served) == sorted(f"{job}-{i}" for i in range(pods) if i != index), str(served))

os.write(1, f"PROBE done {me}: {failures} failure(s)\n".encode())
raise SystemExit(1 if failures else 0)
