"""The run store's meta keys have one home, ``evo.records.meta``: every key the product reads or writes is declared
there (by name, never a string literal at the call), and the declared strings are the ones older run.db files hold."""
import ast

from conftest import REPO
from evo.records import meta
from evo.records.store import RunStore

PRODUCT = ("fitness", "operators", "evo", "kernelevo")
CALLS = {"get_meta", "set_meta", "_count"}
# the store's own methods pass their parameter on: not a key of their own
PASSED_ON = {("evo/records/store.py", "key"), ("evo/records/store.py", "name")}
DECLARED = {name: value for name, value in vars(meta).items() if name.isupper() and isinstance(value, str)}


def meta_names(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """The module's names bound to a key of evo.records.meta (``from evo.records.meta import X [as Y]``), and its
    names for the module itself (``from evo.records import meta``)."""
    keys, modules = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "evo.records.meta":
            keys.update({alias.asname or alias.name: alias.name for alias in node.names})
        if isinstance(node, ast.ImportFrom) and node.module == "evo.records":
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "meta")
    return keys, modules


def keys_used() -> tuple[dict[str, list[str]], list[str]]:
    """Each declared key the product's calls name -> where; and the calls that name a key some other way."""
    used, other = {}, []
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            where = str(path.relative_to(REPO))
            keys, modules = meta_names(tree)
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in CALLS and node.args):
                    continue
                arg, at = node.args[0], f"{where}:{node.lineno}"
                if isinstance(arg, ast.Name) and arg.id in keys:
                    used.setdefault(keys[arg.id], []).append(at)
                elif (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id in modules
                      and arg.attr in DECLARED):
                    used.setdefault(arg.attr, []).append(at)
                elif not (isinstance(arg, ast.Name) and (where, arg.id) in PASSED_ON):
                    other.append(f"{at}: {ast.unparse(arg)}")
    return used, other


def test_every_key_the_product_reads_or_writes_is_declared_in_the_one_home():
    used, other = keys_used()
    assert not other, f"meta keys not named from evo.records.meta (declare them there): {other}"
    assert set(used) <= set(DECLARED), set(used) - set(DECLARED)
    assert {"CONFIG", "STOP_REASON", "SEED_CHECK_S", "SIZES_CHECK", "EVALUATIONS_CUT"} <= set(used)  # the scan sees
    unused = set(DECLARED) - set(used)
    assert not unused, f"declared in evo.records.meta but never read or written: {unused}"


def test_the_declared_keys_are_distinct_and_all_in_keys():
    assert len(set(DECLARED.values())) == len(DECLARED) and set(DECLARED.values()) == meta.KEYS


def test_the_keys_are_the_strings_older_stores_hold(tmp_path):
    """Renaming a key would leave an older run.db's value unread: these are the strings runs have stored."""
    assert meta.KEYS == {"schema_version", "config", "manifest", "stop_reason", "supply_evaluators",
                         "infrastructure_failures", "evaluations_cut", "start_up", "start_up_under_lock",
                         "baseline_wall_s", "baseline_cache", "baseline_jobs", "baselines_ieee_s", "tf32_incorrect",
                         "seed_wall_s", "seed_check_s", "seed_capture_s", "seed_cache", "verdicts_reused",
                         "rewritten_seed", "sizes_check", "sizes_label"}
    store = RunStore(tmp_path)
    store.set_meta(meta.CONFIG, {"problem": {"name": "toy"}})
    store.add_evaluation_cut()
    store.close()
    assert RunStore.saved_run(tmp_path) == {"problem": {"name": "toy"}}
    read = RunStore(tmp_path, create=False)
    assert (read.get_meta("config"), read.get_meta("schema_version"), read.evaluations_cut()) == \
        ({"problem": {"name": "toy"}}, 2, 1)
