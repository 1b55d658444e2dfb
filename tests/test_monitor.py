"""The live monitor against a fake NVML: /metrics names, labels and values as dcgm-exporter
shows them, workload labels, Nsight Compute, bad input, the recorded table; and one scrape by a
real Prometheus server (skipped where its binary is absent)."""

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from tests.fixtures.fake_nvml import EXPECTED, NAME, UUID, MonitorNVML
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.workload import LABELS, STATUS_ENV, clear, publish, read_status
from yolo_sm.topics.monitor import collect as monitor_mod
from yolo_sm.topics.monitor.collect import DEVICE_LABELS, FIELDS, PAUSED_METRIC, Monitor, prof_means

pc = pytest.importorskip("prometheus_client")  # the monitor extra
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from yolo_sm.topics.monitor.collect_exporter import serve, write_record  # noqa: E402

INTERVAL = 0.2


def make(nvml=None, ncu=lambda: False, **kw):
    return Monitor(0, INTERVAL, nvml=nvml or MonitorNVML(), hostname="box", ncu_check=ncu, **kw)


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def scrape(url) -> dict:
    """name -> [(labels, value)] of every sample at ``url``."""
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


@pytest.fixture
def running():
    mon = make()
    server = serve(mon, port=0, address="127.0.0.1")
    with mon:
        yield mon, server
    server.close()


def test_metrics_carry_dcgm_names_labels_and_units(running):
    mon, server = running
    mon.mark(workload="bench", model="yolov8:1", engine="eager/fp16/nhwc", batch=16)
    wait_for(lambda: mon.ticks >= 2 and len(mon.snapshot()["values"]) == len(FIELDS))
    got = scrape(server.url)
    assert set(FIELDS) <= set(got)
    for name, want in EXPECTED.items():
        (labels, value), *more = got[name]
        assert not more, f"{name}: one series per GPU"
        assert value == pytest.approx(want, rel=1e-9), name
        assert set(labels) == {*DEVICE_LABELS, *LABELS}
        assert labels["gpu"] == "0" and labels["UUID"] == UUID and labels["modelName"] == NAME
        assert labels["device"] == "nvidia0" and labels["pci_bus_id"] == "00000000:19:00.0"
        assert labels["Hostname"] == "box"
        assert (labels["engine"], labels["batch"], labels["workload"]) == (
            "eager/fp16/nhwc",
            "16",
            "bench",
        )
    for name in FIELDS:  # PROF fields are ratios 0-1 as dcgm-exporter's
        if name.startswith("DCGM_FI_PROF"):
            assert 0 <= got[name][0][1] <= 1
    assert got[PAUSED_METRIC][0][1] == 0


def test_a_label_change_replaces_the_series(running):
    mon, server = running
    mon.mark(engine="a")
    wait_for(lambda: mon.snapshot()["labels"].get("engine") == "a")
    mon.mark(engine="b")
    wait_for(lambda: mon.snapshot()["labels"].get("engine") == "b")
    engines = {lab["engine"] for lab, _ in scrape(server.url)["DCGM_FI_DEV_SM_CLOCK"]}
    assert engines == {"b"}  # no stale series of the old label set


WRITER = """
import sys, time
from yolo_sm.contract.workload import publish
publish(workload="sweep", engine="cudagraph/fp16/nhwc", batch=4)
print("published", flush=True)
time.sleep(60)
"""


