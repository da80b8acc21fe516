# lit configuration for paxc's FileCheck tests.
import os
import subprocess

import lit.formats

config.name = "paxc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".pir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pax_obj_root, "test", "lit")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.environment["PATH"] = os.pathsep.join(
    [config.pax_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%models", os.path.join(config.pax_src_root, "test", "models")))
config.substitutions.append(("%pax_tools", config.pax_tools_dir))
config.substitutions.append(("%gen", config.python_executable + " " +
                             os.path.join(config.pax_src_root, "tools", "models", "paxmodels.py")))
config.substitutions.append(("%check-summary", config.python_executable + " " +
                             os.path.join(config.pax_src_root, "test", "models", "check_summary.py")))
config.substitutions.append(("%force-strategy", config.python_executable + " " +
                             os.path.join(config.pax_src_root, "tools", "models", "force_strategy.py")))

# The onnxruntime-training reference of the training steps
# (test/models/ort_train_reference.py) runs in a venv of its own, which
# tools/dev/ortrain_env.sh fills (tools/dev/test.sh runs it): "ortrain" and
# %ortrain-python when that venv is complete, at $PAX_ORTRAIN_VENV or else
# <build dir>/ortrain-venv.
ortrain_venv = os.environ.get("PAX_ORTRAIN_VENV") or os.path.join(config.pax_obj_root, "ortrain-venv")
ortrain_python = os.path.join(ortrain_venv, "bin", "python")
if os.path.exists(os.path.join(ortrain_venv, ".ortrain_requirements.sha256")) and \
        os.access(ortrain_python, os.X_OK):
    config.available_features.add("ortrain")
    config.substitutions.append(("%ortrain-python", ortrain_python))

# Built with -fsanitize=address,undefined (PAX_SANITIZE). The MPI tests are
# unsupported there: Open MPI leaves allocations behind at MPI_Finalize
# (in MPI_Init, its progress thread and its plugins), which LeakSanitizer
# reports as leaks of every rank.
if config.pax_sanitize:
    config.available_features.add("sanitizer")

# paxrun built with MPI: "paxrun-mpi"; and an MPI launcher to start it:
# "mpi", and %mpirun (Open MPI's needs leave to run as root, as in
# containers, and to start more ranks than there are cores).
if config.pax_have_mpi:
    config.available_features.add("paxrun-mpi")
if config.pax_have_mpi and config.mpiexec and os.path.exists(config.mpiexec):
    version = subprocess.run([config.mpiexec, "--version"], capture_output=True, text=True)
    openmpi = "Open MPI" in version.stdout or "OpenRTE" in version.stdout
    flags = " --allow-run-as-root --oversubscribe" if openmpi else ""
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", config.mpiexec + flags))

# paxrun built with the CUDA backend: "cuda"; and a GPU to run it on:
# "gpu" (tests that need one are reported unsupported elsewhere).
if config.pax_have_cuda:
    config.available_features.add("cuda")
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        if listed.returncode == 0 and "GPU" in listed.stdout:
            config.available_features.add("gpu")
    except (OSError, subprocess.TimeoutExpired):
        pass
