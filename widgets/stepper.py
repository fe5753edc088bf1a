"""PassStepper: pick ONNX passes, run them, and step through what each one changed, before and after.

A pass picker (family, pass and its explanation, the pipeline, run, progress) above a
:class:`widgets.timeline_stepper.TimelineStepper`, which does the stepping for any
timeline. The work is done by :func:`explorer.passes.pipeline.run_pipeline`; this class wires
state and events.

Examples
--------
>>> from widgets import PassStepper
>>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
>>> stepper.show(1)
>>> stepper.diff.op_deltas
{'BatchNormalization': -20}
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from explorer import load
from explorer.core.errors import PipelineSyntaxError, UnknownPassError
from explorer.core.graph import ModelGraph
from explorer.core.timeline import Timeline
from explorer.passes import FAMILIES, get_pass, pass_names, split_pipeline
from explorer.passes.pipeline import run_pipeline

from .timeline_stepper import TimelineStepper

__all__ = ["PassStepper"]


class _Stepping:
    """A read-only attribute of a PassStepper that is its TimelineStepper's attribute of the same name."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, stepper: PassStepper | None, owner: type | None = None) -> Any:
        if stepper is None:
            return self  # on the class: the descriptor, with its docstring
        return getattr(stepper.stepping, self.name)

    def __set__(self, stepper: PassStepper, value: Any) -> None:
        raise AttributeError(f"{self.name} is the stepping's: set stepper.stepping.{self.name}")


