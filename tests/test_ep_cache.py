"""The cached entry-point index: invalidated by installs and removals, never trusted blindly, same plugins.

Distributions here are real metadata directories on ``sys.path`` (as pip
leaves them) and, in the last tests, real ``pip install`` runs; the index is
compared with what :mod:`importlib.metadata` lists without it.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, last_json, pip_install_target
from ezpz.plugin_host import ep_cache
from ezpz.primitives import bookkeeping_dir
from ezpz.plugin_host.host import PluginHost
from ezpz.inputs.settings import PluginSettings

PAST = time.time() - 3600  # older than the racy window, as any environment installed a while ago


def _dist(site: Path, name: str, eps: dict[str, str], group: str = "ezpz") -> Path:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in eps.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}[console_scripts]\n{name} = x:main\n")
    os.utime(info / "entry_points.txt", (PAST, PAST))
    os.utime(site, (PAST, PAST))
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site directory with two plugin distributions and one unrelated one, first on ``sys.path``."""
    site = tmp_path / "site"
    site.mkdir()
    _dist(site, "plug-a", {"alpha": "plug_a.plugin"})
    _dist(site, "plug-b", {"beta": "plug_b:hooks"})
    _dist(site, "unrelated", {}, group="other")
    # the installed environment, without the test directories (which this very session may be writing to)
    monkeypatch.setattr(sys, "path", [str(site), *_installed_path()])
    return site


def _installed_path() -> list[str]:
    return [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix))]


def _names(eps) -> list[tuple[str, str]]:
    return [(ep.name, ep.value) for ep in eps]


def _truth(group: str = "ezpz") -> list[tuple[str, str]]:
    return _names(importlib.metadata.entry_points(group=group))


def _lookup(cache: Path, group: str = "ezpz") -> list[tuple[str, str]]:
    return _names(ep_cache.entry_points(group, directory=cache))


def _index_file(cache: Path) -> Path:
    (file,) = cache.glob("*.json")
    return file


def test_the_index_is_written_then_used_and_lists_what_importlib_metadata_lists(site, tmp_path):
    cache = tmp_path / "cache"
    first = _lookup(cache)
    assert ep_cache.last_status() == "miss: nothing cached yet; index written"
    assert ("alpha", "plug_a.plugin") in first and ("beta", "plug_b:hooks") in first
    assert _lookup(cache) == first == _truth()
    assert ep_cache.last_status() == "hit"
    assert _lookup(cache, "ezpz.launchers") == _truth("ezpz.launchers")
    assert os.stat(_index_file(cache)).st_mode & 0o077 == 0 and os.stat(cache).st_mode & 0o077 == 0


def test_installing_a_plugin_invalidates_the_index(site, tmp_path):
    cache = tmp_path / "cache"
    _lookup(cache)
    _dist(site, "plug-c", {"gamma": "plug_c"})
    os.utime(site)  # the install happened now, as pip's would
    listed = _lookup(cache)
    assert ep_cache.last_status().startswith("miss: sys.path entry ")
    assert ("gamma", "plug_c") in listed and listed == _truth()


def test_removing_a_plugin_invalidates_the_index(site, tmp_path):
    cache = tmp_path / "cache"
    assert ("beta", "plug_b:hooks") in _lookup(cache)
    for f in (site / "plug_b-1.0.dist-info").iterdir():
        f.unlink()
    (site / "plug_b-1.0.dist-info").rmdir()
    listed = _lookup(cache)
    assert ep_cache.last_status().startswith("miss: sys.path entry ")
    assert ("beta", "plug_b:hooks") not in listed and listed == _truth()


def test_an_edited_entry_points_file_of_an_indexed_plugin_is_read_as_it_is_now(site, tmp_path):
    cache = tmp_path / "cache"
    _lookup(cache)
    (site / "plug_a-1.0.dist-info" / "entry_points.txt").write_text("[ezpz]\nalpha2 = plug_a.other\n")
    listed = _lookup(cache)
    assert ep_cache.last_status() == "hit"
    assert ("alpha2", "plug_a.other") in listed and ("alpha", "plug_a.plugin") not in listed and listed == _truth()


