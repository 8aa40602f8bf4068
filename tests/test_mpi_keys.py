"""MPI jobs with an SSH private key the user supplies (`ssh_private_key`): the Secret holds it as a Pulumi
secret with its derived public key, no pulumi-tls key pair is made, and a key mpirun cannot use is refused
from every entry point. The keys in tests/mpi_keys are test keys; each `.pub` is `ssh-keygen -y`'s line."""

import shutil
import subprocess
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa
from pulumi.runtime import rpc

from trainjobs import DeepSpeedTrainJob, MlxTrainJob, MpiTrainJob, MpiTrainJobArgs, TrainJobError
from trainjobs.testing import attempt, run
from trainjobs.tools.cli.main import main
from trainjobs.tools.engine import run_program
from trainjobs.tools.stackconfig import load_yaml

ROOT = Path(__file__).resolve().parent.parent
KEYS = Path(__file__).resolve().parent / "mpi_keys"
BASE = {"image": "mpi:1", "command": ["mpirun", "python", "/app/hello.py"], "num_nodes": 2}
KEY_PAIR = "tls:index/privateKey:PrivateKey"
PROGRAM = ROOT / "stacks" / "__main__.py"


def key(name: str) -> str:
    return (KEYS / name).read_text()


def public_key(name: str) -> str:
    return (KEYS / f"{name}.pub").read_text()


def is_secret(value) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def ssh_secret(result, name="pi"):
    return result.get("Secret", f"{name}-mpi-ssh-auth")


# --- a good key -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ed25519", "ecdsa-p256.pem", "rsa-1024.p8"])
def test_a_supplied_key_and_its_derived_public_key_make_the_secret_and_no_key_pair_is_made(name):
    result = run(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": key(name)}))
    secret = ssh_secret(result)
    assert secret.manifest["stringData"] == {"ssh-privatekey": key(name), "ssh-publickey": public_key(name)}
    assert is_secret(secret.inputs["stringData"])   # given as a plain string, still stored only as a secret
    assert secret.redacted_manifest["stringData"] == {"ssh-privatekey": "[secret]", "ssh-publickey": "[secret]"}
    assert result.find(type=KEY_PAIR) == []
    assert (secret.manifest["type"], secret.manifest["immutable"]) == ("kubernetes.io/ssh-auth", True)


KEY_FORMATS = {
    "Ed25519 OpenSSH": (lambda: ed25519.Ed25519PrivateKey.generate(), serialization.PrivateFormat.OpenSSH),
    "ECDSA P-384 OpenSSH": (lambda: ec.generate_private_key(ec.SECP384R1()), serialization.PrivateFormat.OpenSSH),
    "ECDSA P-521 SEC1": (lambda: ec.generate_private_key(ec.SECP521R1()),
                         serialization.PrivateFormat.TraditionalOpenSSL),
    "RSA 2048 PKCS#1": (lambda: rsa.generate_private_key(65537, 2048), serialization.PrivateFormat.TraditionalOpenSSL),
}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
@pytest.mark.parametrize("make, private_format", KEY_FORMATS.values(), ids=KEY_FORMATS)
def test_openssh_loads_the_stored_key_and_it_matches_the_derived_public_key(make, private_format, tmp_path):
    text = make().private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption()).decode()
    data = ssh_secret(run(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": text}))).manifest["stringData"]
    stored = tmp_path / "id_rsa"
    stored.write_text(data["ssh-privatekey"])
    stored.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(stored)], capture_output=True, text=True, check=True)
    assert derived.stdout.split()[:2] == data["ssh-publickey"].split()


def test_without_a_key_pulumi_tls_makes_one():
    result = run(lambda: MpiTrainJob("pi", BASE))
    assert result.get(type=KEY_PAIR).name == "pi-ssh-key"


@pytest.mark.parametrize("cls", [MpiTrainJob, DeepSpeedTrainJob, MlxTrainJob])
def test_typed_args_of_every_mpi_component_take_the_key(cls):
    args = cls.args_type(**BASE, ssh_private_key=key("ed25519"))
    result = run(lambda: cls("pi", args))
    assert ssh_secret(result).manifest["stringData"]["ssh-publickey"] == public_key("ed25519")
    assert result.find(type=KEY_PAIR) == []


PASTED = {
    # `pulumi config set` may drop the final newline, without which OpenSSH cannot load the key file.
    "CRLF, no final newline": lambda text: text.rstrip("\n").replace("\n", "\r\n"),
    # `--config mpiSshKey=...` and a plain multi-line YAML scalar fold the lines into spaces.
    "folded by YAML": lambda text: load_yaml(text, "--config mpiSshKey"),
}


