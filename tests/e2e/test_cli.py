"""The command line: --version, --help, verbs, usage errors."""
import re

from conftest import run_hearth


def verbs_from_help(text):
    section = text.split("verbs:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^  (\w+)\s", section, re.M)]


def test_version():
    r = run_hearth("--version")
    assert r.returncode == 0
    assert re.fullmatch(r"hearth \d+\.\d+\.\d+\n", r.stdout)


def test_help_lists_verbs_and_each_has_help():
    r = run_hearth("--help")
    assert r.returncode == 0
    verbs = verbs_from_help(r.stdout)
    assert "devices" in verbs
    for v in verbs:
        h = run_hearth(v, "--help")
        assert h.returncode == 0, v
        assert "usage: hearth " + v in h.stdout


def test_unknown_verb_is_usage_error():
    r = run_hearth("frobnicate")
    assert r.returncode == 2
    assert "unknown verb 'frobnicate'" in r.stderr


def test_unknown_top_level_flag():
    r = run_hearth("--frob")
    assert r.returncode == 2
    assert "unknown option '--frob'" in r.stderr


def test_unknown_verb_flag():
    for v in verbs_from_help(run_hearth("--help").stdout):
        r = run_hearth(v, "--no-such-flag")
        assert r.returncode == 2, v
        assert "--no-such-flag" in r.stderr, v


def test_no_arguments_prints_usage():
    r = run_hearth()
    assert r.returncode == 2
    assert "usage: hearth" in r.stderr


def test_devices_reports_cpu():
    r = run_hearth("devices")
    assert r.returncode == 0
    assert re.search(r"^cpu: \d+ cores", r.stdout, re.M)
