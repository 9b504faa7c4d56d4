"""``SummaryWriter``: TensorBoard event files through the ``tensorboard`` package's writer.

Each ``add_*`` call becomes one ``Event`` holding a ``Summary`` protocol buffer, built as PyTorch
builds it (the same tags, plugin names and histogram buckets), so TensorBoard shows pylucid runs
exactly like PyTorch runs.
"""

from __future__ import annotations

import io
import os
import socket
import time
from datetime import datetime
from typing import Any

from pylucid._interop import np

__all__ = ["SummaryWriter"]

_INSTALL_HINT = ("pylucid.utils.tensorboard.SummaryWriter needs the tensorboard package, which is not installed: "
                 "pip install tensorboard")


def _tb():
    """The pieces of the tensorboard package the writer uses (ImportError with the install hint without it)."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return event_pb2, summary_pb2, TensorProto, TensorShapeProto, EventFileWriter


def _make_np(value: Any, what: str):
    """A host NumPy array of a pylucid tensor, a NumPy array or a Python number."""
    from pylucid._tensor import Tensor

    if isinstance(value, Tensor):
        return np.asarray(value.detach().cpu().numpy())
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (int, float, np.generic)) and not isinstance(value, bool):
        return np.array([value])
    raise TypeError(f"SummaryWriter.{what}: expected a pylucid.Tensor, a NumPy array or a number, "
                    f"got {type(value).__name__}")


def _scalar_value(value: Any, what: str) -> float:
    arr = _make_np(value, what)
    if arr.squeeze().ndim != 0:
        raise ValueError(f"SummaryWriter.{what}: expected a scalar (one element), got shape {arr.shape}")
    return float(arr.reshape(-1)[0])


def _default_bins() -> list[float]:
    # TensorBoard's own histogram buckets: +-1e-12 growing by 10% up to 1e20, and 0
    v, buckets = 1e-12, []
    while v < 1e20:
        buckets.append(v)
        v *= 1.1
    return [-b for b in reversed(buckets)] + [0] + buckets


def _convert_to_hwc(arr, dataformats: str):
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or len(fmt) != arr.ndim:
        raise ValueError(f"SummaryWriter.add_image: dataformats {dataformats!r} does not describe an image of shape "
                         f"{arr.shape}")
    if len(fmt) == 4:
        nchw = arr.transpose([fmt.find(c) for c in "NCHW"])
        if nchw.shape[1] == 1:
            nchw = np.concatenate([nchw] * 3, 1)
        n, _, h, w = nchw.shape
        cols = min(n, 8)
        rows = -(-n // cols)
        canvas = np.zeros((3, h * rows, w * cols), dtype=nchw.dtype)
        for i in range(n):
            y, x = divmod(i, cols)
            canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = nchw[i]
        return canvas.transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    if len(fmt) == 2:
        hw = arr.transpose([fmt.find(c) for c in "HW"])
        return np.stack([hw] * 3, 2)
    raise ValueError(f"SummaryWriter.add_image: dataformats must have 2, 3 or 4 letters, got {dataformats!r}")


class _FileWriter:
    """One event file in one directory (PyTorch's ``FileWriter``)."""

    def __init__(self, log_dir: str, max_queue: int, flush_secs: int, filename_suffix: str) -> None:
        self._event_pb2 = _tb()[0]
        self.event_writer = _tb()[4](str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None) -> None:
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None) -> None:
        self.add_event(self._event_pb2.Event(summary=summary), global_step, walltime)

    def flush(self) -> None:
        self.event_writer.flush()

    def close(self) -> None:
        self.event_writer.close()


