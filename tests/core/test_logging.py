"""What kernelevo tells as it works goes through ``logging`` (``kernelevo.core.log``): one handler on the ``kernelevo``
logger,
installed by the command (and here by the conftest), gives each line its ``[kernelevo]`` prefix, on stdout (warnings
on stderr) as the lines printed before, and nothing reaches the root logger's handlers (Hydra's job log)."""
import ast
import logging

from conftest import REPO
from kernelevo.core.log import Console, configure

PACKAGES = ("hardware_profiles", "fitness", "operators", "evo", "kernelevo")


class Kept(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_a_modules_lines_get_the_prefix_on_stdout_warnings_on_stderr_and_none_reach_the_root(capsys):
    root = Kept()
    logging.getLogger().addHandler(root)
    try:
        logger = configure()
        assert configure() is logger and sum(isinstance(h, Console) for h in logger.handlers) == 1  # once
        log = logging.getLogger("kernelevo.evo.somewhere")
        log.info("resuming %s", "D")
        log.debug("not shown")
        log.warning("WARNING: candidate workers run without %s confinement", "pid")
        out, err = capsys.readouterr()
        assert out == "[kernelevo] resuming D\n"
        assert err == "[kernelevo] WARNING: candidate workers run without pid confinement\n"
        assert root.records == []  # Hydra's console and commands.log handlers hang there
    finally:
        logging.getLogger().removeHandler(root)


def test_no_module_prints_a_kernelevo_line_itself():
    """Every ``[kernelevo] ...`` line is a log record: no ``print("[kernelevo] ...")`` left in the packages (the
    generation lines of a run keep their own print: ``[kernelevo seed N]`` names the search seed in a sweep)."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args:
                    first = node.args[0]
                    text = first.values[0] if isinstance(first, ast.JoinedStr) and first.values else first
                    if isinstance(text, ast.Constant) and str(text.value).startswith("[kernelevo] "):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []
