#!/usr/bin/env python3
"""Writes a fake-NVML scenario for bench/collect_bench.sh: N copies of the real H100 of
tests/fixtures/nvml/h100_580_health.json (driver 580), each NVML call costing what it cost on that
machine (../shared/captures/h100-580/readings.json, costs_on_this_machine), optionally with GPU
processes (real pids, so that /proc is read for them) and MIG instances.

Usage: collect_scenario.py OUT --gpus N [--pids P1,P2,...] [--procs-per-gpu K] [--mig M] [--free]
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "tests", "fixtures", "nvml", "h100_580_health.json")

# µs per call on a real H100 80GB HBM3 (driver 580.159), through pynvml. Two sources:
# - the capture ../shared/captures/h100-580/readings.json (costs_on_this_machine), where it has a figure;
# - scripts/gpu-validate.sh on a lent H100 on 2026-11-27 (/work/gpu1/r/pynvml.json, call_cost_us: the mean
#   of 200 calls) for the rest: above all the energy counter, ~4 ms of CPU per call, which the capture did
#   not time and which made a 1-GPU collection cost 6.7 ms of CPU on that machine;
# - scripts/gpu-collect-cost.sh on two more lent H100s the same day (docs/validation.md): the violation
#   times, 0.64–0.87 ms a call (CPU), which the first run had not timed either.
# "default" is for the calls none timed (retired pages, handles, …): 3 µs, the
# order of the simplest reads. GPM is left out (its own rate, bench/gpm_bench.sh).
CALL_COST_US = {
    "nvmlDeviceGetUtilizationRates": 13.5,           # capture: call_us_util (gpu-validate: 2.9)
    "nvmlDeviceGetMemoryInfo_v2": 6.8,               # capture: call_us_memory (gpu-validate: 7.8)
    "nvmlDeviceGetMemoryInfo": 6.8,
    "nvmlDeviceGetPowerUsage": 10.7,                 # capture: call_us_power (gpu-validate: 1.3)
    "nvmlDeviceGetTemperature": 3.8,                 # capture: call_us_temp (gpu-validate: 1.5)
    "nvmlDeviceGetComputeRunningProcesses_v3": 8.1,  # capture: call_us_procs (each of the three lists)
    "nvmlDeviceGetGraphicsRunningProcesses_v3": 8.1,
    "nvmlDeviceGetMPSComputeRunningProcesses_v3": 8.1,
    "nvmlDeviceGetTotalEccErrors": 11.4,             # capture: call_us_ecc_total (gpu-validate: 1.9)
    "nvmlDeviceGetRemappedRows": 2.3,                # capture: call_us_remapped (gpu-validate: 1.9)
    "nvmlDeviceGetCurrentClocksEventReasons": 3.2,   # capture: call_us_clock_reasons (gpu-validate: 1.4)
    "nvmlDeviceGetTotalEnergyConsumption": 3952.0,   # gpu-validate: energy_mj
    "nvmlDeviceGetViolationStatus": 700.0,           # gpu-collect-cost: power 665–873, thermal 639–713
    "nvmlDeviceGetPcieReplayCounter": 150.0,         # gpu-validate: pcie_replay_counter
    "nvmlDeviceGetFanSpeed": 142.7,                  # gpu-validate: fan_pct (NOT_SUPPORTED on the H100)
    "nvmlDeviceGetMigMode": 139.7,                   # gpu-validate: mig_mode
    "nvmlDeviceGetPersistenceMode": 4.1,             # gpu-validate: persistence_mode
    "nvmlDeviceGetPciInfo_v3": 4.7,                  # gpu-validate: pci
    "nvmlDeviceGetName": 2.1,                        # gpu-validate: name
    "nvmlDeviceGetUUID": 2.0,                        # gpu-validate: uuid
    "nvmlDeviceGetClockInfo": 1.4,                   # gpu-validate: clock_graphics_mhz, clock_mem_mhz
    "nvmlDeviceGetPerformanceState": 1.2,            # gpu-validate: pstate
    "nvmlDeviceGetEnforcedPowerLimit": 1.3,          # gpu-validate: power_limit_mw
    "default": 3.0,
}

MIG_1G = {"profile": "1g.10gb", "memory_total_mib": 9984, "memory_used_mib": 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pids", default="", help="pids to spread over the GPUs (comma-separated)")
    ap.add_argument("--procs-per-gpu", type=int, default=0)
    ap.add_argument("--mig", type=int, default=0, help="1g.10gb MIG instances per GPU (0: MIG off; at most 7)")
    ap.add_argument("--free", action="store_true", help="no call costs (gpufleet's own share)")
    a = ap.parse_args()
    with open(BASE) as f:
        base = json.load(f)
    gpu = base["gpus"][0]
    pids = [int(p) for p in a.pids.split(",") if p]
    gpus = []
    for i in range(a.gpus):
        g = dict(gpu)
        g["uuid"] = "GPU-a7c70913-7752-3821-b707-%012x" % i
        g["pci_bus_id"] = "00000000:%02X:00.0" % (0x18 + 0x10 * i)
        # The real H100 answers the energy counter (the fixture leaves it out, so the fake would say
        # NOT_SUPPORTED once and never be asked again): mJ since the driver loaded, as it read there.
        g["energy_mj"] = 3071187 + 1000 * i
        take = pids[i * a.procs_per_gpu:(i + 1) * a.procs_per_gpu]
        procs = []
        for k, pid in enumerate(take):
            p = {"pid": pid, "used_memory_mib": 1000 + k}
            if a.mig:
                p["gpu_instance_id"] = 7 + k % a.mig
                p["compute_instance_id"] = 0
            procs.append(p)
        if procs:
            g["compute_processes"] = procs
        if a.mig:
            g["mig_mode"] = 1
            g["utilization_gpu_pct"] = "not_supported"
            g["utilization_memory_pct"] = "not_supported"
            g["mig_devices"] = [dict(MIG_1G, index=m, gpu_instance_id=7 + m, compute_instance_id=0)
                                for m in range(a.mig)]
        gpus.append(g)
    out = {
        "description": "bench/collect_bench.sh: %d x the H100 of h100_580_health.json%s%s" %
                       (a.gpus, ", %d MIG instances each" % a.mig if a.mig else "",
                        ", free calls" if a.free else ", calls costing the real H100's figures"),
        "driver_version": base["driver_version"],
        "cuda_driver_version": base["cuda_driver_version"],
        "gpus": gpus,
    }
    if not a.free:
        out["call_cost_us"] = CALL_COST_US
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
