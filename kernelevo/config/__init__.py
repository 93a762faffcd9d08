"""The `kernelevo` commands' configuration, as code: the typed schema (``schema``, the one home of every default; a
plug-in's, its class: ``plugins``), the config groups registered from the packages that own their data
(``groups``), the config's interpolations (``resolvers``) and Hydra's repositories sharing the one ConfigStore
(``store_sharing``). The YAML files choosing among the schema's options are ``conf/`` (``CONF_DIR``: Hydra's primary
config folder, beside this package in the repository and in site-packages alike); each command's plan is made from
the composed config by ``kernelevo.plans``, and the command line is checked against it by ``kernelevo.validate``.

Importing this package registers all of it, once, before Hydra composes or resolves anything.
"""
from pathlib import Path

from kernelevo.config import groups, plugins, resolvers, schema, store_sharing

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"  # the Hydra YAML: one config per command, the groups

resolvers.register()
schema.register()
plugins.register()
groups.register()
store_sharing.share_the_config_store()