def test_labels_come_from_the_status_file_while_its_writer_lives(tmp_path):
    clear()  # nothing published in this process: the file's labels count
    path = tmp_path / "status.json"
    env = {**os.environ, STATUS_ENV: str(path)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "published"
        want = {"workload": "sweep", "engine": "cudagraph/fp16/nhwc", "batch": 4}
        assert read_status(path) == want
        mon = make(status_file=path)
        with mon:
            wait_for(lambda: mon.snapshot()["labels"] == want)
            mon.mark(engine="in-process")  # the process's own labels win
            wait_for(lambda: mon.snapshot()["labels"] == {"engine": "in-process"})
            mon.mark(engine=None)
            wait_for(lambda: mon.snapshot()["labels"] == want)
            writer.kill()
            writer.wait()
            # a file left by a process that has exited labels nothing
            wait_for(lambda: mon.snapshot()["labels"] == {})
    finally:
        writer.kill()
        writer.wait()
    assert path.exists() and read_status(path) == {}
    assert read_status(tmp_path / "absent.json") == {} and read_status(None) == {}
    path.write_text("{not json")
    assert read_status(path) == {}
    with pytest.raises(ValueError, match="unknown workload label"):
        publish(stage="x")


def test_a_workload_in_the_same_process_labels_the_samples(tmp_path, monkeypatch):
    monkeypatch.setenv(STATUS_ENV, str(tmp_path / "s.json"))
    mon = make()
    with mon:
        publish(workload="bench", engine="eager/fp16/nhwc", batch=2)
        try:
            wait_for(lambda: mon.snapshot()["labels"].get("engine") == "eager/fp16/nhwc")
        finally:
            clear()
        wait_for(lambda: mon.snapshot()["labels"] == {})
    assert json.loads((tmp_path / "s.json").read_text())["labels"] == {}


def test_prof_fields_are_window_weighted_means_as_ratios():
    rows = [
        {"metric": "sm_occupancy_pct", "value": 10.0, "window_s": 0.1},
        {"metric": "sm_occupancy_pct", "value": 40.0, "window_s": 0.3},
        {"metric": "dram_bw_util_pct", "value": math.nan, "window_s": 0.1},
        {"metric": "sm_util_pct", "value": 50.0, "window_s": 0.0},
    ]
    got = prof_means(rows)
    assert got == {"DCGM_FI_PROF_SM_OCCUPANCY": pytest.approx((1.0 + 12.0) / 0.4 / 100)}


def test_gpm_pauses_while_nsight_compute_runs():
    state = {"ncu": False}
    mon = make(ncu=lambda: state["ncu"])
    server = serve(mon, port=0, address="127.0.0.1")
    try:
        with mon:
            wait_for(lambda: "DCGM_FI_PROF_SM_OCCUPANCY" in mon.snapshot()["values"])
            state["ncu"] = True
            wait_for(lambda: mon.snapshot().get("paused"))
            got = scrape(server.url)
            assert got[PAUSED_METRIC][0][1] == 1
            assert not [n for n in got if n.startswith("DCGM_FI_PROF")]
            assert "DCGM_FI_DEV_POWER_USAGE" in got  # the device fields go on
            assert mon._sampler is None  # noqa: SLF001 - no GPM sampler while ncu runs
            state["ncu"] = False
            wait_for(lambda: "DCGM_FI_PROF_SM_OCCUPANCY" in mon.snapshot()["values"])
    finally:
        server.close()
    with pytest.raises(UserError, match="Nsight Compute"):
        make(ncu=lambda: True).__enter__()


def test_ncu_running_reads_proc(tmp_path):
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "comm").write_text("python3\n")
    assert not monitor_mod.ncu_running(tmp_path)
    (tmp_path / "13").mkdir()
    (tmp_path / "13" / "comm").write_text("ncu\n")
    assert monitor_mod.ncu_running(tmp_path)


def test_bad_input_is_one_error():
    with pytest.raises(NotAvailableError, match="no NVML GPM"):
        make(MonitorNVML(gpm=0)).__enter__()
    err = MonitorNVML.NVMLError("Driver Not Loaded")
    with pytest.raises(NotAvailableError, match="NVML could not start"):
        make(MonitorNVML(fail={"nvmlInit": err})).__enter__()
    with pytest.raises(UserError, match="no GPU 3"):
        Monitor(3, 1.0, nvml=MonitorNVML(), ncu_check=lambda: False).__enter__()
    for bad in (0.0, -1, 1e9, "1"):
        with pytest.raises(UserError, match="interval"):
            Monitor(0, bad, nvml=MonitorNVML())
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with pytest.raises(UserError, match="in use"):
            serve(make(), port=busy.getsockname()[1], address="127.0.0.1")
    finally:
        busy.close()


