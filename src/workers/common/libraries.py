"""The CUDA libraries a worker process has actually loaded, each asked for its version.

A framework wheel brings its own cuDNN, cuBLAS and NCCL, which need not be the
ones crossbench's native engine was built with or loads (issue 26: the cudnn
rows ran on cuDNN 9.14 while PyTorch's rows named none). The hello's
``versions`` object carries what this reports, so every worker row of a cube
names the libraries that computed it.

Found in /proc/self/maps (the files mapped into this process, not a guess from
the install), then asked through ctypes with the libraries' own version calls:
``cudaRuntimeGetVersion``, ``cudnnGetVersion``, ``cublasGetProperty``,
``ncclGetVersion``. A library that is not loaded is absent from the result.
"""
import ctypes
import os


def _mapped():
    """{basename: path} of the shared objects mapped into this process."""
    found = {}
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and ".so" in path:
                    found.setdefault(os.path.basename(path), path)
    except OSError:
        pass
    return found


def _int_out(library, function, *arguments):
    value = ctypes.c_int(0)
    status = getattr(library, function)(*arguments, ctypes.byref(value))
    return value.value if status == 0 else None


def loaded_library_versions():
    """{"cuda_runtime": "12.4", "cudnn": "9.1.0", "cublas": "12.4.5", "nccl": "2.21.5"} of what is loaded."""
    versions = {}
    for name, path in sorted(_mapped().items()):
        try:
            if name.startswith("libcudart.so") and "cuda_runtime" not in versions:
                v = _int_out(ctypes.CDLL(path), "cudaRuntimeGetVersion")
                if v:  # 12040 -> 12.4
                    versions["cuda_runtime"] = f"{v // 1000}.{v % 1000 // 10}"
            elif name.startswith("libcudnn.so") and "cudnn" not in versions:
                library = ctypes.CDLL(path)
                library.cudnnGetVersion.restype = ctypes.c_size_t
                v = int(library.cudnnGetVersion())
                # cuDNN 9: major*10000 + minor*100 + patch; 8: major*1000 + minor*100 + patch
                major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
                versions["cudnn"] = f"{major}.{rest // 100}.{rest % 100}"
            elif name.startswith("libcublas.so") and "cublas" not in versions:
                library = ctypes.CDLL(path)
                parts = [_int_out(library, "cublasGetProperty", ctypes.c_int(kind)) for kind in (0, 1, 2)]
                if None not in parts:
                    versions["cublas"] = ".".join(map(str, parts))
            elif name.startswith("libnccl.so") and "nccl" not in versions:
                v = _int_out(ctypes.CDLL(path), "ncclGetVersion")
                if v:  # 2.9 and later: major*10000 + minor*100 + patch
                    versions["nccl"] = (f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 20900
                                        else f"{v // 1000}.{v % 1000 // 100}.{v % 100}")
        except (OSError, AttributeError):
            continue  # a library without the call (a stub): leave it out rather than guess
    return versions