@pytest.mark.parametrize("name", ["ed25519", "rsa-1024.p8"])
@pytest.mark.parametrize("paste", PASTED.values(), ids=PASTED)
def test_the_secret_holds_the_key_file_as_ssh_keygen_wrote_it(name, paste):
    pasted = paste(key(name))
    assert pasted != key(name)
    result = run(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": pasted}))
    assert ssh_secret(result).manifest["stringData"] == {"ssh-privatekey": key(name), "ssh-publickey": public_key(name)}


def test_a_key_from_secret_config_is_derived_when_it_resolves():
    result = run(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": pulumi.Config().require_secret("key")}),
                 config={"key": key("ecdsa-p256.pem")}, secret_keys=["key"])
    secret = ssh_secret(result)
    assert secret.manifest["stringData"] == {"ssh-privatekey": key("ecdsa-p256.pem"),
                                             "ssh-publickey": public_key("ecdsa-p256.pem")}
    assert is_secret(secret.inputs["stringData"])
    assert result.find(type=KEY_PAIR) == []


def test_a_key_unknown_during_preview_leaves_the_secret_unknown():
    def program():
        store = k8s.core.v1.Namespace("store", metadata={"name": "store"})   # a value the provider computes
        MpiTrainJob("pi", {**BASE, "ssh_private_key": store.status.apply(lambda status: status["phase"])})

    result = run(program, preview=True)
    assert ssh_secret(result).manifest["stringData"] == "[unknown]"
    assert result.find(type=KEY_PAIR) == []


# --- a key mpirun cannot use ------------------------------------------------------------------------------------

PUBLIC = ("this is a public key; give the private key (the file without .pub, e.g. id_ed25519): the public key "
          "is derived from it")
ENCRYPTED = ("the private key is encrypted with a passphrase, which mpirun cannot enter; give an unencrypted key "
             "(`ssh-keygen -p -N '' -f <copy>` removes the passphrase of a copy) and keep it secret in Pulumi "
             "config or your secret store")
NOT_A_KEY = ("not a private key in OpenSSH or PEM format; give the whole key file, from its -----BEGIN ... PRIVATE "
             "KEY----- line to its -----END ... PRIVATE KEY----- line (e.g. `pulumi config set --secret <key> < "
             "id_ed25519`)")
KINDS = "Ed25519, ECDSA (P-256, P-384, P-521) or RSA"


def pem(private_key) -> str:
    return private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()


def public_pem(name: str) -> str:
    loaded = serialization.load_ssh_public_key(public_key(name).encode())
    return loaded.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


BAD_KEYS = {
    "public key line": (lambda: public_key("ed25519"), PUBLIC),
    "public key PEM": (lambda: public_pem("ecdsa-p256.pem"), PUBLIC),
    "passphrase, OpenSSH": (lambda: key("ed25519-passphrase"), ENCRYPTED),
    "passphrase, PEM": (lambda: key("ecdsa-p256-passphrase.pem"), ENCRYPTED),
    "passphrase, PEM folded": (lambda: " ".join(key("ecdsa-p256-passphrase.pem").split("\n")), ENCRYPTED),
    "no key": (lambda: "hunter2", NOT_A_KEY),
    "cut short": (lambda: key("ed25519")[:200], NOT_A_KEY),
    "DSA": (lambda: pem(dsa.generate_private_key(1024)),
            f"a DSA key, which OpenSSH does not accept for logins; give an {KINDS} key"),
    "Ed25519 PEM": (lambda: pem(ed25519.Ed25519PrivateKey.generate()),
                    "an Ed25519 key in PEM (PKCS#8) format, which some OpenSSH versions cannot load (9.2, Debian "
                    "12's, among them); give it in OpenSSH format (-----BEGIN OPENSSH PRIVATE KEY-----), as "
                    "`ssh-keygen -t ed25519` writes it"),
    "secp256k1": (lambda: pem(ec.generate_private_key(ec.SECP256K1())),
                  f"an ECDSA key on curve secp256k1, which OpenSSH does not accept; give an {KINDS} key"),
}


@pytest.mark.parametrize("value, message", BAD_KEYS.values(), ids=BAD_KEYS)
@pytest.mark.parametrize("given_as", ["dict", "typed"])
def test_a_key_mpirun_cannot_use_is_refused_before_anything_registers(value, message, given_as):
    bad = value()
    args = {**BASE, "ssh_private_key": bad}
    error, result = attempt(lambda: MpiTrainJob("pi", args if given_as == "dict" else MpiTrainJobArgs(**args)))
    assert isinstance(error, TrainJobError)
    assert [str(issue) for issue in error.issues] == [f"ssh_private_key: {message}"]
    assert result.resources == []
    assert not any(line in str(error) for line in bad.splitlines()[1:-1] if len(line) > 8)   # the key is not shown


def test_a_bad_key_from_an_output_fails_naming_the_argument():
    bad = pulumi.Output.secret(key("ed25519-passphrase"))
    error, _ = attempt(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": bad}))
    assert isinstance(error, TrainJobError)
    assert [str(issue) for issue in error.issues] == [f"ssh_private_key: {ENCRYPTED} (the value arrived as an Output)"]


def test_the_algorithm_of_a_generated_key_is_refused_with_a_supplied_one():
    error, result = attempt(lambda: MpiTrainJob("pi", {**BASE, "ssh_private_key": key("ed25519"),
                                                       "ssh_key_algorithm": "ED25519"}))
    assert isinstance(error, TrainJobError) and result.resources == []
    assert [str(issue) for issue in error.issues] == [
        "ssh_key_algorithm: chooses the algorithm of a generated key, and with ssh_private_key no key is generated; "
        "drop ssh_key_algorithm"]


# --- the example stacks: `mpiSshKey` ----------------------------------------------------------------------------


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    return code, printed.out, printed.err


def test_the_hpc_stack_with_mpi_ssh_key_runs_without_pulumi_tls():
    result = run_program(PROGRAM, stack="hpc", config={"mpiSshKey": key("ed25519")})
    assert result.find(type=KEY_PAIR) == []
    for job in ("pi", "ds-finetune"):
        assert ssh_secret(result, job).manifest["stringData"] == {"ssh-privatekey": key("ed25519"),
                                                                  "ssh-publickey": public_key("ed25519")}
    assert len(run_program(PROGRAM, stack="hpc").find(type=KEY_PAIR)) == 2   # the default: pulumi-tls


def test_render_and_explain_with_mpi_ssh_key_show_the_key_as_secret_only(capsys, tmp_path):
    out = tmp_path / "out"
    config = f"mpiSshKey={key('rsa-1024.p8')}"
    code, printed, _ = cli(capsys, "render", str(PROGRAM), "--stack", "hpc", "--config", config, "--out", str(out))
    assert code == 0
    assert "PrivateKey" not in printed and "PrivateKey" not in (out / "tree.txt").read_text()
    secret = (out / "v1-secret-default-pi-mpi-ssh-auth.yaml").read_text()
    assert "stringData:\n  ssh-privatekey: '[secret]'\n  ssh-publickey: '[secret]'\n" in secret
    code, explained, _ = cli(capsys, "explain", str(PROGRAM), "--stack", "hpc", "--job", "pi-launcher-0", "--config",
                             config)
    assert code == 0
    assert ("  file /root/.ssh/id_rsa (mode 0600) = Secret pi-mpi-ssh-auth key ssh-privatekey: [secret]\n"
            "  file /root/.ssh/id_rsa.pub (mode 0644) = Secret pi-mpi-ssh-auth key ssh-publickey: [secret]\n"
            ) in explained
    shown = explained + "".join(path.read_text() for path in out.iterdir())
    assert not any(line in shown for line in key("rsa-1024.p8").splitlines()[1:-1])


def test_a_bad_mpi_ssh_key_is_an_error_naming_the_argument(capsys, tmp_path):
    out = tmp_path / "out"
    code, _, err = cli(capsys, "render", str(PROGRAM), "--stack", "hpc", "--config",
                       f"mpiSshKey={public_key('ed25519')}", "--out", str(out))
    assert code == 2 and not out.exists()
    assert err == (f'error: MpiTrainJob "pi": invalid arguments\n  - ssh_private_key: {PUBLIC}\n'
                   f'error: DeepSpeedTrainJob "ds-finetune": invalid arguments\n  - ssh_private_key: {PUBLIC}\n')


def test_a_job_s_own_key_wins_over_mpi_ssh_key():
    jobs = [{"kind": "MpiTrainJob", "name": "a", **BASE, "ssh_private_key": key("ecdsa-p256.pem")},
            {"kind": "MpiTrainJob", "name": "b", **BASE}, {"kind": "TorchTrainJob", "name": "c"}]
    result = run_program(PROGRAM, stack="hpc", config={"mpiSshKey": key("ed25519"), "jobs": jobs})
    assert ssh_secret(result, "a").manifest["stringData"]["ssh-publickey"] == public_key("ecdsa-p256.pem")
    assert ssh_secret(result, "b").manifest["stringData"]["ssh-publickey"] == public_key("ed25519")


def test_an_encrypted_mpi_ssh_key_renders_offline(capsys, tmp_path):
    (tmp_path / "stacks").mkdir()
    shutil.copy(PROGRAM, tmp_path / "stacks" / "__main__.py")
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: python\nmain: stacks/\n")
    (tmp_path / "Pulumi.dev.yaml").write_text(
        "config:\n  proj:mpiSshKey:\n    secure: v1:abc\n  proj:jobs:\n    - kind: MpiTrainJob\n      name: pi\n"
        "      image: mpi:1\n      command: [mpirun, /app/pi]\n")
    out = tmp_path / "out"
    code, printed, _ = cli(capsys, "render", str(tmp_path / "stacks"), "--out", str(out))
    assert code == 0
    assert "Secret pi-mpi-ssh-auth" in printed and "PrivateKey" not in printed
    assert "ssh-privatekey: '[secret]'" in (out / "v1-secret-default-pi-mpi-ssh-auth.yaml").read_text()
