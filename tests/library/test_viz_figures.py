"""The Plotly figures and tables of marginal_core.viz (samples, lengths, mass, ranks, running
estimates), on real lattice samples with made-up scores."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from marginal_core import viz
from marginal_core.estimators.run_state import Completion, RunState
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.viz import analysis
from tests.viz_cases import QA_TEXT, fake_estimate

# --------------------------------------------------------------------------------------------
# Plotly figures and tables


def test_samples_frame_segments_paths_and_keeps_scores(qa):
    est = fake_estimate(qa)
    frame = viz.samples_frame(qa, est)
    assert list(frame.columns) == ["tokenization", "tokens", "kind", "log_p"]
    assert len(frame) == est.num_distinct
    assert all(t.replace("|", "").replace("␣", " ") == QA_TEXT for t in frame["tokenization"])
    proxy = fake_estimate(qa, with_q=True, method="proxy")
    assert {"log_q", "draws"} <= set(viz.samples_frame(qa, proxy).columns)
    bare = viz.samples_frame(qa, paths=qa.off_by_one()[:3])
    assert bare["tokens"].tolist() == [len(qa.canonical) + 1] * 3


def test_length_histogram_has_one_bar_trace_per_group(qa):
    samples = lattice_samples(qa, 60, seed=1)
    groups = {kind: [len(p) for p, k in zip(samples.paths.tolist(), samples.kinds) if k == kind]
              for kind in ("off_by_one", "uniform")}
    fig = viz.length_histogram(groups, canonical_len=len(qa.canonical))
    assert [t.type for t in fig.data] == ["bar", "bar"]
    assert [t.name for t in fig.data] == ["off-by-one", "uniform (length ≤ L)"]
    assert sum(fig.data[0].y) == len(groups["off_by_one"])
    assert list(fig.data[0].x) == [len(qa.canonical) + 1]


def test_mass_figures_from_the_analyses(qa):
    est = fake_estimate(qa, k=80)
    by_kind = analysis.mass_by_kind(qa, est)
    fig = viz.mass_bar(by_kind, "kind", "t")
    assert len(fig.data) == 1 and fig.data[0].type == "bar"
    assert set(fig.data[0].x) == {"canonical", "off-by-one", "rest"}
    assert math.isclose(sum(fig.data[0].y), 100.0)  # in %, as the bars' labels and every share on a page
    assert all(t.endswith("%") for t in fig.data[0].text)
    fig = viz.mass_bar(analysis.mass_by_splits(qa, est), "splits", "t", log_y=True)
    assert 0 in set(fig.data[0].x) and 1 in set(fig.data[0].x)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick >= 1  # labels at powers of ten only
    top = analysis.top_tokenizations(qa, est, 3)
    assert len(top) == 3 and top["log_p"].is_monotonic_decreasing and top["share"].sum() <= 1 + 1e-12
    assert top["canonical"].sum() <= 1
    top = viz.top_n_figure(analysis.top_n_mass(qa, est))
    assert top.data[0].type == "scatter" and math.isclose(top.data[0].y[-1], 1.0)


def test_rank_scatter_plots_distinct_samples_with_rho(qa):
    est = fake_estimate(qa, with_q=True, method="proxy")
    rho, n = analysis.spearman(est)
    fig = viz.rank_scatter(est)
    assert fig.data[0].mode == "markers" and len(fig.data[0].x) == n
    assert f"{rho:.3f}" in fig.layout.title.text
    with pytest.raises(ValueError):
        viz.rank_scatter(fake_estimate(qa))


def test_running_figure_against_samples_and_seconds(qa):
    est = fake_estimate(qa)
    est = dataclasses.replace(est, run=RunState(Completion(est.num_samples), checkpoints=((10, 0.5), (est.num_samples, 1.0))))
    trace = viz.RunTrace.of(est)
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-4.0, x="samples")
    names = [t.name for t in fig.data]
    assert names == ["lattice", "canonical", "exact"]
    assert len(fig.data[0].x) == est.num_samples
    assert np.allclose(fig.data[0].y, est.running_marginal())
    assert len(fig.layout.shapes) == 2  # canonical and exact lines
    fig = viz.running_figure([trace], log_p_canonical=-5.0, x="seconds")
    assert list(fig.data[0].x) == [0.0, 0.5, 1.0]
    assert fig.data[0].y[1] == pytest.approx(est.running_marginal()[9])
    assert [t.name for t in fig.data] == ["lattice", "canonical"]


def test_running_figure_keeps_a_trace_on_the_canonical_line_visible_with_short_ticks(qa):
    """Issue 13 item 5i: an estimate within 1e-12 nats of the canonical made 14-decimal y ticks,
    and the canonical line hid the proxy trace under it."""
    est = fake_estimate(qa, method="proxy", with_q=True)
    flat = np.full(est.num_samples, -5.0 + 1e-12)
    est = dataclasses.replace(est, running=flat, log_noncanonical=-40.0)
    trace = viz.RunTrace(label="proxy", running=flat, checkpoints=[(est.num_samples, 1.0)],
                         color=viz.COLORS["proxy"], noncanonical=np.full(est.num_samples, -40.0))
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-5.0 + 2e-12, x="samples")
    assert all(shape.layer == "below" for shape in fig.layout.shapes)  # reference lines under the traces
    assert fig.data[0].name == "proxy" and "markers" in fig.data[0].mode
    low, high = fig.layout.yaxis.range
    assert high - low >= viz.MIN_Y_SPAN and low < -5.0 < high
    assert re.fullmatch(r",\.[0-3]f", fig.layout.yaxis.tickformat)
    wide = viz.running_figure([viz.RunTrace.of(fake_estimate(qa))], log_p_canonical=-40.0, x="samples")
    assert wide.layout.yaxis.range is None and wide.layout.yaxis.tickformat == ",.0f"  # autorange, whole nats


def test_running_figure_of_the_noncanonical_mass(qa):
    est = fake_estimate(qa)
    est = dataclasses.replace(est, run=RunState(Completion(est.num_samples), checkpoints=((est.num_samples, 1.0),)))
    trace = viz.RunTrace.of(est)
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-9.0, x="samples", y="noncanonical")
    assert [t.name for t in fig.data] == ["lattice", "exact"]  # no canonical line on this scale
    assert np.allclose(fig.data[0].y, est.running)
    assert fig.layout.yaxis.title.text == viz.RUNNING_Y["noncanonical"]
    fig = viz.running_figure([trace], log_p_canonical=-5.0, x="seconds", y="noncanonical")
    assert list(fig.data[0].x) == [1.0] and fig.data[0].y[0] == pytest.approx(est.running[-1])
    with pytest.raises(ValueError):
        viz.running_figure([trace], log_p_canonical=-5.0, y="bogus")
