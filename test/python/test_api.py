"""The Python module against onnxruntime and the command lines: a plan for
4 devices runs equal to onnxruntime, 3 training steps equal paxrun
--train's, the report and strategy round-trip, and bad calls raise
paxc.Error with paxc's message."""
import json
import os
import re
import subprocess

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

import paxc

TRAIN = dict(mode="train", loss="cross-entropy", lr=0.5)


def onnxruntime_logits(path, x):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_four_devices_equal_onnxruntime(model_path, batch):
    x, _ = batch
    plan = paxc.compile(model_path, gpus=np.int64(4))
    assert plan.devices == 4
    assert plan.inputs == [("x", "float32", [8, 16])]
    assert plan.outputs == [("logits", "float32", [8, 10])]
    out = paxc.Session(plan).run({"x": x})
    assert list(out) == ["logits"]
    assert out["logits"].dtype == np.float32
    np.testing.assert_allclose(out["logits"], onnxruntime_logits(model_path, x),
                               rtol=1e-5, atol=1e-6)


def test_model_as_bytes_or_modelproto(model_path, batch):
    x, _ = batch
    want = onnxruntime_logits(model_path, x)
    with open(model_path, "rb") as f:
        data = f.read()
    for model in (data, onnx.load(model_path)):
        plan = paxc.compile(model, gpus=2)
        got = paxc.Session(plan).run({"x": x})["logits"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_runs_again_with_new_inputs(model_path, batch):
    x, _ = batch
    session = paxc.Session(paxc.compile(model_path, gpus=4))
    for k in range(3):
        xk = x * (k + 1)
        np.testing.assert_allclose(session.run({"x": xk})["logits"],
                                   onnxruntime_logits(model_path, xk),
                                   rtol=1e-5, atol=1e-6)


def write_tensor(path, name, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def paxrun_train(bin_dir, plan_path, data_dir, saved, steps):
    out = subprocess.run(
        [os.path.join(bin_dir, "paxrun"), plan_path, "--train", f"--steps={steps}",
         f"--data={data_dir}", f"--save={saved}"],
        check=True, capture_output=True, text=True).stdout
    return [float(v) for v in re.findall(r"step \d+: loss (\S+)", out)]


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def test_three_steps_equal_paxrun_train(model_path, batch, bin_dir, tmp_path):
    x, labels = batch
    plan = paxc.compile(model_path, gpus=4, **TRAIN)
    assert [i[0] for i in plan.inputs] == ["x", "labels"]
    plan.save(tmp_path / "train.paxplan")
    data = tmp_path / "data"
    data.mkdir()
    write_tensor(data / "input_0.pb", "x", x)
    write_tensor(data / "input_1.pb", "labels", labels)
    want_losses = paxrun_train(bin_dir, str(tmp_path / "train.paxplan"), str(data),
                               str(tmp_path / "paxrun.onnx"), 3)

    # A step leaves the updated weights on the devices; saving gathers
    # them, after one step and again after three.
    one = paxrun_train(bin_dir, str(tmp_path / "train.paxplan"), str(data),
                       str(tmp_path / "paxrun1.onnx"), 1)
    session = paxc.Session(plan)
    losses = [session.train_step({"x": x, "labels": labels})]
    session.save_model(tmp_path / "session1.onnx")
    assert losses == pytest.approx(one, rel=1e-5)
    for name, w in initializers(str(tmp_path / "paxrun1.onnx")).items():
        np.testing.assert_allclose(initializers(str(tmp_path / "session1.onnx"))[name],
                                   w, rtol=1e-6, atol=1e-7, err_msg=name)
    losses += [session.train_step({"x": x, "labels": labels}) for _ in range(2)]
    assert session.step == 3
    session.save_model(tmp_path / "session.onnx")
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert losses[2] < losses[0]
    want = initializers(str(tmp_path / "paxrun.onnx"))
    got = initializers(str(tmp_path / "session.onnx"))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7,
                                   err_msg=name)
    trained = initializers(str(tmp_path / "session.onnx"))["W1"]
    assert not np.array_equal(trained, initializers(model_path)["W1"])


def test_checkpoint_resumes_the_same_steps(model_path, batch, tmp_path):
    x, labels = batch
    feeds = {"x": x, "labels": labels}
    plan = paxc.compile(model_path, gpus=2, optimizer="adam", **dict(TRAIN, lr=0.01))
    first = paxc.Session(plan)
    first.train_step(feeds)
    first.save_checkpoint(tmp_path / "ckpt")
    second_loss = first.train_step(feeds)
    resumed = paxc.Session(plan)
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert resumed.step == 1
    assert resumed.train_step(feeds) == second_loss


def test_report_and_strategy_round_trip(model_path, bin_dir):
    plan = paxc.compile(model_path, gpus=4)
    report = plan.report()
    assert report["gpus"] == 4
    assert json.loads(json.dumps(report)) == report
    assert "step" in plan.report_text() or "ms" in plan.report_text()
    strategy = plan.strategy()
    assert [op["name"] for op in strategy["ops"]] == [op["name"] for op in report["ops"]]
    again = paxc.compile(model_path, gpus=4, strategy=strategy)
    assert [op["config"] for op in again.strategy()["ops"]] == \
        [op["config"] for op in strategy["ops"]]
    # The command line's report of the same search chooses the same.
    cli = json.loads(subprocess.run(
        [os.path.join(bin_dir, "paxc"), model_path, "--gpus=4", "--emit=strategy"],
        check=True, capture_output=True, text=True).stdout)
    assert [op["config"] for op in cli["ops"]] == [op["config"] for op in strategy["ops"]]
    assert paxc.compile(model_path).report() is None


def test_plan_saves_and_loads(model_path, batch, tmp_path):
    x, _ = batch
    plan = paxc.compile(model_path, gpus=4)
    plan.save(tmp_path / "p.paxplan")
    loaded = paxc.load_plan(tmp_path / "p.paxplan")
    assert loaded.devices == 4
    np.testing.assert_allclose(paxc.Session(loaded).run({"x": x})["logits"],
                               paxc.Session(plan).run({"x": x})["logits"])


@pytest.fixture(scope="module")
def sessions(model_path):
    return (paxc.Session(paxc.compile(model_path, gpus=2)),
            paxc.Session(paxc.compile(model_path, gpus=2, **TRAIN)))


BAD_CALLS = [
    ("unknown feed name", lambda m, s, x: s[0].run({"x": x, "y": x}), "unknown feed 'y'"),
    ("missing feed", lambda m, s, x: s[0].run({}), "missing feed 'x'"),
    ("wrong dtype", lambda m, s, x: s[0].run({"x": x.astype(np.float64)}),
     "feed 'x' is float64 [8, 16], the plan reads float32 [8, 16]"),
    ("wrong shape", lambda m, s, x: s[0].run({"x": x[:4]}),
     "feed 'x' is float32 [4, 16], the plan reads float32 [8, 16]"),
    ("no labels", lambda m, s, x: s[1].train_step({"x": x}), "missing feed 'labels'"),
    ("complex feed", lambda m, s, x: s[0].run({"x": x.astype(np.complex64)}),
     "is not an element type paxc runs"),
    ("unknown option", lambda m, s, x: paxc.compile(m, bogus=3),
     "unknown option 'bogus'"),
    ("option a plan has no use for", lambda m, s, x: paxc.compile(m, emit="ir"),
     "has no use here"),
    ("zero devices", lambda m, s, x: paxc.compile(m, gpus=0), "--gpus"),
    ("bad mode", lambda m, s, x: paxc.compile(m, mode="bogus"), "--mode=bogus"),
    ("bad solver", lambda m, s, x: paxc.compile(m, gpus=2, solver="zzz"), "zzz"),
    ("bad loss", lambda m, s, x: paxc.compile(m, mode="train", loss="hinge"),
     "--loss=hinge"),
    ("malformed value", lambda m, s, x: paxc.compile(m, gpus="four"), "four"),
    ("bad model bytes", lambda m, s, x: paxc.compile(b"not an onnx model"), ""),
    ("missing model", lambda m, s, x: paxc.compile("/nonexistent/model.onnx"),
     "/nonexistent/model.onnx"),
    ("train an inference plan", lambda m, s, x: s[0].train_step({"x": x}),
     "train_step needs a training plan"),
    ("checkpoint before a step", lambda m, s, x: paxc.Session(s[1].plan).save_checkpoint("/tmp/x"),
     "no training step has run"),
    ("missing checkpoint", lambda m, s, x: s[1].load_checkpoint("/nonexistent/ckpt"),
     "/nonexistent/ckpt"),
    ("bad backend", lambda m, s, x: paxc.Session(s[0].plan, backend="tpu"),
     "not a backend"),
    ("mpi devices", lambda m, s, x: paxc.Session(s[0].plan, devices="mpi"),
     "mpirun paxrun"),
    ("garbage plan file", lambda m, s, x: paxc.load_plan(m), ""),
]


@pytest.mark.parametrize("what,call,message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_paxc_messages(what, call, message, model_path, sessions, batch):
    with pytest.raises(paxc.Error) as raised:
        call(model_path, sessions, batch[0])
    assert message in str(raised.value)
    assert str(raised.value).strip()


@pytest.mark.parametrize("call", [
    lambda m, s: paxc.compile(123),
    lambda m, s: s[0].run([1, 2]),
    lambda m, s: paxc.Session("plan.paxplan"),
    lambda m, s: paxc.compile(m, gpus=object()),
])
def test_wrong_types_raise_type_error(call, model_path, sessions):
    with pytest.raises(TypeError):
        call(model_path, sessions)


def test_session_still_runs_after_errors(sessions, model_path, batch):
    x, _ = batch
    with pytest.raises(paxc.Error):
        sessions[0].run({"x": x[:2]})
    np.testing.assert_allclose(sessions[0].run({"x": x})["logits"],
                               onnxruntime_logits(model_path, x), rtol=1e-5, atol=1e-6)


def test_help_lists_every_option_group(bin_dir):
    text = subprocess.run([os.path.join(bin_dir, "paxc"), "--help"], check=True,
                          capture_output=True, text=True).stdout
    for group in ("paxc options", "paxc sharding options",
                  "paxc training step options", "paxc training loss options"):
        assert group in text
    for option in ("--loss=", "--optimizer=", "--lr=", "--gpus=", "--pipeline"):
        assert option in text


def test_docs_example_runs(src_dir):
    """docs/python_example.py, the user guide's notebook-style example."""
    result = subprocess.run(
        ["python3", os.path.join(src_dir, "docs", "python_example.py")],
        capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "largest difference from onnxruntime" in result.stdout
    assert "losses:" in result.stdout


def test_threads_compile_and_run_at_once(model_path, batch, tmp_path):
    """Compiles serialize on paxc's one option table and each session runs
    on its own devices: from several Python threads at once (the GIL
    released), every result is still onnxruntime's."""
    import threading
    x, _ = batch
    want = onnxruntime_logits(model_path, x)
    results, errors = {}, []

    def work(k):
        try:
            plan = paxc.compile(model_path, gpus=[1, 2, 4][k % 3])
            session = paxc.Session(plan)
            results[k] = [session.run({"x": x})["logits"] for _ in range(3)]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results) == list(range(6))
    for outputs in results.values():
        for got in outputs:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_strategy_from_a_file(model_path, tmp_path):
    plan = paxc.compile(model_path, gpus=4)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(plan.strategy()))
    again = paxc.compile(model_path, gpus=4, strategy=str(path))
    assert [op["config"] for op in again.strategy()["ops"]] == \
        [op["config"] for op in plan.strategy()["ops"]]


def test_weights_fed_by_name_are_read_each_run(fed_weight_path, batch):
    x, _ = batch
    session = paxc.Session(paxc.compile(fed_weight_path, gpus=2))
    ort = onnxruntime.InferenceSession(fed_weight_path,
                                       providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    for _ in range(2):
        w2 = rng.standard_normal((32, 10)).astype(np.float32)
        got = session.run({"x": x, "W2": w2})["logits"]
        np.testing.assert_allclose(got, ort.run(None, {"x": x, "W2": w2})[0],
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(paxc.Error, match="weight 'W2' is float32 \\[16, 10\\], "
                                         "the plan reads float32 \\[32, 10\\]"):
        session.run({"x": x, "W2": np.zeros((16, 10), np.float32)})
    with pytest.raises(paxc.Error, match="weight 'W2' is a graph input"):
        session.run({"x": x})


def test_gpus_is_the_device_count_whatever_the_cluster(model_path):
    assert paxc.compile(model_path, cluster="dgx-h100").devices == 1
    assert paxc.compile(model_path, cluster="dgx-h100", gpus=2).devices == 2


def test_big_endian_and_empty_inputs_raise(model_path, sessions, batch):
    x, _ = batch
    with pytest.raises(paxc.Error, match="big-endian"):
        sessions[0].run({"x": x.astype(">f4")})
    with pytest.raises(paxc.Error, match="no bytes"):
        paxc.compile(b"")


def test_loaded_checkpoint_is_what_save_model_writes(model_path, batch, tmp_path):
    x, labels = batch
    feeds = {"x": x, "labels": labels}
    plan = paxc.compile(model_path, gpus=2, **TRAIN)
    first = paxc.Session(plan)
    first.train_step(feeds)
    first.train_step(feeds)
    first.save_checkpoint(tmp_path / "ckpt")
    first.save_model(tmp_path / "at_checkpoint.onnx")
    resumed = paxc.Session(plan)
    resumed.load_checkpoint(tmp_path / "ckpt")
    resumed.save_model(tmp_path / "resumed.onnx")
    want = initializers(str(tmp_path / "at_checkpoint.onnx"))
    got = initializers(str(tmp_path / "resumed.onnx"))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_plan_too_large_for_the_host_raises(src_dir, tmp_path):
    """A 512 GiB arena: paxc.Error before anything is allocated, and the
    process goes on."""
    path = tmp_path / "big.onnx"
    subprocess.run(["python3", os.path.join(src_dir, "test", "lit", "errors", "Inputs",
                                            "big_broadcast.py"), str(path)], check=True)
    session = paxc.Session(paxc.compile(path, gpus=2))
    with pytest.raises(paxc.Error, match="does not fit in this machine's memory"):
        session.run({"x": np.ones(1, np.float32)})
