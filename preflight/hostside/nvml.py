# GPUs through NVML (nvidia-ml-py's pynvml), as the probe reads them: in the probe when its
# python has pynvml, else in the Paddle child (where nvidia-ml-py is usually installed), which
# gets this file's source. Standard library only, Python 3.6 syntax.


def nvml_facts(pynvml):
    def text(x):
        return x.decode() if isinstance(x, bytes) else str(x)

    def opt(fn, *a):
        try:
            return fn(*a)
        except Exception:
            return None

    def first(names, *a):
        # Drivers before r535 lack nvmlDeviceGetCurrentClocksEventReasons in libnvidia-ml
        # (nvidia-ml-py still has the Python function: the call raises FunctionNotFound):
        # try each name in turn, the older one last.
        for name in names:
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            try:
                return fn(*a)
            except Exception:
                continue
        return None

    def fabric(h):
        # NVSwitch systems (HGX Hopper on): each GPU joins the NVLink fabric that Fabric
        # Manager sets up. [state, status, health mask]; None where there is no fabric
        # (NotSupported: PCIe cards, older GPUs, drivers without the call). The versioned
        # call carries the health mask; the older one is tried when it is missing.
        import ctypes
        for call, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                                  ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
            fn, cls = getattr(pynvml, call, None), getattr(pynvml, struct_name, None)
            if fn is None or cls is None:
                continue
            info = cls()
            try:
                fn(h, ctypes.byref(info))
            except Exception:
                continue
            return [int(info.state), int(info.status), int(getattr(info, "healthMask", 0))]
        return None

    def device(i):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        cc = opt(pynvml.nvmlDeviceGetCudaComputeCapability, h)
        ecc = opt(pynvml.nvmlDeviceGetEccMode, h)
        mig = opt(pynvml.nvmlDeviceGetMigMode, h)
        power = opt(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
        remap = opt(pynvml.nvmlDeviceGetRemappedRows, h)  # (corr, unc, pending, failure)
        reasons = first(("nvmlDeviceGetCurrentClocksEventReasons",
                         "nvmlDeviceGetCurrentClocksThrottleReasons"), h)
        procs = opt(pynvml.nvmlDeviceGetComputeRunningProcesses, h)
        links = None
        for link in range(18):  # NVML_NVLINK_MAX_LINKS
            try:
                up = pynvml.nvmlDeviceGetNvLinkState(h, link)
            except Exception:
                break
            links = (links or 0) + (1 if up else 0)
        return {
            "ecc_uncorrected_volatile": opt(pynvml.nvmlDeviceGetTotalEccErrors, h, 1, 0),
            "retired_pages_pending": opt(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h),
            "remapped_rows_pending": bool(remap[2]) if remap else None,
            "remapped_rows_failure": bool(remap[3]) if remap else None,
            "clock_event_reasons": reasons,
            "processes": len(procs) if procs is not None else None,
            "nvlink_up": links,
            "fabric": fabric(h),
            "index": i,
            "name": text(pynvml.nvmlDeviceGetName(h)),
            "uuid": text(opt(pynvml.nvmlDeviceGetUUID, h) or ""),
            "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total // (1 << 20),
            "compute_capability": "%d.%d" % tuple(cc) if cc else None,
            "vbios": opt(lambda: text(pynvml.nvmlDeviceGetVbiosVersion(h))),
            "ecc_mode": list(ecc) if ecc else None,
            "mig_mode": list(mig) if mig else None,
            "persistence_mode": opt(pynvml.nvmlDeviceGetPersistenceMode, h),
            "power_limit_w": power / 1000.0 if power else None,
            "pcie_width": opt(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
            "pcie_width_max": opt(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        }

    pynvml.nvmlInit()
    try:
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                devices.append(device(i))
            except Exception as e:
                # One lost GPU (Xid 79: GPU_IS_LOST) is that GPU's finding, not the host's
                # every GPU fact lost.
                devices.append({"index": i, "error": "%s: %s" % (type(e).__name__,
                                                                  str(e)[:200])})
        cuda = opt(pynvml.nvmlSystemGetCudaDriverVersion)
        return {
            "source": "nvml",
            "driver": text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": "%d.%d" % (cuda // 1000, (cuda % 1000) // 10) if cuda else None,
            "devices": devices,
        }
    finally:
        pynvml.nvmlShutdown()
