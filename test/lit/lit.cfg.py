# lit configuration for paxc's FileCheck tests.
import os
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
config.substitutions.append(("%gen", config.python_executable + " " +
                             os.path.join(config.pax_src_root, "tools", "models", "paxmodels.py")))
config.substitutions.append(("%check-summary", config.python_executable + " " +
                             os.path.join(config.pax_src_root, "test", "models", "check_summary.py")))
