"""`scripts/uv_pip_install.py`: uv (which reads no pip configuration) gets what pip's configuration of the machine
says, so `scripts/setup.sh` installs from the same places as pip would: the `find-links` folder with the CPU torch
wheel, the local indexes, the constraint files, and the best version over all indexes."""
from __future__ import annotations

import importlib.util
import sys

from conftest import REPO

SCRIPT = REPO / "scripts" / "uv_pip_install.py"


def helper():
    spec = importlib.util.spec_from_file_location("uv_pip_install", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_settings_become_uvs_options_a_variable_over_install_over_global():
    settings = {"global.find-links": "/opt/wheels", "global.extra-index-url": "file:///a/simple file:///b/simple",
                "global.constraint": "/etc/pip/c.txt", "global.index-url": "https://global/simple",
                "install.index-url": "https://install/simple", ":env:.find-links": "/w1 /w2",
                ":env:.no-index": "true", "global.cert": "/etc/ssl/ca.crt"}
    assert helper().uv_options(settings) == [
        "--index-strategy", "unsafe-best-match", "--index-url", "https://install/simple",
        "--find-links", "/w1", "--find-links", "/w2",
        "--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple",
        "--constraint", "/etc/pip/c.txt", "--no-index"]
    assert helper().uv_options({}) == ["--index-strategy", "unsafe-best-match"]  # pip's defaults are uv's


def test_pips_own_view_of_its_configuration_is_read_variables_included(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/one/folder /another")
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/bundle.crt")
    module = helper()
    monkeypatch.setattr(module.sys, "executable", sys.executable)  # this environment's pip
    settings = module.pip_settings()
    assert settings[":env:.find-links"] == "/one/folder /another"
    assert module.effective(settings, "cert") == "/etc/ssl/certs/bundle.crt"
    options = module.uv_options(settings)
    assert options[options.index("/one/folder") - 1] == "--find-links" and "/another" in options
