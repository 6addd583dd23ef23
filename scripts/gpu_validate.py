#!/usr/bin/env python3
"""The Python half of scripts/gpu-validate.sh: what gpufleet is checked against on a real NVIDIA GPU.

Modes (each prints JSON on stdout; stdlib only, except pynvml and torch where named):
  pynvml                 every field gpufleet reports, read through pynvml (nvidia-ml-py), per GPU, with the
                         mean cost of each NVML call (200 calls) on this driver
  costs                  the wall and CPU time of each NVML call gpufleet makes in a reading (100 calls each,
                         GPU 0), through pynvml: run it idle and under load
  init                   what NVML's start-up calls cost (loading the library, nvmlInit, device discovery, GPM
                         support, XID registration, NvLink states): where a CLI snapshot's time goes
  time N CMD...          runs a shell command N times (after 2 warm-ups): min, median, mean, max wall seconds
  agent URL PID SECONDS  the agent's CPU per collection over SECONDS: the sum of its threads' run time
                         (/proc/PID/task/*/schedstat, ns; /proc/PID/stat's ticks beside it), divided by the
                         collections it counted (gpufleet_collections_total) over the same span; its RSS
  fetch URL PATH FILE    one GET, the body written to FILE
  energy                 GPU 0's energy counter (mJ, nvmlDeviceGetTotalEnergyConsumption) and the time it was read
  burn SECONDS           a bf16 matrix-product loop on GPU 0 through torch: the load of a real job
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def nvml_value(fn, *args):
    """A field's value, or the NVML error's text (NotSupported stays visible as such)."""
    import pynvml  # noqa: PLC0415

    try:
        v = fn(*args)
    except pynvml.NVMLError as e:
        return {"error": str(e)}
    if isinstance(v, bytes):
        return v.decode()
    if hasattr(v, "_fields_"):
        return {f[0]: getattr(v, f[0]) for f in v._fields_}
    return v


def pynvml_mode() -> dict:
    import pynvml  # noqa: PLC0415

    t0 = time.perf_counter()
    pynvml.nvmlInit()
    init_s = time.perf_counter() - t0
    out = {
        "pynvml_version": getattr(pynvml, "__version__", None),
        "init_s": init_s,
        "driver": nvml_value(pynvml.nvmlSystemGetDriverVersion),
        "nvml_version": nvml_value(pynvml.nvmlSystemGetNVMLVersion),
        "gpus": [],
    }
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        n = pynvml
        fields = {
            "name": (n.nvmlDeviceGetName, h),
            "uuid": (n.nvmlDeviceGetUUID, h),
            "pci": (n.nvmlDeviceGetPciInfo, h),
            "memory": (n.nvmlDeviceGetMemoryInfo, h),
            "utilization": (n.nvmlDeviceGetUtilizationRates, h),
            "temperature_c": (n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            "power_mw": (n.nvmlDeviceGetPowerUsage, h),
            "power_limit_mw": (n.nvmlDeviceGetEnforcedPowerLimit, h),
            "energy_mj": (n.nvmlDeviceGetTotalEnergyConsumption, h),
            "fan_pct": (n.nvmlDeviceGetFanSpeed, h),
            "clock_graphics_mhz": (n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_GRAPHICS),
            "clock_sm_mhz": (n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            "clock_mem_mhz": (n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            "max_clock_graphics_mhz": (n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_GRAPHICS),
            "pstate": (n.nvmlDeviceGetPerformanceState, h),
            "persistence_mode": (n.nvmlDeviceGetPersistenceMode, h),
            "compute_mode": (n.nvmlDeviceGetComputeMode, h),
            "mig_mode": (n.nvmlDeviceGetMigMode, h),
            "ecc_mode": (n.nvmlDeviceGetEccMode, h),
            "ecc_volatile_corrected": (
                n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC),
            "ecc_volatile_uncorrected": (
                n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC),
            "ecc_aggregate_corrected": (
                n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_AGGREGATE_ECC),
            "ecc_aggregate_uncorrected": (
                n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_AGGREGATE_ECC),
            "remapped_rows": (n.nvmlDeviceGetRemappedRows, h),
            "pcie_replay_counter": (n.nvmlDeviceGetPcieReplayCounter, h),
            "clock_event_reasons": (n.nvmlDeviceGetCurrentClocksEventReasons, h),
            "pcie_link_gen": (n.nvmlDeviceGetCurrPcieLinkGeneration, h),
            "pcie_link_width": (n.nvmlDeviceGetCurrPcieLinkWidth, h),
            "serial": (n.nvmlDeviceGetSerial, h),
            "vbios": (n.nvmlDeviceGetVbiosVersion, h),
        }
        gpu: dict = {"index": i}
        cost: dict = {}
        for key, (fn, *args) in fields.items():
            if not hasattr(n, fn.__name__):
                continue
            gpu[key] = nvml_value(fn, *args)
            t = time.perf_counter()
            for _ in range(200):
                nvml_value(fn, *args)
            cost[key] = (time.perf_counter() - t) / 200 * 1e6
        procs = nvml_value(n.nvmlDeviceGetComputeRunningProcesses, h)
        gpu["compute_processes"] = (
            [{"pid": p.pid, "used_memory": p.usedGpuMemory} for p in procs] if isinstance(procs, list) else procs)
        gpu["call_cost_us"] = cost
        out["gpus"].append(gpu)
    pynvml.nvmlShutdown()
    return out


def costs_mode() -> dict:
    import pynvml as n  # noqa: PLC0415

    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    energy_fi = getattr(n, "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83)
    calls = {
        "nvmlDeviceGetTotalEnergyConsumption": (n.nvmlDeviceGetTotalEnergyConsumption, h),
        "nvmlDeviceGetFieldValues(TOTAL_ENERGY)": (n.nvmlDeviceGetFieldValues, h, [energy_fi]),
        "nvmlDeviceGetPowerUsage": (n.nvmlDeviceGetPowerUsage, h),
        "nvmlDeviceGetMemoryInfo_v2": (n.nvmlDeviceGetMemoryInfo, h, getattr(n, "nvmlMemory_v2", 0)),
        "nvmlDeviceGetUtilizationRates": (n.nvmlDeviceGetUtilizationRates, h),
        "nvmlDeviceGetTemperature": (n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetFanSpeed": (n.nvmlDeviceGetFanSpeed, h),
        "nvmlDeviceGetClockInfo(GRAPHICS)": (n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_GRAPHICS),
        "nvmlDeviceGetClockInfo(MEM)": (n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
        "nvmlDeviceGetCurrentClocksEventReasons": (n.nvmlDeviceGetCurrentClocksEventReasons, h),
        "nvmlDeviceGetPerformanceState": (n.nvmlDeviceGetPerformanceState, h),
        "nvmlDeviceGetMigMode": (n.nvmlDeviceGetMigMode, h),
        "nvmlDeviceGetViolationStatus(POWER)": (n.nvmlDeviceGetViolationStatus, h, 0),
        "nvmlDeviceGetViolationStatus(THERMAL)": (n.nvmlDeviceGetViolationStatus, h, 1),
        "nvmlDeviceGetEnforcedPowerLimit": (n.nvmlDeviceGetEnforcedPowerLimit, h),
        "nvmlDeviceGetPersistenceMode": (n.nvmlDeviceGetPersistenceMode, h),
        "nvmlDeviceGetTotalEccErrors": (
            n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC),
        "nvmlDeviceGetRemappedRows": (n.nvmlDeviceGetRemappedRows, h),
        "nvmlDeviceGetPcieReplayCounter": (n.nvmlDeviceGetPcieReplayCounter, h),
        "nvmlDeviceGetRetiredPages": (
            n.nvmlDeviceGetRetiredPages, h, n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        "nvmlDeviceGetComputeRunningProcesses": (n.nvmlDeviceGetComputeRunningProcesses, h),
        "nvmlDeviceGetGraphicsRunningProcesses": (n.nvmlDeviceGetGraphicsRunningProcesses, h),
        "nvmlDeviceGetMPSComputeRunningProcesses": (n.nvmlDeviceGetMPSComputeRunningProcesses, h),
        "nvmlDeviceGetUUID": (n.nvmlDeviceGetUUID, h),
        "nvmlDeviceGetPciInfo": (n.nvmlDeviceGetPciInfo, h),
    }
    out = {}
    for name, (fn, *args) in calls.items():
        first = nvml_value(fn, *args)
        w, c = time.perf_counter(), time.process_time()
        for _ in range(100):
            nvml_value(fn, *args)
        out[name] = {"wall_us": (time.perf_counter() - w) / 100 * 1e6,
                     "cpu_us": (time.process_time() - c) / 100 * 1e6,
                     "answer": first if isinstance(first, dict) else None}
    n.nvmlShutdown()
    return out


def timed(fn, *args, repeat: int = 1) -> dict:
    w = time.perf_counter()
    for _ in range(repeat):
        answer = nvml_value(fn, *args)
    return {"wall_us": (time.perf_counter() - w) / repeat * 1e6,
            "answer": answer if isinstance(answer, dict | str | int) else None}


def init_mode() -> dict:
    import ctypes  # noqa: PLC0415

    import pynvml as n  # noqa: PLC0415

    out: dict = {}
    w = time.perf_counter()
    ctypes.CDLL("libnvidia-ml.so.1")
    out["dlopen libnvidia-ml.so.1"] = {"wall_us": (time.perf_counter() - w) * 1e6}
    pairs = []
    for _ in range(5):
        w = time.perf_counter()
        n.nvmlInit()
        t_init = time.perf_counter() - w
        w = time.perf_counter()
        n.nvmlShutdown()
        pairs.append((t_init, time.perf_counter() - w))
    out["nvmlInit"] = {"wall_us": statistics.median(p[0] for p in pairs) * 1e6}
    out["nvmlShutdown"] = {"wall_us": statistics.median(p[1] for p in pairs) * 1e6}
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    out["nvmlDeviceGetCount"] = timed(n.nvmlDeviceGetCount, repeat=20)
    out["nvmlDeviceGetHandleByIndex"] = timed(n.nvmlDeviceGetHandleByIndex, 0, repeat=20)
    out["nvmlSystemGetDriverVersion"] = timed(n.nvmlSystemGetDriverVersion, repeat=20)
    out["nvmlSystemGetCudaDriverVersion"] = timed(n.nvmlSystemGetCudaDriverVersion, repeat=20)
    out["nvmlDeviceGetName"] = timed(n.nvmlDeviceGetName, h, repeat=20)
    if hasattr(n, "nvmlGpmQueryDeviceSupport"):
        out["nvmlGpmQueryDeviceSupport"] = timed(n.nvmlGpmQueryDeviceSupport, h, repeat=5)
    out["nvmlDeviceGetSupportedEventTypes"] = timed(n.nvmlDeviceGetSupportedEventTypes, h, repeat=5)
    w = time.perf_counter()
    es = n.nvmlEventSetCreate()
    out["nvmlEventSetCreate"] = {"wall_us": (time.perf_counter() - w) * 1e6}
    out["nvmlDeviceRegisterEvents(Xid)"] = timed(n.nvmlDeviceRegisterEvents, h, n.nvmlEventTypeXidCriticalError, es)
    out["nvmlEventSetFree"] = timed(n.nvmlEventSetFree, es)
    links = [timed(n.nvmlDeviceGetNvLinkState, h, link) for link in range(18)]
    out["nvmlDeviceGetNvLinkState x18"] = {"wall_us": sum(x["wall_us"] for x in links),
                                           "answer": links[0]["answer"]}
    out["nvmlDeviceGetMaxMigDeviceCount"] = timed(n.nvmlDeviceGetMaxMigDeviceCount, h, repeat=5)
    n.nvmlShutdown()
    return out


def time_mode(n: int, cmd: str) -> dict:
    runs = []
    for k in range(n + 2):
        t = time.perf_counter()
        r = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if k >= 2:
            runs.append(time.perf_counter() - t)
    return {"command": cmd, "exit": r.returncode, "runs": n, "min_s": min(runs),
            "median_s": statistics.median(runs), "mean_s": statistics.mean(runs), "max_s": max(runs)}


def run_ns(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended between the listing and the read
    return total


def scrape(url: str) -> dict:
    text = get(url + "/metrics").decode()
    want = {}
    for name in ("gpufleet_collections_total", "gpufleet_collection_duration_seconds"):
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        want[name] = float(m.group(1)) if m else None
    return want


def ticks(pid: int) -> int:
    """utime + stime of the whole process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))