def test_writing_to_a_directory_without_distributions_keeps_the_index(site, tmp_path, monkeypatch):
    """The script's directory is on sys.path and the job may write there; only metadata directories matter."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    os.utime(workdir, (PAST, PAST))
    monkeypatch.setattr(sys, "path", [str(workdir), *sys.path])
    cache = tmp_path / "cache"
    _lookup(cache)
    (workdir / "checkpoint.pt").write_text("")
    assert _lookup(cache) == _truth() and ep_cache.last_status() == "hit"
    os.utime(workdir)  # busy right now: indexed as "list it each time"
    _lookup(cache)
    (workdir / "log.txt").write_text("")
    assert _lookup(cache) == _truth() and ep_cache.last_status() == "hit"
    _dist(workdir, "plug-w", {"omega": "plug_w"})  # a distribution there does count
    os.utime(workdir)
    assert ("omega", "plug_w") in _lookup(cache) and ep_cache.last_status().startswith("miss: sys.path entry ")


def test_an_index_built_while_the_environment_changes_is_not_written(site, tmp_path):
    os.utime(site)  # modified just now: a concurrent install may still be writing within this mtime tick
    cache = tmp_path / "cache"
    assert _lookup(cache) == _truth()
    assert "not written (sys.path changed during the scan or moments before it)" in ep_cache.last_status()
    assert not list(cache.glob("*.json"))


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda f: f.write_text("{not json"), "not JSON"),
    (lambda f: f.write_bytes(b"\xff\xfe"), "not UTF-8"),
    (lambda f: f.write_text("[1, 2]"), "not an ezpz entry-point index"),
    (lambda f: f.chmod(0o666), "writable by group or others"),
    (lambda f: os.chown(f, 4242, -1) if os.getuid() == 0 else pytest.skip("chown needs root"), "owned by uid 4242"),
])
def test_a_corrupt_or_untrusted_index_is_ignored_with_a_reason(site, tmp_path, damage, reason):
    cache = tmp_path / "cache"
    _lookup(cache)
    damage(_index_file(cache))
    assert _lookup(cache) == _truth()
    assert ep_cache.last_status().startswith("miss: ") and reason in ep_cache.last_status()


def test_a_symlinked_index_is_not_followed(site, tmp_path):
    cache = tmp_path / "cache"
    _lookup(cache)
    file = _index_file(cache)
    real = tmp_path / "elsewhere.json"
    file.rename(real)
    file.symlink_to(real)
    assert _lookup(cache) == _truth()
    assert ep_cache.last_status().startswith("miss: cannot open")


def test_an_index_naming_a_directory_off_sys_path_is_ignored(site, tmp_path):
    """A hostile index cannot make discovery read (let alone import) a distribution that is not installed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    evil = _dist(elsewhere, "evil", {"cpu": "evil.module"})
    cache = tmp_path / "cache"
    _lookup(cache)
    file = _index_file(cache)
    data = json.loads(file.read_text())
    data["dirs"].insert(0, str(evil))
    file.write_text(json.dumps(data))
    listed = _lookup(cache)
    assert "not a metadata directory directly on sys.path" in ep_cache.last_status()
    assert ("cpu", "evil.module") not in listed and listed == _truth()


def test_an_unwritable_cache_location_moves_the_index_to_the_per_user_fallback_else_means_no_index(
        site, tmp_path, monkeypatch, caplog):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the fallback root goes under it
    bookkeeping_dir.forget()
    blocker = tmp_path / "file"
    blocker.write_text("")  # a directory under a regular file cannot be created, even by root
    with caplog.at_level(logging.WARNING, logger="ezpz.bookkeeping"):
        assert _lookup(blocker / "cache") == _truth()
        assert ep_cache.last_status() == "miss: nothing cached yet; index written"
        assert _lookup(blocker / "cache") == _truth() and ep_cache.last_status() == "hit"  # read from the fallback
    [said] = [r.getMessage() for r in caplog.records if r.name == "ezpz.bookkeeping"]  # once, not per write
    instead = tmp_path / "tmp" / f"ezpz-{os.getuid()}" / str(blocker / "cache").lstrip("/")
    assert f"path={blocker / 'cache'}" in said and f"instead={instead}" in said and "Not a directory" in said
    assert _index_file(instead).stat().st_mode & 0o777 == 0o600

    bookkeeping_dir.forget()
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))  # no usable temporary directory either
    assert _lookup(tmp_path / "file" / "other") == _truth()
    assert "; not written (" in ep_cache.last_status()