class SummaryWriter:
    """Write TensorBoard event files to ``log_dir``, as ``torch.utils.tensorboard.SummaryWriter``.

    Args:
        log_dir: the run directory; default ``runs/<date>_<host><comment>``.
        comment: appended to the default ``log_dir`` (ignored when ``log_dir`` is given).
        purge_step: TensorBoard discards events of a crashed run from this step on.
        max_queue: pending events before ``add_*`` forces a write.
        flush_secs: how often pending events are written, in seconds.
        filename_suffix: appended to the event file's name.

    Raises:
        ImportError: the ``tensorboard`` package is not installed (``pip install tensorboard``).

    ``add_graph``, ``add_embedding``, ``add_figure``, ``add_audio``, ``add_video``, ``add_mesh``,
    ``add_pr_curve`` and ``add_custom_scalars`` raise ``NotImplementedError``.

    Example (needs the tensorboard package)::

        with SummaryWriter("runs/exp1") as writer:
            for step in range(100):
                writer.add_scalar("loss/train", 1.0 / (step + 1), step)
    """

    def __init__(self, log_dir: str | os.PathLike | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        _tb()  # the ImportError belongs to construction, not to the first add_*
        if not log_dir:
            current_time = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", current_time + "_" + socket.gethostname() + comment)
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer: _FileWriter | None = None
        self.all_writers: dict[str, _FileWriter] | None = None
        self.default_bins = _default_bins()
        self._get_file_writer()

    def _get_file_writer(self) -> _FileWriter:
        """The run's main writer, recreated if the writer was closed."""
        if self.all_writers is None or self.file_writer is None:
            event_pb2 = _tb()[0]
            self.file_writer = _FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                self.file_writer.add_event(event_pb2.Event(step=self.purge_step, file_version="brain.Event:2"))
                self.file_writer.add_event(event_pb2.Event(
                    step=self.purge_step, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> str:
        """The directory the event files go to."""
        return self.log_dir

    # -- scalars -------------------------------------------------------------------------
    def _scalar_summary(self, tag: str, value: Any, new_style: bool, double_precision: bool, what: str):
        _, summary_pb2, TensorProto, _, _ = _tb()  # noqa: N806 - protobuf class
        v = _scalar_value(value, what)
        if not new_style:
            return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=v)])
        tensor = (TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision
                  else TensorProto(float_val=[v], dtype="DT_FLOAT"))
        metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name="scalars"))
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=metadata)])

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        """Log one number (a Python number, a NumPy scalar or a one-element tensor) under ``tag``."""
        summary = self._scalar_summary(tag, scalar_value, new_style, double_precision, "add_scalar")
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Log several numbers in one chart: each key goes to its own run ``<log_dir>/<main_tag>_<key>``."""
        fw_logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            writer = self.all_writers.get(fw_tag)
            if writer is None:
                writer = self.all_writers[fw_tag] = _FileWriter(fw_tag, self.max_queue, self.flush_secs,
                                                                self.filename_suffix)
            writer.add_summary(self._scalar_summary(main_tag, value, False, False, "add_scalars"), global_step,
                               walltime)

    # -- histograms ----------------------------------------------------------------------
    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: Any = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        """Log the distribution of ``values``; ``bins`` as ``numpy.histogram`` or ``"tensorflow"`` (default)."""
        summary_pb2 = _tb()[1]
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        values = _make_np(values, "add_histogram").astype(float).reshape(-1)
        if values.size == 0:
            raise ValueError("SummaryWriter.add_histogram: the input has no element")
        counts, limits = np.histogram(values, bins=bins)
        if max_bins is not None and len(counts) > max_bins:
            sub = len(counts) // max_bins
            if len(counts) % sub:
                counts = np.pad(counts, [[0, sub - len(counts) % sub]])
            counts = counts.reshape(-1, sub).sum(axis=-1)
            new_limits = np.empty((counts.size + 1,), limits.dtype)
            new_limits[:-1] = limits[:-1:sub]
            new_limits[-1] = limits[-1]
            limits = new_limits
        # TensorBoard keeps right bin edges only: keep the non-empty support plus one empty bin on the left
        cum = np.cumsum(np.greater(counts, 0))
        start, end = np.searchsorted(cum, [0, cum[-1] - 1], side="right")
        start, end = int(start), int(end) + 1
        counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
        limits = limits[start:end + 1]
        hist = summary_pb2.HistogramProto(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                                          sum_squares=values.dot(values), bucket_limit=limits.tolist(),
                                          bucket=counts.tolist())
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=hist)])
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # -- text, images, hyperparameters -----------------------------------------------------
    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """Log a (markdown) string; TensorBoard's text plugin shows it under ``<tag>/text_summary``."""
        _, summary_pb2, TensorProto, TensorShapeProto, _ = _tb()  # noqa: N806 - protobuf classes
        from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

        metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
        tensor = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag + "/text_summary", metadata=metadata,
                                                                       tensor=tensor)])
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_image(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                  dataformats: str = "CHW") -> None:
        """Log an image: a float tensor in [0, 1] or a uint8 one in [0, 255], laid out as ``dataformats``.

        Encoding the PNG needs Pillow (``pip install pillow``).
        """
        summary_pb2 = _tb()[1]
        try:
            from PIL import Image
        except ImportError as exc:
            raise ImportError("SummaryWriter.add_image needs Pillow to encode PNG images: pip install pillow") from exc
        arr = _convert_to_hwc(_make_np(img_tensor, "add_image"), dataformats)
        scale = 1 if arr.dtype == np.uint8 else 255
        arr = (arr.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
        height, width, channels = arr.shape
        buffer = io.BytesIO()
        Image.fromarray(arr).save(buffer, format="PNG")
        image = summary_pb2.Summary.Image(height=height, width=width, colorspace=channels,
                                          encoded_image_string=buffer.getvalue())
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, image=image)])
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_images(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                   dataformats: str = "NCHW") -> None:
        """Log a batch of images as one grid (8 per row)."""
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None,
                    run_name: str | None = None, global_step: int | None = None) -> None:
        """Log one trial's hyperparameters and final metrics for TensorBoard's HParams plugin.

        Values may be ``int``, ``float``, ``str``, ``bool`` or ``None`` (skipped). The trial is written
        to ``<log_dir>/<run_name>`` (default: the current time), with each metric as a scalar.
        """
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("SummaryWriter.add_hparams: hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = _hparams(hparam_dict, metric_dict, hparam_domain_discrete or {})
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w_hp:
            for summary in (exp, ssi, sei):
                w_hp.file_writer.add_summary(summary, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    # -- what pylucid does not log -----------------------------------------------------------
    def _unsupported(self, name: str, why: str):
        raise NotImplementedError(f"pylucid.utils.tensorboard.SummaryWriter.{name} is not supported: {why}")

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        self._unsupported("add_graph", "pylucid has no graph tracer to export the model's graph")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        self._unsupported("add_embedding", "the projector files are not written")

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        self._unsupported("add_figure", "render the figure to an array and use add_image")

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        self._unsupported("add_audio", "audio encoding is not implemented")

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None):
        self._unsupported("add_video", "video encoding is not implemented")

    def add_mesh(self, tag, vertices, colors=None, faces=None, config_dict=None, global_step=None, walltime=None):
        self._unsupported("add_mesh", "mesh summaries are not implemented")

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127, weights=None,
                     walltime=None):
        self._unsupported("add_pr_curve", "PR-curve summaries are not implemented")

    def add_custom_scalars(self, layout):
        self._unsupported("add_custom_scalars", "custom scalar layouts are not implemented")

    # -- lifetime ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every pending event to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every event file (a later ``add_*`` opens a new one)."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _hparams(hparam_dict: dict, metric_dict: dict, domain: dict):
    """The three HParams-plugin summaries (experiment, session start, session end), as PyTorch writes them."""
    summary_pb2 = _tb()[1]
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams import metadata as hp_meta
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

    if not isinstance(domain, dict):
        raise TypeError("SummaryWriter.add_hparams: hparam_domain_discrete should be a dictionary")
    for k, v in domain.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"SummaryWriter.add_hparams: hparam_domain_discrete[{k}] should be a list of same type "
                            f"as hparam_dict[{k}]")
    from pylucid._tensor import Tensor

    ssi = SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, Tensor):
            v = float(v.reshape(-1)[0].item())
        # bool is an int here, so booleans are logged as numbers, as PyTorch logs them
        if isinstance(v, (int, float)):
            ssi.hparams[k].number_value = v
            kind, field = "DATA_TYPE_FLOAT64", "number_value"
        elif isinstance(v, str):
            ssi.hparams[k].string_value = v
            kind, field = "DATA_TYPE_STRING", "string_value"
        else:
            raise ValueError(f"SummaryWriter.add_hparams: value of {k!r} should be one of int, float, str, bool or "
                             f"pylucid.Tensor, got {type(v).__name__}")
        discrete = (struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in domain[k]])
                    if k in domain else None)
        infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=discrete))

    def wrap(tag: str, content) -> Any:
        metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=hp_meta.PLUGIN_NAME, content=content.SerializeToString()))
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=metadata)])

    version = hp_meta.PLUGIN_DATA_VERSION
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (
        wrap(hp_meta.EXPERIMENT_TAG, HParamsPluginData(experiment=experiment, version=version)),
        wrap(hp_meta.SESSION_START_INFO_TAG, HParamsPluginData(session_start_info=ssi, version=version)),
        wrap(hp_meta.SESSION_END_INFO_TAG, HParamsPluginData(session_end_info=SessionEndInfo(
            status=Status.Value("STATUS_SUCCESS")), version=version)),
    )