def agent_mode(url: str, pid: int, seconds: float) -> dict:
    a, ns_a, tk_a, t_a = scrape(url), run_ns(pid), ticks(pid), time.monotonic()
    time.sleep(seconds)
    b, ns_b, tk_b, t_b = scrape(url), run_ns(pid), ticks(pid), time.monotonic()
    collections = (b["gpufleet_collections_total"] or 0) - (a["gpufleet_collections_total"] or 0)
    cpu_s = (ns_b - ns_a) / 1e9
    out = {"seconds": t_b - t_a, "collections": collections, "cpu_s_schedstat": cpu_s,
           "cpu_pct_of_core": 100 * cpu_s / (t_b - t_a), "last_collection_wall_s":
           b["gpufleet_collection_duration_seconds"], "rss_kib": rss_kib(pid)}
    if collections > 0:
        out["cpu_ms_per_collection"] = 1e3 * cpu_s / collections
        hz = os.sysconf("SC_CLK_TCK")
        out["cpu_ms_per_collection_proc_stat"] = 1e3 * (tk_b - tk_a) / hz / collections
    return out


def burn_mode(seconds: float) -> dict:
    import torch  # noqa: PLC0415

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        n += 20
    dt = time.perf_counter() - t0
    return {"products": n, "seconds": dt, "tflops": 2 * 8192**3 * n / dt / 1e12,
            "max_memory_allocated_mib": torch.cuda.max_memory_allocated() / 2**20}


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "pynvml":
        out = pynvml_mode()
    elif mode == "energy":
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
        mj = pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(0))
        out = {"energy_mj": mj, "time": time.time()}
        pynvml.nvmlShutdown()
    elif mode == "costs":
        out = costs_mode()
    elif mode == "init":
        out = init_mode()
    elif mode == "time" and len(argv) >= 4:
        out = time_mode(int(argv[2]), " ".join(argv[3:]))
    elif mode == "agent" and len(argv) == 5:
        out = agent_mode(argv[2], int(argv[3]), float(argv[4]))
    elif mode == "fetch" and len(argv) == 5:
        with open(argv[4], "wb") as f:
            f.write(get(argv[2] + argv[3]))
        return 0
    elif mode == "burn" and len(argv) == 3:
        out = burn_mode(float(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
