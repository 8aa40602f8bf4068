"""What run-local's console leaves out of the containers' output by default."""

from trainjobs.localrun.jobs import Console, Echo
from trainjobs.localrun.output import HARMLESS, LOST_PEERS, REMOVED, SSHD, Filter, left_out

LEFT_OUT = [
    "Server listening on 0.0.0.0 port 2222.",
    "Server listening on :: port 22.",
    "Accepted publickey for root from 10.244.106.2 port 39110 ssh2: ECDSA SHA256:UbwMde6VH+WuVOG4AdvpTNs7VnDWzCazXxvOe1sidrw",
    "Received disconnect from 10.244.106.2 port 39110:11: disconnected by user",
    "Disconnected from user mpiuser 10.244.106.2 port 39110",
    "Connection closed by 10.1.2.3 port 4242 [preauth]",
    "Connection closed by authenticating user root 10.1.2.3 port 4242 [preauth]",
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


def test_sshd_connection_messages_and_known_harmless_messages_are_left_out():
    assert [left_out(line) for line in LEFT_OUT] == [SSHD] * 8 + [HARMLESS] * 2
    assert [line for line in KEPT if left_out(line)] == []


def test_echo_hides_what_the_filter_hides_and_counts_it_unless_verbose():
    shown: list[str] = []
    echo = Echo(Console(shown.append), verbose=False)
    for line, kind in Filter().lines([LEFT_OUT[0], KEPT[0], LEFT_OUT[2], LEFT_OUT[-1]]):
        echo("[pod] ", line, kind)
    assert shown == ["[pod] pi is approximately 3.1413700000000002"]
    assert echo.note() == ("(left out: 1 known harmless messages, 2 sshd connection messages; --verbose shows them, "
                           "the logs have every line)")
    shown.clear()
    verbose = Echo(Console(shown.append), verbose=True)
    for line, kind in Filter().lines([LEFT_OUT[0], KEPT[0]]):
        verbose("[pod] ", line, kind)
    assert shown == ["[pod] Server listening on 0.0.0.0 port 2222.", "[pod] pi is approximately 3.1413700000000002"]
    assert verbose.note() == ""


LOST_STORE = ("[W1122 18:32:23.545244212 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on SocketImpl(fd=3, "
              "addr=[::ffff:10.1.0.3]:33702, remote=[::ffff:10.1.0.2]:29500): Failed to recv, got 0 bytes. "
              "Connection was likely closed. Did the remote server shutdown or crash?")
FRAMES = ["Exception raised from recvBytes at /src/torch/csrc/distributed/c10d/Utils.hpp:787 (most recent call first):",
          "frame #0: c10::Error::Error(c10::SourceLocation) + 0x9d (0x7fc4 in /opt/venv/lib/libc10.so)",
          "<omitting python frames>",
          "frame #31: _start + 0x21 (0x560b in /opt/venv/bin/python)",
          ""]
AGENT = "E1122 18:32:23.749000 3 torch/distributed/elastic/agent/server/api.py:1008] "


def test_torchruns_lost_store_at_its_exit_barrier_is_hidden_as_a_whole():
    """After every worker succeeded, the agent that served the store may be gone first: harmless."""
    barrier = [LOST_STORE, *FRAMES, AGENT + "Error waiting on exit barrier. Elapsed: 0.0315 seconds",
               AGENT + "Traceback (most recent call last):",
               AGENT + '  File "/opt/venv/torch/distributed/elastic/agent/server/api.py", line 994, in _exit_barrier',
               AGENT + "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes."]
    seen = list(Filter().lines(["rank 3/4 all_reduce=10", *barrier, "next"]))
    assert seen == [("rank 3/4 all_reduce=10", None), *[(line, HARMLESS) for line in barrier], ("next", None)]
    # The same lost connection anywhere else is a real problem: every line is shown.
    lost = [LOST_STORE, *FRAMES, AGENT + "Traceback (most recent call last):"]
    assert list(Filter().lines(lost)) == [(line, None) for line in lost]


REMOVED_POD = [
    "W1127 21:03:29.817000 3 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers",
    "Traceback (most recent call last):",
    '  File "/opt/venv/bin/torchrun", line 8, in <module>',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 3 got signal: 15",
]
LOST_PEER = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/opt/e2e/train.py", line 45, in <module>',
    "[rank1]:     dist.all_reduce(contribution)",
    "[rank1]:            ^^^^^^^^^^^^^^^^^^^^^",
    "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [10.105.217.4]:49872. This is typically caused by a remote worker crashing.",
    "E1127 21:03:33.101000 3 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 "
    "(pid: 18) of binary: /opt/venv/bin/python",
]
RESTART = "W1127 21:03:33.822000 3 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 21 closing signal SIGTERM"


def test_after_a_resize_a_removed_pods_output_and_the_remaining_pods_lost_peers_are_left_out():
    removed = Filter()
    assert list(removed.lines(["E2E-RANK rank 2 of 4 on pod 2"])) == [("E2E-RANK rank 2 of 4 on pod 2", None)]
    removed.after_resize(removed=True)
    assert list(removed.lines(REMOVED_POD)) == [(line, REMOVED) for line in REMOVED_POD]

    left = Filter()
    left.after_resize(removed=False)
    seen = list(left.lines([*LOST_PEER, RESTART, "E2E-START round 4", *LOST_PEER]))
    # Until the workers of the next round print, then every line is shown again.
    assert seen == [*[(line, LOST_PEERS) for line in LOST_PEER], (RESTART, None), ("E2E-START round 4", None),
                    *[(line, None) for line in LOST_PEER]]


def test_a_peer_whose_worker_was_killed_is_a_lost_peer_too():
    """gloo reports a peer killed mid-collective (its agent restarting it for the new round) as a reset."""
    reset = [*LOST_PEER[:4], "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
             "pair.cc:537] Read error [10.230.55.2]:52119: Connection reset by peer. This is typically caused by a "
             "remote worker hanging or bugs in the application.", LOST_PEER[-1]]
    left = Filter()
    left.after_resize(removed=False)
    assert list(left.lines(reset)) == [(line, LOST_PEERS) for line in reset]


def test_after_a_resize_another_error_is_shown():
    other = [*LOST_PEER[:4], "[rank1]: RuntimeError: CUDA error: out of memory"]
    left = Filter()
    left.after_resize(removed=False)
    assert list(left.lines(other)) == [(line, None) for line in other]
    shown: list[str] = []
    echo = Echo(Console(shown.append), verbose=False)
    quiet = Filter()
    quiet.after_resize(removed=False)
    for line, kind in quiet.lines(LOST_PEER):
        echo("[pod] ", line, kind)
    assert shown == [] and echo.note() == ("(left out: 6 lines of lost-peer errors after a resize; --verbose shows "
                                           "them, the logs have every line)")