def test_only_the_first_rank_of_a_job_writes_the_index(site, tmp_path):
    assert PluginSettings.from_environ({"RANK": "3"}).entry_point_cache_writer is False
    assert PluginSettings.from_environ({"PMI_RANK": "0", "RANK": "0"}).entry_point_cache_writer is True
    cache = tmp_path / "cache"
    assert _names(ep_cache.entry_points("ezpz", directory=cache, write=False)) == _truth()
    assert ep_cache.last_status().endswith("not written (only the first rank of a job writes it)")
    assert not list(cache.glob("*.json"))


def test_switched_off_it_neither_reads_nor_writes(site, tmp_path):
    cache = tmp_path / "cache"
    assert _names(ep_cache.entry_points("ezpz", directory=cache, enabled=False)) == _truth()
    assert ep_cache.last_status() == "off: EZPZ_CACHE=0" and not cache.exists()
    assert PluginSettings.from_environ({"EZPZ_CACHE": "0"}).entry_point_cache is False


def test_the_cache_location_follows_xdg_and_needs_an_absolute_path(tmp_path):
    assert ep_cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "ezpz" / "entry-points"
    assert ep_cache.cache_dir({"XDG_CACHE_HOME": "relative"}) != Path("relative") / "ezpz" / "entry-points"


def _records(host: PluginHost) -> dict:
    return {k: (r.status, r.target, r.builtin, r.dist_name, r.dist_version, r.reason) for k, r in host.records.items()}


def test_the_same_plugins_load_from_the_index_as_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(sys, "path", _installed_path())
    without = PluginHost(PluginSettings(entry_point_cache=False))
    without.discover()
    first, second = PluginHost(), PluginHost()
    first.discover()
    second.discover()
    assert ep_cache.last_status() == "hit"
    assert _records(first) == _records(second) == _records(without)
    assert {"cpu", "launchers"} <= set(second.loaded())


# -- real pip installs, real interpreters ------------------------------------------------------------------------
CHILD = ("import json, ezpz\nfrom ezpz.plugin_host import ep_cache\n"
         "print(json.dumps({'status': ep_cache.last_status(), "
         "'records': {k: r.status for k, r in ezpz.hooks.get_plugin_host().records.items()}}))")


def _child(target: Path, xdg: Path, **env: str) -> dict:
    cwd = xdg.parent / "cwd"  # sys.path[0] of `python -c`: a directory nobody writes to meanwhile
    cwd.mkdir(exist_ok=True)
    os.utime(cwd, (PAST, PAST))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=clean_env(PYTHONPATH=str(target), XDG_CACHE_HOME=str(xdg),
                                                                      **env), cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return last_json(proc.stdout)


def _pip_install(target: Path, *projects: str) -> None:
    pip_install_target(target, *(ROOT / "tests" / "plugins" / p for p in projects), upgrade=True)


