"""The e2e tier's fixtures: our installed serve and bridge, the published reference serve in its own
virtual environment, and the fake model, all on loopback. No product module is imported here or in
any test of this tier: a module the real process does not load must make these tests fail."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.e2e.*` imports however pytest is launched
    sys.path.insert(0, str(REPO))

from tests.e2e.model_server import ModelServer, running_model_server  # noqa: E402
from tests.e2e.processes import Service, console_script, start_serve, stop_checked  # noqa: E402

SAMPLE_WIKI = REPO / "fixtures" / "sample-wiki"
REFERENCE_VERSION = "0.2.17"
REFERENCE_ENV = REPO / ".venv" / f"reference-llmwiki-serve-{REFERENCE_VERSION}"
_OFFLINE_SIGNS = ("Network is unreachable", "Failed to establish a new connection",
                  "Temporary failure in name resolution", "Name or service not known",
                  "No matching distribution found", "Could not find a version")


def _install_reference() -> Path:
    """`llmwiki-serve==0.2.17` from PyPI in its own virtual environment (kept inside .venv)."""
    script = REFERENCE_ENV / "bin" / "llmwiki-serve"
    stamp = REFERENCE_ENV / ".installed"
    if stamp.exists() and script.exists():
        return script
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(REFERENCE_ENV)], check=True)
    done = subprocess.run([str(REFERENCE_ENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           f"llmwiki-serve=={REFERENCE_VERSION}"], capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        if any(sign in done.stderr for sign in _OFFLINE_SIGNS):
            pytest.skip(f"PyPI is unreachable, so the reference llmwiki-serve=={REFERENCE_VERSION} "
                        f"cannot be installed: {done.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"installing llmwiki-serve=={REFERENCE_VERSION} failed:\n{done.stderr[-3000:]}")
    stamp.touch()
    return script


@pytest.fixture(scope="session")
def reference_serve_script() -> Path:
    return _install_reference()


@pytest.fixture(scope="module")
def our_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Our installed `llmwiki-serve` on the sample wiki, A2A on."""
    service = start_serve(tmp_path_factory.mktemp("our-serve"), SAMPLE_WIKI, "--enable-a2a")
    yield service
    stop_checked(service)


@pytest.fixture(scope="module")
def reference_serve(tmp_path_factory: pytest.TempPathFactory,
                    reference_serve_script: Path) -> Iterator[Service]:
    """The published reference `llmwiki-serve` on the same wiki, A2A on: a peer nobody here wrote."""
    service = start_serve(tmp_path_factory.mktemp("reference-serve"), SAMPLE_WIKI, "--enable-a2a-compat",
                          script=reference_serve_script, name="reference-serve")
    yield service
    violations = service.guard_violations()
    service.stop()  # uvicorn's own shutdown output is not ours to judge
    assert not violations, f"the reference serve tried to reach beyond loopback: {violations}"


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with running_model_server() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def installed_scripts() -> None:
    """Both console scripts must be installed: the tier tests the product as deployed."""
    console_script("llmwiki-serve")
    console_script("llmwiki-agent-bridge")
