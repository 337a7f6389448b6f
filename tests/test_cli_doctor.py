"""``ezpz doctor`` run as a user would: the decision trace, broken plugins, impossible overrides, secrets."""

from __future__ import annotations

import json

import pytest

import ezpz as ezpz_pkg
from conftest import clean_env
from test_cli_support import broken_plugin, ezpz, with_pythonpath


def _doctor_json(**env: str) -> tuple[int, dict]:
    proc = ezpz("doctor", "--json", env=clean_env(**env))
    return proc.returncode, json.loads(proc.stdout)


def test_doctor_json_holds_the_decision_trace():
    code, report = _doctor_json()
    assert code == 0 and report["ok"] is True and report["problems"] == []
    by_topic = {d["topic"]: d for d in report["decisions"]}
    assert {"torch", "launch", "device", "backend", "precision", "profiling"} <= set(by_topic)
    for topic in ("launch", "device", "backend", "precision", "profiling"):
        assert by_topic[topic]["chosen"] and by_topic[topic]["reason"], topic
    assert by_topic["device"]["chosen"] == "cpu"
    assert by_topic["backend"]["chosen"] == "gloo"
    assert by_topic["precision"]["chosen"].split()[0] in ("bf16", "fp16", "fp32")
    assert by_topic["launch"]["chosen"].startswith("single")
    for alt in by_topic["device"]["alternatives"] + by_topic["launch"]["alternatives"]:
        assert alt["name"] and alt["reason"]  # every rejected candidate says why
    assert report["torch"]["version"] and "gloo" in report["torch"]["distributed_backends"]
    assert {p["name"]: p["status"] for p in report["plugins"]}["cpu"] == "loaded"
    assert report["launcher"]["reason"]
    placement = report["python_environment"]  # where this venv lives: this machine's fact, so only its shape
    assert placement["where"] in ("node-local", "shared", "staged", "unknown") and placement["reason"]


def test_doctor_says_where_each_rank_value_came_from():
    code, report = _doctor_json(RANK="1", WORLD_SIZE="4", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2",
                                MASTER_ADDR="127.0.0.1", MASTER_PORT="29511")
    assert code == 0
    launch = next(d for d in report["decisions"] if d["topic"] == "launch")
    assert "rank 1/4" in launch["chosen"]
    assert "RANK" in launch["details"]["rank"] and "WORLD_SIZE" in launch["details"]["world_size"]
    assert report["environment"]["RANK"] == "1"


def test_doctor_text_ends_ok():
    proc = ezpz("doctor")
    assert proc.returncode == 0, proc.stderr
    for section in ("plugins", "setup() here would decide", "device: cpu", "backend: gloo", "precision:",
                    "profiling:", "launch:", "ezpz launch here would use", "python environment (ezpz stage)",
                    "environment"):
        assert section in proc.stdout
    assert proc.stdout.rstrip().endswith("ok: nothing broken")


def test_quarantined_plugin_fails_doctor_and_is_named(tmp_path):
    env = with_pythonpath(clean_env(), broken_plugin(tmp_path / "site"))
    text = ezpz("doctor", env=env)
    assert text.returncode == 1
    assert "broken" in text.stdout and "FAILED" in text.stdout and "vendor SDK missing" in text.stdout
    assert "EZPZ_DISABLE_PLUGINS=broken" in text.stdout  # the fix
    proc = ezpz("doctor", "--json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["ok"] is False
    (row,) = [p for p in report["plugins"] if p["name"] == "broken"]
    assert row["status"] == "failed" and row["stage"] == "import" and (row["distribution"], row["version"]) == (
        "ezpz-broken", "1.2.3")
    assert any("'broken'" in p["what"] and "EZPZ_DISABLE_PLUGINS=broken" in p["fix"] for p in report["problems"])
    # setup() itself still works without it: the trace is there
    assert any(d["topic"] == "device" for d in report["decisions"])
    # and disabling it, as the fix says, makes doctor pass
    assert ezpz("doctor", env={**env, "EZPZ_DISABLE_PLUGINS": "broken"}).returncode == 0


@pytest.mark.parametrize(("var", "value"), [("EZPZ_DEVICE", "nonexistent"), ("EZPZ_PRECISION", "bogus"),
                                            ("TORCH_DEVICE", "nonexistent")])
def test_impossible_override_fails_doctor_with_the_fix(var, value):
    code, report = _doctor_json(**{var: value})
    assert code == 1 and report["ok"] is False
    assert report["error"]["name"] == var and report["error"]["value"] == value and report["error"]["fix"]
    (problem,) = report["problems"]
    assert var in problem["what"] and problem["fix"] == report["error"]["fix"]
    if var == "EZPZ_DEVICE":  # the text form says the same
        text = ezpz("doctor", env=clean_env(**{var: value}))
        assert text.returncode == 1 and f"{var}='{value}'" in text.stdout and "fix:" in text.stdout


def test_inconsistent_launcher_variables_fail_doctor():
    code, report = _doctor_json(RANK="5", WORLD_SIZE="2")
    assert code == 1 and report["error"]["name"] == "RANK"


def test_secrets_are_redacted():
    env = clean_env(FOO_TOKEN="s3cret-foo", EZPZ_API_TOKEN="s3cret-ezpz", NCCL_PASSWORD="s3cret-nccl",
                    EZPZ_HUB_KEY="s3cret-key", EZPZ_DEVICE="cpu")
    for args in (["doctor"], ["doctor", "--json"]):
        proc = ezpz(*args, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "s3cret" not in proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["environment"]["EZPZ_API_TOKEN"] == "<redacted>"
    assert report["environment"]["EZPZ_HUB_KEY"] == "<redacted>"
    assert report["environment"]["EZPZ_DEVICE"] == "cpu"


def test_secret_in_a_plugin_error_is_scrubbed(tmp_path):
    plugin = broken_plugin(tmp_path / "site", "bad token hf_s3cretvalue")
    env = with_pythonpath(clean_env(HF_TOKEN="hf_s3cretvalue"), plugin)
    proc = ezpz("doctor", "--json", env=env)
    assert proc.returncode == 1 and "hf_s3cretvalue" not in proc.stdout and "<redacted>" in proc.stdout


def test_version_and_python_m_are_the_same_cli():
    proc = ezpz("--version")
    assert proc.returncode == 0 and proc.stdout.startswith(f"ezpz {ezpz_pkg.__version__} (") and "torch" in proc.stdout
    assert ezpz("--help").stdout.count("doctor") >= 1