def test_a_real_pip_install_and_removal_are_seen_through_the_index(tmp_path):
    target, xdg = tmp_path / "target", tmp_path / "xdg"
    _pip_install(target, "ezpz-test-good")
    os.utime(target, (PAST, PAST))
    truth = _child(target, xdg, EZPZ_CACHE="0")["records"]
    assert truth.get("test-good") == "loaded"
    built = _child(target, xdg)
    assert built["status"].endswith("index written") and built["records"] == truth
    used = _child(target, xdg)
    assert used["status"] == "hit" and used["records"] == truth

    _pip_install(target, "ezpz-test-sentinel")  # pip adds a dist-info directory to the target
    added = _child(target, xdg)
    assert added["status"].startswith("miss: sys.path entry ")
    assert added["records"] == _child(target, xdg, EZPZ_CACHE="0")["records"]
    assert "test-sentinel" in added["records"] and "test-good" in added["records"]

    (good_info,) = target.glob("ezpz_test_good-*.dist-info")  # what `pip uninstall` removes
    subprocess.run(["rm", "-rf", str(good_info), str(target / "ezpz_test_good")], check=True)
    removed = _child(target, xdg)
    assert removed["status"].startswith("miss: sys.path entry ")
    assert "test-good" not in removed["records"] and "test-sentinel" in removed["records"]


# -- a job started in a directory created moments before (mkdir run-N && cd run-N && python ...) ------------------
STATUS = "from ezpz.plugin_host import ep_cache\nprint(ep_cache.last_status())\n"


def _in_new_directory(tmp_path: Path, name: str, argv: str, **env: str) -> str:
    """``mkdir NAME && cd NAME && ARGV`` in a real shell; the index status the child printed."""
    proc = subprocess.run(["sh", "-c", f"mkdir {name} && cd {name} && {argv}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=clean_env(XDG_CACHE_HOME=str(tmp_path / "xdg"), **env))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_python_c_in_a_directory_created_moments_before_writes_the_index_and_the_next_one_uses_it(tmp_path):
    """Was: the new directory's stamp was set aside as "busy", so the comparison with the stamps before the scan
    always differed: "not written (sys.path changed ...)", and every rank of every job scanned every distribution."""
    code = f"{sys.executable} -c 'import ezpz\n{STATUS}'"
    started = time.monotonic()
    first = _in_new_directory(tmp_path, "d", code)
    second = _in_new_directory(tmp_path, "e", code)
    assert first == "miss: nothing cached yet; index written", first
    assert second == "hit", second
    assert time.monotonic() - started < 60  # the point is two jobs in quick succession; seconds on a busy machine
    assert len(list((tmp_path / "xdg").rglob("*.json"))) == 1  # one index, not one per job directory


def test_python_m_jobs_each_in_a_new_directory_share_one_index(tmp_path):
    """``mkdir run-N && cd run-N && python -m job``: sys.path[0] is a new absolute directory every time."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "job.py").write_text(f"import ezpz\n{STATUS}")
    os.utime(lib, (PAST, PAST))
    seen = [_in_new_directory(tmp_path, f"run-{n}", f"{sys.executable} -m job", PYTHONPATH=str(lib))
            for n in range(3)]
    assert seen[0].endswith("index written") and seen[1:] == ["hit", "hit"], seen
    assert len(list((tmp_path / "xdg").rglob("*.json"))) == 1


def test_a_main_module_directory_that_holds_a_distribution_is_not_left_out(site, tmp_path, monkeypatch):
    """The first sys.path entry is left out of the key only while it holds no distributions: one that does
    (a script run from a site directory) must be the one the index was built for."""
    here, there = tmp_path / "here", tmp_path / "there"
    for d in (here, there):
        d.mkdir()
        os.utime(d, (PAST, PAST))
    rest = list(sys.path)
    cache = tmp_path / "cache"
    monkeypatch.setattr(sys, "path", [str(here), *rest])
    _lookup(cache)
    monkeypatch.setattr(sys, "path", [str(there), *rest])  # another job's directory, also without distributions
    assert _lookup(cache) == _truth() and ep_cache.last_status() == "hit"
    _dist(there, "plug-t", {"tau": "plug_t"})  # ... but this one holds a plugin
    os.utime(there, (PAST + 60, PAST + 60))  # installed a while ago, after the index was built
    listed = _lookup(cache)
    assert ep_cache.last_status() == "miss: built for another sys.path; index written"
    assert ("tau", "plug_t") in listed and listed == _truth()
    monkeypatch.setattr(sys, "path", [str(here), *rest])
    assert _lookup(cache) == _truth() and ep_cache.last_status().startswith("miss: built for another sys.path")