class PassStepper(w.VBox):
    """Step through a pipeline of passes, one snapshot at a time.

    Parameters
    ----------
    graph : ModelGraph or anything :func:`explorer.load` accepts
        The model.
    pipeline : str or list, optional
        Passes to run at once (``"onnxsim,fuse_bn_into_conv,ort:extended"``);
        otherwise pick them in the widget and press *run*.
    input_shapes : mapping, optional
        Fixed input shapes (loading, onnxsim, verification inputs).
    verify : bool
        Compare every changed step's outputs with the original in ONNX Runtime.
    height : int
        Height of each graph in pixels.

    Attributes
    ----------
    timeline : Timeline or None
        The last run.
    stepping : TimelineStepper
        The stepping below the picker; ``step``, ``diff``, ``before``, ``after``, ``slider``,
        ``show``, ``move`` and the rest are its own, reached through this widget too.

    Examples
    --------
    >>> stepper = PassStepper("zoo:mlp", "eliminate_identity,fuse_matmul_add_bias_into_gemm", verify=False)
    >>> stepper.visible_steps()
    [0, 1, 2]
    >>> stepper.slider is stepper.stepping.slider, stepper.step == stepper.stepping.step
    (True, True)
    """

    def __init__(
        self,
        graph: ModelGraph | Any,
        pipeline: str | Sequence[Any] | None = None,
        *,
        input_shapes: dict[str, Sequence[int]] | None = None,
        verify: bool = True,
        height: int = 560,
    ) -> None:
        self.graph = graph if isinstance(graph, ModelGraph) else load(graph, input_shapes=input_shapes)
        self.input_shapes = input_shapes
        self.verify = verify
        self.timeline: Timeline | None = None

        self.family = w.Dropdown(options=list(FAMILIES), value="onnxoptimizer", description="family")
        self.pass_menu = w.Dropdown(options=pass_names("onnxoptimizer"), description="pass")
        self.explanation = w.HTML()
        self.explanation.add_class("oge-pass-explanation")
        self.add_button = w.Button(description="add to pipeline", layout=w.Layout(width="130px"))
        self.pipeline_text = w.Text(
            value=pipeline if isinstance(pipeline, str) else ",".join(str(p) for p in pipeline or ()),
            description="pipeline",
            layout=w.Layout(width="60%"),
        )
        self.run_button = w.Button(description="run", button_style="primary", layout=w.Layout(width="80px"))
        self.run_button.add_class("oge-run")
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="200px"))
        self.message = w.HTML()
        self.message.add_class("oge-message")
        self.stepping = TimelineStepper(graph=self.graph, height=height)

        self.family.observe(self._family_changed, names="value")
        self.pass_menu.observe(self._pass_changed, names="value")
        self.add_button.on_click(self._add_pass)
        self.run_button.on_click(lambda _: self.run())
        self._pass_changed({"new": self.pass_menu.value})

        picker = w.VBox(
            [
                w.HBox([self.family, self.pass_menu, self.add_button]),
                self.explanation,
                w.HBox([self.pipeline_text, self.run_button, self.progress]),
                self.message,
            ]
        )
        super().__init__([picker, self.stepping])
        self.add_class("oge-pass-stepper")
        if self.pipeline_text.value:
            self.run()

    # -- pass picking --------------------------------------------------------------------------

    def _family_changed(self, change: dict[str, Any]) -> None:
        self.pass_menu.options = pass_names(change["new"])

    def _pass_changed(self, change: dict[str, Any]) -> None:
        if change["new"]:
            found = get_pass(change["new"])
            self.explanation.value = (
                f"<div style='max-width:900px'><b>{html.escape(found.name)}</b> "
                f"<i>({html.escape(found.family)}, {html.escape(found.kind)})</i>: "
                f"{html.escape(found.description)}</div>"
            )

    def _add_pass(self, _: Any) -> None:
        names = split_pipeline(self.pipeline_text.value)
        self.pipeline_text.value = ",".join([*names, self.pass_menu.value])

    # -- running -------------------------------------------------------------------------------

    def run(self, pipeline: str | Sequence[Any] | None = None) -> Timeline:
        """Run the pipeline (the text box's, or ``pipeline``) and show its last step.

        Examples
        --------
        >>> stepper = PassStepper("zoo:mlp", verify=False)
        >>> len(stepper.run("eliminate_identity"))
        2
        """
        if pipeline is not None:
            self.pipeline_text.value = pipeline if isinstance(pipeline, str) else ",".join(map(str, pipeline))
        spec = self.pipeline_text.value
        self.progress.value = 0
        self.message.value = "<i>running...</i>"

        def report(step: int, total: int, name: str) -> None:
            self.progress.value = step - 1
            self.message.value = f"<i>step {step}/{total}: {html.escape(name)}...</i>"

        try:
            self.progress.max = max(1, len(split_pipeline(spec)))
            self.timeline = run_pipeline(
                self.graph, spec, input_shapes=self.input_shapes, verify=self.verify, progress=report
            )
        except (UnknownPassError, PipelineSyntaxError) as err:
            self.message.value = f"<span style='color:#d62728'>{html.escape(str(err))}</span>"
            raise
        self.progress.value = self.progress.max
        failed = [s for s in self.timeline.snapshots if s.error]
        self.message.value = f"{len(self.timeline) - 1} steps" + (
            f", <span style='color:#d62728'>{len(failed)} failed</span>" if failed else ""
        )
        self.stepping.set_timeline(self.timeline)
        return self.timeline

    # -- the stepping, reached through the picker too ------------------------------------------

    step = _Stepping("The snapshot shown on the right (0 = the model as loaded).")
    diff = _Stepping("The diff shown (snapshot ``step - 1`` to ``step``).")
    before = _Stepping("The graph before the step.")
    after = _Stepping("The graph after the step.")
    slider = _Stepping("The step slider.")
    hide_unchanged = _Stepping("Skip steps that changed nothing.")
    step_title = _Stepping("What the shown step did.")
    fusions = _Stepping("The fusions of the shown step.")
    table = _Stepping("Every step with its counts.")

    def show(self, index: int) -> None:
        """Show snapshot ``index`` (:meth:`TimelineStepper.show`).

        Examples
        --------
        >>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
        >>> stepper.show(0); stepper.diff is None
        True
        """
        self.stepping.show(index)

    def move(self, delta: int) -> None:
        """Go to the next (``+1``) or previous (``-1``) visible step (:meth:`TimelineStepper.move`).

        Examples
        --------
        >>> stepper = PassStepper("zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False)
        >>> stepper.show(1); stepper.move(+1); stepper.step
        2
        """
        self.stepping.move(delta)

    def visible_steps(self) -> list[int]:
        """Snapshot indices the slider and buttons visit (:meth:`TimelineStepper.visible_steps`).

        Examples
        --------
        >>> PassStepper("zoo:mlp", "eliminate_identity", verify=False).visible_steps()
        [0, 1]
        """
        return self.stepping.visible_steps()

    def highlighted(self, side: str = "after") -> dict[str, str]:
        """Item -> colour of the highlighted nodes on one side (:meth:`TimelineStepper.highlighted`).

        Examples
        --------
        >>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
        >>> len(stepper.highlighted("before"))
        40
        """
        return self.stepping.highlighted(side)
