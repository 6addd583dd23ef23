"""`gpufleet.lease(mig=...)`: one MIG instance of a profile, through the agent socket and through the
binary, on the fake NVML's MIG node (tests/fixtures/nvml/mig.json: GPU 0 cut into 3g.40gb, 2g.20gb and two
1g.10gb, one of which runs a process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gpufleet
from conftest import Agent, _required

MIG_SCENARIO = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "nvml" / "mig.json"
FREE_1G = "MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6"  # the 1g.10gb instance no process runs in


def _mig_env():
    env = dict(os.environ)
    env["GPUFLEET_NVML_LIBRARY"] = _required("GF_FAKE_NVML")
    env["FAKE_NVML_SCENARIO"] = str(MIG_SCENARIO)
    return env


@pytest.fixture(scope="module")
def mig_agent(tmp_path_factory):
    a = Agent(tmp_path_factory.mktemp("mig"), "mig-node", env=_mig_env())
    yield a
    a.stop()


def test_lease_of_a_mig_instance_through_the_agent(mig_agent, monkeypatch):
    monkeypatch.setenv("GPUFLEET_URL", mig_agent.url)
    monkeypatch.setenv("GPUFLEET_SOCKET", mig_agent.socket)
    monkeypatch.setenv("GPUFLEET_BIN", "/nonexistent/gpufleet")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with gpufleet.lease(mig="1g.10gb") as held:
        assert held.via == "agent"
        assert held.mig_uuids == [FREE_1G] and held.indices == [0]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == FREE_1G
        leases = mig_agent.get("/api/v1/leases")["leases"]
        assert [g["uuid"] for g in leases[0]["gpus"]] == [FREE_1G] and leases[0]["gpus"][0]["mig"] is True
        with pytest.raises(gpufleet.NoGpusAvailable, match="no free MIG instance of profile 1g.10gb"):
            gpufleet.acquire(mig="1g.10gb")
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert mig_agent.get("/api/v1/leases")["leases"] == []
    with pytest.raises(gpufleet.GpufleetError, match="no MIG instance of profile 7g.80gb"):
        gpufleet.acquire(mig="7g.80gb")
    with pytest.raises(ValueError):
        gpufleet.acquire(mig="1g.10gb; rm -rf /")
    with pytest.raises(ValueError):
        gpufleet.acquire(gpus=2, mig="1g.10gb")


def test_lease_of_a_mig_instance_through_the_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUFLEET_SOCKET", "none")
    monkeypatch.setenv("GPUFLEET_BIN", _required("GF_BINARY"))
    monkeypatch.setenv("GPUFLEET_DB", str(tmp_path / "cli.db"))
    for k, v in _mig_env().items():
        if k in ("GPUFLEET_NVML_LIBRARY", "FAKE_NVML_SCENARIO"):
            monkeypatch.setenv(k, v)
    with gpufleet.lease(mig="2g.20gb") as held:
        assert held.via == "binary"
        assert held.cuda_visible_devices == "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973"
        assert held.mig_uuids == ["MIG-a25704ba-3a06-5299-a795-fd7cf4d13973"]
