"""validation.traffic: the memory traffic the calibration's host-time probes run amid, its reads
kept off the probes' clock."""


def test_traffic_reads_after_every_pass_off_its_clock(monkeypatch):
    """validation.traffic: a wrapped model's forward is followed by a read of a target pass's bytes
    (a drafter's, for a drafter), whose time the Traffic's clock leaves out: on a fake clock where
    the forward takes 2 s and each read 5 s, a pass reads 2 s on it; `read` alone, 0 s."""
    import types

    import validation.traffic as traffic_mod
    from validation.traffic import Traffic

    now = [0.0]
    monkeypatch.setattr(traffic_mod, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    reads: list[int] = []

    class Buffer:  # stands in for the tensor: a read of n elements takes 5 s
        def __getitem__(self, sl):
            reads.append(sl.stop)
            return types.SimpleNamespace(sum=lambda: now.__setitem__(0, now[0] + 5.0))

    tr = Traffic(4096, 1024)
    tr.buf = Buffer()

    class Model:
        def forward(self, x):
            now[0] += 2.0
            return x + 1

    target, drafter = tr.wrap(Model()), tr.wrap(Model(), drafter=True)
    t0 = tr.clock()
    assert target.forward(1) == 2 and tr.clock() - t0 == 2.0
    t0 = tr.clock()
    assert drafter.forward(1) == 2 and tr.clock() - t0 == 2.0
    t0 = tr.clock()
    tr.read()
    assert tr.clock() == t0 and tr.swept == 15.0 and now[0] == 19.0
    assert reads == [1024, 256, 1024]  # fp32 elements: the target's, the drafter's, the target's


def test_traffic_is_a_cpu_models_passes():
    """Traffic.of: a target pass reads the model's weights, a drafter pass one layer of its shape
    with its LM head; no traffic without a model or on a GPU (its passes stream device memory)."""
    from dataclasses import replace

    from validation.calibrate import context_model
    from validation.traffic import Traffic, pass_bytes
    tiny = context_model("tiny")
    tr = Traffic.of(tiny, "cpu")
    assert (tr.target_bytes, tr.drafter_bytes) == pass_bytes(tiny)
    assert tr.target_bytes == tiny.weight_bytes > tr.drafter_bytes == replace(tiny, layers=1).weight_bytes
    assert Traffic.of(None, "cpu") is None and Traffic.of(tiny, "cuda") is None
    assert context_model("none") is None