def test_record_is_a_registered_monitor_dataset(tmp_path):
    from yolo_sm.contract.datasets import open_root

    mon = make()
    with mon:
        mon.mark(workload="bench", engine="eager/fp16/nhwc", batch=1)
        wait_for(lambda: mon.ticks >= 3)
    path = write_record(mon, tmp_path / "monitor_bench.parquet", dataset="monitor_bench")
    root = open_root(tmp_path)
    df = root.load("monitor_bench")
    assert root.info("monitor_bench")["kind"] == "monitor"
    assert set(df.metric) == set(FIELDS)
    assert len(df) == len(FIELDS) * mon.ticks
    occ = df[df.metric == "DCGM_FI_PROF_SM_OCCUPANCY"]
    assert occ.value.tolist() == pytest.approx([EXPECTED["DCGM_FI_PROF_SM_OCCUPANCY"]] * len(occ))
    assert set(occ.unit) == {"ratio"} and set(df[df.metric.str.contains("FB")].unit) == {"MiB"}
    assert (df.engine == "eager/fp16/nhwc").all() and (df.batch == 1).all()
    assert df.t_s.is_monotonic_increasing and (df.window_s > 0).all()
    assert root.machine()["gpu_name"] == NAME and "prov_hostname" not in df
    assert path.exists()
    empty = make()
    with pytest.raises(UserError, match="no sample"):
        write_record(empty, tmp_path / "none.parquet")


def test_take_rows_empties_the_sampler():
    from yolo_sm.core.profiling.gpm import GpmSampler

    with GpmSampler(hz=200, nvml=MonitorNVML()) as s:
        wait_for(lambda: len(s.rows) >= 8)
        taken = s.take_rows()
        assert len(taken) >= 8 and len(s.rows) < len(taken)
    assert {r["metric"] for r in taken} == set(monitor_mod.PROF_FIELDS.values())


# --- the command ------------------------------------------------------------------------------


def test_cli_bad_input_exits_2_with_one_sentence(capsys, monkeypatch):
    from yolo_sm.cli.main import main

    busy = socket.socket()
    busy.bind(("0.0.0.0", 0))
    busy.listen()
    try:
        cases = [
            ["--port", str(busy.getsockname()[1])],
            ["--port", "70000"],
            ["--interval", "0"],
            ["--record", "x.csv"],
            ["--dataset", "d"],
            ["--device", "-1"],
        ]
        for extra in cases:
            assert main(["monitor", "--duration", "1", *extra]) == 2, extra
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("yolo-sm: error:"), (extra, err)
    finally:
        busy.close()

    def no_driver():
        return MonitorNVML(fail={"nvmlInit": MonitorNVML.NVMLError("Driver Not Loaded")})

    monkeypatch.setattr(monitor_mod, "import_pynvml", no_driver)
    assert main(["monitor", "--port", "0", "--duration", "1"]) == 2
    assert "NVML could not start" in capsys.readouterr().err
    monkeypatch.setattr(monitor_mod, "import_pynvml", lambda: MonitorNVML(gpm=0))
    assert main(["monitor", "--port", "0", "--duration", "1"]) == 2
    assert "no NVML GPM" in capsys.readouterr().err


def test_cli_records_and_registers(tmp_path, monkeypatch, capsys):
    from yolo_sm.cli.main import main
    from yolo_sm.contract.datasets import open_root

    monkeypatch.setattr(monitor_mod, "import_pynvml", MonitorNVML)
    monkeypatch.setattr(monitor_mod, "ncu_running", lambda: False)
    out = tmp_path / "m.parquet"
    argv = ["monitor", "--port", "0", "--address", "127.0.0.1", "--interval", "0.2"]
    code = main([*argv, "--duration", "1", "--record", str(out), "--dataset", "monitor_x"])
    assert code == 0, capsys.readouterr().err
    df = open_root(tmp_path).load("monitor_x")
    assert set(df.metric) == set(FIELDS) and df.t_s.max() <= 1.2


