"""What run-local's console leaves out of the containers' output by default."""

from components.localrun.jobs import Console, Echo
from components.localrun.output import chatter

CHATTER = [
    "Server listening on 0.0.0.0 port 2222.",
    "Server listening on :: port 22.",
    "Accepted publickey for root from 10.244.106.2 port 39110 ssh2: ECDSA SHA256:UbwMde6VH+WuVOG4AdvpTNs7VnDWzCazXxvOe1sidrw",
    "Received disconnect from 10.244.106.2 port 39110:11: disconnected by user",
    "Disconnected from user mpiuser 10.244.106.2 port 39110",
    "Connection closed by 10.1.2.3 port 4242 [preauth]",
    "Received signal 15; terminating.",
    "[pi-launcher-0-0:00019] plm:rsh: Warning: setpgid(25,25) failed in parent with errno=Permission denied(13)",
    "[W1122 18:26:06.068224159 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3",
]
KEPT = [
    "pi is approximately 3.1413700000000002",
    "Missing privilege separation directory: /run/sshd",
    "Connection refused",
    "sshd exited before the launcher finished",
    "ssh: connect to host pi-node-0-1.pi port 2222: Connection refused",
    "[W1122 18:26:06.068224159 socket.cpp:207] [c10d] The client socket has timed out after 30000ms",
]


def test_sshd_connection_messages_and_known_harmless_warnings_are_chatter():
    assert [line for line in CHATTER if not chatter(line)] == []
    assert [line for line in KEPT if chatter(line)] == []


def test_echo_hides_chatter_and_counts_it_unless_verbose():
    shown: list[str] = []
    echo = Echo(Console(shown.append), verbose=False)
    for line in [CHATTER[0], KEPT[0], CHATTER[2]]:
        echo("[pod] ", line)
    assert shown == ["[pod] pi is approximately 3.1413700000000002"] and echo.hidden == 2
    shown.clear()
    verbose = Echo(Console(shown.append), verbose=True)
    for line in [CHATTER[0], KEPT[0]]:
        verbose("[pod] ", line)
    assert shown == ["[pod] Server listening on 0.0.0.0 port 2222.", "[pod] pi is approximately 3.1413700000000002"]
    assert verbose.hidden == 0