@pytest.mark.parametrize(
    "flags, bound, said",
    [
        ([], "127.0.0.1", "http://127.0.0.1:"),
        (["--host", "0.0.0.0"], "0.0.0.0", "every address of this host"),
    ],
)
def test_monitor_listens_on_this_host_unless_told_and_says_where(
    monkeypatch, capsys, flags, bound, said
):
    """Without --host the exporter binds 127.0.0.1 (not every address); its start-up line
    names the address it really listens on."""
    from yolo_sm.cli.main import main
    from yolo_sm.topics.monitor import collect_exporter as exporter

    seen = []
    real = exporter.serve

    def spy(mon, port, address):
        server = real(mon, port=port, address=address)
        seen.append(server.httpd.server_address[0])
        return server

    monkeypatch.setattr(exporter, "serve", spy)
    monkeypatch.setattr(monitor_mod, "import_pynvml", MonitorNVML)
    monkeypatch.setattr(monitor_mod, "ncu_running", lambda: False)
    code = main(["monitor", "--port", "0", "--interval", "0.2", "--duration", "0.5", *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    assert seen == [bound]
    start = [line for line in err.splitlines() if "every 0.2 s" in line]
    assert len(start) == 1 and said in start[0], start


# --- a real Prometheus server scrapes the exporter ---------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(
    PROMETHEUS is None, reason="no prometheus binary here (apt-get install prometheus)"
)
@pytest.mark.timeout(60)
def test_prometheus_scrapes_the_fake_values(tmp_path):
    mon = make()
    server = serve(mon, port=0, address="127.0.0.1")
    web = free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: yolo_sm\n    scrape_interval: 500ms\n"
        "    scrape_timeout: 400ms\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{server.port}']\n"
    )
    log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    api = f"http://127.0.0.1:{web}/api/v1/query?query="

    def query(q):
        try:
            with urllib.request.urlopen(api + urllib.parse.quote(q), timeout=2) as r:
                return json.load(r)["data"]["result"]
        except OSError:
            return []

    try:
        with mon:
            mon.mark(workload="bench", engine="eager/fp16/nhwc", batch=16)
            deadline = time.monotonic() + 25
            result = []
            while time.monotonic() < deadline and proc.poll() is None:
                result = query('DCGM_FI_PROF_SM_OCCUPANCY{engine="eager/fp16/nhwc"}')
                if result:
                    break
                time.sleep(0.3)
            assert result, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert query('up{job="yolo_sm"}')[0]["value"][1] == "1"
            metric, (_, value) = result[0]["metric"], result[0]["value"]
            assert float(value) == pytest.approx(EXPECTED["DCGM_FI_PROF_SM_OCCUPANCY"])
            assert metric["UUID"] == UUID and metric["gpu"] == "0" and metric["batch"] == "16"
            power = query("DCGM_FI_DEV_POWER_USAGE")
            assert float(power[0]["value"][1]) == pytest.approx(EXPECTED["DCGM_FI_DEV_POWER_USAGE"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        server.close()
    assert os.path.isdir(tmp_path / "tsdb")


# --- the plan step: the monitor beside a bench in one process -----------------------------------


def test_plan_step_records_the_bench_it_ran_beside(tmp_path, monkeypatch):
    import functools

    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.plans import load_plan
    from yolo_sm.core import plan_runners
    from yolo_sm.core import plans as collect_plans

    seen = {}

    def fake_bench(spec, out, progress=True, deadline=None):
        seen["spec"] = spec
        for batch in spec.batches:  # what run_bench publishes as it moves on
            publish(workload="bench", model="yolov8:1", engine="eager/fp16/nhwc", batch=batch)
            time.sleep(3 * INTERVAL)

    monkeypatch.setattr(plan_runners, "run_bench", fake_bench)
    monkeypatch.setattr(plan_runners, "nvml_index", lambda device: 0)
    fake = functools.partial(Monitor, nvml=MonitorNVML(), ncu_check=lambda: False, hostname="h")
    monkeypatch.setattr(plan_runners, "Monitor", fake)
    (tmp_path / "plan.yaml").write_text(
        "name: t\ndevice: cuda\nsteps:\n  - name: monitor_bench\n    kind: monitor\n"
        "    out: monitor_bench.parquet\n    est_s: 5\n"
        f"    params: {{models: 'yolov8:1.0', batches: [1, 16], interval: {INTERVAL}, "
        "idle_s: 0.5, predict: false}\n"
    )
    out = tmp_path / "root"
    status = collect_plans.run_plan(load_plan(tmp_path / "plan.yaml"), out, progress=False)
    assert status.state.tolist() == ["done"]
    assert seen["spec"].batches == (1, 16) and seen["spec"].predict is False
    df = open_root(out).load("monitor_bench")
    assert set(df.metric) == set(FIELDS)
    assert set(df.batch.dropna()) == {1, 16}
    idle = df[df.engine == ""]
    assert len(idle) and idle.t_s.min() < df[df.engine != ""].t_s.min()  # idle before the bench
    assert idle.t_s.max() > df[df.engine != ""].t_s.max()  # and after it


def test_grafana_dashboard_has_a_panel_per_field():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "yolo_sm.json"
    dash = json.loads(path.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    for name in [*FIELDS, PAUSED_METRIC]:
        assert sum(e.startswith(name + "{") for e in exprs) == 1, name
    assert all('gpu=~"$gpu"' in e for e in exprs)
    ids = [p["id"] for p in dash["panels"]]
    assert len(set(ids)) == len(ids)
